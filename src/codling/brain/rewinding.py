"""``/undo`` and ``/rewind``: putting the code, the conversation or both back as they were before an earlier turn
(or, for the code, before one of its steps).

``/undo`` rewinds both to before the last turn; ``/rewind`` lists the turns (what each asked and changed);
``/rewind N [code|conversation|both]`` rewinds to before turn N (both, unless it says), ``/rewind N.S`` the code
to before step S of turn N (its S-th call that could change files). The command's turn shows a preview (each
file that will change, with lines added and removed) and asks the user to confirm, as a tool call asks; the
question names the files changed outside codling since its last checkpoint, which the rewind would
overwrite. With no one to ask, a rewind is done unless it would overwrite such files (then it is refused,
naming them).

The code side is the session's checkpoint keeper (``tools/checkpoints/``); the conversation side is a
``Rewound`` event, recorded like any other, after which the session's conversation is rebuilt from its
recorded events exactly as a restore would rebuild it (``brain/branches.py`` says what it abandons).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, assert_never

from codling.brain.branches import TurnMark, live_turns
from codling.brain.events import RewindScope, Rewound, TextDelta, ToolCallFinished, ToolCallStarted
from codling.errors import CheckpointError
from codling.tools.checkpoints.rewind import FileChange
from codling.tools.checkpoints.scan import Uncovered
from codling.tools.ports import PermissionRequest, Rejection

if TYPE_CHECKING:
    from codling.brain.turn_context import TurnContext
    from codling.tools.checkpoints.keeper import CheckpointKeeper

REWIND_TOOL = "rewind"
"""The tool name of a rewind's card (not a tool the model has)."""

SCOPE_WORDS: dict[str, RewindScope] = {
    "both": "both",
    "code": "code",
    "files": "code",
    "conversation": "conversation",
    "chat": "conversation",
}
"""What ``/rewind N`` may be followed by."""

_TARGET = re.compile(r"^(?P<turn>\d+)(?:\.(?P<step>\d+))?$")
LISTED_FILES = 20
"""Files a preview names; more are counted."""
LISTED_UNCOVERED = 8
"""Paths checkpoints do not cover that a preview names; more are counted."""


@dataclass(frozen=True)
class Target:
    """What to rewind to: before ``turn`` (or before its step ``step``, 1-based), putting back ``scope``."""

    turn: TurnMark
    scope: RewindScope
    step: int | None = None

    @property
    def checkpoint(self) -> int | None:
        """The checkpoint the code goes back to (None: none was taken)."""
        return self.turn.checkpoint if self.step is None else self.turn.steps[self.step - 1].checkpoint

    @property
    def label(self) -> str:
        """``turn 3`` or ``step 2 of turn 3``."""
        return f"turn {self.turn.number}" if self.step is None else f"step {self.step} of turn {self.turn.number}"


def parse_target(name: str, argument: str, turns: Sequence[TurnMark]) -> Target | str:
    """The target ``/undo`` or ``/rewind ARGUMENT`` names, or what to tell the user instead."""
    if not turns:
        return "There is nothing to rewind: no turn of this conversation is left to undo."
    if name == "undo":
        return Target(turns[-1], "both")
    words = argument.split()
    match = _TARGET.match(words[0]) if words else None
    alone: RewindScope = "code" if match is not None and match["step"] is not None else "both"  # a step: the code
    scope = SCOPE_WORDS.get(words[1].lower()) if len(words) == 2 else (alone if len(words) == 1 else None)
    if match is None or scope is None:
        return f"Say which turn to rewind to: /rewind N [code|conversation|both] (or N.S for a step).\n\n{menu(turns)}"
    number = int(match["turn"])
    if not 1 <= number <= len(turns):
        return f"There is no turn {number} to rewind to (turns 1 to {len(turns)}).\n\n{menu(turns)}"
    turn = turns[number - 1]
    if match["step"] is None:
        return Target(turn, scope)
    step = int(match["step"])
    if not 1 <= step <= len(turn.steps):
        steps = f"steps 1 to {len(turn.steps)}" if turn.steps else "no step that could change files"
        return f"Turn {number} has no step {step} ({steps})."
    if scope != "code":
        return "A step can only be rewound in the code (the conversation goes back by whole turns): add `code`."
    return Target(turn, scope, step)


def menu(turns: Sequence[TurnMark]) -> str:
    """The turns one may rewind to, with what each asked and changed (markdown)."""
    lines = ["Turns you can rewind to (`/rewind N`, `/rewind N code`, `/rewind N conversation`, `/rewind N.S code`):"]
    lines.append("")
    for turn in turns:
        prompt = " ".join(turn.prompt.split())
        prompt = prompt if len(prompt) <= 70 else prompt[:69] + "…"
        changed = f" — changed {_names(turn.files)}" if turn.files else ""
        lines.append(f"{turn.number}. {prompt}{changed}")
        for index, step in enumerate(turn.steps, 1):
            lines.append(f"   {turn.number}.{index} {step.title}")
    return "\n".join(lines)


async def run_rewind(turn: TurnContext, name: str, argument: str) -> None:
    """Run ``/undo`` or ``/rewind ARGUMENT`` within the command's ``turn`` (see the module's docstring)."""
    session, send = turn.session, turn.send

    def say(text: str) -> None:
        send(TextDelta(turn.id, text))

    recorded = session.recorded
    if recorded is None:
        say("This session is not recorded, so it cannot be rewound.")
        return
    if name == "undo" and argument.strip():
        say("/undo takes nothing after it: it undoes the last turn. `/rewind` lists the turns to go back to.")
        return
    await turn.delivered_so_far()  # this turn's start is in the file before the file is read
    events = await recorded()
    turns = live_turns(events, session.state.cwd)
    keeper = session.deps.checkpoints
    if keeper is not None:  # what each turn changed, commands' changes too, as its checkpoints tell
        turns = await _with_checkpointed_files(turns, keeper)
    if name == "rewind" and not argument.strip():
        say(menu(turns) if turns else "There is nothing to rewind to: no turn of this conversation is left.")
        return
    target = parse_target(name, argument, turns)
    if isinstance(target, str):
        say(target)
        return
    changes: tuple[FileChange, ...] = ()
    outside: tuple[str, ...] = ()
    uncovered: tuple[Uncovered, ...] = ()
    if target.scope != "conversation" and session.state.mode == "read-only":
        say(
            "codling is in read-only mode, so no file is changed: switch the mode (/mode), or "
            f"`/rewind {target.turn.number} conversation` rewinds the conversation alone."
        )
        return
    if target.scope != "conversation" and (keeper is None or target.checkpoint is None):
        why = "checkpoints are off" if keeper is None else f"no checkpoint was taken before {target.label}"
        alone = f"`/rewind {target.turn.number} conversation` rewinds the conversation alone"
        say(f"The code cannot be rewound: {why}. {alone}.")
        return
    if keeper is not None and target.checkpoint is not None:
        try:
            preview = await keeper.preview(target.checkpoint)
        except CheckpointError as e:
            say(f"The code cannot be rewound: {e}.")
            return
        changes, outside, uncovered = preview.changes, preview.outside, preview.uncovered
    kept = tuple(change.path for change in changes) if target.scope == "conversation" else ()
    if target.scope == "conversation":  # the files stay: what differs from then is what they keep
        changes, outside, uncovered = (), (), ()
    what = _what(target.scope)
    title = f"Rewind the {what} to before {target.label}"
    say(describe_preview(target, changes, outside, uncovered, kept))
    call_id = f"rewind-{uuid.uuid4().hex[:12]}"
    raw_input = {"turn": target.turn.number, "step": target.step, "scope": target.scope, "outside": list(outside)}
    send(ToolCallStarted(turn.id, call_id, REWIND_TOOL, title, "edit", raw_input))
    approver = session.deps.permissions.approver
    if approver is not None:
        question = title + (f" (overwriting {len(outside)} file(s) changed outside codling)" if outside else "")
        subject = _what_changes(changes, kept)  # what the user decides on, under the question
        answer = await approver.ask(
            PermissionRequest(call_id, REWIND_TOOL, "edit", question, subject, raw_input=raw_input)
        )
        if isinstance(answer, Rejection) or answer == "reject":
            send(ToolCallFinished(turn.id, call_id, REWIND_TOOL, "failed", "Not rewound.", ended_by="rejected"))
            say("\n\nNothing was rewound.")
            return
    elif outside:
        message = (
            f"Not rewound: {len(outside)} file(s) changed outside codling since its last checkpoint "
            f"({_names(outside)}), and no one can confirm overwriting them here"
        )
        send(ToolCallFinished(turn.id, call_id, REWIND_TOOL, "failed", message))
        say(f"\n\n{message}.")
        return
    saved = None
    if target.scope != "conversation":
        assert keeper is not None and target.checkpoint is not None
        try:
            done = await keeper.rewind(target.checkpoint, confirmed=frozenset(outside))
        except CheckpointError as e:
            send(ToolCallFinished(turn.id, call_id, REWIND_TOOL, "failed", f"Not rewound: {e}"))
            say(f"\n\nNot rewound: {e}.")
            return
        changes, saved = done.changes, done.saved
    rewound = Rewound(
        turn.id,
        target.turn.turn_id,
        target.turn.number,
        target.scope,
        target.checkpoint if target.scope != "conversation" else None,
        saved,
        kept or tuple(change.path for change in changes),
        target.step,
    )
    send(rewound)
    if target.scope != "code":
        session.rebuild([*events, rewound])
    result = _result(target, changes)
    send(ToolCallFinished(turn.id, call_id, REWIND_TOOL, "completed", result, summary=result))
    say(f"\n\n{result}")


async def _with_checkpointed_files(turns: list[TurnMark], keeper: CheckpointKeeper) -> list[TurnMark]:
    """``turns`` with the files each changed between its first and last checkpoint added to what its calls
    said (a checkpoint log that cannot be read adds nothing)."""
    spans = [(t.checkpoint, t.ended) for t in turns if t.checkpoint is not None and t.ended is not None]
    try:
        touched = iter(await keeper.touched(spans))
    except CheckpointError:
        return turns
    return [
        replace(turn, files=tuple(dict.fromkeys((*turn.files, *next(touched)))))
        if turn.checkpoint is not None and turn.ended is not None
        else turn
        for turn in turns
    ]


def _what(scope: RewindScope) -> str:
    match scope:
        case "both":
            return "code and conversation"
        case "code":
            return "code"
        case "conversation":
            return "conversation"
        case _:
            assert_never(scope)


def _what_changes(changes: Sequence[FileChange], kept: Sequence[str]) -> str:
    """The files a rewind changes, one per line with what happens to each (or, for the conversation alone, the
    files that keep what the abandoned turns changed)."""
    if kept:
        return (
            "The files stay as they are: " + ", ".join(kept[:LISTED_FILES]) + (" …" if len(kept) > LISTED_FILES else "")
        )
    if not changes:
        return "No file changes."
    lines = [f"{change.path} {_stat(change)}" for change in changes[:LISTED_FILES]]
    return "\n".join(lines + ([f"… and {len(changes) - LISTED_FILES} more"] if len(changes) > LISTED_FILES else []))


def describe_preview(
    target: Target,
    changes: Sequence[FileChange],
    outside: Sequence[str],
    uncovered: Sequence[Uncovered],
    kept: Sequence[str] = (),
) -> str:
    """What a rewind to ``target`` will do (markdown): the files changing and how, what checkpoints do not cover
    (a directory once, not its entries), the files changed outside codling, the conversation's side."""
    prompt = " ".join(target.turn.prompt.split())
    lines = [f"Rewinding the {_what(target.scope)} to before {target.label} (“{prompt[:80]}”)."]
    if target.scope != "conversation":
        if changes:
            lines += ["", f"{len(changes)} file(s) will change:"]
            lines += [f"- `{change.path}` {_stat(change)}" for change in changes[:LISTED_FILES]]
            if len(changes) > LISTED_FILES:
                lines.append(f"- … and {len(changes) - LISTED_FILES} more")
        else:
            lines += ["", "No file will change: the code is as it was then."]
        # A directory not covered covers what is in it: its entries are not named again.
        directories = tuple(u.path for u in uncovered if u.path.endswith("/"))
        uncovered = [u for u in uncovered if not any(u.path.startswith(d) and u.path != d for d in directories)]
        if uncovered:
            listed = ", ".join(f"`{u.path}` ({u.why})" for u in uncovered[:LISTED_UNCOVERED])
            more = f" and {len(uncovered) - LISTED_UNCOVERED} more" if len(uncovered) > LISTED_UNCOVERED else ""
            lines += ["", f"Not covered by checkpoints, left as they are: {listed}{more}."]
        if outside:
            lines += [
                "",
                f"**Changed outside codling** since its last checkpoint (the rewind overwrites them): "
                f"{_names(outside)}.",
            ]
    if target.scope != "code":
        back = f"The conversation goes back to before turn {target.turn.number}"
        lines += ["", f"{back}; later turns stay in the history, abandoned."]
    if kept:
        lines += ["", f"The files stay as they are: {_names(kept)} keep what the abandoned turns changed."]
    return "\n".join(lines)


def _stat(change: FileChange) -> str:
    counted = change.added is not None and change.removed is not None and (change.added or change.removed)
    counts = f" (+{change.added} −{change.removed})" if counted else ""
    match change.action:
        case "restore":
            return f"restored{counts}"
        case "remove":
            return f"deleted (made since){counts}"
        case "recreate":
            return f"recreated (deleted since){counts}"
        case "mode":
            return "permissions restored"
        case _:
            assert_never(change.action)


def _result(target: Target, changes: Sequence[FileChange]) -> str:
    code = ""
    if target.scope != "conversation":
        code = (
            f" {len(changes)} file(s) changed back: {_names([c.path for c in changes])}."
            if changes
            else " No file changed."
        )
    talk = " The conversation continues from before that turn." if target.scope != "code" else ""
    return f"Rewound the {_what(target.scope)} to before {target.label}.{code}{talk}"


def _names(paths: Sequence[str]) -> str:
    shown = ", ".join(f"`{path}`" for path in paths[:LISTED_FILES])
    return shown + (f" and {len(paths) - LISTED_FILES} more" if len(paths) > LISTED_FILES else "")
