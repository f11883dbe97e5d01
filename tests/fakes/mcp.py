"""Helpers for tests with real MCP servers (``tests/fakes/mcp_server.py``): their specs, an HTTP one running
in a subprocess, and the pid a stdio one wrote (``tests/fakes/processes.py`` tells whether it still runs)."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from codling.mcp_servers import McpServerSpec, McpTransport
from tests.fakes import warm
from tests.fakes.deadlines import deadline

ROOT = Path(__file__).resolve().parents[2]
SERVER_MODULE = warm.MCP_SERVER


def server_env(**extra: str) -> dict[str, str]:
    """What a fake server needs to import the tests package (it runs with a minimal environment)."""
    return {"PYTHONPATH": str(ROOT), **extra}


def stdio_spec(name: str = "fake", *args: str, **env: str) -> McpServerSpec:
    """A stdio spec of the fake server (``args`` go to it, ``env`` is set for it)."""
    program, *launch = warm.module(SERVER_MODULE)
    return McpServerSpec(
        name,
        "stdio",
        command=program,
        args=(*launch, "--name", name, *args),
        env=tuple(server_env(**env).items()),
    )


@contextmanager
def http_server(transport: McpTransport = "http", name: str = "web") -> Iterator[str]:
    """The fake server on 127.0.0.1 over ``transport`` (http or sse) in a subprocess; yields its URL."""
    process = subprocess.Popen(
        [*warm.module(SERVER_MODULE), "--transport", transport, "--name", name],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # the server says its port once it accepts connections
        assert line.startswith("PORT "), f"the fake MCP server did not start: {line!r}"
        port = int(line.split()[1])
        yield f"http://127.0.0.1:{port}/mcp" if transport == "http" else f"http://127.0.0.1:{port}/sse"
    finally:
        process.terminate()
        process.wait(deadline(10))


async def pid_written(pidfile: Path, within: float = 20.0) -> int:
    """The pid a fake server wrote to ``pidfile`` (polled, within a liveness deadline: another process
    decides when)."""
    async with asyncio.timeout(deadline(within)):
        while not pidfile.exists() or not pidfile.read_text().strip():
            await asyncio.sleep(0.02)
    return int(pidfile.read_text())


class RecordingHttpServer:
    """The fake server over streamable HTTP, served by uvicorn in the test's own event loop (no subprocess),
    recording each request's method and ``mcp-session-id`` header (a DELETE is the client ending its session)."""

    def __init__(self, name: str = "web", *, legacy: bool = False) -> None:
        self.name = name
        self.legacy = legacy
        """Speak only the 2025 protocol (sessions with ids), refusing the newer protocol's sessionless probe."""
        self.requests: list[tuple[str, str | None]] = []
        self.sessions: list[str] = []
        """The session ids the server gave out."""
        self.url = ""

    def deletes(self) -> list[str | None]:
        """The session ids of the DELETE requests received, in order."""
        return [session for method, session in self.requests if method == "DELETE"]

    async def __aenter__(self) -> RecordingHttpServer:
        import socket

        import uvicorn

        from tests.fakes.mcp_server import build

        app = build(self.name).streamable_http_app()

        async def recording(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] == "http":
                headers = dict(scope.get("headers") or [])
                session = headers.get(b"mcp-session-id")
                self.requests.append((scope["method"], session.decode() if session else None))
                if self.legacy and headers.get(b"mcp-method") == b"server/discover":
                    # What a server of the 2025 protocol (most of those in use) answers the newer protocol's probe
                    # without a session: the client falls back to initialize, and gets a session.
                    body = json.dumps(
                        {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Missing session ID"}}
                    ).encode()
                    await send(
                        {
                            "type": "http.response.start",
                            "status": 400,
                            "headers": [(b"content-type", b"application/json")],
                        }
                    )
                    await send({"type": "http.response.body", "body": body})
                    return

                async def sending(message: Any) -> None:
                    if message["type"] == "http.response.start":
                        for key, value in message.get("headers") or []:
                            if key.lower() == b"mcp-session-id":
                                self.sessions.append(value.decode())
                    await send(message)

                await app(scope, receive, sending)
                return
            await app(scope, receive, send)

        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        started = asyncio.Event()

        class Server(uvicorn.Server):
            async def startup(self, sockets: Any = None) -> None:
                await super().startup(sockets=sockets)
                started.set()  # it accepts connections now

        self._web = Server(uvicorn.Config(recording, log_level="warning", lifespan="on"))
        self._task = asyncio.get_running_loop().create_task(self._web.serve(sockets=[self._sock]))
        await asyncio.wait_for(started.wait(), 20)  # a liveness deadline
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}/mcp"
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._web.should_exit = True
        await asyncio.gather(self._task, return_exceptions=True)
        self._sock.close()
