"""The live branch of a recorded conversation: which turns a rewind abandoned, and the turns that are left.

A rewind (``Rewound``) with the conversation in its scope abandons its target turn and every event after it
up to the rewind's own turn (the ``/undo`` or ``/rewind`` command that did it) or, for a rewind made outside
any turn (``codling sessions rewind``), up to the rewind itself. Abandoned events stay in history.jsonl; the
restore skips them (but counts what their turns spent), so a restored session's model is sent what the live one
is, and ``sessions show`` marks their turns abandoned. Ranges may nest: a later rewind to an earlier turn
abandons earlier rewinds with the rest.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import assert_never

from codling.brain.events import Event, Rewound, ToolCallFinished, ToolCallStarted, TurnEnded, TurnStarted
from codling.brain.prompt import TextBlock
from codling.brain.slash import PROMPT_COMMANDS
from codling.brain.turns import command_of


@dataclass(frozen=True)
class StepMark:
    """A call within a turn that may have changed files, with the checkpoint taken just before it."""

    call_id: str
    title: str
    checkpoint: int


@dataclass(frozen=True)
class TurnMark:
    """A turn of the live branch: its id, its number in the conversation, its prompt, the checkpoint taken
    before it (None: none was), its steps and the files its calls' results name as changed (relative to the
    working directory where they are inside it: a command's changes only its checkpoints know)."""

    turn_id: str
    number: int
    prompt: str
    checkpoint: int | None
    steps: tuple[StepMark, ...] = ()
    files: tuple[str, ...] = ()
    ended: int | None = None
    """The checkpoint taken as it ended (None: none was, or it never ended)."""


NOTED_FILES = 10
"""Files a rewind note names; more are counted."""


def rewind_note(rewound: Rewound) -> str | None:
    """What the model should know after a rewind of one side only, where the conversation and the files now
    disagree (None after a rewind of both, or of the code when no file changed)."""
    match rewound.scope:
        case "both":
            return None
        case "code":
            if not rewound.files:
                return None
            when = f"step {rewound.step} of turn" if rewound.step is not None else "turn"
            return (
                f"The user put files back as they were before {when} {rewound.turn_number} ({_noted(rewound.files)}):"
                " what the conversation says was changed in them since is undone. Read a file again before relying"
                " on it."
            )
        case "conversation":
            if not rewound.files:
                return None  # the files are as they were then too
            return (
                f"The user took the conversation back to before turn {rewound.turn_number} but kept the files as "
                f"they are: {_noted(rewound.files)} may hold changes this conversation does not mention. Read a "
                "file again before relying on it."
            )
        case _:
            assert_never(rewound.scope)


def _noted(files: Sequence[str]) -> str:
    more = f" and {len(files) - NOTED_FILES} more" if len(files) > NOTED_FILES else ""
    return ", ".join(files[:NOTED_FILES]) + more


def abandoned(events: Sequence[Event]) -> set[int]:
    """The indexes of ``events`` that rewinds abandoned (see the module's docstring)."""
    starts: dict[str, int] = {}
    gone: set[int] = set()
    for index, event in enumerate(events):
        if isinstance(event, TurnStarted):
            starts.setdefault(event.turn_id, index)
        elif isinstance(event, Rewound) and event.scope != "code" and event.target_turn_id in starts:
            begin = starts[event.target_turn_id]
            end = starts.get(event.turn_id, index)
            gone.update(range(begin, end if end > begin else index))
    return gone


def kept_turn(event: TurnStarted) -> bool:
    """Whether the conversation keeps the turn ``event`` starts: a user turn or a prompt command (``/init``),
    not a command codling answers (as ``restore`` decides it)."""
    command = command_of(event.blocks or (TextBlock(event.prompt),))
    return command is None or command[0] in PROMPT_COMMANDS


def live_turns(events: Sequence[Event], cwd: Path) -> list[TurnMark]:
    """The turns of the live branch, oldest first, numbered as the conversation numbers them; the files they
    changed are named relative to ``cwd`` where they are inside it."""
    gone = abandoned(events)
    marks: dict[str, _Building] = {}
    titles: dict[str, str] = {}
    for index, event in enumerate(events):
        if index in gone:
            continue
        if isinstance(event, TurnStarted) and kept_turn(event):
            marks[event.turn_id] = _Building(event, len(marks) + 1)
        elif isinstance(event, ToolCallStarted) and event.turn_id in marks:
            titles[event.call_id] = event.title
        elif isinstance(event, ToolCallFinished) and (building := marks.get(event.turn_id)) is not None:
            if event.checkpoint is not None:
                title = titles.get(event.call_id, event.tool_name)
                building.steps.append(StepMark(event.call_id, title, event.checkpoint))
            changed = (*((event.diff.path,) if event.diff is not None else ()), *event.changed)
            building.files.update((_shown(Path(path), cwd), None) for path in changed)
        elif isinstance(event, TurnEnded) and (building := marks.get(event.turn_id)) is not None:
            building.ended = event.checkpoint
    return [building.mark() for building in marks.values()]


@dataclass
class _Building:
    started: TurnStarted
    number: int
    steps: list[StepMark] = field(default_factory=list)
    files: dict[str, None] = field(default_factory=dict)
    ended: int | None = None

    def mark(self) -> TurnMark:
        started = self.started
        return TurnMark(
            started.turn_id,
            self.number,
            started.prompt,
            started.checkpoint,
            tuple(self.steps),
            tuple(self.files),
            self.ended,
        )


def _shown(path: Path, cwd: Path) -> str:
    return path.relative_to(cwd).as_posix() if path.is_relative_to(cwd) else str(path)
