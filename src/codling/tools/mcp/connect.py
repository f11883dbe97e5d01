"""Connecting to one MCP server through pydantic-ai's ``MCPToolset`` (fastmcp transports under it).

Imported only when a session has MCP servers, and then in a thread: pydantic-ai's MCP module and fastmcp take
seconds to import.
"""

from __future__ import annotations

from pathlib import Path
from typing import IO, Any, cast

from fastmcp.client.transports import SSETransport, StdioTransport, StreamableHttpTransport
from fastmcp.exceptions import McpError
from pydantic_ai.mcp import MCPToolset

from codling import __version__
from codling.mcp_servers import McpServerSpec

CONNECTION_CLOSED = -32000
"""The JSON-RPC error code the MCP SDK gives a request whose connection went away."""


def toolset_for(spec: McpServerSpec, cwd: Path, startup_timeout: float, errlog: IO[bytes] | None) -> MCPToolset[Any]:
    """An ``MCPToolset`` that reaches ``spec``'s server (not yet connected)."""
    transport: Any
    if spec.transport == "stdio":
        # keep_alive=False: leaving the toolset ends the process (fastmcp would otherwise keep it for reuse).
        transport = StdioTransport(
            spec.command,
            list(spec.args),
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


def protocol_error(error: BaseException) -> bool:
    """Whether ``error`` is a JSON-RPC error answer from a server that still works."""
    return isinstance(error, McpError) and getattr(error, "code", None) != CONNECTION_CLOSED
