"""A scripted OpenAI Responses API server for tests (``POST /v1/responses``), standard library only.

It speaks the documented wire format that pydantic-ai's ``OpenAIResponsesModel`` parses (``openai:`` and
``openai-responses:`` models): streamed (``"stream": true``) as named server-sent events —
``response.created``, ``response.in_progress``, then per output item ``response.output_item.added`` …
``response.output_item.done`` with, inside, ``response.reasoning_summary_part.added`` /
``response.reasoning_summary_text.delta`` / ``…done`` for a reasoning summary (the item's
``encrypted_content`` is its signature, sent back on the next request), ``response.content_part.added`` /
``response.output_text.delta`` / ``response.output_text.done`` for text, ``response.function_call_arguments.delta``
/ ``…done`` for a function call — and finally ``response.completed`` with ``usage`` ``{input_tokens,
input_tokens_details: {cached_tokens}, output_tokens, output_tokens_details: {reasoning_tokens}, total_tokens}``;
not streamed, as one ``response`` object. Errors use OpenAI's JSON error shape (:class:`ErrorReply` of
``openai_server``: 400 ``context_length_exceeded``, 401 ``invalid_api_key``, 429 with ``retry-after``, 5xx).

Usage is the fake's own bill: input tokens are the request's layout (instructions, tools, input items) at four
characters a token, and the cached part is what an implicit prefix cache serves (``http_fake.PrefixCache``: the
longest prefix shared with an earlier request, from 1,024 tokens, in 128-token steps). :attr:`ResponsesServer.bills`
lists it per request, so tests assert caching from the provider's side.

Title requests (codling's title turn, recognised by its instructions) get :attr:`ResponsesServer.title_reply` and
are left out of :attr:`ResponsesServer.requests`, as in ``openai_server``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from codling.brain.builtin_turns import prompt_text
from tests.fakes.http_fake import FakeProvider, Handler, PrefixCache, RecordedRequest, freeze_pieces, tokens_of
from tests.fakes.openai_server import ErrorReply, ToolCall

__all__ = ["Bill", "ErrorReply", "Reply", "ResponsesServer", "ToolCall", "running_responses_server"]

DEFAULT_MODEL = "gpt-5-mini"


@dataclass(frozen=True)
class Reply:
    """One response: a reasoning summary (streamed in the pieces given), then text, then function calls.

    ``cut=True`` ends the stream after the content events, without ``response.completed``.
    """

    text: Sequence[str] = ()
    reasoning: Sequence[str] = ()
    tool_calls: Sequence[ToolCall] = ()
    cut: bool = False

    def __post_init__(self) -> None:
        freeze_pieces(self, ("text", "reasoning"), ("tool_calls",))


@dataclass(frozen=True)
class Bill:
    """What the fake billed one request: input tokens in all and of them served from the cache."""

    input_tokens: int
    cached_tokens: int
    output_tokens: int
    reasoning_tokens: int


def layout(body: dict[str, Any]) -> str:
    """A Responses request as a prefix cache sees it, in order: instructions, tools, then each input item."""
    parts = [json.dumps(body.get("instructions")), json.dumps(body.get("tools") or [], sort_keys=True)]
    items = body.get("input")
    parts += [json.dumps(item, sort_keys=True) for item in items] if isinstance(items, list) else [json.dumps(items)]
    return "\n".join(parts)


def is_title(body: dict[str, Any]) -> bool:
    """Whether a request is codling's title special turn."""
    return str(body.get("instructions") or "").strip() == prompt_text("title").strip()


def user_texts(body: dict[str, Any]) -> list[str]:
    """The text of each user message of the request's input, in order."""
    texts = []
    for item in body.get("input") or []:
        if isinstance(item, dict) and item.get("role") == "user":
            content = item.get("content")
            if isinstance(content, str):
                texts.append(content)
            elif isinstance(content, list):
                texts.append("".join(p.get("text", "") for p in content if isinstance(p, dict)))
    return texts


class ResponsesServer(FakeProvider):
    """A scripted OpenAI Responses server on ``127.0.0.1``; see the module docstring."""

    name = "fake-responses-server"

    def __init__(self, *, model: str = DEFAULT_MODEL, expected_api_key: str | None = None) -> None:
        super().__init__()
        self.cache = PrefixCache()
        self.model = model
        self.expected_api_key = expected_api_key
        self.title_reply: Reply | ErrorReply = Reply("Loopback session title")
        self._bills: dict[int, Bill] = {}

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def env(self, api_key: str = "test-key") -> dict[str, str]:
        """The variables that point codling's OpenAI client at this server."""
        return {"OPENAI_BASE_URL": self.base_url, "OPENAI_API_KEY": api_key}

    def _counted(self) -> list[tuple[int, RecordedRequest]]:
        return [
            (i, r)
            for i, r in enumerate(self.recorded)
            if r.path == "/v1/responses" and r.body is not None and not is_title(r.body)
        ]

    @property
    def requests(self) -> list[dict[str, Any]]:
        """The JSON bodies of the model requests received (title requests left out), in order."""
        return [r.body for _, r in self._counted() if r.body is not None]

    @property
    def headers(self) -> list[dict[str, str]]:
        """The headers of each request in :attr:`requests`."""
        return [dict(r.headers) for _, r in self._counted()]

    @property
    def bills(self) -> list[Bill]:
        """What each answered request in :attr:`requests` was billed (errors bill nothing)."""
        with self._condition:
            bills = dict(self._bills)
        return [bills[i] for i, _ in self._counted() if i in bills]

    def wait_for_requests(self, count: int, timeout: float = 5.0) -> list[dict[str, Any]]:
        self.wait_for(lambda _: len(self._counted_locked()) >= count, timeout)
        return self.requests

    def _counted_locked(self) -> list[RecordedRequest]:
        return [r for r in self._recorded if r.path == "/v1/responses" and r.body is not None and not is_title(r.body)]

    def no_reply(self, index: int) -> ErrorReply:
        return ErrorReply(500, f"fake Responses server: no scripted reply for request #{index}", "server_error")

    # -- answering ---------------------------------------------------------------------------------------

    def route(self, handler: Handler, request: RecordedRequest, index: int) -> None:
        if self.expected_api_key is not None and request.headers.get("authorization") != (
            f"Bearer {self.expected_api_key}"
        ):
            failure = ErrorReply(
                401,
                "Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys.",
                "invalid_request_error",
                "invalid_api_key",
            )
            handler.send_json(failure.status, failure.body)
        elif request.method != "POST" or request.path != "/v1/responses":
            failure = ErrorReply(404, f"Invalid URL ({request.method} {request.path})", "invalid_request_error")
            handler.send_json(failure.status, failure.body)
        elif request.body is None:
            handler.send_json(400, ErrorReply(400, "We could not parse the JSON body of your request.").body)
        else:
            body = request.body
            reply = self.title_reply if is_title(body) else self.next_reply(body, index)
            if isinstance(reply, ErrorReply):
                handler.send_json(reply.status, reply.body, reply.headers)
            else:
                self._answer(handler, body, index, reply)

    def _answer(self, handler: Handler, body: dict[str, Any], index: int, reply: Reply) -> None:
        text = "".join(reply.text)
        reasoning = "".join(reply.reasoning)
        bill = Bill(
            input_tokens=tokens_of(layout(body)),
            cached_tokens=self.cache.serve(layout(body)),
            output_tokens=tokens_of(text + reasoning + "".join(c.arguments_json for c in reply.tool_calls)),
            reasoning_tokens=tokens_of(reasoning),
        )
        with self._condition:
            self._bills[index] = bill
        # As OpenAI does: a reasoning item carries its encrypted content only when the request asks for it.
        items = _output_items(reply, index, "reasoning.encrypted_content" in (body.get("include") or []))
        response = _response(body, index, self.model, "in_progress", [], None)
        if not body.get("stream"):
            handler.send_json(200, _response(body, index, self.model, "completed", items, bill))
            return
        events = _events(reply, items, response, _response(body, index, self.model, "completed", items, bill))
        handler.start_events()
        for number, event in enumerate(events):
            if reply.cut and event["type"] == "response.completed":
                break
            event["sequence_number"] = number
            handler.send_event(event, event["type"])
        handler.end_events()


def _usage(bill: Bill) -> dict[str, Any]:
    return {
        "input_tokens": bill.input_tokens,
        "input_tokens_details": {"cached_tokens": bill.cached_tokens},
        "output_tokens": bill.output_tokens,
        "output_tokens_details": {"reasoning_tokens": bill.reasoning_tokens},
        "total_tokens": bill.input_tokens + bill.output_tokens,
    }


def _response(
    body: dict[str, Any], index: int, model: str, status: str, output: list[dict[str, Any]], bill: Bill | None
) -> dict[str, Any]:
    return {
        "id": f"resp_fake_{index}",
        "object": "response",
        "created_at": int(time.time()),
        "status": status,
        "error": None,
        "incomplete_details": None,
        "instructions": body.get("instructions"),
        "metadata": {},
        "model": str(body.get("model") or model),
        "output": output,
        "parallel_tool_calls": True,
        "temperature": 1.0,
        "tool_choice": "auto",
        "tools": body.get("tools") or [],
        "top_p": 1.0,
        "usage": None if bill is None else _usage(bill),
    }


def _output_items(reply: Reply, index: int, encrypted: bool) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if reply.reasoning:
        items.append(
            {
                "id": f"rs_{index}",
                "type": "reasoning",
                "summary": [{"type": "summary_text", "text": "".join(reply.reasoning)}],
                "encrypted_content": f"enc-reasoning-{index}" if encrypted else None,
            }
        )
    if reply.text:
        items.append(
            {
                "id": f"msg_{index}",
                "type": "message",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": "".join(reply.text), "annotations": []}],
            }
        )
    for n, call in enumerate(reply.tool_calls):
        items.append(
            {
                "id": f"fc_{index}_{n}",
                "type": "function_call",
                "call_id": call.id or f"call_{index}_{n}",
                "name": call.name,
                "arguments": call.arguments_json,
                "status": "completed",
            }
        )
    return items


def _events(
    reply: Reply, items: list[dict[str, Any]], started: dict[str, Any], completed: dict[str, Any]
) -> Iterator[dict[str, Any]]:
    yield {"type": "response.created", "response": started}
    yield {"type": "response.in_progress", "response": started}
    for output_index, item in enumerate(items):
        item_id = item["id"]
        at = {"item_id": item_id, "output_index": output_index}
        match item["type"]:
            case "reasoning":
                yield {
                    "type": "response.output_item.added",
                    "output_index": output_index,
                    "item": {**item, "summary": []},
                }
                part = {"type": "summary_text", "text": ""}
                yield {"type": "response.reasoning_summary_part.added", **at, "summary_index": 0, "part": part}
                for piece in reply.reasoning:
                    yield {"type": "response.reasoning_summary_text.delta", **at, "summary_index": 0, "delta": piece}
                summary = item["summary"][0]["text"]
                yield {"type": "response.reasoning_summary_text.done", **at, "summary_index": 0, "text": summary}
                done_part = {"type": "summary_text", "text": summary}
                yield {"type": "response.reasoning_summary_part.done", **at, "summary_index": 0, "part": done_part}
            case "message":
                added = {**item, "status": "in_progress", "content": []}
                yield {"type": "response.output_item.added", "output_index": output_index, "item": added}
                empty = {"type": "output_text", "text": "", "annotations": []}
                yield {"type": "response.content_part.added", **at, "content_index": 0, "part": empty}
                for piece in reply.text:
                    yield {
                        "type": "response.output_text.delta",
                        **at,
                        "content_index": 0,
                        "delta": piece,
                        "logprobs": [],
                    }
                text = item["content"][0]["text"]
                yield {"type": "response.output_text.done", **at, "content_index": 0, "text": text, "logprobs": []}
                yield {"type": "response.content_part.done", **at, "content_index": 0, "part": item["content"][0]}
            case "function_call":
                added = {**item, "arguments": "", "status": "in_progress"}
                yield {"type": "response.output_item.added", "output_index": output_index, "item": added}
                arguments = item["arguments"]
                size = max(1, -(-len(arguments) // 3))
                for start in range(0, len(arguments), size):
                    delta = arguments[start : start + size]
                    yield {"type": "response.function_call_arguments.delta", **at, "delta": delta}
                yield {
                    "type": "response.function_call_arguments.done",
                    **at,
                    "name": item["name"],
                    "arguments": arguments,
                }
            case other:
                raise AssertionError(f"unknown output item type {other!r}")
        yield {"type": "response.output_item.done", "output_index": output_index, "item": item}
    yield {"type": "response.completed", "response": completed}


@contextmanager
def running_responses_server(
    *, model: str = DEFAULT_MODEL, expected_api_key: str | None = None
) -> Iterator[ResponsesServer]:
    """A started :class:`ResponsesServer`, stopped on exit."""
    with ResponsesServer(model=model, expected_api_key=expected_api_key) as server:
        yield server
