"""The parts history records are made of: timestamps, prompt blocks in ACP wire format, locations, diffs, plan
steps, usage and turn summaries, each a strict pydantic model (``store/records.py`` builds the records from them)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from codling.brain.context.ledger_entries import TurnExecutionSummary, TurnStep
from codling.brain.context.window import LearnedWindow
from codling.brain.interactions import InteractionKind
from codling.brain.prompt import ImageBlock, PromptBlock, ResourceBlock, TextBlock
from codling.store.ids import is_session_id
from codling.vocabulary import Location, PlanPriority, PlanStatus


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


def id_or_none(value: object) -> object:
    # A parent that is not a session id is dropped rather than followed anywhere.
    return value if is_session_id(value) else None


Timestamp = Annotated[str, AfterValidator(_a_time)]
AbsolutePath = Annotated[str, AfterValidator(_absolute)]


def omit_none(value: object) -> bool:
    return value is None


def omit_zero(value: object) -> bool:
    """``exclude_if`` for a count that is usually 0 (older records lack it)."""
    return value == 0


def omit_empty(value: object) -> bool:
    return not value


class Part(BaseModel):
    """A part of a record: strict types (no coercion), unknown fields ignored (a later version may add some).

    Each model's validator is built on first use (``defer_build``) or by ``records.build_records``: built on
    import, they were half of what opening the first session cost."""

    model_config = ConfigDict(
        strict=True, frozen=True, validate_by_name=True, serialize_by_alias=True, defer_build=True
    )


# -- prompt blocks in ACP wire format --------------------------------------------------------------------------


class TextWire(Part):
    """Text the user typed."""

    type: Literal["text"] = "text"
    text: str

    def block(self) -> PromptBlock:
        return TextBlock(self.text)


class ImageWire(Part):
    """An attached image, kept whole (base64)."""

    type: Literal["image"] = "image"
    mime_type: str = Field(alias="mimeType")
    data: str
    uri: str | None = Field(default=None, exclude_if=omit_none)

    def block(self) -> PromptBlock:
        return ImageBlock(self.data, self.mime_type, self.uri)


class EmbeddedText(Part):
    """An embedded text resource's content."""

    uri: str
    text: str


class ResourceWire(Part):
    """An embedded resource, or a linked file as it was read for the model."""

    type: Literal["resource"] = "resource"
    resource: EmbeddedText

    def block(self) -> PromptBlock:
        return ResourceBlock(self.resource.uri, text=self.resource.text)


class LinkWire(Part):
    """A link that could not be read; ``description`` says why."""

    type: Literal["resource_link"] = "resource_link"
    uri: str
    name: str = ""
    description: str | None = Field(default=None, exclude_if=omit_none)

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


class LocationPart(Part):
    """A file (absolute path) and optionally a line."""

    path: str
    line: int | None = None

    @classmethod
    def of(cls, items: tuple[Location, ...]) -> list[LocationPart]:
        return [cls(path=str(loc.path), line=loc.line) for loc in items]

    def location(self) -> Location:
        return Location(Path(self.path), self.line)


def locations_of(parts: list[LocationPart]) -> tuple[Location, ...]:
    return tuple(part.location() for part in parts)


class DiffPart(Part):
    """A change to one file (``old_text`` null for a new file)."""

    path: str
    old_text: str | None
    new_text: str


class StepPart(Part):
    """One plan step."""

    step: str
    status: PlanStatus = "pending"
    priority: PlanPriority = "medium"


class InteractionPart(Part):
    """One kept piece of a special turn."""

    kind: InteractionKind
    text: str


class UsagePart(Part):
    """Tokens and requests a turn spent."""

    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)
    requests: int = Field(default=0, ge=0)
    cache_read_tokens: int = Field(default=0, ge=0, exclude_if=omit_zero)
    cache_write_tokens: int = Field(default=0, ge=0, exclude_if=omit_zero)
    cache_write_1h_tokens: int = Field(default=0, ge=0, exclude_if=omit_zero)


class WindowPart(Part):
    """The window learned from a model's server (see ``brain/context/window.py``)."""

    model: str
    tokens: int = Field(gt=0)

    @classmethod
    def of(cls, window: LearnedWindow) -> WindowPart:
        """The part for a learned window."""
        return cls(model=window.model, tokens=window.tokens)

    def window(self) -> LearnedWindow:
        """The learned window it stands for."""
        return LearnedWindow(self.model, self.tokens)


class TurnStepPart(Part):
    """One tool call of a turn summary."""

    title: str
    outcome: str
    paths: list[str] = Field(default_factory=list)
    detail: str = ""


class SummaryPart(Part):
    """A turn execution summary (see ``brain/summaries.py``)."""

    turn_number: int
    request: str = ""
    goal: str = ""
    steps: list[TurnStepPart] = Field(default_factory=list)
    files_changed: list[str] = Field(default_factory=list)
    commands: list[str] = Field(default_factory=list)
    reply: str = ""
    error: str | None = None
    open_plan: list[str] = Field(default_factory=list)

    @classmethod
    def of(cls, summary: TurnExecutionSummary) -> SummaryPart:
        """The part that records ``summary``."""
        steps = [
            TurnStepPart(title=s.title, outcome=s.outcome, paths=[str(p) for p in s.paths], detail=s.detail)
            for s in summary.steps
        ]
        return cls(
            turn_number=summary.turn_number,
            request=summary.request,
            goal=summary.goal,
            steps=steps,
            files_changed=[str(p) for p in summary.files_changed],
            commands=list(summary.commands),
            reply=summary.reply,
            error=summary.error,
            open_plan=list(summary.open_plan),
        )

    def summary(self) -> TurnExecutionSummary:
        """The summary this part records."""
        return TurnExecutionSummary(
            turn_number=self.turn_number,
            request=self.request,
            goal=self.goal,
            steps=tuple(TurnStep(s.title, s.outcome, tuple(Path(p) for p in s.paths), s.detail) for s in self.steps),
            files_changed=tuple(Path(p) for p in self.files_changed),
            commands=tuple(self.commands),
            reply=self.reply,
            error=self.error,
            open_plan=tuple(self.open_plan),
        )
