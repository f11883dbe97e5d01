"""history.jsonl: one session's append-only record of everything that happened in it.

The writer flushes every record as one line; a line torn by a crash is ignored when reading and cut off before
the next append. A corrupt line in the middle is skipped with a warning. Replay (what an ACP client sees on
session/load) and state restore (the brain's history) are both derived from these records alone.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from codling.brain.builtin_turns import fallback_title
from codling.brain.events import Event, SessionTitled, TextDelta, ThoughtDelta, TurnEnded, TurnFailed, TurnStarted
from codling.errors import SessionError
from codling.secrecy import Redactor
from codling.store.records import EVENT_KINDS, VERSION, event_payload, now, record_events

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SessionHeader:
    """The first record of a session: where it works and how it started (never secrets)."""

    session_id: str
    cwd: Path
    model: str
    mode: str
    additional_dirs: tuple[Path, ...] = ()
    parent: str | None = None
    created_at: str = field(default_factory=now)

    def record(self) -> dict[str, Any]:
        """The ``session`` record."""
        return {
            "v": VERSION,
            "ts": self.created_at,
            "session_id": self.session_id,
            "kind": "session",
            "cwd": str(self.cwd),
            "model": self.model,
            "mode": self.mode,
            "additional_dirs": [str(d) for d in self.additional_dirs],
            "parent": self.parent,
        }

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> SessionHeader:
        """The inverse of :meth:`record`."""
        return cls(
            session_id=record["session_id"],
            cwd=Path(record["cwd"]),
            model=record.get("model", ""),
            mode=record.get("mode", "ask"),
            additional_dirs=tuple(Path(d) for d in record.get("additional_dirs") or ()),
            parent=record.get("parent"),
            created_at=record["ts"],
        )


@dataclass
class SessionLog:
    """A session as read back from its history.jsonl."""

    header: SessionHeader
    events: list[Event] = field(default_factory=list)
    records: list[dict[str, Any]] = field(default_factory=list)
    """Every valid record, in order (the header included)."""
    title: str | None = None
    mode: str = "ask"
    model: str = ""
    updated_at: str = ""
    turns: int = 0
    skipped_lines: int = 0


def first_request_title(event: TurnStarted) -> str:
    """A session title from its first request: the prompt on one line, trimmed to 80 characters."""
    return fallback_title(event.prompt)


def read_history(path: Path) -> SessionLog:
    """Read a history file; a torn last line is ignored and corrupt lines are skipped with a warning."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError as e:
        raise SessionError(f"no history at {path}") from e
    lines = raw.split(b"\n")
    torn = lines.pop()  # after the last newline: empty, or a record a crash cut short
    records: list[dict[str, Any]] = []
    skipped = 0
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            if not isinstance(record, dict) or "kind" not in record:
                raise ValueError("not a record")
        except ValueError as e:
            skipped += 1
            log.warning("%s:%d: skipping a corrupt record (%s)", path, number, e)
            continue
        records.append(record)
    if torn.strip():
        log.warning("%s: ignoring a torn last line (%d bytes)", path, len(torn))
    if not records or records[0].get("kind") != "session":
        raise SessionError(f"{path} does not start with a session record")
    return _fold(records, skipped)


def _fold(records: list[dict[str, Any]], skipped: int) -> SessionLog:
    header = SessionHeader.from_record(records[0])
    result = SessionLog(header, records=records, mode=header.mode, model=header.model, skipped_lines=skipped)
    for record in records[1:]:
        kind = record.get("kind")
        if kind == "settings":
            result.title = record.get("title", result.title)
            result.mode = record.get("mode", result.mode)
            result.model = record.get("model", result.model)
        elif kind in EVENT_KINDS:
            events = record_events(record)
            result.events.extend(events)
            if kind == "turn_start":
                result.turns += 1
                if result.title is None and isinstance(events[0], TurnStarted):
                    result.title = first_request_title(events[0])
    result.updated_at = str(records[-1].get("ts", header.created_at))
    return result


def _cut_torn_tail(path: Path) -> None:
    """Drop a partial last line left by a crash, so the next record starts on a line of its own."""
    with open(path, "rb+") as f:
        size = f.seek(0, os.SEEK_END)
        if size == 0:
            return
        f.seek(size - 1)
        if f.read(1) == b"\n":
            return
        block = 65536
        end = size
        while end > 0:
            start = max(0, end - block)
            f.seek(start)
            chunk = f.read(end - start)
            newline = chunk.rfind(b"\n")
            if newline >= 0:
                keep = start + newline + 1
                break
            end = start
        else:
            keep = 0
        log.warning("%s: cutting a torn last line (%d bytes) before appending", path, size - keep)
        f.truncate(keep)


class HistoryFile:
    """Appends records to one session's history.jsonl, one flushed line each.

    The writer holds an exclusive advisory lock on the file while it is open, so two processes (an editor and
    ``codling run --resume``, say) never interleave turns in one history: the second gets a SessionError.
    """

    def __init__(self, path: Path, session_id: str, redact: Redactor | None = None) -> None:
        self.path = path
        self.session_id = session_id
        self._redact = redact or Redactor([])
        # errors="replace": a lone surrogate (from a file name that is not UTF-8) must not lose the record.
        self._file: IO[str] = open(path, "a", encoding="utf-8", errors="replace")  # noqa: SIM115 - session-long
        try:
            fcntl.flock(self._file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            self._file.close()
            raise SessionError(f"session {session_id} is open in another codling process; close it there first") from e
        # Only the lock holder may repair a torn tail: another writer could be in the middle of a line.
        _cut_torn_tail(path)

    def append(self, payload: dict[str, Any], turn_id: str | None = None) -> None:
        """Write one record (``payload`` holds ``kind`` and its fields)."""
        record: dict[str, Any] = {"v": VERSION, "ts": now(), "session_id": self.session_id}
        if turn_id is not None:
            record["turn_id"] = turn_id
        record.update(payload)
        self.write_record(record)

    def write_record(self, record: dict[str, Any]) -> None:
        """Write a complete record as it is."""
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
        self._file.write(self._redact(line) + "\n")
        self._file.flush()

    def close(self) -> None:
        """Close the file and release the lock (records already written are safe either way)."""
        self._file.close()


class HistoryRecorder:
    """An observer writing a session's events to its history file.

    Text and thought deltas are merged into one record per segment (a segment ends at any other event), so a
    record costs one line per paragraph of output, not per token.
    """

    def __init__(
        self,
        file: HistoryFile,
        *,
        title: str | None = None,
        on_title: Callable[[str], Awaitable[None]] | None = None,
    ) -> None:
        self.file = file
        self.title = title
        self._on_title = on_title
        self._pending: list[str] = []
        self._pending_kind: type[TextDelta] | type[ThoughtDelta] | None = None
        self._pending_turn = ""
        self._error: str | None = None

    async def __call__(self, event: Event) -> None:
        if isinstance(event, TextDelta | ThoughtDelta):
            if self._pending_kind is not type(event):
                self._flush()
                self._pending_kind = type(event)
                self._pending_turn = event.turn_id
            self._pending.append(event.text)
            return
        self._flush()
        if isinstance(event, TurnFailed):
            self._error = event.message
            return
        payload = event_payload(event, self._error)
        if payload is not None:
            self.file.append(payload, getattr(event, "turn_id", None))
        if isinstance(event, TurnEnded):
            self._error = None
        elif isinstance(event, TurnStarted) and self.title is None:
            # Until a better one exists, a session is named after the user's first request.
            await self.set_title(first_request_title(event))
        elif isinstance(event, SessionTitled) and event.title and event.title != self.title:
            await self.set_title(event.title)

    async def set_title(self, title: str) -> None:
        """Record a new title and tell whoever shows it."""
        self.title = title
        self.settings(title=title)
        if self._on_title is not None:
            await self._on_title(title)

    def _flush(self) -> None:
        if self._pending_kind is None:
            return
        merged = self._pending_kind(self._pending_turn, "".join(self._pending))
        payload = event_payload(merged)
        assert payload is not None
        self.file.append(payload, merged.turn_id)
        self._pending.clear()
        self._pending_kind = None

    def settings(self, **changes: str) -> None:
        """Record a change of mode, model or title."""
        self.file.append({"kind": "settings", **changes})
