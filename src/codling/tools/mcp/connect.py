"""Connecting to one MCP server through pydantic-ai's ``MCPToolset`` (fastmcp transports under it).

Imported only when a session has MCP servers, and then in a thread: pydantic-ai's MCP module and fastmcp take
seconds to import.
"""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path
from typing import IO, Any, cast

from fastmcp.client.transports import SSETransport, StdioTransport, StreamableHttpTransport
from fastmcp.exceptions import McpError
from pydantic_ai.mcp import MCPToolset

from codling import __version__
from codling.errors import SandboxUnavailable
from codling.mcp_servers import McpServerSpec
from codling.tools.reaper import can_reap, server_argv

CONNECTION_CLOSED = -32000
"""The JSON-RPC error code the MCP SDK gives a request whose connection went away."""

SERVER_KILL_GRACE = 1.0
"""Seconds a stdio server's leftover processes get after SIGTERM before SIGKILL (within the 2 s the MCP SDK
waits for the server to exit once its stdin is closed)."""


def toolset_for(
    spec: McpServerSpec, cwd: Path, startup_timeout: float, errlog: IO[bytes] | None, policy: str | None = None
) -> MCPToolset[Any]:
    """An ``MCPToolset`` that reaches ``spec``'s server (not yet connected), a stdio one confined to ``policy``
    (a policy of ``tools/sandbox/confine.py``; None: unconfined)."""
    transport: Any
    if spec.transport == "stdio":
        command, args = spec.command, list(spec.args)
        if policy is not None and not can_reap():
            raise SandboxUnavailable("the sandbox needs Linux, with /proc")
        if can_reap():
            # Under codling's reaper, so that what the server starts (setsid'd daemons included) ends with it.
            env = {**_default_environment(), **dict(spec.env)}
            args = server_argv(
                SERVER_KILL_GRACE, env.get("LC_CTYPE"), program_path(command, env, cwd), [command, *args], policy
            )
            command, args = args[0], args[1:]
        # keep_alive=False: leaving the toolset ends the process (fastmcp would otherwise keep it for reuse).
        transport = StdioTransport(
            command,
            args,
            env=dict(spec.env),
            cwd=str(cwd),
            keep_alive=False,
            # A binary file works as the child's stderr; fastmcp's hint says TextIO.
            log_file=cast(Any, errlog),
        )
    elif spec.transport == "sse":
        transport = SSETransport(spec.url, headers=dict(spec.headers))
    else:
        transport = StreamableHttpTransport(spec.url, headers=dict(spec.headers))
    from mcp.types import Implementation

    return MCPToolset(
        transport,
        init_timeout=startup_timeout,
        client_info=Implementation(name="codling", version=__version__),
    )


def program_path(command: str, env: dict[str, str], cwd: Path) -> str:
    """Where the program ``command`` names is, as the server's start would find it (its ``PATH``, or ``cwd``
    for a relative path); ``FileNotFoundError`` naming ``command`` when it is not there."""
    found: str | None
    if os.sep in command:
        path = str(cwd / command)
        found = path if os.path.isfile(path) and os.access(path, os.X_OK) else None
    else:
        found = shutil.which(command, path=env.get("PATH", os.defpath))
    if found is None:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), command)
    return found


def _default_environment() -> dict[str, str]:
    from mcp.client.stdio import get_default_environment

    return get_default_environment()


def protocol_error(error: BaseException) -> bool:
    """Whether ``error`` is a JSON-RPC error answer from a server that still works."""
    return isinstance(error, McpError) and getattr(error, "code", None) != CONNECTION_CLOSED
