"""Helpers for tests with real MCP servers (``tests/fakes/mcp_server.py``): their specs, an HTTP one running
in a subprocess, and whether a process is still alive."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
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


def alive(pid: int) -> bool:
    """Whether process ``pid`` still runs (a zombie not yet reaped counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


def wait_until_gone(pid: int, deadline: float = 10.0) -> bool:
    """Whether ``pid`` is gone within ``deadline`` seconds (a liveness bound, not a timing assertion)."""
    end = time.monotonic() + deadline
    while alive(pid):
        if time.monotonic() > end:
            return False
        time.sleep(0.02)
    return True


def read_pid(pidfile: Path, deadline: float = 20.0) -> int:
    """The pid a fake server wrote to ``pidfile`` (waiting for it to be written, within ``deadline``)."""
    end = time.monotonic() + deadline
    while not pidfile.exists() or not pidfile.read_text().strip():
        assert time.monotonic() < end, "the fake MCP server never wrote its pid"
        time.sleep(0.02)
    return int(pidfile.read_text())


async def pid_written(pidfile: Path, deadline: float = 20.0) -> int:
    """:func:`read_pid` for a test whose event loop must keep running meanwhile."""
    async with asyncio.timeout(deadline):
        while not pidfile.exists() or not pidfile.read_text().strip():
            await asyncio.sleep(0.02)
    return int(pidfile.read_text())
