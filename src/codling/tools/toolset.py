"""The tools as one pydantic-ai toolset, their per-session dependencies, and how a call is described.

Every result the toolset returns is a :class:`pydantic_ai.messages.ToolReturn` whose ``return_value`` is the
text for the model and whose ``metadata`` is a :class:`~codling.tools.base.ToolReport` (diff, locations,
error) for the user interface. pydantic-ai copies it to ``ToolReturnPart.metadata``, which observers see on
``FunctionToolResultEvent.part.metadata`` and which is never sent to the model.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic_ai import RunContext
from pydantic_ai.messages import ToolReturn
from pydantic_ai.toolsets import AbstractToolset, FunctionToolset, WrapperToolset
from pydantic_ai.toolsets.abstract import ToolsetTool

from codling.errors import PathError, RejectedError, ToolError
from codling.llm.tokens import count_tokens, tail_tokens, truncate_to_tokens
from codling.tools.approval import Permissions
from codling.tools.base import ToolCallInfo, ToolOutput, ToolReport
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

READ_ONLY_TOOLS: frozenset[str] = frozenset({"read_file", "list_files", "search", "update_plan"})
"""Tools that never change anything, so they need no permission."""

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


class ReportingToolset(WrapperToolset[ToolDeps]):
    """Turns tool outputs and tool errors into ``ToolReturn`` values carrying a :class:`ToolReport`.

    A :class:`~codling.errors.ToolError` becomes an ordinary result whose text starts with ``Error:``, so the
    model reads the message and the run goes on without using up pydantic-ai's retries. Any other exception
    (and cancellation) propagates.
    """

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[ToolDeps], tool: ToolsetTool[ToolDeps]
    ) -> Any:
        """Run the wrapped tool and wrap its output (or its :class:`ToolError`) for the model and the UI."""
        ctx.deps.progress.running(ctx.tool_call_id or "")
        try:
            result = await self.wrapped.call_tool(name, tool_args, ctx, tool)
        except ToolError as e:
            message = valid_text(str(e))
            text = capped_error(f"Error: {message}", ctx.deps.output_tokens)
            report = ToolReport(None, error=message, rejected=isinstance(e, RejectedError))
            return ToolReturn(return_value=text, metadata=report)
        if isinstance(result, ToolOutput):
            text = capped(valid_text(result.text), ctx.deps.output_tokens)
            output = replace(result, text=text, summary=valid_text(result.summary))
            return ToolReturn(return_value=output.text, metadata=ToolReport(output))
        return result


def capped(text: str, max_tokens: int) -> str:
    """``text`` within ``max_tokens`` tokens: whole, or its head and tail around a note that names the cap and
    how to see the rest."""
    if len(text) <= max_tokens:  # a token is at least one character
        return text
    tokens = count_tokens(text)
    if tokens <= max_tokens:
        return text
    note = (
        f"\n[… about {tokens - max_tokens:,} tokens cut here: a tool result may hold at most {max_tokens:,} tokens "
        "with this model. Read a line range, search for something narrower, or filter the command's output "
        "(| tail -n 50, | grep …) to see the rest …]\n"
    )
    room = max(0, max_tokens - count_tokens(note))
    return truncate_to_tokens(text, room // 2) + note + tail_tokens(text, room - room // 2)


def capped_error(text: str, max_tokens: int) -> str:
    """An error message within ``max_tokens`` tokens, but never cut inside its first line (which says what
    went wrong): the rest is cut like any result, in the room the first line leaves."""
    first, newline, rest = text.partition("\n")
    if not newline or len(text) <= max_tokens or count_tokens(text) <= max_tokens:
        return text
    room = max_tokens - count_tokens(first) - 1
    if room <= _MIN_ERROR_REST_TOKENS:
        return first
    return f"{first}\n{capped(rest, room)}"


_MIN_ERROR_REST_TOKENS = 100
"""Below this, an error's first line comes back alone: a cut note would take most of the room."""


def valid_text(text: str) -> str:
    """``text`` as valid Unicode: a file name that is not UTF-8 reaches Python as lone surrogates, which
    neither JSON-RPC clients nor history.jsonl accept; they become U+FFFD."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text


def build_toolset() -> AbstractToolset[ToolDeps]:
    """The tools (see :data:`TOOL_NAMES`) as one toolset for an agent whose deps are :class:`ToolDeps`."""
    return ReportingToolset(_functions())


def _functions() -> FunctionToolset[ToolDeps]:
    # Imported here because the tool modules import ToolDeps from this one.
    from codling.tools.delegate import delegate
    from codling.tools.files import edit_file, read_file, write_file
    from codling.tools.patch import apply_patch
    from codling.tools.plan import update_plan
    from codling.tools.search import list_files, search
    from codling.tools.shell import run_command

    functions = FunctionToolset[ToolDeps](docstring_format="google", require_parameter_descriptions=True)
    for reader in (read_file, list_files, search, update_plan):
        functions.add_function(reader)
    functions.add_function(delegate, prepare=_when_delegating, sequential=True)
    # pydantic-ai runs a response's tool calls concurrently: two edits of one file would each read the old
    # text and the last write would win, and the user would get overlapping permission prompts. Sequential
    # tools run alone, one at a time, in the order the model called them.
    for changer in (edit_file, write_file, apply_patch, run_command):
        functions.add_function(changer, sequential=True)
    return functions


async def _when_delegating(ctx: RunContext[ToolDeps], tool_def: Any) -> Any:
    """Offer ``delegate`` only where delegating is allowed (not inside a delegate)."""
    return tool_def if ctx.deps.delegator is not None else None


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
