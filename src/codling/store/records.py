"""history.jsonl records: brain events and session facts as versioned, validated JSON objects, and back.

Every record has ``v`` (format version), ``ts`` (UTC, ISO 8601), ``session_id``, ``kind`` and, for records of
a turn, ``turn_id``. Each kind is a pydantic model; ``RECORD`` validates a line (or a dict) into one of them,
so a record is checked when written and again when read, and a record that is valid JSON but not a valid
record (a missing field, a status no version wrote, a wrong type) is refused as a whole. A record that stands
for an event is declared as such (``store/mirror.py``), which gives ``event_record`` and ``events()``. The tables
of docs/history-format.md are generated from these models and their fields' docstrings
(``python -m tests.history_format``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal, assert_never

from pydantic import BeforeValidator, ConfigDict, Field, TypeAdapter

from codling.brain.events import (
    CompactionReason,
    CompactionStarted,
    ContextCompacted,
    ContextWarning,
    Event,
    McpServerNotice,
    McpServersStarting,
    PlanUpdated,
    ProviderRetrying,
    RewindScope,
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
from codling.brain.prompt import describe_prompt
from codling.brain.thinking import ThoughtLevel
from codling.store.clock import now
from codling.store.mirror import PATH, Convert, Mirror, Mirrored, many, model_for, optional, part
from codling.store.parts import (
    LOCATIONS,
    AbsolutePath,
    DiffPart,
    InteractionPart,
    LocationPart,
    Part,
    PromptWire,
    RecapPart,
    StepPart,
    Timestamp,
    UsagePart,
    WindowPart,
    block_to_wire,
    id_or_none,
    omit_empty,
    omit_none,
    parse_time,
)
from codling.vocabulary import PermissionMode, StopReason, ToolKind

VERSION: Literal[1] = 1


# -- records -----------------------------------------------------------------------------------------------------
# A record that stands for an event declares it (``MIRROR``, see ``store/mirror.py``): its fields are the event's,
# under the same names unless ``convert`` says otherwise, so both directions come from the one declaration.


class _Record(Part):
    v: Literal[1] = VERSION
    """Format version (1)."""
    ts: Timestamp = Field(default_factory=now)
    """UTC time the record was written, ISO 8601 with milliseconds and ``Z``."""
    session_id: str
    """The session."""

    def events(self) -> list[Event]:
        """The brain events this record stands for (none for session facts)."""
        return []


class _EventRecord(_Record, Mirrored):
    ENVELOPE = frozenset({"v", "ts", "session_id", "kind"})

    def events(self) -> list[Event]:
        """The event this record stands for."""
        return [self.value()]


class _TurnRecord(_EventRecord):
    turn_id: str
    """The turn."""


class SessionRecord(_Record):
    """The first record: where the session works and how it started (never secrets). Always the first line."""

    kind: Literal["session"] = "session"
    cwd: AbsolutePath
    """The working directory (absolute)."""
    model: str = ""
    """``provider:model``."""
    mode: PermissionMode = "ask"
    """The permission mode."""
    additional_dirs: list[AbsolutePath] = Field(default_factory=list)
    """More workspace roots (absolute)."""
    parent: Annotated[str | None, BeforeValidator(id_or_none)] = None
    """The session this one was forked from (a value that is not a session id is read as null)."""


class SettingsRecord(_Record):
    """A change made during the session: any of its fields. The first ``turn_start`` is followed by a ``title``
    holding the first request (one line, at most 80 characters); once the first turn is over, the title special
    turn (ephemeral: it leaves no other record) may add one holding the model's short title."""

    kind: Literal["settings"] = "settings"
    mode: PermissionMode | None = Field(default=None, exclude_if=omit_none)
    """The permission mode."""
    model: str | None = Field(default=None, exclude_if=omit_none)
    """``provider:model``."""
    thinking: bool | None = Field(default=None, exclude_if=omit_none)
    """Whether a model that can think does."""
    thought_level: ThoughtLevel | None = Field(default=None, exclude_if=omit_none)
    """How hard it thinks."""
    title: str | None = Field(default=None, exclude_if=omit_none)
    """The session's title."""
    always: tuple[str, str] | None = Field(default=None, exclude_if=omit_none)
    """An "always" answer the user gave: what it allows, as ``[kind, what]`` (``["execute", "pytest"]``: every
    ``pytest`` command; ``["execute-exact", "rm -rf build"]``: that command; ``["edit", "*"]``: every edit;
    ``["mcp", "server.tool"]``). A restored or forked session starts with every one in force."""


class TurnStartRecord(_TurnRecord):
    """A user prompt was accepted."""

    MIRROR = Mirror(
        TurnStarted,
        convert={
            "prompt": many(Convert(write=block_to_wire, read=lambda wire: wire.block()), name="blocks"),
            "started_at": Convert(write=datetime.isoformat),
        },
        derived={
            "prompt": lambda record: describe_prompt(tuple(wire.block() for wire in record.prompt)),
            "started_at": lambda record: parse_time(record.started_at or record.ts),
        },
    )
    kind: Literal["turn_start"] = "turn_start"
    prompt: list[PromptWire] = Field(default_factory=list)
    """The prompt's content blocks in ACP wire format: ``text``; ``resource`` (an embedded resource, or a
    linked file as it was read for the model); ``resource_link`` (a link that could not be read: its
    ``description`` says why); ``image`` (kept whole, base64, so a reloaded session shows it; ``uri`` only when
    the client gave one)."""
    thinking: bool = False
    """The model was asked to think."""
    started_at: Timestamp | None = None
    """When the turn started (absent: ``ts``)."""
    checkpoint: int | None = Field(default=None, ge=1, exclude_if=omit_none)
    """The workspace's checkpoint before the turn (``checkpoints/log.jsonl`` in the session's folder; absent:
    none was taken)."""


class MessageRecord(_TurnRecord):
    """A segment of the assistant's reply (consecutive streamed deltas merged)."""

    MIRROR = Mirror(TextDelta)
    kind: Literal["message"] = "message"
    text: str
    """The text."""


class ThoughtRecord(_TurnRecord):
    """A segment of the model's visible reasoning."""

    MIRROR = Mirror(ThoughtDelta)
    kind: Literal["thought"] = "thought"
    text: str
    """The text."""


class ToolCallRecord(_TurnRecord):
    """The model called a tool."""

    MIRROR = Mirror(ToolCallStarted, convert={"locations": LOCATIONS})
    kind: Literal["tool_call"] = "tool_call"
    call_id: str
    """The call, as the model named it (its result has the same)."""
    tool_name: str
    """The tool."""
    title: str
    """As shown to the user."""
    tool_kind: ToolKind = "other"
    """ACP tool kind: ``read``, ``edit``, ``search``, ``execute``…"""
    raw_input: dict[str, Any] = Field(default_factory=dict)
    """The arguments."""
    locations: list[LocationPart] = Field(default_factory=list)
    """The files it concerns."""


class ToolResultRecord(_TurnRecord):
    """A tool call finished."""

    MIRROR = Mirror(
        ToolCallFinished,
        convert={"diff": optional(part(DiffPart)), "locations": LOCATIONS, "changed": many(PATH)},
        live_only=frozenset({"terminal_id", "shown"}),
    )
    kind: Literal["tool_result"] = "tool_result"
    call_id: str
    """The call it ends."""
    tool_name: str
    """The tool."""
    status: Literal["completed", "failed"]
    """How it ended."""
    text: str = ""
    """What the model was told."""
    diff: DiffPart | None = None
    """For edits."""
    locations: list[LocationPart] = Field(default_factory=list)
    """The files it concerned."""
    summary: str = ""
    """What later turns are told of the call."""
    changed: list[str] = Field(default_factory=list, exclude_if=omit_empty)
    """Files the call changed besides its diff's (a delegate's edits); only when there are some."""
    ended_by: Literal["rejected", "cancelled"] | None = Field(default=None, exclude_if=omit_empty)
    """The user ended the call: rejected it when asked, or cancelled the turn; only when so."""
    checkpoint: int | None = Field(default=None, ge=1, exclude_if=omit_none)
    """The workspace's checkpoint just before a call that may change files ran (absent: other calls)."""
    approved_by: str | None = Field(default=None, exclude_if=omit_none)
    """What let the call run without a question: the user's rule or "always" answer, in words (absent: it was
    asked, or the mode allows it)."""


class PlanRecord(_TurnRecord):
    """The model set its plan (``update_plan``: follows that call's ``tool_result``; a planner delegate's plan
    comes while its ``delegate`` call runs, before that call's ``tool_result``). Replay sends it as a ``plan``
    update; ``sessions show`` draws it as a checklist under the call that set it."""

    MIRROR = Mirror(PlanUpdated, convert={"steps": many(part(StepPart))})
    kind: Literal["plan"] = "plan"
    steps: list[StepPart] = Field(default_factory=list)
    """The whole plan."""


class CompactionRecord(_TurnRecord):
    """The history was compacted (in the turn that needed it, or a ``/compact`` turn). On restore the history
    becomes the kept messages plus the summary, exactly as live."""

    MIRROR = Mirror(ContextCompacted, convert={"kept_messages": many(name="kept_user_messages")})
    kind: Literal["compaction"] = "compaction"
    call_id: str
    """The id replay shows it under, as a tool call."""
    reason: CompactionReason = "threshold"
    """Why: the context passed the threshold, the provider said it overflowed, the user asked (``/compact``), or
    a turn's results outgrew the window mid-turn."""
    summary: str
    """Without the prefix."""
    kept_messages: list[str] = Field(default_factory=list)
    """The user messages kept verbatim, oldest first."""
    tokens_before: int = Field(default=0, ge=0)
    """The history's size before, in tokens."""
    tokens_after: int = Field(default=0, ge=0)
    """And after."""
    fallback: bool = False
    """The summary was built without the model."""
    skipped: bool = False
    """The summarizer was not asked (it kept failing)."""
    note: str = ""
    """What the user was told about this compaction, once."""

    def events(self) -> list[Event]:
        """The compaction's start (which has no record of its own), then its end."""
        return [CompactionStarted(self.turn_id, self.call_id, self.tokens_before, self.reason), self.value()]


class TurnEndRecord(_TurnRecord):
    """The last record of a turn that finished. ``error`` and ``summary`` are restored on load and resume and go
    into the next turn's prompt. On restore each ``turn_end`` sets the window the next turns use: its ``window``
    if it names the session's model, else the catalog's."""

    MIRROR = Mirror(
        TurnEnded,
        convert={
            "usage": part(UsagePart),
            "summary": optional(part(RecapPart)),
            "window": optional(part(WindowPart)),
        },
        given=frozenset({"error"}),
        derived={"error": lambda record: record.error is not None},
    )
    kind: Literal["turn_end"] = "turn_end"
    stop_reason: StopReason
    """Why the turn ended (``max_cost``: its spend passed ``codling run --max-cost``)."""
    usage: UsagePart = Field(default_factory=UsagePart)
    """What the turn spent."""
    error: str | None = None
    """The error reply shown to the user (the turn's ``TurnFailed`` message), or null."""
    summary: RecapPart | None = None
    """The turn's recap (``brain/context/ledger.py``; null for a slash-command turn)."""
    context_tokens: int = Field(default=0, ge=0)
    """The input tokens the provider reported for the turn's first request, carried past the turn."""
    cost: float | None = Field(default=None, ge=0)
    """US dollars at list price, or null."""
    window: WindowPart | None = Field(default=None, exclude_if=omit_none)
    """Only when the session learned one: the window the model's server revealed, smaller than the catalog's and
    in use when the turn ended (absent: the catalog's, so a switch of model shows in the next ``turn_end``)."""
    context: str = Field(default="", exclude_if=omit_empty)
    """Only when the turn's request carried one: the ``<session-context>`` block it sent before the prompt; on
    restore the turn's prompt gets it back (absent: the prompt alone)."""
    checkpoint: int | None = Field(default=None, ge=1, exclude_if=omit_none)
    """The workspace's checkpoint as the turn ended (absent: none was taken)."""

    def events(self) -> list[Event]:
        """The turn's failure (its ``error``), if it failed, then its end."""
        ended: Event = self.value()
        return [TurnFailed(self.turn_id, self.error), ended] if self.error is not None else [ended]


class SpecialRecord(_EventRecord):
    """A special turn's result entered the history (between turns: no turn id). On restore the interactions are
    appended, or replace the history (its first ``replaced`` entries) for ``replace-above``. Compaction runs
    through the summarize special turn but is recorded as ``compaction``."""

    MIRROR = Mirror(SpecialTurnPersisted, convert={"interactions": many(part(InteractionPart))})
    kind: Literal["special"] = "special"
    turn_type: str = "special"
    """``greeting``…"""
    persistence: Literal["persist-result", "persist-all", "replace-above"] = "persist-result"
    """How its result entered the history: appended (the result, or all of it), or replacing it."""
    interactions: list[InteractionPart] = Field(default_factory=list)
    """What was kept after filtering."""
    metadata: dict[str, Any] = Field(default_factory=dict)
    """What the special turn returned beside its interactions (JSON)."""
    replaced: int | None = Field(default=None, ge=0, exclude_if=omit_none)
    """``replace-above`` only: how many of the history's first entries the result replaced (absent: all)."""
    special_id: str = Field(default="", exclude_if=omit_empty)
    """Tells this record from any other; replay derives its tool call ids from it."""


class RewindRecord(_TurnRecord):
    """The user rewound the session (``/undo``, ``/rewind``, ``codling sessions rewind``): ``turn_id`` is the
    command's turn. With the conversation (``scope`` ``both`` or ``conversation``), the turn ``target_turn_id``
    and every later one are abandoned: ``sessions show`` marks them so, and a restored session's model is sent
    the conversation as it stood before them (what they spent still counts). Nothing is removed from the file."""

    MIRROR = Mirror(Rewound, convert={"files": many()})
    kind: Literal["rewind"] = "rewind"
    target_turn_id: str
    """The first turn undone."""
    turn_number: int = Field(ge=1)
    """Its number when it ran."""
    scope: RewindScope = "both"
    """What was put back: ``both``, ``code`` or ``conversation``."""
    checkpoint: int | None = Field(default=None, ge=1, exclude_if=omit_none)
    """The checkpoint the workspace was put back to (absent: the code was not)."""
    saved: int | None = Field(default=None, ge=1, exclude_if=omit_none)
    """The checkpoint of the workspace just before the rewind (absent: the code was not put back)."""
    files: list[str] = Field(default_factory=list, exclude_if=omit_empty)
    """The files the rewind changed, relative to the working directory (a conversation rewind: those that keep
    what the abandoned turns changed)."""
    step: int | None = Field(default=None, ge=1, exclude_if=omit_none)
    """The step of the turn the code went back to before (absent: the whole turn)."""


Record = Annotated[
    SessionRecord
    | SettingsRecord
    | TurnStartRecord
    | MessageRecord
    | ThoughtRecord
    | ToolCallRecord
    | ToolResultRecord
    | PlanRecord
    | CompactionRecord
    | TurnEndRecord
    | SpecialRecord
    | RewindRecord,
    Field(discriminator="kind"),
]
"""Any record, told apart by its ``kind``."""

RECORD: TypeAdapter[Record] = TypeAdapter(Record, config=ConfigDict(defer_build=True))
"""Validates a record (``validate_json`` for a line, ``validate_python`` for a dict). Built on first use, like
every part (``Part`` defers its build), or by :func:`build_records`."""


def build_records() -> None:
    """Build the validators and serializers of ``RECORD`` and of every part and record model now.

    They are deferred so that opening a session, which imports this module, does not pay for them (about half
    of a first ``session/new``'s CPU); the warm-up thread calls this before the first turn records anything.
    """
    pending: list[type[Part]] = [Part]
    while pending:
        model = pending.pop()
        model.model_rebuild()  # a no-op once built
        pending.extend(model.__subclasses__())
    RECORD.rebuild()


def dump_record(record: Record) -> dict[str, Any]:
    """A record as the JSON object written to the file."""
    return record.model_dump(mode="json")


# -- events → records ------------------------------------------------------------------------------------------


def event_record(event: Event, session_id: str, error: str | None = None) -> Record | None:
    """The record for one event (text deltas arrive here already merged), or None for events that have no
    record of their own. ``error`` is the message of the turn's ``TurnFailed``, kept in its ``turn_end``."""
    match event:
        case TurnEnded():
            return model_for(TurnEndRecord, event, session_id=session_id, error=error)
        case TurnStarted():
            return model_for(TurnStartRecord, event, session_id=session_id)
        case TextDelta():
            return model_for(MessageRecord, event, session_id=session_id)
        case ThoughtDelta():
            return model_for(ThoughtRecord, event, session_id=session_id)
        case ToolCallStarted():
            return model_for(ToolCallRecord, event, session_id=session_id)
        case ToolCallFinished():
            return model_for(ToolResultRecord, event, session_id=session_id)
        case PlanUpdated():
            return model_for(PlanRecord, event, session_id=session_id)
        case ContextCompacted():
            return model_for(CompactionRecord, event, session_id=session_id)
        case SpecialTurnPersisted():
            return model_for(SpecialRecord, event, session_id=session_id)
        case Rewound():
            return model_for(RewindRecord, event, session_id=session_id)
        case SettingsChanged(model=model, mode=mode):  # a slash command's, recorded as a client's change is
            return SettingsRecord(session_id=session_id, model=model, mode=mode)
        case TurnFailed():  # its message is the ``error`` of the turn's end record
            return None
        case CompactionStarted():  # the ``compaction`` record stands for both
            return None
        case UsageUpdated():  # derived again on load
            return None
        case SessionTitled():  # the recorder writes a ``settings`` record with the title
            return None
        case ToolCallTerminal() | ToolCallRunning() | ToolCallNote():
            # A terminal id means nothing once the client is gone; a delegate's progress is in its result.
            return None
        case ProviderRetrying() | ContextWarning() | McpServersStarting() | McpServerNotice():
            return None  # live only: a wait, or a notice said once
        case _:
            assert_never(event)
