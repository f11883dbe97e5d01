"""What every tool shares: its per-session context, its output, and how a call is described."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from codling.config import PERMISSION_MODES, PermissionMode
from codling.tools.ports import PLAN_TOOL, STATUS_MARKS, FileDiff, FileSystem, Location, PlanStep, Terminal, ToolKind


@dataclass(frozen=True)
class ToolOutput:
    """A tool's result: ``text`` goes to the model; the rest is shown to the user."""

    text: str
    diff: FileDiff | None = None
    locations: tuple[Location, ...] = ()
    summary: str = ""
    """A concrete, brief account of what the call did, kept across turns in place of the call (the command,
    cwd, exit status and trimmed output; the path and a trimmed diff; the path and range read …)."""
    terminal_id: str | None = None
    """The editor's terminal a command ran in (shown in place of the text while the client is connected)."""
    plan: tuple[PlanStep, ...] | None = None
    """The whole plan, when the tool set it (``update_plan``)."""
    changed: tuple[Path, ...] = ()
    """Files the call changed besides its ``diff``'s (a delegate's edits)."""


@dataclass(frozen=True)
class ToolCallInfo:
    """How a tool call is presented before it runs: a title, a kind and the files it touches."""

    title: str
    kind: ToolKind
    locations: tuple[Location, ...] = ()


@dataclass(frozen=True)
class ToolReport:
    """Attached (as metadata, never sent to the model) to every tool result the toolset returns."""

    output: ToolOutput | None
    error: str | None = None

    @property
    def failed(self) -> bool:
        """Whether the call failed (its text is then the error message)."""
        return self.error is not None


__all__ = [
    "PERMISSION_MODES",
    "PLAN_TOOL",
    "STATUS_MARKS",
    "FileDiff",
    "FileSystem",
    "Location",
    "PermissionMode",
    "PlanStep",
    "Terminal",
    "ToolCallInfo",
    "ToolOutput",
    "ToolReport",
]
