"""The session's MCP tools as one pydantic-ai toolset, asking before each call like a command does.

The toolset lists the tools of the servers that are ready when a request is made (``ToolDeps.mcp``), so a
server that starts late adds its tools to the next request and one that fails takes them away. Each call is
checked against the permission mode (``PermissionRequest.mcp_tool``), runs one at a time (their permission
prompts never overlap), and comes back as a :class:`~codling.tools.base.ToolOutput` whose text
``ReportingToolset`` caps like any tool's.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import AbstractToolset
from pydantic_ai.toolsets.abstract import ToolsetTool
from pydantic_ai.toolsets.external import TOOL_SCHEMA_VALIDATOR

from codling.errors import ToolError
from codling.tools.base import ShownResult, ToolCallInfo, ToolOutput
from codling.tools.deps import ToolDeps
from codling.tools.mcp.results import McpTool
from codling.tools.ports import PermissionRequest
from codling.tools.specs import describe_call
from codling.tools.toolset import ReportingToolset

_TITLE_ARGS_CHARS = 80


class McpToolset(AbstractToolset[ToolDeps]):
    """The MCP tools of the session whose deps a run has (none when it has no servers)."""

    @property
    def id(self) -> str | None:
        """The toolset's id in pydantic-ai's messages."""
        return "mcp"

    async def get_tools(self, ctx: RunContext[ToolDeps]) -> dict[str, ToolsetTool[ToolDeps]]:
        """The tools of the servers ready now."""
        servers = ctx.deps.mcp
        if servers is None:
            return {}
        return {tool.name: self._tool(tool) for tool in servers.tools()}

    def _tool(self, tool: McpTool) -> ToolsetTool[ToolDeps]:
        return ToolsetTool(toolset=self, tool_def=definition(tool), max_retries=1, args_validator=TOOL_SCHEMA_VALIDATOR)

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[ToolDeps], tool: ToolsetTool[ToolDeps]
    ) -> ToolOutput:
        """Ask (as the mode says), then run the tool on its server."""
        deps = ctx.deps
        found = deps.mcp.find(name) if deps.mcp is not None else None
        if deps.mcp is None or found is None:
            raise ToolError(f"There is no MCP tool named {name} in this session.")
        server, mcp_tool = found
        request = PermissionRequest(
            tool_call_id=ctx.tool_call_id or "",
            tool_name=name,
            kind=mcp_tool.kind,
            title=describe(name, tool_args, mcp_tool).title,
            subject=_arguments(tool_args, 2_000),
            raw_input=tool_args,
            mcp_tool=name,
        )
        await deps.permissions.check(request)
        result = await server.call(mcp_tool, tool_args, deps.mcp.tool_timeout, images=deps.sees_images)
        text = result.text if result.text.strip() else "(the tool returned nothing)"
        shown = ShownResult(links=result.links) if result.links else None
        return ToolOutput(text=text, images=result.images, shown=shown)


def build_mcp_toolset() -> AbstractToolset[ToolDeps]:
    """The MCP tools as a toolset whose results and errors are reported (and capped) like codling's own."""
    return ReportingToolset(McpToolset())


def describe_any(name: str, args: dict[str, Any], deps: ToolDeps) -> ToolCallInfo:
    """How any call of a session is shown: an MCP tool's as :func:`describe` says, codling's own as
    ``describe_call`` does."""
    found = deps.mcp.find(name) if deps.mcp is not None else None
    if found is not None:
        return describe(name, args, found[1])
    return describe_call(name, args, deps.workspace)


def definition(tool: McpTool) -> ToolDefinition:
    """The definition the model gets of ``tool``."""
    return ToolDefinition(
        name=tool.name, description=tool.description, parameters_json_schema=tool.parameters, sequential=True
    )


def describe(name: str, args: dict[str, Any], tool: McpTool | None) -> ToolCallInfo:
    """How an MCP call is shown: ``server: tool title (arguments…)``, of the tool's kind."""
    if tool is None:
        return ToolCallInfo(title=name, kind="other")
    shown = _arguments(args, _TITLE_ARGS_CHARS)
    return ToolCallInfo(title=f"{tool.server}: {tool.title}" + (f" ({shown})" if shown else ""), kind=tool.kind)


def _arguments(args: dict[str, Any], limit: int) -> str:
    """``args`` as ``key: value, …`` on one line, at most ``limit`` characters."""
    text = ", ".join(f"{k}: {json.dumps(v, ensure_ascii=False)}" for k, v in args.items())
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
