"""history.jsonl records: brain events and session facts as versioned, validated JSON objects, and back.

Every record has ``v`` (format version), ``ts`` (UTC, ISO 8601), ``session_id``, ``kind`` and, for records of
a turn, ``turn_id``. Each kind is a pydantic model; ``RECORD`` validates a line (or a dict) into one of them,
so a record is checked when written and again when read, and a record that is valid JSON but not a valid
record (a missing field, a status no version wrote, a wrong type) is refused as a whole. The format is
documented in docs/history-format.md.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, TypeAdapter

from codling.brain.events import (
    CompactionReason,
    CompactionStarted,
    ContextCompacted,
    Event,
    PlanUpdated,
    SpecialTurnPersisted,
    StopReason,
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
from codling.brain.prompt import ImageBlock, PromptBlock, ResourceBlock, TextBlock, prompt_summary
from codling.brain.summaries import TurnExecutionSummary, TurnStep
from codling.config import PermissionMode
from codling.store.ids import is_session_id
from codling.tools.base import PlanStep
from codling.tools.ports import FileDiff, Location, PlanPriority, PlanStatus, ToolKind

VERSION: Literal[1] = 1


def now() -> str:
    """The current UTC time as written in records."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_time(value: str) -> datetime:
    """A record timestamp as an aware datetime."""
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def _a_time(value: str) -> str:
    parse_time(value)  # a ValueError here makes the record invalid
    return value


def _absolute(value: str) -> str:
    if not Path(value).is_absolute():
        raise ValueError(f"{value!r} is not an absolute path")
    return value


def _id_or_none(value: object) -> object:
    # A parent that is not a session id is dropped rather than followed anywhere.
    return value if is_session_id(value) else None


Timestamp = Annotated[str, AfterValidator(_a_time)]
AbsolutePath = Annotated[str, AfterValidator(_absolute)]


def _omit_none(value: object) -> bool:
    return value is None


def _omit_empty(value: object) -> bool:
    return not value


class _Part(BaseModel):
    """A part of a record: strict types (no coercion), unknown fields ignored (a later version may add some)."""

    model_config = ConfigDict(strict=True, frozen=True, validate_by_name=True, serialize_by_alias=True)


# -- prompt blocks in ACP wire format --------------------------------------------------------------------------


class TextWire(_Part):
    """Text the user typed."""

    type: Literal["text"] = "text"
    text: str

    def block(self) -> PromptBlock:
        return TextBlock(self.text)


class ImageWire(_Part):
    """An attached image, kept whole (base64)."""

    type: Literal["image"] = "image"
    mime_type: str = Field(alias="mimeType")
    data: str
    uri: str | None = Field(default=None, exclude_if=_omit_none)

    def block(self) -> PromptBlock:
        return ImageBlock(self.data, self.mime_type, self.uri)


class EmbeddedText(_Part):
    """An embedded text resource's content."""

    uri: str
    text: str


class ResourceWire(_Part):
    """An embedded resource, or a linked file as it was read for the model."""

    type: Literal["resource"] = "resource"
    resource: EmbeddedText

    def block(self) -> PromptBlock:
        return ResourceBlock(self.resource.uri, text=self.resource.text)


class LinkWire(_Part):
    """A link that could not be read; ``description`` says why."""

    type: Literal["resource_link"] = "resource_link"
    uri: str
    name: str = ""
    description: str | None = Field(default=None, exclude_if=_omit_none)

    def block(self) -> PromptBlock:
        return ResourceBlock(self.uri, note=self.description)


PromptWire = Annotated[TextWire | ImageWire | ResourceWire | LinkWire, Field(discriminator="type")]


def block_to_wire(block: PromptBlock) -> PromptWire:
    """A prompt block as an ACP content block: text, image, embedded text resource, or resource link."""
    if isinstance(block, TextBlock):
        return TextWire(text=block.text)
    if isinstance(block, ImageBlock):
        return ImageWire(mimeType=block.mime_type, data=block.data, uri=block.uri)
    if block.text is not None:
        return ResourceWire(resource=EmbeddedText(uri=block.uri, text=block.text))
    return LinkWire(uri=block.uri, name=block.name, description=block.note)


# -- the parts of records ----------------------------------------------------------------------------------------


class LocationPart(_Part):
    """A file (absolute path) and optionally a line."""

    path: str
    line: int | None = None

    @classmethod
    def of(cls, items: tuple[Location, ...]) -> list[LocationPart]:
        return [cls(path=str(loc.path), line=loc.line) for loc in items]

    def location(self) -> Location:
        return Location(Path(self.path), self.line)


def _locations(parts: list[LocationPart]) -> tuple[Location, ...]:
    return tuple(part.location() for part in parts)


class DiffPart(_Part):
    """A change to one file (``old_text`` null for a new file)."""

    path: str
    old_text: str | None
    new_text: str


class StepPart(_Part):
    """One plan step."""

    step: str
    status: PlanStatus = "pending"
    priority: PlanPriority = "medium"


class InteractionPart(_Part):
    """One kept piece of a special turn."""

    kind: str
    text: str


class UsagePart(_Part):
    """Tokens and requests a turn spent."""

    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)
    requests: int = Field(default=0, ge=0)


class TurnStepPart(_Part):
    """One tool call of a turn summary."""

    title: str
    outcome: str
    paths: list[str] = Field(default_factory=list)


class SummaryPart(_Part):
    """A turn execution summary (see ``brain/summaries.py``)."""

    turn_number: int
    request: str = ""
    steps: list[TurnStepPart] = Field(default_factory=list)
    files_changed: list[str] = Field(default_factory=list)
    commands: list[str] = Field(default_factory=list)
    reply: str = ""
    error: str | None = None

    @classmethod
    def of(cls, summary: TurnExecutionSummary) -> SummaryPart:
        return cls.model_validate(summary.to_dict())

    def summary(self) -> TurnExecutionSummary:
        return TurnExecutionSummary(
            turn_number=self.turn_number,
            request=self.request,
            steps=tuple(TurnStep(s.title, s.outcome, tuple(Path(p) for p in s.paths)) for s in self.steps),
            files_changed=tuple(Path(p) for p in self.files_changed),
            commands=tuple(self.commands),
            reply=self.reply,
            error=self.error,
        )


# -- records -----------------------------------------------------------------------------------------------------


class _Record(_Part):
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
    parent: Annotated[str | None, BeforeValidator(_id_or_none)] = None


class SettingsRecord(_Record):
    """A change of mode, model or title."""

    kind: Literal["settings"] = "settings"
    mode: PermissionMode | None = Field(default=None, exclude_if=_omit_none)
    model: str | None = Field(default=None, exclude_if=_omit_none)
    title: str | None = Field(default=None, exclude_if=_omit_none)


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
                _locations(self.locations),
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
    changed: list[str] = Field(default_factory=list, exclude_if=_omit_empty)

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
                _locations(self.locations),
                self.summary,
                changed=tuple(Path(p) for p in self.changed),
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
            ),
        ]


class TurnEndRecord(_TurnRecord):
    """The last record of a turn that finished."""

    kind: Literal["turn_end"] = "turn_end"
    stop_reason: StopReason
    usage: UsagePart = Field(default_factory=UsagePart)
    error: str | None = None
    summary: SummaryPart | None = None

    def events(self) -> list[Event]:
        usage = Usage(self.usage.input_tokens, self.usage.output_tokens, self.usage.requests)
        summary = self.summary.summary() if self.summary is not None else None
        ended = TurnEnded(self.turn_id, self.stop_reason, usage, error=self.error is not None, summary=summary)
        return [TurnFailed(self.turn_id, self.error), ended] if self.error is not None else [ended]


class SpecialRecord(_Record):
    """A special turn's result entered the history (between turns: no turn id)."""

    kind: Literal["special"] = "special"
    turn_type: str = "special"
    persistence: Literal["persist-result", "persist-all", "replace-above"] = "persist-result"
    interactions: list[InteractionPart] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    replaced: int | None = Field(default=None, ge=0, exclude_if=_omit_none)
    special_id: str = Field(default="", exclude_if=_omit_empty)

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

RECORD: TypeAdapter[Record] = TypeAdapter(Record)
"""Validates a record (``validate_json`` for a line, ``validate_python`` for a dict)."""


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
                    input_tokens=usage.input_tokens, output_tokens=usage.output_tokens, requests=usage.requests
                ),
                error=error,
                summary=SummaryPart.of(summary) if summary is not None else None,
            )
    return None
