"""ACP's ``mcpServers`` (session/new, load, resume, fork) as codling's :class:`McpServerSpec`."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from acp.schema import HttpMcpServer, McpServerStdio, SseMcpServer

from codling.mcp_servers import McpServerSpec

log = logging.getLogger(__name__)


def mcp_specs(servers: Sequence[Any] | None) -> tuple[McpServerSpec, ...]:
    """The servers a client named, in its order; one of a transport codling does not speak (ACP's own "acp"
    transport) is left out and logged."""
    specs = []
    for server in servers or ():
        if isinstance(server, McpServerStdio):
            env = tuple((v.name, v.value) for v in server.env)
            specs.append(
                McpServerSpec(
                    server.name, "stdio", command=server.command, args=tuple(server.args), env=env, source="editor"
                )
            )
        elif isinstance(server, HttpMcpServer | SseMcpServer):
            headers = tuple((h.name, h.value) for h in server.headers)
            specs.append(McpServerSpec(server.name, server.type, url=server.url, headers=headers, source="editor"))
        else:
            log.warning(
                "MCP server %r uses a transport codling does not support; left out", getattr(server, "name", "")
            )
    return tuple(specs)
