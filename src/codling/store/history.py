"""history.jsonl: one session's append-only record of everything that happened in it.

Every record is validated (``store/records.py``) when written and when read. The writer opens the file for each
record and writes the whole line in one ``O_APPEND`` write, so an idle session holds no file descriptor and a
record is never interleaved with another; a line torn by a crash is ignored when reading and cut off before the
next append. A line in the middle that is not a valid record (corrupt JSON, a missing field, a kind from a
newer version) is skipped with a warning and counted. Replay (what an ACP client sees on session/load) and
state restore (the brain's history) are both derived from these records alone.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, assert_never

from pydantic import ValidationError

from codling.brain.builtin_turns import fallback_title
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
from codling.brain.thinking import Thinking
from codling.errors import SessionError
from codling.secrecy import Redactor, redact_credentials
from codling.store import lock
from codling.store.header import SessionHeader
from codling.store.records import (
    RECORD,
    Record,
    SessionRecord,
    SettingsRecord,
    TurnStartRecord,
    dump_record,
    event_record,
)
from codling.vocabulary import PermissionMode

log = logging.getLogger(__name__)


@dataclass
class SessionLog:
    """A session as read back from its history.jsonl."""

    header: SessionHeader
    events: list[Event] = field(default_factory=list)
    records: list[Record] = field(default_factory=list)
    """Every valid record, in order (the header included)."""
    title: str | None = None
    mode: PermissionMode = "ask"
    model: str = ""
    thinking: Thinking = field(default_factory=Thinking)
    """The thinking choice as last recorded."""
    updated_at: str = ""
    turns: int = 0
    approvals: list[tuple[str, str]] = field(default_factory=list)
    """The "always" answers given in the session, oldest first."""
    skipped_lines: int = 0
    """Lines in the middle that were not valid records (corrupt, invalid, or of a kind this version does not
    know), skipped with a warning. A torn last line is not counted."""


def first_request_title(event: TurnStarted) -> str:
    """A session title from its first request: the prompt on one line, trimmed to 80 characters."""
    return fallback_title(event.prompt)


def read_history(path: Path) -> SessionLog:
    """Read a history file; a torn last line is ignored and lines that are not valid records are skipped with a
    warning. Raises ``SessionError`` when there is no file or it does not start with a valid session record."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError as e:
        raise SessionError(f"no history at {path}") from e
    except OSError as e:
        raise SessionError(f"cannot read {path}: {e.strerror or e}") from e
    lines = raw.split(b"\n")
    torn = lines.pop()  # after the last newline: empty, or a record a crash cut short
    records: list[Record] = []
    skipped = 0
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            records.append(RECORD.validate_json(line))
        except ValidationError as e:
            skipped += 1
            log.warning("%s:%d: skipping a corrupt record: %s", path, number, _why(e))
    if torn.strip():
        log.warning("%s: ignoring a torn last line (%d bytes)", path, len(torn))
    if not records or not isinstance(records[0], SessionRecord):
        raise SessionError(f"{path} does not start with a valid session record; it cannot be loaded")
    return _fold(records, skipped)


def _why(error: ValidationError) -> str:
    first = error.errors(include_url=False, include_input=False)[0]
    loc = first["loc"]
    match first["type"]:
        case "json_invalid":
            return "not JSON"
        case "union_tag_invalid":
            tag = (first.get("ctx") or {}).get("tag")
            return f"a kind this version does not know ({tag!r}; written by a newer codling?)"
        case "union_tag_not_found" | "dict_type" | "model_attributes_type" | "model_type" if len(loc) <= 1:
            return "not a record (an object with a kind)"
    where = ".".join(str(part) for part in loc[1:]) or "record"
    return f"a {loc[0] if loc else ''} record that is not valid: {where}: {first['msg']}"


def _fold(records: list[Record], skipped: int) -> SessionLog:
    first = records[0]
    assert isinstance(first, SessionRecord)
    header = SessionHeader.from_record(first)
    result = SessionLog(header, records=records, mode=first.mode, model=first.model, skipped_lines=skipped)
    for record in records[1:]:
        if isinstance(record, SettingsRecord):
            result.title = record.title if record.title is not None else result.title
            result.mode = record.mode or result.mode
            result.model = record.model if record.model is not None else result.model
            if record.thinking is not None:
                result.thinking = replace(result.thinking, on=record.thinking)
            if record.thought_level is not None:
                result.thinking = replace(result.thinking, level=record.thought_level)
            if record.always is not None:
                result.approvals.append(record.always)
            continue
        events = record.events()
        result.events.extend(events)
        if isinstance(record, TurnStartRecord):
            result.turns += 1
            if result.title is None and isinstance(events[0], TurnStarted):
                result.title = first_request_title(events[0])
    result.updated_at = records[-1].ts
    return result


def _cut_torn_tail(fd: int, path: Path) -> None:
    """Drop a partial last line left by a crash, so the next record starts on a line of its own."""
    size = os.lseek(fd, 0, os.SEEK_END)
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return
    block = 65536
    end = size
    keep = 0
    while end > 0:
        start = max(0, end - block)
        newline = os.pread(fd, end - start, start).rfind(b"\n")
        if newline >= 0:
            keep = start + newline + 1
            break
        end = start
    log.warning("%s: cutting a torn last line (%d bytes) before appending", path, size - keep)
    os.ftruncate(fd, keep)


class HistoryFile:
    """Appends records to one session's history.jsonl, one line each, holding no file descriptor between them.

    One writer per session: opening takes the session's lock file (``store/lock.py``), so two processes (an
    editor and ``codling run --resume``, say) never interleave turns in one history; the second gets a
    ``SessionError``. The lock is released by :meth:`close` (or at exit; a killed writer's lock is taken over).
    """

    def __init__(
        self,
        path: Path,
        session_id: str,
        redact: Redactor | None = None,
        write: Callable[[int, bytes], int] = os.write,
    ) -> None:
        self.path = path
        self.session_id = session_id
        self._redact = redact or Redactor([])
        self._write = write
        """How bytes reach the file (``os.write``; a test injects a full disk)."""
        self._backlog: list[bytes] = []
        """Records not written yet (the disk was full): written first, whole, once there is room."""
        self.problem: str | None = None
        """Why the latest write failed, while records wait in the backlog (None: everything is written)."""
        self._lock = self.lock_path(path)
        guard = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            lock.acquire(self._lock, guard, f"session {session_id}")
            # Only the lock holder may repair a torn tail: another writer could be in the middle of a line.
            _cut_torn_tail(guard, path)
        finally:
            os.close(guard)
        self._open = True

    @staticmethod
    def lock_path(path: Path) -> Path:
        """The lock file of the history at ``path``."""
        return path.with_name(path.name + ".lock")

    def append(self, payload: dict[str, Any], turn_id: str | None = None) -> None:
        """Write one record given as ``kind`` and its fields (validated first; ``SessionError`` if invalid)."""
        record: dict[str, Any] = {"session_id": self.session_id}
        if turn_id is not None:
            record["turn_id"] = turn_id
        record.update(payload)
        try:
            self.write(RECORD.validate_python(record))
        except ValidationError as e:
            raise SessionError(f"not a valid {payload.get('kind')} record: {e}") from e

    def write(self, record: Record) -> None:
        """Write a complete record as one line, in one write call, after any the disk had no room for. A write
        that fails is cut back, so no torn line stays, and kept to be written whole once there is room (the
        next write, or ``close``); ``problem`` says why meanwhile. Never raises for a full disk: the turn goes
        on, and what it does is written when it can be."""
        if not self._open:
            raise SessionError(f"session {self.session_id}'s history is closed")
        line = json.dumps(dump_record(record), ensure_ascii=False, separators=(",", ":"))
        # errors="replace": a lone surrogate (from a file name that is not UTF-8) must not lose the record.
        self._backlog.append((redact_credentials(self._redact(line)) + "\n").encode("utf-8", errors="replace"))
        self._drain()

    def _drain(self) -> None:
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
        except FileNotFoundError as e:
            raise SessionError(f"session {self.session_id}'s history {self.path} is gone (deleted?)") from e
        try:
            while self._backlog:
                data = self._backlog[0]
                size = os.lseek(fd, 0, os.SEEK_END)
                try:
                    written = self._write(fd, data)
                    while written < len(data):  # a regular file takes the line whole; this is only a fallback
                        written += self._write(fd, data[written:])
                except OSError as e:
                    os.ftruncate(fd, size)  # no torn line: the record is written again, whole, later
                    if self.problem is None:
                        log.error("cannot write %s: %s; keeping its records until there is room", self.path, e)
                    self.problem = (
                        f"codling cannot write session {self.session_id}'s history ({e.strerror or e}): "
                        f"{len(self._backlog)} record(s) wait in memory and are written as soon as there is "
                        "room; free some space (they are lost if codling exits first)"
                    )
                    return
                self._backlog.pop(0)
            self.problem = None
        finally:
            os.close(fd)

    def close(self) -> None:
        """Write what waits, if there is room now, and release the session (records already written are safe
        either way)."""
        if self._open:
            if self._backlog:
                with contextlib.suppress(OSError, SessionError):
                    self._drain()
                if self._backlog:
                    log.error("%s: %d record(s) could not be written before closing", self.path, len(self._backlog))
            self._open = False
            lock.release(self._lock)


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
        """Write what history.jsonl keeps of ``event`` (``brain/event_contract.py``'s ``history``)."""
        if not isinstance(event, TextDelta | ThoughtDelta):
            self._flush()  # any other event ends a segment of text or thought
        match event:
            case TextDelta() | ThoughtDelta():
                if self._pending_kind is not type(event):
                    self._flush()
                    self._pending_kind = type(event)
                    self._pending_turn = event.turn_id
                self._pending.append(event.text)
            case TurnFailed():
                self._error = event.message  # kept in the turn's end record
            case SettingsChanged():  # a slash command's; event_record writes it as a client's change is
                self._write(event)
            case SessionTitled():
                if event.title and event.title != self.title:
                    await self.set_title(event.title)
            case TurnStarted():
                self._write(event)
                if self.title is None:
                    # Until a better one exists, a session is named after the user's first request.
                    await self.set_title(first_request_title(event))
            case TurnEnded():
                self._write(event)
                self._error = None
            case (
                ToolCallStarted()
                | ToolCallFinished()
                | PlanUpdated()
                | ContextCompacted()
                | SpecialTurnPersisted()
                | Rewound()
            ):
                self._write(event)
            case (
                CompactionStarted()
                | ToolCallTerminal()
                | ToolCallNote()
                | ToolCallRunning()
                | ProviderRetrying()
                | ContextWarning()
                | McpServersStarting()
                | McpServerNotice()
                | UsageUpdated()
            ):
                pass  # live only (usage is derived again on load); a compaction's start is in its end's record
            case _:
                assert_never(event)

    def _write(self, event: Event) -> None:
        record = event_record(event, self.file.session_id, self._error)
        if record is not None:
            self.file.write(record)

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
        record = event_record(merged, self.file.session_id)
        assert record is not None
        self.file.write(record)
        self._pending.clear()
        self._pending_kind = None

    def settings(self, **changes: str | bool | tuple[str, str]) -> None:
        """Record a change of mode, model, thinking choice or title, or an "always" answer."""
        self.file.write(SettingsRecord.model_validate({"session_id": self.file.session_id, **changes}))
