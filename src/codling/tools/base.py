"""What every tool's call shares: its output (text, images, links), what the user is shown of it, how the call
is described and reported, and a command's result line. (Its per-session context is ``tools/deps.ToolDeps``.)"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from codling.config import PERMISSION_MODES
from codling.tools.ports import PLAN_TOOL, FileSystem, Terminal
from codling.vocabulary import STATUS_MARKS, FileDiff, Location, PermissionMode, PlanStep, ToolKind


@dataclass(frozen=True)
class ResourceLink:
    """A link to a resource a tool returned (an MCP tool's ``resource_link``), shown as a link."""

    uri: str
    name: str
    title: str | None = None
    mime_type: str | None = None
    description: str | None = None


@dataclass(frozen=True)
class ShownResult:
    """How a finished call is shown to the user where that differs from what the model is told."""

    title: str = ""
    """The call's title now it is done, when its start's no longer fits (a patch names what it changed)."""
    diffs: tuple[FileDiff, ...] = ()
    """Every changed file's diff when a call changed several (a multi-file patch, a delegate's edits)."""
    steps: str = ""
    """What a delegate did, step by step."""
    exit_code: int | None = None
    """A command's exit code (None: it timed out, was stopped, or this is no command)."""
    links: tuple[ResourceLink, ...] = ()
    """Resources the result links to (the text names them too)."""


@dataclass(frozen=True)
class ToolImage:
    """An image a tool returns for the model (an MCP tool's), sent only to a model that sees images."""

    data: bytes = field(repr=False)
    mime_type: str


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
    shown: ShownResult | None = None
    """How the user sees the result, where that is not ``text`` and ``diff``."""
    images: tuple[ToolImage, ...] = ()
    """Images sent to the model with ``text`` (which names them)."""


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
    rejected: bool = False
    """The user rejected the call when asked (the editor already shows it so)."""
    checkpoint: int | None = None
    """The workspace's checkpoint taken just before the call ran (a call that may change files)."""
    approved_by: str | None = None
    """What let the call run without a question: the user's rule or "always" answer, in words (None: nothing
    did: it was asked, or the mode allows it)."""

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


_COMMAND_STATUS = re.compile(r"exit code -?\d+|timed out after |stopped before it exited")
"""How the first line of a ``run_command`` result starts (``tools/shell.py`` writes it): how the command ended."""


def command_result(text: str) -> tuple[str, str] | None:
    """A ``run_command`` result's status line ("exit code 3", "timed out after 60s, …") and its output; None
    when ``text`` is not such a result."""
    status, _, output = text.partition("\n")
    return (status, output) if _COMMAND_STATUS.match(status) else None
