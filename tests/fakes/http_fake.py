"""The plumbing the loopback provider fakes share (``openai_server.py``, ``responses_server.py``,
``gemini_server.py``, ``anthropic_server.py``): a threaded HTTP server on ``127.0.0.1`` that records every
request, hands out scripted replies in order, streams server-sent events, and computes what an implicit prefix
cache would serve of each request (OpenAI's and Gemini's; Anthropic's explicit cache is ``anthropic_cache.py``).

Standard library only; a subclass says how a request is routed and answered (:meth:`FakeProvider.route`) and
what a request gets when nothing is scripted (:meth:`FakeProvider.no_reply`, :meth:`FakeProvider.responder_failed`).
"""

from __future__ import annotations

import json
import socket
import sys
import threading
from collections import deque
from collections.abc import Callable, Mapping
from contextlib import suppress
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self, cast

from tests.fakes.deadlines import deadline

CONNECTION_ERRORS = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError)

CHARS_PER_TOKEN = 4
"""The fakes count tokens as four characters each: close enough to a real tokenizer for cache arithmetic."""

MIN_CACHED_TOKENS = 1_024
CACHE_STEP_TOKENS = 128


@dataclass(frozen=True)
class RecordedRequest:
    """One request the server received. Header names are lowercased; ``body`` is ``None`` unless JSON."""

    method: str
    path: str
    query: str
    headers: Mapping[str, str]
    body: dict[str, Any] | None

    @property
    def authorization(self) -> str | None:
        return self.headers.get("authorization")


def freeze_pieces(reply: Any, pieces: tuple[str, ...], items: tuple[str, ...] = ()) -> None:
    """In a frozen reply's ``__post_init__``: each of ``pieces`` (a ``str`` is one piece) and ``items`` as tuples."""
    for name in pieces:
        value = getattr(reply, name)
        object.__setattr__(reply, name, (value,) if isinstance(value, str) else tuple(value))
    for name in items:
        object.__setattr__(reply, name, tuple(getattr(reply, name)))


def tokens_of(text: str) -> int:
    """The fake tokenizer: four characters a token, rounded up."""
    return -(-len(text) // CHARS_PER_TOKEN)


def common_prefix(a: str, b: str) -> int:
    """The length of the longest common prefix of ``a`` and ``b``."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


class PrefixCache:
    """An implicit prompt cache as OpenAI and Gemini run one: a request is served the longest prefix it shares
    with an earlier request, in 128-token steps, from 1,024 tokens on. What it serves is what the fake bills as
    cached input."""

    def __init__(self) -> None:
        self._seen: list[str] = []

    def serve(self, layout: str) -> int:
        """Cached tokens for a request laid out as ``layout``; remembers it for later requests."""
        shared = max((common_prefix(layout, earlier) for earlier in self._seen), default=0)
        self._seen.append(layout)
        tokens = shared // CHARS_PER_TOKEN
        return 0 if tokens < MIN_CACHED_TOKENS else tokens - tokens % CACHE_STEP_TOKENS


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, owner: FakeProvider) -> None:
        self.owner = owner
        self.connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.connections_lock:
            self.connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self.connections_lock:
            self.connections.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        with self.connections_lock:
            connections = list(self.connections)
        for connection in connections:
            with suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], (*CONNECTION_ERRORS, TimeoutError)):
            return
        super().handle_error(request, client_address)


class Handler(BaseHTTPRequestHandler):
    """Reads and records a request, then lets the owning fake answer it."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    timeout = deadline(30)  # a connection idle this long is closed

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def _handle(self, method: str) -> None:
        path, _, query = self.path.partition("?")
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length > 0 else b""
        body: dict[str, Any] | None = None
        if raw:
            with suppress(ValueError):
                parsed = json.loads(raw)
                body = parsed if isinstance(parsed, dict) else None
        headers = {name.lower(): value for name, value in self.headers.items()}
        request = RecordedRequest(method, path, query, headers, body)
        owner = cast(_HTTPServer, self.server).owner
        try:
            owner.route(self, request, owner._record(request))
        except CONNECTION_ERRORS:
            self.close_connection = True
            owner._hung_up()

    def send_json(self, status: int, payload: Any, headers: Mapping[str, str] | None = None) -> None:
        """A whole JSON response."""
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def start_events(self) -> None:
        """The head of a server-sent-events response (chunked, so the body can end without a length)."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def send_event(self, data: Any, event: str | None = None) -> None:
        """One server-sent event: an ``event:`` line when named, then ``data: {json}``."""
        head = f"event: {event}\n" if event else ""
        self.write_chunk(f"{head}data: {json.dumps(data)}\n\n".encode())

    def end_events(self) -> None:
        self.write_chunk(b"")

    def write_chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()


class FakeProvider:
    """A scripted provider server run from a background thread; a context manager. Replies are taken from the
    queue (:meth:`enqueue`), else from :attr:`responder`, else the subclass's :meth:`no_reply`."""

    name = "fake-provider"

    def __init__(self, *, responder: Callable[[dict[str, Any]], Any] | None = None) -> None:
        self.responder = responder
        self._condition = threading.Condition()
        self._queue: deque[Any] = deque()
        self._recorded: list[RecordedRequest] = []
        self._hangups = 0
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        """Set by :meth:`stop`: releases handlers of stalled replies."""

    # -- what a subclass provides --------------------------------------------------------------------------

    def route(self, handler: Handler, request: RecordedRequest, index: int) -> None:
        raise NotImplementedError

    def no_reply(self, index: int) -> Any:
        raise NotImplementedError

    def responder_failed(self, exc: Exception) -> Any:
        """The reply when :attr:`responder` raises; by default the exception reaches the handler, which drops
        the connection."""
        raise exc

    # -- lifecycle ---------------------------------------------------------------------------------------

    def start(self) -> Self:
        if self._httpd is not None:
            raise RuntimeError("the server is already running")
        httpd = _HTTPServer(self)
        thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, name=self.name, daemon=True
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
        thread.join(timeout=deadline(5))

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """The server's root, ``http://127.0.0.1:PORT``."""
        if self._httpd is None:
            raise RuntimeError("the server is not running")
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    # -- scripting and records ---------------------------------------------------------------------------

    def enqueue(self, *replies: Any) -> None:
        """Queue replies for the next model requests, in order."""
        with self._condition:
            self._queue.extend(replies)

    @property
    def pending(self) -> int:
        with self._condition:
            return len(self._queue)

    @property
    def recorded(self) -> list[RecordedRequest]:
        """Every request received, in order (a snapshot)."""
        with self._condition:
            return list(self._recorded)

    def wait_for(self, predicate: Callable[[list[RecordedRequest]], bool], timeout: float) -> list[RecordedRequest]:
        """Wait until ``predicate`` holds of the requests received; TimeoutError if it does not in time."""
        with self._condition:
            if not self._condition.wait_for(lambda: predicate(self._recorded), timeout=deadline(timeout)):
                raise TimeoutError(f"{self.name}: the requests expected did not arrive within {timeout}s")
            return list(self._recorded)

    @property
    def hangups(self) -> int:
        """How many replies were cut short because the client hung up while they were being sent."""
        with self._condition:
            return self._hangups

    def wait_for_hangups(self, count: int, timeout: float = 5.0) -> None:
        """Wait until the client has hung up on at least ``count`` replies."""
        with self._condition:
            if not self._condition.wait_for(lambda: self._hangups >= count, timeout=deadline(timeout)):
                raise TimeoutError(f"expected {count} hang-ups within {timeout}s, got {self._hangups}")

    def _record(self, request: RecordedRequest) -> int:
        with self._condition:
            self._recorded.append(request)
            self._condition.notify_all()
            return len(self._recorded) - 1

    def _hung_up(self) -> None:
        with self._condition:
            self._hangups += 1
            self._condition.notify_all()

    def next_reply(self, body: dict[str, Any], index: int) -> Any:
        """The next queued reply, else the responder's answer, else :meth:`no_reply`."""
        with self._condition:
            if self._queue:
                return self._queue.popleft()
            responder = self.responder
        if responder is None:
            return self.no_reply(index)
        try:
            return responder(body)
        except Exception as exc:
            return self.responder_failed(exc)
