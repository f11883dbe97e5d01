"""A scripted OpenAI-compatible chat-completions server for tests.

The server listens on ``127.0.0.1`` on an ephemeral port and serves from a background thread of the test
process, so the code under test can reach it in-process (``OpenAIProvider(base_url=server.base_url, ...)``)
and from spawned subprocesses (``env={**os.environ, **server.env()}`` sets ``OPENAI_BASE_URL`` and
``OPENAI_API_KEY``). It uses the standard library only and never touches anything beyond loopback; the server
plumbing (recording, the reply queue, SSE, stopping) is ``http_fake.FakeProvider``'s.

Endpoints:

- ``POST /v1/chat/completions``: answers with the next scripted reply, streamed as server-sent events
  (``chat.completion.chunk`` objects, one ``data: {json}`` event per chunk, then ``data: [DONE]``) when the
  request has ``"stream": true``, else as one ``chat.completion`` object.
- ``GET /v1/models``: a list with one model (:attr:`OpenAIServer.listed_models`, when set, lists those instead).
- anything else: ``404`` with an OpenAI-style error body.

Title requests (codling's title special turn, recognised by its system prompt) are answered with
:attr:`OpenAIServer.title_reply` and kept apart (:attr:`OpenAIServer.title_requests`): they never take a queued
reply and never count in :attr:`OpenAIServer.requests`, so a script for the user's turns stays the same
whether or not sessions get titles.

Which other reply a request gets: the next one queued with :meth:`OpenAIServer.enqueue`; when the queue is empty,
whatever :attr:`OpenAIServer.responder` returns for the request body; when there is neither, a ``500`` whose
error body says ``no scripted reply`` (code ``no_scripted_reply``).

Retries: codling's own clients (``llm/providers.py``) never retry in the SDK; the session retries visibly
(``brain/provider_retries.py``). A client made directly with the ``openai`` SDK, as in
``tests/unit/test_openai_server.py``, retries 408, 409, 429 and 5xx responses (and connection errors) twice by default,
with a backoff of about 0.5 s, then 1 s, unless the response's ``retry-after-ms``/``retry-after`` header says
otherwise. A test that scripts such an error should therefore either give the provider a client built with
``AsyncOpenAI(..., max_retries=0)``, or run the agent with ``ModelSettings(max_retries=0)``, or script as many
errors as the client will make attempts (``ErrorReply.rate_limited(retry_after_ms=1)`` keeps the waits short).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from codling.brain.builtin_turns import prompt_text
from tests.fakes.http_fake import FakeProvider, Handler, RecordedRequest

__all__ = [
    "DEFAULT_MODEL",
    "ErrorReply",
    "OpenAIServer",
    "RecordedRequest",
    "Reply",
    "Responder",
    "ScriptedReply",
    "ToolCall",
    "Usage",
    "last_user_text",
    "running_server",
]

DEFAULT_MODEL = "fake-model"
"""The model id ``GET /v1/models`` lists unless the server is given another."""

_ARGUMENT_PIECES = 3
"""How many ``tool_calls`` deltas a tool call's arguments string is split over when streamed."""

# --- Scripted replies ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Usage:
    """Token counts reported for one reply."""

    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int = 0
    """Of ``prompt_tokens``, those served from the provider's prompt cache (``prompt_tokens_details``)."""

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
        }
        if self.cached_tokens:
            body["prompt_tokens_details"] = {"cached_tokens": self.cached_tokens}
        return body


@dataclass(frozen=True)
class ToolCall:
    """One tool call the model makes.

    ``arguments`` is JSON-encoded before it is sent; a ``str`` is sent as it is, so a test can send arguments
    that aren't valid JSON. Without an ``id``, the server makes one up (``call_<request>_<index>``).
    """

    name: str
    arguments: Any = field(default_factory=dict)
    id: str | None = None

    @property
    def arguments_json(self) -> str:
        return self.arguments if isinstance(self.arguments, str) else json.dumps(self.arguments)


@dataclass(frozen=True)
class Reply:
    """One successful response from the model.

    Streamed, each item of ``reasoning`` and ``text`` is a delta of its own (reasoning first, then text,
    then tool calls); each tool call is a delta carrying its id and name followed by deltas carrying its
    arguments in pieces. Not streamed, they are joined into one message. A plain ``str`` given as ``text`` or
    ``reasoning`` is one chunk.

    ``reasoning`` goes in the ``reasoning_field`` of the delta or message: ``reasoning_content`` (DeepSeek,
    Moonshot, vLLM) by default, or ``reasoning`` (gpt-oss via Ollama, OpenRouter); pydantic-ai's
    ``OpenAIChatModel`` reads both as a ``ThinkingPart``.

    ``usage`` is sent in a final chunk (with empty ``choices``) when the request asks for it with
    ``stream_options: {"include_usage": true}``, and in the body of a non-streamed response; without it, no
    usage is sent at all. ``finish_reason`` defaults to ``"tool_calls"`` when there are tool calls, else
    ``"stop"``. ``delay`` is slept before each streamed chunk, or once before a non-streamed response.

    Misbehaving streams: ``cut=True`` ends the body cleanly after the content chunks, with no finish-reason
    chunk, no usage and no ``data: [DONE]`` (a proxy or provider that dropped the rest of the reply).
    ``stall_after=n`` sends ``n`` chunks and then nothing until :meth:`OpenAIServer.stop` (a provider that hung).
    """

    text: Sequence[str] = ()
    reasoning: Sequence[str] = ()
    tool_calls: Sequence[ToolCall] = ()
    usage: Usage | None = None
    finish_reason: str | None = None
    delay: float = 0.0
    reasoning_field: str = "reasoning_content"
    cut: bool = False
    stall_after: int | None = None

    def __post_init__(self) -> None:
        for name in ("text", "reasoning"):
            value = getattr(self, name)
            object.__setattr__(self, name, (value,) if isinstance(value, str) else tuple(value))
        object.__setattr__(self, "tool_calls", tuple(self.tool_calls))
        if self.delay < 0:
            raise ValueError(f"delay must not be negative, got {self.delay}")

    @classmethod
    def chunked(cls, text: str, size: int = 8, *, usage: Usage | None = None, delay: float = 0.0) -> Reply:
        """A text reply streamed in chunks of ``size`` characters."""
        if size < 1:
            raise ValueError(f"size must be positive, got {size}")
        return cls(text=[text[i : i + size] for i in range(0, len(text), size)], usage=usage, delay=delay)

    @property
    def full_text(self) -> str:
        return "".join(self.text)

    @property
    def full_reasoning(self) -> str:
        return "".join(self.reasoning)

    @property
    def effective_finish_reason(self) -> str:
        if self.finish_reason is not None:
            return self.finish_reason
        return "tool_calls" if self.tool_calls else "stop"


@dataclass(frozen=True)
class ErrorReply:
    """An HTTP error response with an OpenAI-style body: ``{"error": {"message", "type", "param", "code"}}``.

    ``headers`` are added to the response, e.g. ``{"retry-after-ms": "10"}`` or
    ``{"x-should-retry": "false"}``, which the ``openai`` SDK's retry logic reads.
    """

    status: int
    message: str
    type: str = "invalid_request_error"
    code: str | None = None
    param: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not 400 <= self.status <= 599:
            raise ValueError(f"an error reply needs a 4xx or 5xx status, got {self.status}")
        object.__setattr__(self, "headers", dict(self.headers))

    @property
    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}

    @classmethod
    def context_length_exceeded(cls, message: str | None = None) -> ErrorReply:
        """The ``400`` OpenAI sends when the prompt doesn't fit the model's context window."""
        return cls(
            status=400,
            message=message
            or (
                "This model's maximum context length is 8192 tokens. However, your messages resulted in "
                "9000 tokens. Please reduce the length of the messages."
            ),
            type="invalid_request_error",
            code="context_length_exceeded",
            param="messages",
        )

    @classmethod
    def rate_limited(
        cls, message: str | None = None, *, retry_after_ms: int | None = None, retry_after: int | None = None
    ) -> ErrorReply:
        """A ``429`` rate limit; ``retry_after_ms`` sets the ``retry-after-ms`` header the SDK waits for,
        ``retry_after`` the standard ``Retry-After`` header (seconds)."""
        headers = {} if retry_after_ms is None else {"retry-after-ms": str(retry_after_ms)}
        if retry_after is not None:
            headers["retry-after"] = str(retry_after)
        return cls(
            status=429,
            message=message or "Rate limit reached for requests. Please try again in 1ms.",
            type="requests",
            code="rate_limit_exceeded",
            headers=headers,
        )

    @classmethod
    def server_error(cls, message: str | None = None, *, status: int = 500) -> ErrorReply:
        """A ``5xx`` server error."""
        return cls(
            status=status,
            message=message or "The server had an error while processing your request.",
            type="server_error",
        )


ScriptedReply = Reply | ErrorReply
Responder = Callable[[dict[str, Any]], ScriptedReply]
"""Answers a request (its JSON body) when no reply is queued. Called from a server thread."""


def _is_chat_completion(request: RecordedRequest) -> bool:
    return request.method == "POST" and request.path == "/v1/chat/completions"


def last_user_text(body: Mapping[str, Any]) -> str:
    """The text of the last user message of a chat-completions request body, ``""`` if there is none.

    Handy for responders, e.g. an echo:
    ``server.responder = lambda body: Reply(text=[last_user_text(body)])``.
    """
    for message in reversed(body.get("messages") or []):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            return "".join(
                part.get("text", "") for part in content if isinstance(part, dict) and part.get("type") == "text"
            )
        return ""
    return ""


# --- Response bodies -------------------------------------------------------------------------------------


def text_of(content: Any) -> str:
    """The text of a chat message's content (a string, or a list of parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def is_title(body: Mapping[str, Any]) -> bool:
    """Whether a chat-completion request is codling's title special turn (its system prompt says so)."""
    title_prompt = prompt_text("title").strip()
    messages = body.get("messages") or []
    return any(
        isinstance(m, dict)
        and m.get("role") in ("system", "developer")
        and text_of(m.get("content")).strip() == title_prompt
        for m in messages
    )


def _counted(request: RecordedRequest) -> bool:
    return _is_chat_completion(request) and request.body is not None and not is_title(request.body)


def _error_body(message: str, type_: str, code: str | None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}


def _tool_call_ids(reply: Reply, request_index: int) -> list[str]:
    return [call.id or f"call_{request_index}_{i}" for i, call in enumerate(reply.tool_calls)]


def _split(text: str, pieces: int) -> list[str]:
    if not text:
        return []
    size = max(1, -(-len(text) // pieces))
    return [text[i : i + size] for i in range(0, len(text), size)]


def _completion(reply: Reply, *, completion_id: str, model: str, request_index: int) -> dict[str, Any]:
    message: dict[str, Any] = {
        "role": "assistant",
        "content": reply.full_text if reply.text or not reply.tool_calls else None,
        "refusal": None,
    }
    if reply.reasoning:
        message[reply.reasoning_field] = reply.full_reasoning
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments_json},
            }
            for call, call_id in zip(reply.tool_calls, _tool_call_ids(reply, request_index), strict=True)
        ]
    body: dict[str, Any] = {
        "id": completion_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": reply.effective_finish_reason, "logprobs": None}],
    }
    if reply.usage is not None:
        body["usage"] = reply.usage.to_json()
    return body


def _chunks(
    reply: Reply, *, completion_id: str, model: str, request_index: int, include_usage: bool
) -> Iterator[dict[str, Any]]:
    created = int(time.time())

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}],
        }
        if include_usage:
            data["usage"] = None
        return data

    yield chunk({"role": "assistant", "content": ""})
    for piece in reply.reasoning:
        yield chunk({reply.reasoning_field: piece})
    for piece in reply.text:
        yield chunk({"content": piece})
    for index, (call, call_id) in enumerate(zip(reply.tool_calls, _tool_call_ids(reply, request_index), strict=True)):
        yield chunk(
            {
                "tool_calls": [
                    {
                        "index": index,
                        "id": call_id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": ""},
                    }
                ]
            }
        )
        for piece in _split(call.arguments_json, _ARGUMENT_PIECES):
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    if reply.cut:
        return
    yield chunk({}, reply.effective_finish_reason)
    if include_usage and reply.usage is not None:
        yield {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [],
            "usage": reply.usage.to_json(),
        }


# --- The server ------------------------------------------------------------------------------------------


class OpenAIServer(FakeProvider):
    """A scripted OpenAI-compatible chat-completions server on ``127.0.0.1``, run from a background thread.

    Use it as a context manager, or call :meth:`start` and :meth:`stop`. All methods and properties are safe
    to call from any thread while it serves.
    """

    name = "fake-openai-server"

    def __init__(
        self,
        *,
        responder: Responder | None = None,
        model: str = DEFAULT_MODEL,
        expected_api_key: str | None = None,
    ) -> None:
        """Create a stopped server.

        Args:
            responder: Answers a request when no reply is queued; it can be set later too.
            model: The model id ``GET /v1/models`` lists, and the one responses name when a request names
                none.
            expected_api_key: When set, a request whose ``Authorization`` isn't ``Bearer <key>`` gets a
                ``401`` with code ``invalid_api_key``.
        """
        super().__init__(responder=responder)
        self.model = model
        self.expected_api_key = expected_api_key
        self.listed_models: list[str] | None = None
        """The model ids ``GET /v1/models`` lists (None: just :attr:`model`; empty: none)."""
        self.title_reply: ScriptedReply = Reply("Loopback session title")

    # -- addresses ---------------------------------------------------------------------------------------

    @property
    def port(self) -> int:
        return int(self.url.rpartition(":")[2])

    @property
    def base_url(self) -> str:
        """The OpenAI base URL, ``http://127.0.0.1:PORT/v1``."""
        return f"{self.url}/v1"

    def env(self, api_key: str = "test-key") -> dict[str, str]:
        """The environment variables that point an OpenAI client in a subprocess at this server."""
        return {"OPENAI_BASE_URL": self.base_url, "OPENAI_API_KEY": api_key}

    # -- what was received -------------------------------------------------------------------------------

    @property
    def requests(self) -> list[dict[str, Any]]:
        """The JSON bodies of the chat-completion requests received, in order (a snapshot), title requests
        left out."""
        return [r.body for r in self.recorded if r.body is not None and _counted(r)]

    @property
    def title_requests(self) -> list[dict[str, Any]]:
        """The JSON bodies of the title requests received, in order (a snapshot)."""
        return [r.body for r in self.recorded if _is_chat_completion(r) and r.body is not None and is_title(r.body)]

    @property
    def authorizations(self) -> list[str | None]:
        """The ``Authorization`` header of each request in :attr:`requests`, e.g. ``"Bearer test-key"``."""
        return [r.authorization for r in self.recorded if _counted(r)]

    def wait_for_requests(self, count: int, timeout: float = 5.0) -> list[dict[str, Any]]:
        """Wait until at least ``count`` chat-completion requests have arrived; return :attr:`requests`."""
        try:
            self.wait_for(lambda recorded: sum(map(_counted, recorded)) >= count, timeout)
        except TimeoutError:
            got = sum(map(_counted, self.recorded))
            raise TimeoutError(f"expected {count} chat-completion requests within {timeout}s, got {got}") from None
        return self.requests

    # -- answering ---------------------------------------------------------------------------------------

    def no_reply(self, index: int) -> ErrorReply:
        return ErrorReply(
            status=500,
            message=f"fake OpenAI server: no scripted reply for request #{index} "
            "(the queue is empty and there is no responder)",
            type="server_error",
            code="no_scripted_reply",
        )

    def responder_failed(self, exc: Exception) -> ErrorReply:
        return ErrorReply(
            status=500,
            message=f"fake OpenAI server: the responder raised {exc!r}",
            type="server_error",
            code="responder_error",
        )

    def route(self, handler: Handler, request: RecordedRequest, index: int) -> None:
        body = request.body
        if self.expected_api_key is not None and request.authorization != f"Bearer {self.expected_api_key}":
            handler.send_json(
                401, _error_body("Incorrect API key provided.", "invalid_request_error", "invalid_api_key")
            )
        elif request.method == "GET" and request.path == "/v1/models":
            handler.send_json(200, self._models_body())
        elif _is_chat_completion(request):
            if body is None:
                handler.send_json(
                    400, _error_body("The request body is not a JSON object.", "invalid_request_error", None)
                )
            else:
                self._answer(handler, body, index, self.title_reply if is_title(body) else self.next_reply(body, index))
        else:
            handler.send_json(
                404,
                _error_body(
                    f"Unknown request URL: {request.method} {request.path}", "invalid_request_error", "unknown_url"
                ),
            )

    def _answer(self, handler: Handler, body: dict[str, Any], index: int, reply: ScriptedReply) -> None:
        if isinstance(reply, ErrorReply):
            handler.send_json(reply.status, reply.body, reply.headers)
            return
        model = str(body.get("model") or self.model)
        completion_id = f"chatcmpl-fake-{index}"
        if not body.get("stream"):
            time.sleep(reply.delay)
            handler.send_json(200, _completion(reply, completion_id=completion_id, model=model, request_index=index))
            return
        stream_options = body.get("stream_options")
        include_usage = isinstance(stream_options, dict) and bool(stream_options.get("include_usage"))
        handler.start_events()
        chunks = _chunks(
            reply, completion_id=completion_id, model=model, request_index=index, include_usage=include_usage
        )
        for sent, data in enumerate(chunks):
            if sent == reply.stall_after:
                self._stopping.wait()  # hung: nothing more until the server stops
                return
            time.sleep(reply.delay)
            handler.send_event(data)
        if not reply.cut:
            handler.write_chunk(b"data: [DONE]\n\n")
        handler.end_events()

    def _models_body(self) -> dict[str, Any]:
        listed = [self.model] if self.listed_models is None else self.listed_models
        return {
            "object": "list",
            "data": [{"id": m, "object": "model", "created": 0, "owned_by": "codling-tests"} for m in listed],
        }


@contextmanager
def running_server(
    *, responder: Responder | None = None, model: str = DEFAULT_MODEL, expected_api_key: str | None = None
) -> Iterator[OpenAIServer]:
    """A started :class:`OpenAIServer`, stopped on exit; wrap it in a fixture."""
    with OpenAIServer(responder=responder, model=model, expected_api_key=expected_api_key) as server:
        yield server
