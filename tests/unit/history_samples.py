"""One event of every recorded kind with every field away from its default, for the history mapping's tests."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from codling.brain.context.ledger_entries import TurnRecap, TurnStep
from codling.brain.context.window import LearnedWindow
from codling.brain.events import (
    ContextCompacted,
    Event,
    PlanUpdated,
    Rewound,
    SpecialTurnPersisted,
    TextDelta,
    ThoughtDelta,
    ToolCallFinished,
    ToolCallStarted,
    TurnEnded,
    TurnStarted,
    Usage,
)
from codling.brain.interactions import Interaction
from codling.brain.prompt import ImageBlock, ResourceBlock, TextBlock
from codling.vocabulary import FileDiff, Location, PlanStep

TURN = "turn-1"

SUMMARY = TurnRecap(
    turn_number=3,
    request="rename greet",
    steps=(TurnStep("Edit app.py", "done", (Path("/w/app.py"),), "+1 -1"),),
    files_changed=(Path("/w/app.py"),),
    commands=("`pytest -q` → exit 0",),
    reply="Renamed.",
    error="it broke",
    open_plan=("run the tests",),
    goal="rename greet",
)

SAMPLES: tuple[Event, ...] = (
    TurnStarted(
        TURN,
        "rename greet @a.png @b.py @c.py",
        True,
        datetime(2026, 11, 22, 10, 0, 1, 199000, tzinfo=UTC),
        (
            TextBlock("rename greet"),
            ImageBlock("aGk=", "image/png", "file:///w/a.png"),
            ResourceBlock("file:///w/b.py", text="print()"),
            ResourceBlock("file:///w/c.py", note="binary"),
        ),
        checkpoint=2,
    ),
    TextDelta(TURN, "Renamed."),
    ThoughtDelta(TURN, "Let me look."),
    ToolCallStarted(
        TURN, "call_1", "edit_file", "Edit app.py", "edit", {"path": "app.py"}, (Location(Path("/w/app.py"), 4),)
    ),
    ToolCallFinished(
        TURN,
        "call_1",
        "edit_file",
        "failed",
        "Edited app.py",
        FileDiff(Path("/w/app.py"), "def greet", "def welcome"),
        (Location(Path("/w/app.py"), 1), Location(Path("/w/b.py"))),
        "edited app.py (+1 -1)",
        changed=(Path("/w/c.py"),),
        ended_by="rejected",
        checkpoint=3,
        approved_by="every `pytest` command",
    ),
    PlanUpdated(TURN, (PlanStep("read", "completed", "high"), PlanStep("edit", "in_progress", "low"))),
    ContextCompacted(
        TURN, "compact-1", "the summary", ("first", "second"), 9000, 1200, True, "overflow", True, "a note"
    ),
    TurnEnded(
        TURN,
        "max_tokens",
        Usage(1200, 80, 2, 100, 50, 25),
        error=True,
        summary=SUMMARY,
        context_tokens=1100,
        cost=0.25,
        window=LearnedWindow("openai:gpt-x", 64000),
        context="<session-context>today</session-context>",
        checkpoint=4,
    ),
    SpecialTurnPersisted(
        "greeting",
        "replace-above",
        (Interaction("assistant", "hello"), Interaction("summary", "so far")),
        {"source": "test"},
        2,
        "special-1",
    ),
    Rewound("turn-2", TURN, 3, "code", 2, 5, ("app.py", "src/b.py"), 2),
)
"""What event_record gets (the turn's error, for ``TurnEnded``, is the ``error`` argument)."""
