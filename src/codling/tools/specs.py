"""One descriptor per tool (:class:`ToolSpec`): every fact about a tool that is not its code.

Its name, kind, whether it only reads, which delegate roles may use it, how a lean tool set treats its
description, and how a call is titled for the user before it runs. Every table elsewhere is derived from
:data:`TOOLS`: the names the toolset offers and in which order, which calls run one at a time, what each
delegate role may call, what a lean set leaves out.

Light on purpose (no pydantic-ai): sessions, delegates and the context engine read it before the model stack
is imported. The tools' code is in the tool modules; ``tools/toolset.py`` joins the two.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast, get_args

from codling.errors import ConfigError, PathError
from codling.tools.base import ToolCallInfo
from codling.tools.ports import DelegateRole
from codling.tools.workspace import Workspace
from codling.vocabulary import Location, ToolKind

ToolName = Literal[
    "read_file",
    "list_files",
    "search",
    "update_plan",
    "delegate",
    "edit_file",
    "write_file",
    "apply_patch",
    "run_command",
]
"""The name of one of codling's own tools (an MCP server's tools have names of their own)."""

LeanForm = Literal["first-paragraph", "whole", "dropped"]
"""What a lean tool set (small windows, ``brain/context/tools.py``) does with a tool: offers it with the first
paragraph of its description, with all of it, or not at all."""

Shown = tuple[str, tuple[Location, ...]]
"""A call's title and the files it touches."""

Title = Callable[[dict[str, Any], Workspace], Shown]
"""How a call is presented before it runs: its title and the files it touches, from its arguments (which may
be malformed: a title function may raise, and ``describe_call`` falls back to the tool's name)."""

_TITLE_COMMAND_CHARS = 200
_TITLE_TASK_CHARS = 100


@dataclass(frozen=True)
class ToolSpec:
    """What codling knows about one of its tools besides its code."""

    name: ToolName
    kind: ToolKind
    """What a call does (ACP clients pick an icon by it; the permission check gates some kinds)."""
    read_only: bool
    """Changes no file and starts no process. Other tools run sequentially: pydantic-ai runs a response's
    calls concurrently, so two edits of one file would each read the old text and the last write would win,
    and the user would get overlapping permission prompts. A sequential tool runs alone, in the order the
    model called it."""
    roles: frozenset[DelegateRole]
    """The delegate roles that may use it."""
    lean: LeanForm
    title: Title

    @property
    def sequential(self) -> bool:
        """Whether its calls run one at a time (see ``read_only``)."""
        return not self.read_only


def _read_title(args: dict[str, Any], workspace: Workspace) -> Shown:
    if not args.get("path"):
        return "read_file (no path given)", ()
    shown, resolved = _path_for_title(str(args["path"]), workspace)
    start, end = args.get("start_line"), args.get("end_line")
    line = start if isinstance(start, int) and start >= 1 else None
    return f"Read {shown}{_line_range(start, end)}", _locations(resolved, line)


def _list_title(args: dict[str, Any], workspace: Workspace) -> Shown:
    shown, resolved = _path_for_title(str(args.get("path") or "."), workspace)
    where = "" if resolved == workspace.cwd else f" in {shown}"
    return f"List files{where}", _locations(resolved)


def _search_title(args: dict[str, Any], workspace: Workspace) -> Shown:
    shown, resolved = _path_for_title(str(args.get("path") or "."), workspace)
    where = "" if resolved == workspace.cwd else f" in {shown}"
    glob = args.get("glob")
    only = f" ({glob})" if glob else ""
    return f"Search for /{args['pattern']}/{where}{only}", _locations(resolved)


def _plan_title(_args: dict[str, Any], _workspace: Workspace) -> Shown:
    return "Update the plan", ()


def _delegate_title(args: dict[str, Any], _workspace: Workspace) -> Shown:
    task = " ".join(str(args.get("task", "")).split())
    task = task if len(task) <= _TITLE_TASK_CHARS else task[: _TITLE_TASK_CHARS - 1] + "…"
    return f"Delegate to the {args.get('agent', 'sub-agent')}: {task}", ()


def _file_title(verb: str, tool_name: str) -> Title:
    def title(args: dict[str, Any], workspace: Workspace) -> Shown:
        if not args.get("path"):
            return f"{tool_name} (no path given)", ()
        shown, resolved = _path_for_title(str(args["path"]), workspace)
        return f"{verb} {shown}", _locations(resolved)

    return title


def _patch_title(args: dict[str, Any], workspace: Workspace) -> Shown:
    files = re.findall(r"^\*\*\* (?:Add|Update|Delete) File: (.+)$", str(args.get("patch", "")), re.MULTILINE)
    paths = [_path_for_title(f.strip(), workspace) for f in files]
    names = ", ".join(s for s, _ in paths[:3]) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")
    located = tuple(loc for _, resolved in paths for loc in _locations(resolved))
    return (f"Patch {names}" if names else "Apply a patch"), located


def _command_title(args: dict[str, Any], _workspace: Workspace) -> Shown:
    lines = str(args["command"]).strip().splitlines() or [""]
    first = lines[0]
    if len(lines) > 1 or len(first) > _TITLE_COMMAND_CHARS:
        first = first[:_TITLE_COMMAND_CHARS] + " …"
    return f"Run {first}", ()


_ALL: frozenset[DelegateRole] = frozenset(get_args(DelegateRole))
_CODER: frozenset[DelegateRole] = frozenset({"coder"})

TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec("read_file", "read", True, _ALL, "first-paragraph", _read_title),
    ToolSpec("list_files", "search", True, _ALL, "first-paragraph", _list_title),
    ToolSpec("search", "search", True, _ALL, "first-paragraph", _search_title),
    ToolSpec("update_plan", "think", True, frozenset({"planner"}), "dropped", _plan_title),
    # No delegate may delegate (depth is bounded); a coder delegate edits, so delegating is not read-only.
    ToolSpec("delegate", "think", False, frozenset(), "dropped", _delegate_title),
    ToolSpec("edit_file", "edit", False, _CODER, "first-paragraph", _file_title("Edit", "edit_file")),
    ToolSpec("write_file", "edit", False, _CODER, "first-paragraph", _file_title("Write", "write_file")),
    # The patch format is in its description: a lean set keeps it whole.
    ToolSpec("apply_patch", "edit", False, _CODER, "whole", _patch_title),
    # The reviewer runs commands (which follow the permission mode) but edits nothing.
    ToolSpec("run_command", "execute", False, frozenset({"reviewer", "coder"}), "first-paragraph", _command_title),
)
"""Every tool the toolset offers, in the order the model sees them."""

TOOL_SPECS: dict[str, ToolSpec] = {spec.name: spec for spec in TOOLS}
"""The descriptors by name."""

TOOL_NAMES: tuple[ToolName, ...] = tuple(spec.name for spec in TOOLS)
"""Every tool the toolset offers, in order."""


def editing_tools() -> frozenset[ToolName]:
    """The tools that change files (edit, delete or move them)."""
    return frozenset(spec.name for spec in TOOLS if spec.kind in ("edit", "delete", "move"))


def role_tools(role: DelegateRole) -> frozenset[ToolName]:
    """The tools a delegate of ``role`` may use."""
    return frozenset(spec.name for spec in TOOLS if role in spec.roles)


def known_tools(names: Iterable[str], what: str) -> frozenset[ToolName]:
    """``names``, each checked to be one of codling's tools; ``ConfigError`` naming any that is not (``what``
    says where the names come from)."""
    chosen = frozenset(names)
    if unknown := sorted(chosen - set(TOOL_NAMES)):
        raise ConfigError(f"{what} names unknown tools: {', '.join(unknown)}; known: {', '.join(TOOL_NAMES)}")
    return cast(frozenset[ToolName], chosen)


@dataclass(frozen=True)
class ToolFilter:
    """Which of codling's tools a model may call: those ``allow`` names (None: all), except those ``block``
    names. Unknown names are refused when a filter is built: a typo would silently take a tool away."""

    allow: frozenset[ToolName] | None = None
    block: frozenset[ToolName] = frozenset()

    def __post_init__(self) -> None:
        known_tools(self.allow or (), "a tool filter")
        known_tools(self.block, "a tool filter")

    @classmethod
    def only(cls, *names: ToolName) -> ToolFilter:
        """A filter that allows ``names`` alone (none: no tools)."""
        return cls(allow=frozenset(names))

    @classmethod
    def without(cls, *names: ToolName) -> ToolFilter:
        """A filter that allows every tool but ``names``."""
        return cls(block=frozenset(names))

    def allows(self, name: str) -> bool:
        """Whether the tool ``name`` passes."""
        return name not in self.block and (self.allow is None or name in self.allow)

    @property
    def empty(self) -> bool:
        """Whether no tool passes."""
        return not any(self.allows(name) for name in TOOL_NAMES)


NO_TOOLS = ToolFilter.only()
"""No tool at all."""

ALL_TOOLS = ToolFilter()
"""Every tool."""


def describe_call(tool_name: str, args: dict[str, Any], workspace: Workspace) -> ToolCallInfo:
    """Title, kind and locations of a call before it runs, e.g. ``Read src/a.py (lines 10-20)``.

    Never raises: unknown tools (an MCP server's) and malformed arguments still get a title.
    """
    spec = TOOL_SPECS.get(tool_name)
    if spec is None:
        return ToolCallInfo(tool_name, "other")
    try:
        title, locations = spec.title(args, workspace)
    except Exception:  # a malformed call must still be shown to the user
        return ToolCallInfo(tool_name, spec.kind)
    return ToolCallInfo(title, spec.kind, locations)


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
