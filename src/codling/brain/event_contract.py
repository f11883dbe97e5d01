"""The event contract: for each kind of brain event, whether history.jsonl keeps it, whether an ACP client is
sent it, whether the terminal draws it, and which folds act on it.

The table is the truth; ``tests/unit/test_event_contract.py`` holds it to the code: every member of the
``Event`` union has a row; a sample of each kind gets a record from ``store.records.event_record`` iff its row
says ``history="record"``, updates from ``acp.translate.translate`` iff ``translated``, and output from the
terminal renderer iff ``drawn``; and each fold's ``match`` acts on exactly the kinds the rows name it for and
ends in ``assert_never``, so a kind added to the union makes mypy name every fold it must reach.

A fold (``FOLDS``) is a consumer that acts on an event by its kind, over the whole union: its dispatch is one
``match event`` whose kinds it does not act on are listed in one ignoring case, and whose last case is
``case _: assert_never(event)``. Not folds: consumers generic over the fields of every kind (the redactor,
``--json``'s lines), routes that hand every kind they do not treat themselves to a fold (``translate.ToolCards``,
``acp/replay.py``: to ``translate``) and queries for the kinds a turn always ends with (``TurnEnded``,
``UsageUpdated``: ``ConversationSession.run``, the prompt's answer in ``acp/server.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from codling.brain.events import (
    CompactionStarted,
    ContextCompacted,
    ContextWarning,
    Event,
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

History = Literal["record", "in_record", "settings", "live"]
"""What history.jsonl keeps of an event: a record of its own (``store.records.event_record`` makes it, and
reading the history gives the event back); part of another kind's record (read back from it); a ``settings``
record (a title, a model or mode: ``event_record`` makes it for a ``SettingsChanged``, the recorder writes it
for a title; read back as the session's, not as an event); or nothing
(live only: it means nothing once the process is gone, or is derived again on load)."""

Fold = Literal[
    "translate",
    "notices",
    "render",
    "last_message",
    "transcript",
    "notify",
    "recorder",
    "records",
    "restore",
    "follow",
    "turn_log",
    "segments",
    "ledger",
    "delegates",
    "interactions",
]
"""The consumers that act on events by their kind (see ``FOLDS`` for where each lives)."""

FOLDS: dict[Fold, str] = {
    "translate": "codling.acp.translate:translate",
    "notices": "codling.acp.notices",
    "render": "codling.cli.render:TerminalRenderer",
    "last_message": "codling.cli.script_output:LastMessage",
    "transcript": "codling.cli.transcript:_split_turns",
    "notify": "codling.cli.notify:Notifier",
    "recorder": "codling.store.history:HistoryRecorder",
    "records": "codling.store.records:event_record",
    "restore": "codling.brain.restore:restore_event",
    "follow": "codling.brain.restore:follow",
    "turn_log": "codling.brain.turns:TurnLog",
    "segments": "codling.brain.reasoning:SegmentSplitter",
    "ledger": "codling.brain.context.ledger:build_turn_recap",
    "delegates": "codling.brain.delegates:SessionDelegator",
    "interactions": "codling.brain.special_history:interactions_of",
}
"""Where each fold's ``match event`` lives: a module, or a function or class of it."""


@dataclass(frozen=True)
class EventRow:
    """One event kind's row of the contract."""

    history: History
    translated: bool
    """``acp.translate.translate`` makes ``session/update``s of it (live; a replay translates what is recorded)."""
    drawn: bool
    """The terminal renderer writes something for it (a spinner or its label alone does not count)."""
    folds: frozenset[Fold]
    """The folds that act on it (not those that list it as ignored)."""
    note: str = ""
    """What the flags leave unsaid: where it goes instead, or when it is not drawn or sent."""

    @property
    def recorded(self) -> bool:
        """Whether history.jsonl has a record of its own for it."""
        return self.history == "record"

    @property
    def live_only(self) -> bool:
        """Whether history.jsonl keeps nothing of it."""
        return self.history == "live"


def _row(history: History, *, translated: bool, drawn: bool, folds: tuple[Fold, ...], note: str = "") -> EventRow:
    return EventRow(history, translated, drawn, frozenset(folds), note)


CONTRACT: dict[type[Event], EventRow] = {
    TurnStarted: _row(
        "record",
        translated=False,
        drawn=False,
        folds=("render", "last_message", "transcript", "notify", "recorder", "records", "restore", "ledger"),
        note="ACP: the client sent the prompt itself (a replay sends it as user chunks); the terminal starts the "
        "spinner; the recorder names an untitled session after it.",
    ),
    TextDelta: _row(
        "record",
        translated=True,
        drawn=True,
        folds=(
            "translate",
            "render",
            "last_message",
            "transcript",
            "recorder",
            "records",
            "turn_log",
            "segments",
            "delegates",
            "interactions",
        ),
        note="Recorded merged, one record per segment.",
    ),
    ThoughtDelta: _row(
        "record",
        translated=True,
        drawn=True,
        folds=("translate", "render", "transcript", "recorder", "records", "segments", "interactions"),
        note="Recorded merged, one record per segment; a thinking turn draws it collapsed into its block's line.",
    ),
    ToolCallStarted: _row(
        "record",
        translated=True,
        drawn=True,
        folds=(
            "translate",
            "render",
            "last_message",
            "transcript",
            "recorder",
            "records",
            "turn_log",
            "segments",
            "ledger",
            "delegates",
            "interactions",
        ),
        note="Not sent for the plan tool (its plan is); live and interactive, the spinner's label until it ends.",
    ),
    ToolCallTerminal: _row(
        "live",
        translated=True,
        drawn=False,
        folds=("translate",),
        note="A terminal id means nothing once the client is gone; the terminal draws the call's result.",
    ),
    ToolCallNote: _row(
        "live",
        translated=True,
        drawn=False,
        folds=("translate",),
        note="A delegate's steps so far; its result is recorded.",
    ),
    ToolCallRunning: _row("live", translated=True, drawn=False, folds=("translate",)),
    ToolCallFinished: _row(
        "record",
        translated=True,
        drawn=True,
        folds=(
            "translate",
            "render",
            "transcript",
            "recorder",
            "records",
            "restore",
            "follow",
            "turn_log",
            "segments",
            "ledger",
            "delegates",
            "interactions",
        ),
        note="``terminal_id`` and ``shown`` are live only.",
    ),
    PlanUpdated: _row(
        "record",
        translated=True,
        drawn=True,
        folds=(
            "translate",
            "render",
            "transcript",
            "recorder",
            "records",
            "restore",
            "follow",
            "ledger",
            "delegates",
        ),
    ),
    CompactionStarted: _row(
        "in_record",
        translated=True,
        drawn=False,
        folds=("translate", "notices", "render"),
        note="Read back from the ``compaction`` record; the terminal shows the spinner until it ends.",
    ),
    ContextCompacted: _row(
        "record",
        translated=True,
        drawn=True,
        folds=("translate", "notices", "render", "recorder", "records", "restore"),
    ),
    ProviderRetrying: _row(
        "live",
        translated=True,
        drawn=True,
        folds=("translate", "notices", "render"),
        note="A notice where the client presents them; the terminal draws the wait only, on stderr.",
    ),
    ContextWarning: _row(
        "live",
        translated=True,
        drawn=True,
        folds=("translate", "notices", "render"),
        note="A notice where the client presents them.",
    ),
    McpServersStarting: _row(
        "live",
        translated=True,
        drawn=True,
        folds=("translate", "render"),
        note="The terminal draws the wait's start only.",
    ),
    McpServerNotice: _row(
        "live",
        translated=True,
        drawn=True,
        folds=("translate", "notices", "render"),
        note="A server's stderr may hold anything: never recorded. A notice where the client presents them.",
    ),
    SettingsChanged: _row(
        "settings",
        translated=False,
        drawn=False,
        folds=("recorder", "records"),
        note="ACP: the agent sends the pickers' new state (acp/agent_core.py), which translate cannot know.",
    ),
    UsageUpdated: _row(
        "live",
        translated=True,
        drawn=False,
        folds=("translate",),
        note="Derived again when a session is loaded.",
    ),
    SpecialTurnPersisted: _row(
        "record",
        translated=True,
        drawn=False,
        folds=("translate", "transcript", "recorder", "records", "restore"),
        note="Sent (and shown by sessions show) unless it replaced the history: compaction shows its own.",
    ),
    SessionTitled: _row(
        "settings",
        translated=False,
        drawn=False,
        folds=("recorder",),
        note="ACP: session_info_update, from the recorder's title hook.",
    ),
    TurnFailed: _row(
        "in_record",
        translated=False,
        drawn=True,
        folds=("render", "transcript", "recorder", "turn_log", "ledger", "delegates"),
        note="Kept as the turn_end record's ``error``. ACP: the prompt's JSON-RPC error says it live, a replay "
        "shows it as text.",
    ),
    TurnEnded: _row(
        "record",
        translated=False,
        drawn=True,
        folds=("render", "transcript", "notify", "recorder", "records", "restore", "turn_log", "delegates"),
        note="ACP: session/prompt's response; the terminal draws a stop note unless the turn simply ended.",
    ),
    Rewound: _row(
        "record",
        translated=False,
        drawn=False,
        folds=("transcript", "recorder", "records", "restore", "follow"),
        note="The command that rewound says what it did in its reply. Restore skips what it abandoned before "
        "folding (brain/branches.py); follow keeps its note for the context block when it rewound one side "
        "only; sessions show marks the abandoned turns.",
    ),
}
"""Every event kind's row."""
