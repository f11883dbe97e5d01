"""What the tools of a session work with (``ToolDeps``), and how a call is described to the user before it runs.

Light on purpose: no pydantic-ai here, so a session can be built (and ``session/new`` answered) before the model
stack is imported; the tools themselves and the toolset the model sees are in ``tools/toolset.py``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codling.errors import PathError
from codling.tools.approval import Permissions
from codling.tools.base import ToolCallInfo
from codling.tools.ports import DELEGATE_TOOL, Delegator, FileSystem, Location, Terminal, ToolKind, ToolProgress
from codling.tools.workspace import Workspace

if TYPE_CHECKING:
    from codling.tools.mcp.servers import McpServers

TOOL_NAMES: tuple[str, ...] = (
    "read_file",
    "list_files",
    "search",
    "update_plan",
    "delegate",
    "edit_file",
    "write_file",
    "apply_patch",
    "run_command",
)
"""Every tool :func:`build_toolset` offers, in the order the model sees them."""

_TOOL_KINDS: dict[str, ToolKind] = {
    "read_file": "read",
    "list_files": "search",
    "search": "search",
    "edit_file": "edit",
    "write_file": "edit",
    "apply_patch": "edit",
    "run_command": "execute",
    "update_plan": "think",
    "delegate": "think",
}

_TITLE_COMMAND_CHARS = 200
_TITLE_TASK_CHARS = 100


@dataclass(frozen=True)
class ToolDeps:
    """What the tools of one session work with; pydantic-ai hands it to each tool as ``ctx.deps``."""

    workspace: Workspace
    fs: FileSystem
    terminal: Terminal
    permissions: Permissions
    command_timeout: float = 120.0
    """Default seconds a command may run (the model may ask for another, within limits)."""
    output_limit: int = 30_000
    """Most characters of command output kept for the model."""
    output_tokens: int = 8_000
    """Most tokens one tool result keeps for the model (the session sets it from the model's window: about a
    quarter of it); a longer result is cut in the middle, with a note saying so and how to see the rest."""
    progress: ToolProgress = field(default_factory=ToolProgress)
    """Where tools report what the user can watch while they run (the session connects it to its turns)."""
    delegator: Delegator | None = None
    """Runs delegates (sub-agents); None where delegating is not allowed (inside a delegate: depth is bounded)."""
    mcp: McpServers | None = None
    """The session's MCP servers (None: it has none); their tools come with ``tools/mcp/toolset.py``."""


def describe_call(tool_name: str, args: dict[str, Any], workspace: Workspace) -> ToolCallInfo:
    """Title, kind and locations of a call before it runs, e.g. ``Read src/a.py (lines 10-20)``.

    Never raises: unknown tools and malformed arguments still get a title.
    """
    kind = _TOOL_KINDS.get(tool_name, "other")
    try:
        return _describe(tool_name, args, workspace, kind)
    except Exception:  # a malformed call must still be shown to the user
        return ToolCallInfo(title=tool_name, kind=kind)


def _describe(tool_name: str, args: dict[str, Any], workspace: Workspace, kind: ToolKind) -> ToolCallInfo:
    if tool_name == "run_command":
        return ToolCallInfo(title=f"Run {_short_command(str(args['command']))}", kind=kind)
    if tool_name == "update_plan":
        return ToolCallInfo(title="Update the plan", kind=kind)
    if tool_name == "apply_patch":
        files = re.findall(r"^\*\*\* (?:Add|Update|Delete) File: (.+)$", str(args.get("patch", "")), re.MULTILINE)
        paths = [_path_for_title(f.strip(), workspace) for f in files]
        names = ", ".join(s for s, _ in paths[:3]) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")
        located = tuple(loc for _, resolved in paths for loc in _locations(resolved))
        return ToolCallInfo(title=f"Patch {names}" if names else "Apply a patch", kind=kind, locations=located)
    if tool_name == DELEGATE_TOOL:
        task = " ".join(str(args.get("task", "")).split())
        task = task if len(task) <= _TITLE_TASK_CHARS else task[: _TITLE_TASK_CHARS - 1] + "…"
        return ToolCallInfo(title=f"Delegate to the {args.get('agent', 'sub-agent')}: {task}", kind=kind)
    if tool_name not in _TOOL_KINDS:
        return ToolCallInfo(title=tool_name, kind=kind)
    if tool_name in ("read_file", "edit_file", "write_file") and not args.get("path"):
        return ToolCallInfo(title=f"{tool_name} (no path given)", kind=kind)
    raw_path = str(args.get("path") or ".")
    shown, resolved = _path_for_title(raw_path, workspace)
    if tool_name == "read_file":
        start, end = args.get("start_line"), args.get("end_line")
        title = f"Read {shown}{_line_range(start, end)}"
        line = start if isinstance(start, int) and start >= 1 else None
        return ToolCallInfo(title=title, kind=kind, locations=_locations(resolved, line))
    if tool_name == "list_files":
        where = "" if resolved == workspace.cwd else f" in {shown}"
        return ToolCallInfo(title=f"List files{where}", kind=kind, locations=_locations(resolved))
    if tool_name == "search":
        where = "" if resolved == workspace.cwd else f" in {shown}"
        glob = args.get("glob")
        only = f" ({glob})" if glob else ""
        title = f"Search for /{args['pattern']}/{where}{only}"
        return ToolCallInfo(title=title, kind=kind, locations=_locations(resolved))
    verb = "Edit" if tool_name == "edit_file" else "Write"
    return ToolCallInfo(title=f"{verb} {shown}", kind=kind, locations=_locations(resolved))


def _path_for_title(raw_path: str, workspace: Workspace) -> tuple[str, Path | None]:
    try:
        resolved = workspace.resolve(raw_path)
    except PathError:
        return raw_path, None
    return workspace.display(resolved), resolved


def _locations(resolved: Path | None, line: int | None = None) -> tuple[Location, ...]:
    return () if resolved is None else (Location(resolved, line),)


def _line_range(start: object, end: object) -> str:
    has_start, has_end = isinstance(start, int), isinstance(end, int)
    if has_start and has_end:
        return f" (lines {start}-{end})"
    if has_start:
        return f" (from line {start})"
    if has_end:
        return f" (lines 1-{end})"
    return ""


def _short_command(command: str) -> str:
    lines = command.strip().splitlines() or [""]
    first = lines[0]
    if len(lines) > 1 or len(first) > _TITLE_COMMAND_CHARS:
        return first[:_TITLE_COMMAND_CHARS] + " …"
    return first
