"""A real MCP server for tests, on the ``mcp`` SDK: stdio, streamable HTTP or SSE.

    python -m tests.fakes.mcp_server [--transport stdio|http|sse] [--name NAME] [--start-delay S] [--fail]

Tools: ``echo(text)``, ``add(a, b)``, ``whoami()`` (the server's ``--name`` and its ``MCP_FAKE_TOKEN``),
``slow(seconds, marker)`` (sleeps; writes ``cancelled`` to the file ``marker`` when the call is cancelled),
``huge(chars)`` (that many characters), ``crash()`` (the process exits at once, after a line on stderr),
``fail()`` (a tool error), plus one tool whose name is hostile (``../../read_file; rm -rf``, which the server
registers under that name). HTTP and SSE listen on 127.0.0.1 on a free port and print ``PORT <n>`` on stdout
once they accept connections. With ``MCP_FAKE_PIDFILE`` set, the process writes its pid there first.
``--fail`` writes to stderr and exits 3 before speaking MCP; ``--start-delay`` waits before serving (a slow
server).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import sys
import time
from pathlib import Path

from mcp.server.mcpserver import MCPServer

HOSTILE_NAME = "../../read_file; rm -rf"


def build(name: str) -> MCPServer:
    server = MCPServer(name)

    @server.tool()
    def echo(text: str) -> str:
        """Say ``text`` back."""
        return f"echo: {text}"

    @server.tool()
    def add(a: int, b: int) -> str:
        """Add two numbers."""
        return str(a + b)

    @server.tool()
    def whoami() -> str:
        """The server's name and its token."""
        return f"{name} token={os.environ.get('MCP_FAKE_TOKEN', '')}"

    @server.tool()
    async def slow(seconds: float, marker: str) -> str:
        """Sleep ``seconds``; a cancelled call writes to ``marker``."""
        Path(marker).write_text("started")
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            Path(marker).write_text("cancelled")
            raise
        return "slept"

    @server.tool()
    def huge(chars: int) -> str:
        """That many characters."""
        return "".join(f"line {i:06d} " + "x" * 50 + "\n" for i in range(chars // 63 + 1))[:chars]

    @server.tool()
    def crash() -> str:
        """Exit the process at once."""
        print("fatal: the fake server crashed on purpose", file=sys.stderr, flush=True)
        os._exit(7)

    @server.tool()
    def fail() -> str:
        """Report a tool error."""
        raise ValueError("the fake tool failed on purpose")

    def hostile() -> str:
        return "hostile tool ran"

    server.add_tool(hostile, name=HOSTILE_NAME, description="A tool whose name is not a safe name.")
    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--transport", default="stdio", choices=["stdio", "http", "sse"])
    parser.add_argument("--name", default="fake")
    parser.add_argument("--start-delay", type=float, default=0.0)
    parser.add_argument("--fail", action="store_true")
    args = parser.parse_args()
    if pidfile := os.environ.get("MCP_FAKE_PIDFILE"):
        Path(pidfile).write_text(str(os.getpid()))
    if args.fail:
        print("error: the fake server refuses to start (--fail)", file=sys.stderr, flush=True)
        sys.exit(3)
    if args.start_delay:
        time.sleep(args.start_delay)
    server = build(args.name)
    if args.transport == "stdio":
        server.run("stdio")
        return
    import uvicorn

    app = server.streamable_http_app() if args.transport == "http" else server.sse_app()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(app, log_level="warning")
    web = uvicorn.Server(config)

    async def serve() -> None:
        task = asyncio.create_task(web.serve(sockets=[sock]))
        while not web.started:
            await asyncio.sleep(0.01)
        print(f"PORT {sock.getsockname()[1]}", flush=True)
        await task

    asyncio.run(serve())


if __name__ == "__main__":
    main()
