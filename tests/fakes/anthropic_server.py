"""A scripted Anthropic Messages API server for tests, with Anthropic's prompt cache simulated.

On the plumbing the provider fakes share (``http_fake.FakeProvider``): ``127.0.0.1`` on an ephemeral port, served
from a background thread, every request recorded, standard library only. The code under test reaches it in process
(``AsyncAnthropic(base_url=server.url, ...)``, or codling's ``build_model("anthropic:...", env=server.env())``) or
from a subprocess (``env={**os.environ, **server.env()}`` sets ``ANTHROPIC_BASE_URL`` and ``ANTHROPIC_API_KEY``).

``POST /v1/messages`` (the SDK's beta client adds ``?beta=true``) answers with the next scripted reply:

- ``"stream": true``: server-sent events as Anthropic sends them: ``message_start`` (the message, empty, with
  its input usage), ``ping``, then per content block ``content_block_start`` / ``content_block_delta`` /
  ``content_block_stop`` (thinking: ``thinking_delta`` then ``signature_delta``; text: ``text_delta``; tool use:
  ``input_json_delta`` in pieces), then ``message_delta`` (``stop_reason`` and the cumulative usage, with
  ``output_tokens``) and ``message_stop``. ``Reply(cut=True)`` ends the body after the content blocks;
  ``Reply(stream_error="overloaded_error")`` sends an ``error`` event there instead, as Anthropic reports a
  failure once the response has begun.
- otherwise one ``message`` object with the same content and usage.

Usage: ``input_tokens``, ``cache_creation_input_tokens``, ``cache_read_input_tokens`` come from the cache
simulation (``anthropic_cache.py``) applied to the request; every request's figures are kept in
:attr:`AnthropicServer.bill` for a test or the bench to price. ``output_tokens`` is the reply's, or an estimate.

Errors are Anthropic's JSON (``{"type": "error", "error": {"type", "message"}}``) with the API's statuses:
:meth:`ErrorReply.prompt_too_long` (400), :meth:`ErrorReply.authentication` (401, also sent by itself when
``expected_api_key`` is set and ``x-api-key`` differs), :meth:`ErrorReply.rate_limited` (429 with
``retry-after``), :meth:`ErrorReply.overloaded` (529). A breakpoint the API refuses (more than 4, or on a
thinking or empty block) is a 400 ``invalid_request_error``; any other path or method a 404 ``not_found_error``;
a responder that raises a 500 ``api_error`` naming the exception. JSON responses carry a ``request-id``.

Title requests (codling's title special turn, recognised by its system prompt) get :attr:`title_reply` and are
left out of :attr:`requests` and :attr:`bill`, as in the OpenAI fake (:attr:`title_bill` has theirs).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from codling.brain.builtin_turns import prompt_text
from tests.fakes.anthropic_cache import Billed, CacheRejected, PromptCache
from tests.fakes.http_fake import FakeProvider, Handler, RecordedRequest

__all__ = [
    "AnthropicServer",
    "ErrorReply",
    "RecordedRequest",
    "Reply",
    "Responder",
    "ScriptedReply",
    "Thinking",
    "ToolUse",
    "api_key",
    "running_server",
]

_JSON_PIECES = 3
"""How many ``input_json_delta`` events a tool call's input is split over."""

_REQUEST_ID = {"request-id": "req_fake"}
"""Sent with every JSON response, as Anthropic does (the SDK puts it in its errors)."""


@dataclass(frozen=True)
class Thinking:
    """A thinking block: its text (streamed as ``thinking_delta`` pieces) and its signature."""

    text: Sequence[str]
    signature: str = "sig-fake"

    def __post_init__(self) -> None:
        object.__setattr__(self, "text", (self.text,) if isinstance(self.text, str) else tuple(self.text))


@dataclass(frozen=True)
class ToolUse:
    """A ``tool_use`` block; without an ``id`` the server makes one (``toolu_<request>_<index>``)."""

    name: str
    input: Mapping[str, Any] = field(default_factory=dict)
    id: str | None = None


@dataclass(frozen=True)
class Reply:
    """One successful message: optional thinking, then text (each item a ``text_delta``), then tool uses.

    ``stop_reason`` defaults to ``tool_use`` with tool uses, else ``end_turn``; ``output_tokens`` to an estimate.
    """

    text: Sequence[str] = ()
    thinking: Thinking | None = None
    tool_uses: Sequence[ToolUse] = ()
    stop_reason: str | None = None
    output_tokens: int | None = None
    cut: bool = False
    """Streamed, the body ends after the content blocks: no ``message_delta``, no ``message_stop`` (a connection
    dropped mid-reply)."""
    stream_error: str | None = None
    """Streamed, an ``error`` event of this type (e.g. ``overloaded_error``) follows the content blocks and ends
    the stream, as Anthropic reports a failure after the response has begun."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "text", (self.text,) if isinstance(self.text, str) else tuple(self.text))
        object.__setattr__(self, "tool_uses", tuple(self.tool_uses))

    @property
    def effective_stop_reason(self) -> str:
        return self.stop_reason or ("tool_use" if self.tool_uses else "end_turn")

    def content(self, request_index: int) -> list[dict[str, Any]]:
        """The finished content blocks (as a non-streamed message carries them)."""
        blocks: list[dict[str, Any]] = []
        if self.thinking is not None:
            blocks.append(
                {"type": "thinking", "thinking": "".join(self.thinking.text), "signature": self.thinking.signature}
            )
        if self.text:
            blocks.append({"type": "text", "text": "".join(self.text)})
        for i, use in enumerate(self.tool_uses):
            blocks.append(
                {
                    "type": "tool_use",
                    "id": use.id or f"toolu_{request_index}_{i}",
                    "name": use.name,
                    "input": dict(use.input),
                }
            )
        return blocks

    def estimated_output(self, request_index: int) -> int:
        if self.output_tokens is not None:
            return self.output_tokens
        return max(1, len(json.dumps(self.content(request_index))) // 4)


@dataclass(frozen=True)
class ErrorReply:
    """An HTTP error with Anthropic's body, ``{"type": "error", "error": {"type", "message"}}``."""

    status: int
    type: str
    message: str
    headers: Mapping[str, str] = field(default_factory=dict)

    @property
    def body(self) -> dict[str, Any]:
        return {"type": "error", "error": {"type": self.type, "message": self.message}}

    @classmethod
    def prompt_too_long(cls, tokens: int = 210_000, maximum: int = 200_000) -> ErrorReply:
        """The ``400`` Anthropic sends when the prompt does not fit the context window."""
        return cls(400, "invalid_request_error", f"prompt is too long: {tokens} tokens > {maximum} maximum")

    @classmethod
    def authentication(cls) -> ErrorReply:
        return cls(401, "authentication_error", "invalid x-api-key")

    @classmethod
    def rate_limited(cls, retry_after: int = 1) -> ErrorReply:
        """A ``429`` whose ``retry-after`` header says how many seconds to wait."""
        return cls(
            429,
            "rate_limit_error",
            "This request would exceed the rate limit for your organization of 50 requests per minute.",
            {"retry-after": str(retry_after)},
        )

    @classmethod
    def overloaded(cls) -> ErrorReply:
        return cls(529, "overloaded_error", "Overloaded")


ScriptedReply = Reply | ErrorReply
Responder = Callable[[dict[str, Any]], ScriptedReply]


def _is_message(request: RecordedRequest) -> bool:
    return request.method == "POST" and request.path == "/v1/messages"


def is_title(body: Mapping[str, Any]) -> bool:
    """Whether a request is codling's title special turn (its system prompt says so)."""
    system = body.get("system")
    text = (
        system if isinstance(system, str) else "".join(b.get("text", "") for b in system or [] if isinstance(b, dict))
    )
    return text.strip() == prompt_text("title").strip()


def api_key(headers: Mapping[str, str]) -> str | None:
    """The key a request carries: ``x-api-key``, or a bearer token (newer SDKs send ``authorization``)."""
    if "x-api-key" in headers:
        return headers["x-api-key"]
    scheme, _, token = headers.get("authorization", "").partition(" ")
    return token if scheme.lower() == "bearer" and token else None


def _counted(request: RecordedRequest) -> bool:
    return _is_message(request) and request.body is not None and not is_title(request.body)


def _events(reply: Reply, message: dict[str, Any], usage: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """The stream's events for ``reply``, in order, as (event name, data)."""
    yield "message_start", {"type": "message_start", "message": {**message, "content": [], "stop_reason": None}}
    yield "ping", {"type": "ping"}
    for index, block in enumerate(message["content"]):
        kind = block["type"]
        match kind:
            case "thinking":
                yield _start(index, {"type": "thinking", "thinking": "", "signature": ""})
                assert reply.thinking is not None
                for piece in reply.thinking.text:
                    yield _delta(index, {"type": "thinking_delta", "thinking": piece})
                yield _delta(index, {"type": "signature_delta", "signature": block["signature"]})
            case "text":
                yield _start(index, {"type": "text", "text": ""})
                for piece in reply.text:
                    yield _delta(index, {"type": "text_delta", "text": piece})
            case "tool_use":
                yield _start(index, {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}})
                encoded = json.dumps(block["input"])
                size = max(1, -(-len(encoded) // _JSON_PIECES))
                for at in range(0, len(encoded), size):
                    yield _delta(index, {"type": "input_json_delta", "partial_json": encoded[at : at + size]})
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    if reply.stream_error is not None:
        error = {"type": reply.stream_error, "message": "Overloaded" if "overloaded" in reply.stream_error else "Error"}
        yield "error", {"type": "error", "error": error}
        return
    if reply.cut:
        return
    yield (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
            "usage": usage,
        },
    )
    yield "message_stop", {"type": "message_stop"}


def _start(index: int, block: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return "content_block_start", {"type": "content_block_start", "index": index, "content_block": block}


def _delta(index: int, delta: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}


class AnthropicServer(FakeProvider):
    """A scripted Anthropic Messages API on ``127.0.0.1``, with a simulated prompt cache and a bill.

    Use it as a context manager, or :meth:`start` and :meth:`stop`; every method is safe from any thread.
    """

    name = "fake-anthropic-server"

    def __init__(
        self,
        *,
        responder: Responder | None = None,
        expected_api_key: str | None = None,
        clock: Callable[[], float] = time.monotonic,
        minimum_cacheable: int | None = None,
    ) -> None:
        """``clock`` (seconds) drives cache expiry; ``minimum_cacheable`` overrides the per-model minimum."""
        super().__init__(responder=responder)
        self.expected_api_key = expected_api_key
        self.title_reply: ScriptedReply = Reply("Loopback session title")
        self.cache = PromptCache(clock, minimum=minimum_cacheable)
        self._bills: list[Billed] = []
        self._title_bills: list[Billed] = []

    def env(self, api_key: str = "test-key") -> dict[str, str]:
        """The variables that point codling (or the Anthropic SDK) at this server (``url`` is the API root)."""
        return {"ANTHROPIC_BASE_URL": self.url, "ANTHROPIC_API_KEY": api_key}

    @property
    def requests(self) -> list[dict[str, Any]]:
        """The bodies of the message requests received, title requests left out."""
        return [r.body for r in self.recorded if r.body is not None and _counted(r)]

    @property
    def headers(self) -> list[Mapping[str, str]]:
        """The headers of each request in :attr:`requests` (``x-api-key``, ``anthropic-version``, ...)."""
        return [r.headers for r in self.recorded if _counted(r)]

    @property
    def bill(self) -> list[Billed]:
        """What each answered request in :attr:`requests` was billed, in order (errors bill nothing)."""
        with self._condition:
            return list(self._bills)

    @property
    def title_bill(self) -> list[Billed]:
        """What each answered title request was billed, in order."""
        with self._condition:
            return list(self._title_bills)

    def wait_for_requests(self, count: int, timeout: float = 5.0) -> list[dict[str, Any]]:
        """Wait until at least ``count`` message requests have arrived; return :attr:`requests`."""
        self.wait_for(lambda recorded: sum(map(_counted, recorded)) >= count, timeout)
        return self.requests

    def no_reply(self, index: int) -> ErrorReply:
        return ErrorReply(500, "api_error", f"fake Anthropic server: no scripted reply for request #{index}")

    def responder_failed(self, exc: Exception) -> ErrorReply:
        return ErrorReply(500, "api_error", f"fake Anthropic server: the responder raised {exc!r}")

    # -- answering ---------------------------------------------------------------------------------------

    def route(self, handler: Handler, request: RecordedRequest, index: int) -> None:
        body = request.body
        if self.expected_api_key is not None and api_key(request.headers) != self.expected_api_key:
            _send_error(handler, ErrorReply.authentication())
        elif not _is_message(request):
            _send_error(handler, ErrorReply(404, "not_found_error", f"Not found: {request.method} {request.path}"))
        elif body is None:
            _send_error(handler, ErrorReply(400, "invalid_request_error", "The request body is not a JSON object."))
        else:
            reply = self.title_reply if is_title(body) else self.next_reply(body, index)
            if isinstance(reply, ErrorReply):
                _send_error(handler, reply)
            else:
                self._answer(handler, body, index, reply)

    def _answer(self, handler: Handler, body: dict[str, Any], index: int, reply: Reply) -> None:
        try:
            with self._condition:
                billed = self.cache.bill(body)
        except CacheRejected as e:
            _send_error(handler, ErrorReply(400, "invalid_request_error", str(e)))
            return
        usage = {**billed.usage_json(), "output_tokens": reply.estimated_output(index)}
        with self._condition:
            bills = self._title_bills if is_title(body) else self._bills
            bills.append(Billed(**{**billed.__dict__, "output_tokens": usage["output_tokens"]}))
        message = {
            "id": f"msg_fake_{index}",
            "type": "message",
            "role": "assistant",
            "model": str(body.get("model")),
            "content": reply.content(index),
            "stop_reason": reply.effective_stop_reason,
            "stop_sequence": None,
            "usage": usage,
        }
        if not body.get("stream"):
            handler.send_json(200, message, _REQUEST_ID)
            return
        handler.start_events()
        for name, data in _events(reply, {**message, "usage": {**usage, "output_tokens": 1}}, usage):
            handler.send_event(data, name)
        handler.end_events()


def _send_error(handler: Handler, error: ErrorReply) -> None:
    handler.send_json(error.status, error.body, {**_REQUEST_ID, **error.headers})


@contextmanager
def running_server(
    *, responder: Responder | None = None, expected_api_key: str | None = None
) -> Iterator[AnthropicServer]:
    """A started :class:`AnthropicServer`, stopped on exit."""
    with AnthropicServer(responder=responder, expected_api_key=expected_api_key) as server:
        yield server
