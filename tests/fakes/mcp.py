"""Helpers for tests with real MCP servers (``tests/fakes/mcp_server.py``): their specs, an HTTP one running
in a subprocess, and the pid a stdio one wrote (``tests/fakes/processes.py`` tells whether it still runs)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from codling.mcp_servers import McpServerSpec, McpTransport

ROOT = Path(__file__).resolve().parents[2]
SERVER_MODULE = "tests.fakes.mcp_server"


def server_env(**extra: str) -> dict[str, str]:
    """What a fake server needs to import the tests package (it runs with a minimal environment)."""
    return {"PYTHONPATH": str(ROOT), **extra}


def stdio_spec(name: str = "fake", *args: str, **env: str) -> McpServerSpec:
    """A stdio spec of the fake server (``args`` go to it, ``env`` is set for it)."""
    return McpServerSpec(
        name,
        "stdio",
        command=sys.executable,
        args=("-m", SERVER_MODULE, "--name", name, *args),
        env=tuple(server_env(**env).items()),
    )


@contextmanager
def http_server(transport: McpTransport = "http", name: str = "web") -> Iterator[str]:
    """The fake server on 127.0.0.1 over ``transport`` (http or sse) in a subprocess; yields its URL."""
    process = subprocess.Popen(
        [sys.executable, "-m", SERVER_MODULE, "--transport", transport, "--name", name],
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
        process.wait(10)


async def pid_written(pidfile: Path, deadline: float = 20.0) -> int:
    """The pid a fake server wrote to ``pidfile`` (polled, within a liveness ``deadline``: another process
    decides when)."""
    async with asyncio.timeout(deadline):
        while not pidfile.exists() or not pidfile.read_text().strip():
            await asyncio.sleep(0.02)
    return int(pidfile.read_text())
