"""Ports: how tools reach files, processes and the user's approval.

Tools never touch the disk, spawn processes or ask the user directly; they go through these protocols so the
same tool works on local files (``tools/local.py``), inside an editor over ACP (``acp/client_ports.py``), or
against a fake in tests.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from codling.vocabulary import FileDiff, PlanStep, StopReason, ToolKind

Decision = Literal["allow_once", "allow_always", "allow_everywhere", "reject"]
"""The user's answer to a permission request ("allow_everywhere": always, in every session: a rule the user
owns, offered only where ``PermissionRequest.everywhere`` says what it covers)."""


@dataclass(frozen=True)
class Rejection:
    """A "no" that comes with the user's reason, which the model is told."""

    reason: str


Answer = Decision | Rejection
"""What an approver returns: a decision, or a rejection with a reason."""

PLAN_TOOL = "update_plan"
"""The tool that sets the model's plan (``tools/plan.py``); clients show the plan rather than the call."""

DELEGATE_TOOL = "delegate"
"""The tool that hands a task to a sub-agent (``tools/delegate.py``, run by ``brain/delegates.py``)."""

COMMAND_TOOL = "run_command"
"""The tool that runs a shell command (``tools/shell.py``): its result's first line is the exit status."""


@dataclass(frozen=True)
class PermissionRequest:
    """What an approver is asked: the actual command or path, and the diff for an edit."""

    tool_call_id: str
    tool_name: str
    kind: ToolKind
    title: str
    subject: str
    """The command line for ``execute``, the absolute path for ``edit``."""
    diff: FileDiff | None = None
    raw_input: dict[str, Any] = field(default_factory=dict)
    paths: tuple[Path, ...] = ()
    """Every path an edit, move or delete writes, both as the model named it and resolved (a move: both ends);
    :class:`~codling.tools.approval.Permissions` always asks about protected ones."""
    mcp_tool: str | None = None
    """The MCP tool this call runs (its model-facing name): gated like a command whatever its kind, and an
    "always" answer allows that tool of that server."""
    within: ShownCall | None = None
    """The call the user sees, when this one is not shown itself (a delegate's call runs within its
    ``delegate`` call): an editor asks under that call, keeping its title; ``title`` then says what is asked."""
    always: str | None = None
    """What an "always" answer allows for the rest of the session, in words (``every `pytest` command``); None
    when such an answer is not remembered (a protected path is asked about every time)."""
    everywhere: str | None = None
    """What an "always, in every session" answer allows, in words: an allow rule saved in the user's
    ``$CODLING_HOME/permissions.toml``; offered for a whole program only (None: not offered)."""
    sandboxed: bool = False
    """Whether the command runs confined by the sandbox (``tools/sandbox/``): auto mode runs it without asking."""
    lift: str | None = None
    """What of the sandbox the call asks to lift (``network``, ``all``), with ``reason``: always asked."""
    reason: str | None = None
    """Why, in the model's words, when ``lift`` is set."""


@dataclass(frozen=True)
class ShownCall:
    """A tool call as the user's client shows it: its id, title, kind and arguments."""

    call_id: str
    title: str
    kind: ToolKind
    raw_input: dict[str, Any] = field(default_factory=dict)


class Approver(Protocol):
    """Asks the user whether a tool call may go ahead."""

    async def ask(self, request: PermissionRequest) -> Answer:
        """Return the user's decision; raise ``asyncio.CancelledError`` if the turn is cancelled."""
        ...


@dataclass(frozen=True)
class CommandResult:
    """The outcome of a finished (or stopped) command."""

    exit_code: int | None
    """``None`` when the command was killed (timeout)."""
    output: str
    """Combined stdout and stderr as plain text (``text.plain_terminal_text``: no colours, cursor moves or
    progress-bar rewrites), capped to the output limit."""
    truncated: bool = False
    timed_out: bool = False
    terminal_id: str | None = None
    """The client's terminal the command ran in, when the editor ran it (it keeps showing its output)."""


class FileSystem(Protocol):
    """Reads and writes text files by absolute path."""

    async def read_text(self, path: Path) -> str:
        """Return the file's text; raise ``MissingPathError`` if it does not exist, ``PathError`` if unreadable."""
        ...

    async def write_text(self, path: Path, content: str) -> None:
        """Create or replace the file (creating parent directories); raise ``PathError`` on failure."""
        ...


class Terminal(Protocol):
    """Runs shell commands."""

    async def run(
        self,
        command: str,
        *,
        cwd: Path,
        timeout: float,
        output_limit: int,
        on_terminal: Callable[[str], Awaitable[None]] | None = None,
        sandbox: str | None = None,
    ) -> CommandResult:
        """Run ``command`` in a shell in ``cwd``, confined to ``sandbox`` (a policy of
        ``tools/sandbox/confine.py``; None: unconfined) or not at all (``SandboxUnavailable``).

        The whole process group is killed on timeout or when the awaiting task is cancelled. A terminal that
        the user can watch (the editor's) is announced through ``on_terminal`` with its id as soon as the
        command runs in it; it returns once the user can see it (so it is shown before it is released).
        """
        ...


class ToolProgress:
    """Where a running tool reports what the user can watch before it finishes (a live terminal).

    The session points it at the running turn's event stream; while nothing listens (a special turn, or
    between turns) reports go nowhere.
    """

    def __init__(self) -> None:
        self._listener: ProgressListener | None = None

    def listen(self, listener: ProgressListener | None) -> None:
        """Send reports to ``listener`` from now on (None: to nowhere)."""
        self._listener = listener

    async def terminal(self, call_id: str, terminal_id: str) -> None:
        """Tool call ``call_id`` runs in the client's terminal ``terminal_id``; returns once that is shown."""
        if self._listener is not None:
            await self._listener.terminal(call_id, terminal_id)

    def note(self, call_id: str, text: str) -> None:
        """What tool call ``call_id`` is doing now, as the whole text to show under it (a delegate's steps)."""
        if self._listener is not None:
            self._listener.note(call_id, text)

    def running(self, call_id: str) -> None:
        """Tool call ``call_id`` started its work."""
        if self._listener is not None:
            self._listener.running(call_id)

    def plan(self, steps: tuple[PlanStep, ...]) -> None:
        """A plan a tool made (a planner delegate's), to show as the session's plan."""
        if self._listener is not None:
            self._listener.plan(steps)


class ProgressListener(Protocol):
    """What the running turn does with tool progress (``ToolProgress``)."""

    async def terminal(self, call_id: str, terminal_id: str) -> None:
        """Show the terminal under the call; return once the user can see it."""
        ...

    def note(self, call_id: str, text: str) -> None:
        """Show ``text`` under the call."""
        ...

    def running(self, call_id: str) -> None:
        """Show the call as running."""
        ...

    def plan(self, steps: tuple[PlanStep, ...]) -> None:
        """Show ``steps`` as the plan."""
        ...


DelegateRole = Literal["planner", "reviewer", "coder"]


@dataclass(frozen=True)
class DelegateOutcome:
    """How a delegate's run ended: its reply, and why it stopped if not by answering."""

    reply: str
    stop_reason: StopReason = "end_turn"
    error: str | None = None
    steps: tuple[str, ...] = ()
    """What it did, a line per tool call (``→ Read parser.py``), for when it did not answer."""
    changed: tuple[Path, ...] = ()
    """The files it changed, in the order it first changed them."""
    diffs: tuple[FileDiff, ...] = ()
    """Each changed file's diff over the whole run (its text before the first edit, after the last)."""


class Delegator(Protocol):
    """Runs a delegate (a sub-agent in a session of its own) for a tool call of the session."""

    async def delegate(
        self, call_id: str, role: DelegateRole, task: str, context: str, carryover: bool
    ) -> DelegateOutcome:
        """Run the ``role`` delegate on ``task`` to its end and return what it answered."""
        ...
