"""history.jsonl records: brain events and session facts as versioned, validated JSON objects, and back.

Every record has ``v`` (format version), ``ts`` (UTC, ISO 8601), ``session_id``, ``kind`` and, for records of
a turn, ``turn_id``. Each kind is a pydantic model; ``RECORD`` validates a line (or a dict) into one of them,
so a record is checked when written and again when read, and a record that is valid JSON but not a valid
record (a missing field, a status no version wrote, a wrong type) is refused as a whole. The format is
documented in docs/history-format.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, ConfigDict, Field, TypeAdapter

from codling.brain.events import (
    CompactionReason,
    CompactionStarted,
    ContextCompacted,
    Event,
    PlanUpdated,
    SpecialTurnPersisted,
    TextDelta,
    ThoughtDelta,
    ToolCallFinished,
    ToolCallStarted,
    TurnEnded,
    TurnFailed,
    TurnStarted,
    Usage,
)
from codling.brain.interactions import Interaction
from codling.brain.prompt import prompt_summary
from codling.brain.thinking import ThoughtLevel
from codling.store.clock import now
from codling.store.parts import (
    AbsolutePath,
    DiffPart,
    InteractionPart,
    LocationPart,
    Part,
    PromptWire,
    StepPart,
    SummaryPart,
    Timestamp,
    UsagePart,
    WindowPart,
    block_to_wire,
    id_or_none,
    locations_of,
    omit_empty,
    omit_none,
    parse_time,
)
from codling.vocabulary import FileDiff, PermissionMode, PlanStep, StopReason, ToolKind

VERSION: Literal[1] = 1


# -- records -----------------------------------------------------------------------------------------------------


class _Record(Part):
    v: Literal[1] = VERSION
    ts: Timestamp = Field(default_factory=now)
    session_id: str

    def events(self) -> list[Event]:
        """The brain events this record stands for (none for session facts)."""
        return []


class _TurnRecord(_Record):
    turn_id: str


class SessionRecord(_Record):
    """The first record: where the session works and how it started (never secrets)."""

    kind: Literal["session"] = "session"
    cwd: AbsolutePath
    model: str = ""
    mode: PermissionMode = "ask"
    additional_dirs: list[AbsolutePath] = Field(default_factory=list)
    parent: Annotated[str | None, BeforeValidator(id_or_none)] = None


class SettingsRecord(_Record):
    """A change of mode, model, thinking choice or title."""

    kind: Literal["settings"] = "settings"
    mode: PermissionMode | None = Field(default=None, exclude_if=omit_none)
    model: str | None = Field(default=None, exclude_if=omit_none)
    thinking: bool | None = Field(default=None, exclude_if=omit_none)
    """Whether a model that can think does."""
    thought_level: ThoughtLevel | None = Field(default=None, exclude_if=omit_none)
    """How hard it thinks."""
    title: str | None = Field(default=None, exclude_if=omit_none)


class TurnStartRecord(_TurnRecord):
    """A user prompt was accepted."""

    kind: Literal["turn_start"] = "turn_start"
    prompt: list[PromptWire] = Field(default_factory=list)
    thinking: bool = False
    started_at: Timestamp | None = None

    def events(self) -> list[Event]:
        blocks = tuple(wire.block() for wire in self.prompt)
        started = parse_time(self.started_at or self.ts)
        return [TurnStarted(self.turn_id, prompt_summary(blocks), self.thinking, started, blocks)]


class MessageRecord(_TurnRecord):
    """A segment of the reply."""

    kind: Literal["message"] = "message"
    text: str

    def events(self) -> list[Event]:
        return [TextDelta(self.turn_id, self.text)]


class ThoughtRecord(_TurnRecord):
    """A segment of the model's visible reasoning."""

    kind: Literal["thought"] = "thought"
    text: str

    def events(self) -> list[Event]:
        return [ThoughtDelta(self.turn_id, self.text)]


class ToolCallRecord(_TurnRecord):
    """The model called a tool."""

    kind: Literal["tool_call"] = "tool_call"
    call_id: str
    tool_name: str
    title: str
    tool_kind: ToolKind = "other"
    raw_input: dict[str, Any] = Field(default_factory=dict)
    locations: list[LocationPart] = Field(default_factory=list)

    def events(self) -> list[Event]:
        return [
            ToolCallStarted(
                self.turn_id,
                self.call_id,
                self.tool_name,
                self.title,
                self.tool_kind,
                self.raw_input,
                locations_of(self.locations),
            )
        ]


class ToolResultRecord(_TurnRecord):
    """A tool call finished."""

    kind: Literal["tool_result"] = "tool_result"
    call_id: str
    tool_name: str
    status: Literal["completed", "failed"]
    text: str = ""
    diff: DiffPart | None = None
    locations: list[LocationPart] = Field(default_factory=list)
    summary: str = ""
    changed: list[str] = Field(default_factory=list, exclude_if=omit_empty)
    ended_by: Literal["rejected", "cancelled"] | None = Field(default=None, exclude_if=omit_empty)

    def events(self) -> list[Event]:
        diff = self.diff
        return [
            ToolCallFinished(
                self.turn_id,
                self.call_id,
                self.tool_name,
                self.status,
                self.text,
                FileDiff(Path(diff.path), diff.old_text, diff.new_text) if diff else None,
                locations_of(self.locations),
                self.summary,
                changed=tuple(Path(p) for p in self.changed),
                ended_by=self.ended_by,
            )
        ]


class PlanRecord(_TurnRecord):
    """The model set its plan (the whole list)."""

    kind: Literal["plan"] = "plan"
    steps: list[StepPart] = Field(default_factory=list)

    def events(self) -> list[Event]:
        return [PlanUpdated(self.turn_id, tuple(PlanStep(s.step, s.status, s.priority) for s in self.steps))]


class CompactionRecord(_TurnRecord):
    """The history was compacted."""

    kind: Literal["compaction"] = "compaction"
    call_id: str
    reason: CompactionReason = "threshold"
    summary: str
    kept_messages: list[str] = Field(default_factory=list)
    tokens_before: int = Field(default=0, ge=0)
    tokens_after: int = Field(default=0, ge=0)
    fallback: bool = False
    skipped: bool = False
    note: str = ""

    def events(self) -> list[Event]:
        return [
            CompactionStarted(self.turn_id, self.call_id, self.tokens_before, self.reason),
            ContextCompacted(
                self.turn_id,
                self.call_id,
                self.summary,
                tuple(self.kept_messages),
                self.tokens_before,
                self.tokens_after,
                self.fallback,
                self.reason,
                self.skipped,
                self.note,
            ),
        ]


class TurnEndRecord(_TurnRecord):
    """The last record of a turn that finished."""

    kind: Literal["turn_end"] = "turn_end"
    stop_reason: StopReason
    usage: UsagePart = Field(default_factory=UsagePart)
    error: str | None = None
    summary: SummaryPart | None = None
    context_tokens: int = Field(default=0, ge=0)
    cost: float | None = Field(default=None, ge=0)
    window: WindowPart | None = Field(default=None, exclude_if=omit_none)
    context: str = Field(default="", exclude_if=omit_empty)

    def events(self) -> list[Event]:
        usage = Usage(
            self.usage.input_tokens,
            self.usage.output_tokens,
            self.usage.requests,
            self.usage.cache_read_tokens,
            self.usage.cache_write_tokens,
            self.usage.cache_write_1h_tokens,
        )
        summary = self.summary.summary() if self.summary is not None else None
        ended = TurnEnded(
            self.turn_id,
            self.stop_reason,
            usage,
            error=self.error is not None,
            summary=summary,
            context_tokens=self.context_tokens,
            cost=self.cost,
            window=self.window.window() if self.window is not None else None,
            context=self.context,
        )
        return [TurnFailed(self.turn_id, self.error), ended] if self.error is not None else [ended]


class SpecialRecord(_Record):
    """A special turn's result entered the history (between turns: no turn id)."""

    kind: Literal["special"] = "special"
    turn_type: str = "special"
    persistence: Literal["persist-result", "persist-all", "replace-above"] = "persist-result"
    interactions: list[InteractionPart] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    replaced: int | None = Field(default=None, ge=0, exclude_if=omit_none)
    special_id: str = Field(default="", exclude_if=omit_empty)

    def events(self) -> list[Event]:
        interactions = tuple(Interaction(i.kind, i.text) for i in self.interactions)
        return [
            SpecialTurnPersisted(
                self.turn_type, self.persistence, interactions, self.metadata, self.replaced, self.special_id
            )
        ]


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
    | SpecialRecord,
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
    record of their own: ``TurnFailed`` (its message is the ``error`` of the turn's end record),
    ``CompactionStarted`` (the ``compaction`` record stands for both), ``UsageUpdated`` (derived again on
    load), ``SessionTitled`` (the recorder writes a ``settings`` record), ``ToolCallTerminal`` (a terminal id
    means nothing once the client is gone; nor is ``terminal_id`` kept) and ``ToolCallNote`` (a delegate's
    progress; its result is recorded)."""
    sid = session_id
    match event:
        case TurnStarted(turn_id=turn, blocks=blocks, thinking=thinking, started_at=started):
            prompt = [block_to_wire(b) for b in blocks]
            return TurnStartRecord(
                session_id=sid, turn_id=turn, prompt=prompt, thinking=thinking, started_at=started.isoformat()
            )
        case TextDelta(turn_id=turn, text=text):
            return MessageRecord(session_id=sid, turn_id=turn, text=text)
        case ThoughtDelta(turn_id=turn, text=text):
            return ThoughtRecord(session_id=sid, turn_id=turn, text=text)
        case ToolCallStarted():
            return ToolCallRecord(
                session_id=sid,
                turn_id=event.turn_id,
                call_id=event.call_id,
                tool_name=event.tool_name,
                title=event.title,
                tool_kind=event.tool_kind,
                raw_input=event.raw_input,
                locations=LocationPart.of(event.locations),
            )
        case ToolCallFinished(diff=diff):
            return ToolResultRecord(
                session_id=sid,
                turn_id=event.turn_id,
                call_id=event.call_id,
                tool_name=event.tool_name,
                status=event.status,
                text=event.text,
                diff=DiffPart(path=str(diff.path), old_text=diff.old_text, new_text=diff.new_text) if diff else None,
                locations=LocationPart.of(event.locations),
                summary=event.summary,
                changed=[str(p) for p in event.changed],
                ended_by=event.ended_by,
            )
        case SpecialTurnPersisted():
            return SpecialRecord(
                session_id=sid,
                turn_type=event.turn_type,
                persistence=event.persistence,
                interactions=[InteractionPart(kind=i.kind, text=i.text) for i in event.interactions],
                metadata=event.metadata,
                replaced=event.replaced,
                special_id=event.special_id,
            )
        case ContextCompacted():
            return CompactionRecord(
                session_id=sid,
                turn_id=event.turn_id,
                call_id=event.call_id,
                reason=event.reason,
                summary=event.summary,
                kept_messages=list(event.kept_user_messages),
                tokens_before=event.tokens_before,
                tokens_after=event.tokens_after,
                fallback=event.fallback,
                skipped=event.skipped,
                note=event.note,
            )
        case PlanUpdated(turn_id=turn, steps=steps):
            parts = [StepPart(step=s.step, status=s.status, priority=s.priority) for s in steps]
            return PlanRecord(session_id=sid, turn_id=turn, steps=parts)
        case TurnEnded(turn_id=turn, usage=usage, summary=summary):
            return TurnEndRecord(
                session_id=sid,
                turn_id=turn,
                stop_reason=event.stop_reason,
                usage=UsagePart(
                    input_tokens=usage.input_tokens,
                    output_tokens=usage.output_tokens,
                    requests=usage.requests,
                    cache_read_tokens=usage.cache_read_tokens,
                    cache_write_tokens=usage.cache_write_tokens,
                    cache_write_1h_tokens=usage.cache_write_1h_tokens,
                ),
                error=error,
                summary=SummaryPart.of(summary) if summary is not None else None,
                context_tokens=event.context_tokens,
                cost=event.cost,
                window=WindowPart.of(event.window) if event.window is not None else None,
                context=event.context,
            )
    return None
