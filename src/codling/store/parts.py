"""The parts history records are made of: timestamps, prompt blocks in ACP wire format, locations, diffs, plan
steps, usage and turn recaps, each a strict pydantic model (``store/records.py`` builds the records from them)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from codling.brain.context.ledger_entries import TurnRecap, TurnStep
from codling.brain.context.window import LearnedWindow
from codling.brain.events import Usage
from codling.brain.interactions import Interaction, InteractionKind
from codling.brain.prompt import ImageBlock, PromptBlock, ResourceBlock, TextBlock
from codling.store.ids import is_session_id
from codling.store.mirror import PATH, Mirror, Mirrored, many, part
from codling.vocabulary import FileDiff, Location, PlanPriority, PlanStatus, PlanStep


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
    """The block's type."""
    text: str
    """The text."""

    def block(self) -> PromptBlock:
        return TextBlock(self.text)


class ImageWire(Part):
    """An attached image, kept whole (base64)."""

    type: Literal["image"] = "image"
    """The block's type."""
    mime_type: str = Field(alias="mimeType")
    """``image/png``…"""
    data: str
    """The image, base64."""
    uri: str | None = Field(default=None, exclude_if=omit_none)
    """Where it came from, when the client said."""

    def block(self) -> PromptBlock:
        return ImageBlock(self.data, self.mime_type, self.uri)


class EmbeddedText(Part):
    """An embedded text resource's content."""

    uri: str
    """The resource."""
    text: str
    """Its text."""


class ResourceWire(Part):
    """An embedded resource, or a linked file as it was read for the model."""

    type: Literal["resource"] = "resource"
    """The block's type."""
    resource: EmbeddedText
    """The resource and its text."""

    def block(self) -> PromptBlock:
        return ResourceBlock(self.resource.uri, text=self.resource.text)


class LinkWire(Part):
    """A link that could not be read; ``description`` says why."""

    type: Literal["resource_link"] = "resource_link"
    """The block's type."""
    uri: str
    """The resource."""
    name: str = ""
    """Its name (the last part of its path)."""
    description: str | None = Field(default=None, exclude_if=omit_none)
    """Why it could not be read."""

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
# Each stands for a brain dataclass field by field (``store/mirror.py``): a field added to the dataclass is a
# field added here, under the same name.


class LocationPart(Part, Mirrored):
    """A file (absolute path) and optionally a line."""

    MIRROR = Mirror(Location, convert={"path": PATH})
    path: str
    """An absolute path."""
    line: int | None = None
    """A line in it (1-based), or null."""


LOCATIONS = many(part(LocationPart))
"""A record's ``locations``."""


class DiffPart(Part, Mirrored):
    """A change to one file (``old_text`` null for a new file)."""

    MIRROR = Mirror(FileDiff, convert={"path": PATH})
    path: str
    """The file (absolute path)."""
    old_text: str | None
    """The file's text before (null: the file is new)."""
    new_text: str
    """Its text after."""


class StepPart(Part, Mirrored):
    """One plan step."""

    MIRROR = Mirror(PlanStep)
    step: str
    """What to do."""
    status: PlanStatus = "pending"
    """How far it is."""
    priority: PlanPriority = "medium"
    """How much it matters."""


class InteractionPart(Part, Mirrored):
    """One kept piece of a special turn."""

    MIRROR = Mirror(Interaction)
    kind: InteractionKind
    """``user``, ``assistant``, ``summary``, ``thought``, ``tool_call`` (the call's title), ``tool_result`` (its
    plain-text summary)."""
    text: str
    """Its text."""


class UsagePart(Part, Mirrored):
    """Tokens and requests a turn spent."""

    MIRROR = Mirror(Usage)
    input_tokens: int = Field(default=0, ge=0)
    """All input, the prompt cache's reads and writes included."""
    output_tokens: int = Field(default=0, ge=0)
    """Output, thinking included."""
    requests: int = Field(default=0, ge=0)
    """Model requests."""
    cache_read_tokens: int = Field(default=0, ge=0, exclude_if=omit_zero)
    """Input tokens read from the provider's prompt cache (absent: 0)."""
    cache_write_tokens: int = Field(default=0, ge=0, exclude_if=omit_zero)
    """Input tokens written to it (absent: 0)."""
    cache_write_1h_tokens: int = Field(default=0, ge=0, exclude_if=omit_zero)
    """Of those, the ones written to live an hour (absent: 0)."""


class WindowPart(Part, Mirrored):
    """The window learned from a model's server (see ``brain/context/window.py``)."""

    MIRROR = Mirror(LearnedWindow)
    model: str
    """``provider:model``."""
    tokens: int = Field(gt=0)
    """Its size."""


class TurnStepPart(Part, Mirrored):
    """One tool call of a turn recap."""

    MIRROR = Mirror(TurnStep, convert={"paths": many(PATH)})
    title: str
    """The call's title."""
    outcome: str
    """``done``, ``exit 1``, ``failed: <reason>``…"""
    paths: list[str] = Field(default_factory=list)
    """The files it touched."""
    detail: str = ""
    """What came of it: a command's salient output lines, an edit's size, a search's count…"""


class RecapPart(Part, Mirrored):
    """A turn recap (see ``brain/context/ledger.py``)."""

    MIRROR = Mirror(
        TurnRecap,
        convert={
            "steps": many(part(TurnStepPart)),
            "files_changed": many(PATH),
            "commands": many(),
            "open_plan": many(),
        },
    )
    turn_number: int
    """The turn's number in the session (1 for the first)."""
    request: str = ""
    """The user's request, trimmed."""
    goal: str = ""
    """What the user is after (a short follow-up keeps the previous goal)."""
    steps: list[TurnStepPart] = Field(default_factory=list)
    """One per tool call."""
    files_changed: list[str] = Field(default_factory=list)
    """Files edited or written, first change first."""
    commands: list[str] = Field(default_factory=list)
    """Commands run and how they ended."""
    reply: str = ""
    """The start of the reply."""
    error: str | None = None
    """Why the turn failed, if it did."""
    open_plan: list[str] = Field(default_factory=list)
    """The plan's steps not completed when the turn ended."""
