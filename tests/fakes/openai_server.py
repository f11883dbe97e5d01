"""A scripted OpenAI-compatible chat-completions server for tests.

The server listens on ``127.0.0.1`` on an ephemeral port and serves from a background thread of the test
process, so the code under test can reach it in-process (``OpenAIProvider(base_url=server.base_url, ...)``)
and from spawned subprocesses (``env={**os.environ, **server.env()}`` sets ``OPENAI_BASE_URL`` and
``OPENAI_API_KEY``). It uses the standard library only and never touches anything beyond loopback.

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
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self, cast

from codling.brain.builtin_turns import prompt_text

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

_CONNECTION_ERRORS = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError)


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


@dataclass(frozen=True)
class RecordedRequest:
    """One request the server received. Header names are lowercased; ``body`` is ``None`` unless JSON."""

    method: str
    path: str
    headers: Mapping[str, str]
    body: dict[str, Any] | None

    @property
    def authorization(self) -> str | None:
        return self.headers.get("authorization")

    @property
    def is_chat_completion(self) -> bool:
        return self.method == "POST" and self.path == "/v1/chat/completions"


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
    return request.is_chat_completion and request.body is not None and not is_title(request.body)


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


# --- HTTP plumbing ---------------------------------------------------------------------------------------


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, owner: OpenAIServer) -> None:
        self.owner = owner
        self.connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.connections_lock:
            self.connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self.connections_lock:
            self.connections.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        """Unblock handler threads waiting on idle keep-alive connections."""
        with self.connections_lock:
            connections = list(self.connections)
        for connection in connections:
            with suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hangs up (e.g. a cancelled stream) is not a server error worth a traceback.
        if isinstance(sys.exc_info()[1], (*_CONNECTION_ERRORS, TimeoutError)):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # TCP_NODELAY, as real API servers set it: with Nagle's algorithm a streamed reply's second small write waits
    # for the client's delayed ACK (up to 40 ms on Linux), which made every warm prompt look 30-40 ms slower.
    disable_nagle_algorithm = True
    timeout = 30  # an idle keep-alive connection frees its thread after this long

    @property
    def _owner(self) -> OpenAIServer:
        return cast(_HTTPServer, self.server).owner

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def _handle(self, method: str) -> None:
        path = self.path.split("?", 1)[0]
        raw = self._read_body()
        body: dict[str, Any] | None = None
        if raw:
            try:
                parsed = json.loads(raw)
            except ValueError:
                parsed = None
            body = parsed if isinstance(parsed, dict) else None
        headers = {name.lower(): value for name, value in self.headers.items()}
        request = RecordedRequest(method=method, path=path, headers=headers, body=body)
        owner = self._owner
        index = owner._record(request)

        try:
            if owner.expected_api_key is not None and request.authorization != f"Bearer {owner.expected_api_key}":
                self._send_json(
                    401,
                    _error_body("Incorrect API key provided.", "invalid_request_error", "invalid_api_key"),
                )
            elif method == "GET" and path == "/v1/models":
                self._send_json(200, owner._models_body())
            elif request.is_chat_completion:
                if body is None:
                    self._send_json(
                        400,
                        _error_body("The request body is not a JSON object.", "invalid_request_error", None),
                    )
                else:
                    self._answer(body, index, owner._next_reply(body, index))
            else:
                self._send_json(
                    404,
                    _error_body(f"Unknown request URL: {method} {path}", "invalid_request_error", "unknown_url"),
                )
        except _CONNECTION_ERRORS:
            self.close_connection = True
            owner._hung_up()

    def _read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _send_json(self, status: int, payload: Mapping[str, Any], headers: Mapping[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _answer(self, body: dict[str, Any], index: int, reply: ScriptedReply) -> None:
        if isinstance(reply, ErrorReply):
            self._send_json(reply.status, reply.body, reply.headers)
            return
        model = str(body.get("model") or self._owner.model)
        completion_id = f"chatcmpl-fake-{index}"
        if not body.get("stream"):
            time.sleep(reply.delay)
            self._send_json(200, _completion(reply, completion_id=completion_id, model=model, request_index=index))
            return
        stream_options = body.get("stream_options")
        include_usage = isinstance(stream_options, dict) and bool(stream_options.get("include_usage"))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        chunks = _chunks(
            reply, completion_id=completion_id, model=model, request_index=index, include_usage=include_usage
        )
        for sent, data in enumerate(chunks):
            if sent == reply.stall_after:
                self._owner._stopping.wait()  # hung: nothing more until the server stops
                return
            time.sleep(reply.delay)
            self._write_chunk(f"data: {json.dumps(data)}\n\n".encode())
        if not reply.cut:
            self._write_chunk(b"data: [DONE]\n\n")
        self._write_chunk(b"")  # the zero-length chunk that ends the body

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()


# --- The server ------------------------------------------------------------------------------------------


class OpenAIServer:
    """A scripted OpenAI-compatible chat-completions server on ``127.0.0.1``, run from a background thread.

    Use it as a context manager, or call :meth:`start` and :meth:`stop`. All methods and properties are safe
    to call from any thread while it serves.
    """

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
        self.responder: Responder | None = responder
        self.model = model
        self.expected_api_key = expected_api_key
        self.listed_models: list[str] | None = None
        """The model ids ``GET /v1/models`` lists (None: just :attr:`model`; empty: none)."""
        self.title_reply: ScriptedReply = Reply("Loopback session title")
        self._condition = threading.Condition()
        self._queue: deque[ScriptedReply] = deque()
        self._recorded: list[RecordedRequest] = []
        self._hangups = 0
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        """Set by :meth:`stop`: releases handlers of stalled replies."""

    # -- lifecycle ---------------------------------------------------------------------------------------

    def start(self) -> Self:
        if self._httpd is not None:
            raise RuntimeError("the server is already running")
        httpd = _HTTPServer(self)
        thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-openai-server", daemon=True
        )
        thread.start()
        self._httpd, self._thread = httpd, thread
        return self

    def stop(self) -> None:
        httpd, thread = self._httpd, self._thread
        if httpd is None or thread is None:
            return
        self._httpd = self._thread = None
        self._stopping.set()
        httpd.shutdown()
        httpd.close_connections()
        httpd.server_close()
        thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # -- addresses ---------------------------------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("the server is not running")
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """The server's root, ``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """The OpenAI base URL, ``http://127.0.0.1:PORT/v1``."""
        return f"{self.url}/v1"

    def env(self, api_key: str = "test-key") -> dict[str, str]:
        """The environment variables that point an OpenAI client in a subprocess at this server."""
        return {"OPENAI_BASE_URL": self.base_url, "OPENAI_API_KEY": api_key}

    # -- scripting ---------------------------------------------------------------------------------------

    def enqueue(self, *replies: ScriptedReply) -> None:
        """Queue the replies for the next chat-completion requests, in order."""
        with self._condition:
            self._queue.extend(replies)

    @property
    def pending(self) -> int:
        """How many queued replies haven't been sent yet."""
        with self._condition:
            return len(self._queue)

    # -- what was received -------------------------------------------------------------------------------

    @property
    def recorded(self) -> list[RecordedRequest]:
        """Every request received, of any method and path, in order (a snapshot)."""
        with self._condition:
            return list(self._recorded)

    @property
    def requests(self) -> list[dict[str, Any]]:
        """The JSON bodies of the chat-completion requests received, in order (a snapshot), title requests
        left out."""
        return [r.body for r in self.recorded if r.body is not None and _counted(r)]

    @property
    def title_requests(self) -> list[dict[str, Any]]:
        """The JSON bodies of the title requests received, in order (a snapshot)."""
        return [r.body for r in self.recorded if r.is_chat_completion and r.body is not None and is_title(r.body)]

    @property
    def authorizations(self) -> list[str | None]:
        """The ``Authorization`` header of each request in :attr:`requests`, e.g. ``"Bearer test-key"``."""
        return [r.authorization for r in self.recorded if _counted(r)]

    def wait_for_requests(self, count: int, timeout: float = 5.0) -> list[dict[str, Any]]:
        """Wait until at least ``count`` chat-completion requests have arrived; return :attr:`requests`."""

        def arrived() -> int:
            return sum(1 for r in self._recorded if _counted(r))

        with self._condition:
            if not self._condition.wait_for(lambda: arrived() >= count, timeout=timeout):
                raise TimeoutError(f"expected {count} chat-completion requests within {timeout}s, got {arrived()}")
        return self.requests

    @property
    def hangups(self) -> int:
        """How many replies were cut short because the client hung up while they were being sent."""
        with self._condition:
            return self._hangups

    def wait_for_hangups(self, count: int, timeout: float = 5.0) -> None:
        """Wait until the client has hung up on at least ``count`` replies."""
        with self._condition:
            if not self._condition.wait_for(lambda: self._hangups >= count, timeout=timeout):
                raise TimeoutError(f"expected {count} hang-ups within {timeout}s, got {self._hangups}")

    # -- used by the handler -----------------------------------------------------------------------------

    def _record(self, request: RecordedRequest) -> int:
        with self._condition:
            self._recorded.append(request)
            self._condition.notify_all()
            return len(self._recorded) - 1

    def _hung_up(self) -> None:
        with self._condition:
            self._hangups += 1
            self._condition.notify_all()

    def _next_reply(self, body: dict[str, Any], index: int) -> ScriptedReply:
        if is_title(body):
            return self.title_reply
        with self._condition:
            if self._queue:
                return self._queue.popleft()
            responder = self.responder
        if responder is None:
            return ErrorReply(
                status=500,
                message=f"fake OpenAI server: no scripted reply for request #{index} "
                "(the queue is empty and there is no responder)",
                type="server_error",
                code="no_scripted_reply",
            )
        try:
            return responder(body)
        except Exception as exc:
            return ErrorReply(
                status=500,
                message=f"fake OpenAI server: the responder raised {exc!r}",
                type="server_error",
                code="responder_error",
            )

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
