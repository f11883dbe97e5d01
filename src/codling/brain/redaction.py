"""Secret values taken out of a session's events before they leave codling (an editor, ``--json``).

Every text an event carries (a reply's delta, a tool's arguments and output, a diff, an error) passes through
a :class:`~codling.secrecy.Redactor`. A secret a reply streams across deltas is seen whole too: the end of a
delta that may start one waits for the next delta of its kind, or goes out before any other event.
"""

from __future__ import annotations

import dataclasses
from pathlib import PurePath
from typing import Any, TypeVar, cast

from codling.brain.events import Event, TextDelta, ThoughtDelta
from codling.secrecy import Redactor

T = TypeVar("T")


def redacted(value: T, redact: Redactor) -> T:
    """``value`` with every string in it redacted: strings, and those inside dataclasses (frozen ones are
    copied), tuples, lists and dicts (keys and values), and paths. Anything else (numbers, datetimes) is kept."""
    return cast(T, _walk(value, redact))


def _walk(value: Any, redact: Redactor) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, PurePath):  # a file may be named after a token
        text = str(value)
        clean = redact(text)
        return value if clean == text else type(value)(clean)
    if value is None or isinstance(value, int | float | bool):
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {}
        for field in dataclasses.fields(value):
            if not field.init:
                continue
            old = getattr(value, field.name)
            new = _walk(old, redact)
            if new is not old and new != old:
                changes[field.name] = new
        return dataclasses.replace(value, **changes) if changes else value
    if isinstance(value, tuple):
        return tuple(_walk(item, redact) for item in value)
    if isinstance(value, list):
        return [_walk(item, redact) for item in value]
    if isinstance(value, dict):
        return {_walk(key, redact): _walk(item, redact) for key, item in value.items()}
    return value


class EventRedactor:
    """Redacts a stream of events: ``feed`` each one, forward what it returns, ``flush`` at the end."""

    def __init__(self, redact: Redactor) -> None:
        self._redact = redact
        self._held: TextDelta | ThoughtDelta | None = None

    def feed(self, event: Event) -> list[Event]:
        """The events to forward now (none, while a delta's end may start a secret; two, when a held piece
        of one kind precedes an event of another)."""
        if not isinstance(event, TextDelta | ThoughtDelta):
            return [*self.flush(), redacted(event, self._redact)]
        out: list[Event] = []
        held, self._held = self._held, None
        if held is not None and type(held) is not type(event):
            out.append(held)
            held = None
        text = self._redact((held.text if held is not None else "") + event.text)
        keep = self._redact.held_back(text)
        if keep:
            self._held = dataclasses.replace(event, text=text[len(text) - keep :])
        if text[: len(text) - keep]:
            out.append(dataclasses.replace(event, text=text[: len(text) - keep]))
        return out

    def flush(self) -> list[Event]:
        """What was held back, now known not to start a secret (the stream ended or moved on)."""
        held, self._held = self._held, None
        return [held] if held is not None else []
