"""A real MCP server for tests, on the ``mcp`` SDK: stdio, streamable HTTP or SSE.

    python -m tests.fakes.mcp_server [--transport stdio|http|sse] [--name NAME] [--start-delay S] [--fail]
        [--fail-listing] [--refusing] [--extra-tools N] [--daemon PIDFILE]

Tools: ``echo(text)``, ``add(a, b)``, ``whoami()`` (the server's ``--name`` and its ``MCP_FAKE_TOKEN``),
``slow(seconds, marker)`` (sleeps; writes ``cancelled`` to the file ``marker`` when the call is cancelled),
``huge(chars)`` (that many characters), ``crash()`` (the process exits at once, after a line on stderr),
``fail()`` (a tool error), ``picture()`` (a text, a PNG and a resource link), plus one tool whose name is
hostile (``../../read_file; rm -rf``, which the server registers under that name). HTTP and SSE listen on
127.0.0.1 on a free port and print ``PORT <n>`` on stdout once they accept connections. With
``MCP_FAKE_PIDFILE`` set, the process writes its pid there first.
``--fail`` writes to stderr and exits 3 before speaking MCP; ``--start-delay`` waits before serving (a slow
server). ``--fail-listing`` answers the tool listing with a JSON-RPC error; ``--refusing`` adds ``refuse()``,
which answers with a JSON-RPC error (the server still works); ``--extra-tools N`` adds ``extra_000``... tools.
``--daemon PIDFILE`` first starts a daemon as a shell does (``setsid sleep &`` from a shell that then exits: in
a session of its own, an orphan) and writes its pid to ``PIDFILE``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp.types import INTERNAL_ERROR, INVALID_PARAMS, ImageContent, ResourceLink, TextContent
from mcp.types import Tool as MCPTool

HOSTILE_NAME = "../../read_file; rm -rf"
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
"""The 1x1 PNG ``picture()`` returns."""
LISTING_ERROR = "the fake server cannot list its tools (--fail-listing)"
REFUSAL = "the fake server refuses this call (--refusing)"


class UnlistableServer(MCPServer):
    """A server whose tool listing fails."""

    async def list_tools(self) -> list[MCPTool]:
        raise MCPError(INTERNAL_ERROR, LISTING_ERROR)


def build(
    name: str, *, fail_listing: bool = False, refusing: bool = False, extra_tools: int = 0, probe: Path | None = None
) -> MCPServer:
    server = UnlistableServer(name) if fail_listing else MCPServer(name)

    if probe is not None:

        @server.tool()
        def escape() -> str:
            """Read the probe file and write beside it: what a confined server cannot do."""
            said = []
            try:
                said.append(f"read: {probe.read_text()!r}")
            except OSError as e:
                said.append(f"read refused: {e.strerror}")
            try:
                (probe.parent / "written-by-server").write_text("escaped")
                said.append("wrote")
            except OSError as e:
                said.append(f"write refused: {e.strerror}")
            return "; ".join(said)

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

    @server.tool()
    def picture() -> list[TextContent | ImageContent | ResourceLink]:
        """A text, a tiny PNG and a link to a resource."""
        return [
            TextContent(type="text", text="Here is the chart."),
            ImageContent(type="image", data=base64.b64encode(PNG).decode(), mime_type="image/png"),
            ResourceLink(
                type="resource_link",
                name="chart.csv",
                title="Chart data",
                uri="file:///srv/data/chart.csv",
                mime_type="text/csv",
                description="The numbers behind the chart.",
            ),
        ]

    def hostile() -> str:
        return "hostile tool ran"

    server.add_tool(hostile, name=HOSTILE_NAME, description="A tool whose name is not a safe name.")

    if refusing:

        @server.tool()
        def refuse() -> str:
            """Answer with a JSON-RPC error."""
            raise MCPError(INVALID_PARAMS, REFUSAL)

    for i in range(extra_tools):
        server.add_tool(_extra(i), name=f"extra_{i:03d}", description=f"Extra tool {i}.")
    return server


def _extra(i: int) -> Callable[[], str]:
    def extra() -> str:
        return f"extra {i}"

    return extra


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--transport", default="stdio", choices=["stdio", "http", "sse"])
    parser.add_argument("--name", default="fake")
    parser.add_argument("--start-delay", type=float, default=0.0)
    parser.add_argument("--fail", action="store_true")
    parser.add_argument("--fail-listing", action="store_true")
    parser.add_argument("--refusing", action="store_true")
    parser.add_argument("--extra-tools", type=int, default=0)
    parser.add_argument("--daemon", type=Path)
    parser.add_argument("--probe", type=Path, help="offer the escape tool, which reads this file and writes beside it")
    args = parser.parse_args()
    if pidfile := os.environ.get("MCP_FAKE_PIDFILE"):
        Path(pidfile).write_text(str(os.getpid()))
    if args.daemon:
        script = 'setsid sleep 600 </dev/null >/dev/null 2>&1 & echo $! > "$1.part" && mv "$1.part" "$1"'
        subprocess.run(["sh", "-c", script, "sh", str(args.daemon)], check=True)
    if args.fail:
        print("error: the fake server refuses to start (--fail)", file=sys.stderr, flush=True)
        sys.exit(3)
    if args.start_delay:
        time.sleep(args.start_delay)
    server = build(
        args.name,
        fail_listing=args.fail_listing,
        refusing=args.refusing,
        extra_tools=args.extra_tools,
        probe=args.probe,
    )
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
