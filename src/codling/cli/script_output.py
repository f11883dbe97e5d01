"""``codling run``'s output for scripts: ``--json``'s one JSON object per event (``JsonLinesRenderer``,
``event_to_json``) and the turn's last message (``LastMessage``), what a script piping the answer wants."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO, assert_never

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
from codling.brain.prompt import ImageBlock
from codling.brain.redaction import EventRedactor
from codling.secrecy import Redactor


class JsonLinesRenderer:
    """Prints each event as one JSON object per line (see :func:`event_to_json`), flushed per line.

    With ``redact``, secret values are redacted from every line, also one a reply streams across two deltas
    (each a line of its own, where a stream's redaction cannot see it whole): the end of a delta that may be
    the start of a secret waits for the next delta of its kind, or for the next other event."""

    def __init__(self, out: TextIO, redact: Redactor | None = None) -> None:
        self._out = out
        self._redactor = EventRedactor(redact) if redact is not None else None

    async def __call__(self, event: Event) -> None:
        """Print one event."""
        for shown in self._redactor.feed(event) if self._redactor is not None else [event]:
            self.write(event_to_json(shown))

    def close(self) -> None:
        """Print what waits to be known not to start a secret."""
        for held in self._redactor.flush() if self._redactor is not None else []:
            self.write(event_to_json(held))

    def write(self, line: Mapping[str, Any]) -> None:
        """Print one JSON object as a line (the run's own session and result lines, too)."""
        self._out.write(json.dumps(line, ensure_ascii=False) + "\n")
        self._out.flush()


def event_to_json(event: Event) -> dict[str, Any]:
    """``{"type": event.kind, **fields}`` with every other dataclass field of the event made JSON-ready: paths
    as strings, datetimes as ISO 8601, nested dataclasses (usage, diffs, locations) as objects, tuples as
    lists. Generic over the event classes, so a new event or field needs no code here."""
    fields = _jsonable(event)
    del fields["kind"]  # it is the "type"
    return {"type": event.kind, **fields}


class LastMessage:
    """An observer keeping a turn's last message: the text after its last tool call, which is what a script
    piping the answer wants."""

    def __init__(self) -> None:
        self._parts: list[str] = []

    async def __call__(self, event: Event) -> None:
        """Note one event."""
        match event:
            case TurnStarted() | ToolCallStarted():
                self._parts.clear()
            case TextDelta():
                self._parts.append(event.text)
            case (
                ThoughtDelta()
                | ToolCallTerminal()
                | ToolCallNote()
                | ToolCallRunning()
                | ToolCallFinished()
                | PlanUpdated()
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
                | TurnFailed()
                | TurnEnded()
                | Rewound()
            ):
                pass  # the message goes on (a failure's text is not the answer)
            case _:
                assert_never(event)

    @property
    def text(self) -> str:
        """The turn's last message, without surrounding blank space."""
        return "".join(self._parts).strip()


def _jsonable(value: Any) -> Any:
    if isinstance(value, ImageBlock):  # an image's name and size, not megabytes of base64 on one line
        return {"type": "image", "mime_type": value.mime_type, "uri": value.uri, "bytes": len(value.data) * 3 // 4}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_jsonable(v) for v in value]
    return value
