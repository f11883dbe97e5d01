"""Delegates: sub-agents (planner, reviewer, coder) that take a task from the session's model.

A delegate is a fresh ``ConversationSession`` with its own state: the same model, workspace, ports and
permissions (a view of them: its approvals are the user's, its mode the session's), its role's instructions
(``prompts/<role>.md``) and its role's tools, and no delegate tool of its own, so depth is bounded. It gets
only the task, the context the model gave, what the session's last turns did ("Prior context") and, with
carryover, the answer of the latest completed run of the same role in this session. Its steps show under the
parent tool call while it works (``ToolCallNote``), and the user is asked about its edits and commands under
that call too; a planner's plan becomes the session's plan. Cancelling the parent turn cancels it.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, assert_never

from codling.brain.builtin_turns import prompt_text
from codling.brain.context.budget import Budget
from codling.brain.context.compaction import DEFAULT_THRESHOLD
from codling.brain.context.digests import changed_files
from codling.brain.context.layout import turn_context
from codling.brain.context.pins import render_pins
from codling.brain.events import (
    CompactionStarted,
    ContextCompacted,
    ContextWarning,
    McpServerNotice,
    McpServersStarting,
    PlanUpdated,
    ProviderRetrying,
    Rewound,
    SessionTitled,
    SettingsChanged,
    SpecialTurnPersisted,
    TextDelta,
    ThoughtDelta,
    ToolCallFinished,
    ToolCallNote,
    ToolCallRunning,
    ToolCallStarted,
    ToolCallTerminal,
    TurnEnded,
    TurnFailed,
    TurnStarted,
    UsageUpdated,
)
from codling.brain.reasoning import SegmentSplitter
from codling.brain.spend import Spend
from codling.brain.state import SessionState
from codling.tools.ports import (
    COMMAND_TOOL,
    DELEGATE_TOOL,
    Answer,
    Approver,
    DelegateOutcome,
    DelegateRole,
    PermissionRequest,
    ShownCall,
    ToolProgress,
)
from codling.tools.sandbox.policy import Sandbox
from codling.tools.specs import describe_call, editing_tools, role_tools
from codling.vocabulary import FileDiff

if TYPE_CHECKING:
    from codling.brain.host import SessionHost

NOTE_STEPS = 200
"""How many of a delegate's latest steps show under the parent tool call (every one, in a run of usual size)."""

CARRYOVER_CHARS = 1_500
"""Most characters of a delegate's answer kept for the next run of its role (carryover)."""


class SessionDelegator:
    """Runs the delegates of one session (its ``ToolDeps.delegator``)."""

    def __init__(self, parent: SessionHost) -> None:
        self._parent = parent

    async def delegate(
        self, call_id: str, role: DelegateRole, task: str, context: str, carryover: bool
    ) -> DelegateOutcome:
        """Run the ``role`` delegate on ``task`` and return its answer; its steps show under ``call_id``."""
        parent = self._parent
        state = parent.state
        child_state = SessionState(
            session_id=f"{state.session_id}.{role}",
            cwd=state.cwd,
            model=state.model,
            mode=state.mode,
            thinking=state.thinking,
            additional_dirs=state.additional_dirs,
        )
        args = {"agent": role, "task": task, "context": context, "carryover": carryover}
        shown = ShownCall(call_id, describe_call(DELEGATE_TOOL, args, parent.deps.workspace).title, "think", args)
        approver = parent.deps.permissions.approver
        deps = replace(
            parent.deps,
            permissions=parent.deps.permissions.view(_Within(approver, shown, role) if approver else None),
            progress=ToolProgress(),
            delegator=None,
            mcp=None,  # the session's servers stay the session's: a role names its own tools
            checkpoints=None,  # the delegate call is checkpointed before it runs, as a whole
            sandbox=_sandbox_for(role, parent.deps.sandbox),
        )
        options = replace(
            parent.options,
            auto_title=False,
            delegates=False,
            tool_names=role_tools(role),
            role_instructions=prompt_text(role),
        )
        child = parent.spawn(child_state, deps, options)
        progress = parent.deps.progress
        steps: list[str] = []
        reply: list[str] = []
        splitter = SegmentSplitter()
        changed: dict[Path, None] = {}
        diffs: dict[Path, FileDiff] = {}
        outcome = DelegateOutcome("")

        def note() -> None:
            shown = steps[-NOTE_STEPS:]
            earlier = len(steps) - len(shown)
            progress.note(call_id, "\n".join(([f"… {earlier} earlier steps"] if earlier else []) + shown))

        # The delegate's commands are not embedded as terminals: each note replaces the card's content, and an
        # editor refuses a released terminal, so a command would vanish at the next step. Its outcome is a step.
        async for event in child.stream(self.prompt(role, task, context, carryover)):
            starts = splitter.feed(event)
            match event:
                case ToolCallStarted():
                    steps.append(f"→ {event.title}")
                    note()
                case ToolCallFinished():
                    changed.update(dict.fromkeys(changed_files(event)))
                    for diff in file_diffs(event):
                        first = diffs.get(diff.path)
                        diffs[diff.path] = replace(diff, old_text=first.old_text) if first else diff
                    if (ending := step_outcome(event)) is not None:
                        steps.append(f"  {ending}")
                        note()
                case PlanUpdated():
                    progress.plan(event.steps)
                case TextDelta():
                    if starts == "text" and reply:
                        reply.append("\n\n")  # what it said at each step, a paragraph of its own
                    reply.append(event.text)
                case TurnFailed():
                    outcome = replace(outcome, error=event.message)
                case TurnEnded():
                    outcome = replace(outcome, stop_reason=event.stop_reason)
                    parent.aside.add(Spend(event.usage, event.cost))
                case (
                    TurnStarted()
                    | ThoughtDelta()
                    | ToolCallTerminal()
                    | ToolCallNote()
                    | ToolCallRunning()
                    | CompactionStarted()
                    | ContextCompacted()
                    | ProviderRetrying()
                    | ContextWarning()
                    | McpServersStarting()
                    | McpServerNotice()
                    | SettingsChanged()
                    | UsageUpdated()
                    | SpecialTurnPersisted()
                    | SessionTitled()
                    | Rewound()
                ):
                    pass  # not the delegate's steps, plan, reply or outcome
                case _:
                    assert_never(event)
        return replace(
            outcome,
            reply="".join(reply).strip(),
            steps=tuple(steps),
            changed=tuple(changed),
            diffs=tuple(diffs.values()),
        )

    def prompt(self, role: DelegateRole, task: str, context: str, carryover: bool) -> str:
        """What the delegate is told: the task, the model's context, the user's pinned instructions and facts,
        the last turns, and its previous run."""
        state = self._parent.state
        parts = [f"# Task\n{task}"]
        if context:
            parts.append(f"# Context from the lead agent\n{context}")
        budget = Budget.of(state.model, DEFAULT_THRESHOLD)
        # The user's standing rules bind the delegate too ("never touch migrations/" is not the lead's alone).
        if pins := render_pins(state.pins, budget.pins):
            parts.append(pins)
        # What the lead's own requests get each turn (recent files, the turn ledger), DESIGN §6.
        ledger = budget.ledger
        if prior := turn_context(state.recent_files, state.turn_recaps, state.cwd, ledger):
            parts.append(f"# Prior context (what the lead agent's last turns did)\n{prior}")
        if carryover and (note := state.delegate_notes.get(role)):
            parts.append(f"# Your previous run as the {role} in this session ended with\n{note}")
        return "\n\n".join(parts)


class _Within:
    """Asks the session's approver about a delegate's tool call within the ``delegate`` call, which is the one
    the user's client shows (the delegate's own calls are not); the title names the delegate:
    ``coder: Write notes.txt``."""

    def __init__(self, inner: Approver, shown: ShownCall, role: DelegateRole) -> None:
        self._inner = inner
        self._shown = shown
        self._role = role

    async def ask(self, request: PermissionRequest) -> Answer:
        """Ask within the shown call."""
        return await self._inner.ask(replace(request, title=f"{self._role}: {request.title}", within=self._shown))


def file_diffs(event: ToolCallFinished) -> list[FileDiff]:
    """Every file diff a finished call carries."""
    return ([event.diff] if event.diff is not None else []) + list(event.shown.diffs if event.shown else ())


def step_outcome(event: ToolCallFinished) -> str | None:
    """How a delegate's step ended, when it says more than "done": a failure, a command's exit status."""
    if event.status == "failed":
        return f"failed: {event.text.splitlines()[0] if event.text else event.tool_name}"
    if event.tool_name == COMMAND_TOOL:
        return event.text.partition("\n")[0]  # its exit status ("exit code 1", "timed out after 5s")
    return None


def remember(state: SessionState, started: ToolCallStarted, finished: ToolCallFinished) -> None:
    """Keep a delegate's answer for carryover (live, and when a session is restored): the answer of the
    latest run of each role that finished with one."""
    if started.tool_name == DELEGATE_TOOL and finished.status == "completed":
        role = str(started.raw_input.get("agent", ""))
        state.delegate_notes = {**state.delegate_notes, role: finished.text[:CARRYOVER_CHARS]}


def _sandbox_for(role: DelegateRole, sandbox: Sandbox | None) -> Sandbox | None:
    """The sandbox a delegate's commands run in: a role that edits no file (the reviewer) may not change the
    workspace through a command either; only temp stays writable."""
    if sandbox is None or role_tools(role) & editing_tools():
        return sandbox
    return sandbox.reading_workspace()
