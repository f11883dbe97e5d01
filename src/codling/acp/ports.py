"""Ports over the ACP client connection: permission requests become ``session/request_permission``."""

from __future__ import annotations

from acp import helpers
from acp.interfaces import Client
from acp.schema import (
    ContentToolCallContent,
    FileEditToolCallContent,
    PermissionOption,
    TerminalToolCallContent,
    ToolCallUpdate,
)

from codling.acp.translate import locations
from codling.tools.ports import Decision, Location, PermissionRequest

OPTIONS = [
    PermissionOption(option_id="allow_once", name="Allow", kind="allow_once"),
    PermissionOption(option_id="allow_always", name="Always allow", kind="allow_always"),
    PermissionOption(option_id="reject", name="Reject", kind="reject_once"),
]


class AcpApprover:
    """Asks the editor's user, showing the actual command, or the path and the diff of an edit."""

    def __init__(self, client: Client, session_id: str) -> None:
        self._client = client
        self._session_id = session_id

    async def ask(self, request: PermissionRequest) -> Decision:
        """Send session/request_permission and map the chosen option to a decision."""
        content: list[ContentToolCallContent | FileEditToolCallContent | TerminalToolCallContent]
        if request.diff is not None:
            d = request.diff
            content = [helpers.tool_diff_content(str(d.path), d.new_text, d.old_text)]
        else:
            content = [helpers.tool_content(helpers.text_block(request.subject))]
        tool_call = ToolCallUpdate(
            tool_call_id=request.tool_call_id,
            title=request.title,
            kind=request.kind,
            status="pending",
            content=content,
            locations=locations([Location(request.diff.path)] if request.diff else []),
            raw_input=request.raw_input,
        )
        response = await self._client.request_permission(
            session_id=self._session_id, tool_call=tool_call, options=OPTIONS
        )
        outcome = response.outcome
        if outcome.outcome == "selected" and outcome.option_id in ("allow_once", "allow_always"):
            return "allow_always" if outcome.option_id == "allow_always" else "allow_once"
        return "reject"
