"""The session store: one directory per session under ``$CODLING_HOME/sessions``.

``<id>/history.jsonl`` is the truth. ``<id>/meta.json`` is a small cache of what listing needs (cwd, title,
parent, model), written atomically, rewritten only when the title changes and rebuilt from the history when
missing, damaged or naming another session; ``updated_at`` is the history file's modification time. Listing
therefore reads one small file per session.

Every id that arrives from outside is checked (``store/ids.py``) before it becomes a path: a malformed one is an
``InvalidSessionIdError``, a well-formed one with no session an ``UnknownSessionError``. Directories whose names
are not session ids are not sessions.
"""

from __future__ import annotations

import bisect
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from codling.brain.events import TurnStarted
from codling.errors import SessionError, SessionHeldError, UnknownSessionError
from codling.secrecy import Redactor, redact_credentials
from codling.store import lock
from codling.store.header import SessionHeader
from codling.store.history import HistoryFile, HistoryRecorder, SessionLog, read_history
from codling.store.ids import check_prefix, check_session_id, is_session_id
from codling.store.parts import Timestamp
from codling.store.records import SettingsRecord, TurnStartRecord
from codling.store.root import check_writable, sessions_root, unusable

log = logging.getLogger(__name__)

HISTORY = "history.jsonl"
PROMPTS = "prompts"
"""A session's folder for prompts too long for its model's window, saved whole."""
CHECKPOINTS = "checkpoints"
"""A session's folder for its workspace's checkpoints."""
META = "meta.json"


@dataclass(frozen=True)
class SessionListing:
    """What a session list shows."""

    session_id: str
    cwd: Path
    title: str | None
    created_at: str
    updated_at: str
    parent: str | None = None
    model: str = ""


ListKey = tuple[str, str]
"""A session's place in a list: its ``updated_at`` and its id (a list shows the greatest first)."""


def _timestamp(mtime: float) -> str:
    return datetime.fromtimestamp(mtime, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Meta(BaseModel):
    """meta.json: what listing needs, cached from the history."""

    model_config = ConfigDict(strict=True, frozen=True)

    session_id: str
    cwd: str
    title: str | None = None
    created_at: Timestamp
    parent: str | None = None
    model: str = ""


DATE_LENGTH = len("20261122-")
"""Where a session id's random part starts (what a user may type instead of the whole id)."""

FIRST_REQUEST_BYTES = 65_536
"""How much of a history :meth:`SessionStore.first_request` reads: its first request is near the start (a longer
one is not looked for)."""

AMBIGUOUS_SHOWN = 10
"""How many of the sessions an ambiguous prefix matches its error lists."""


class SessionStore:
    """Creates, opens, lists, forks and deletes sessions on disk."""

    def __init__(self, home: Path, redact: Redactor | None = None) -> None:
        self.root = sessions_root(home)
        self._redact = redact or Redactor([])
        self._ordered: tuple[int | None, list[ListKey]] | None = None
        """The last list keys read (:meth:`_order`), with the sessions directory's mtime then."""

    def _directory(self, session_id: str) -> Path:
        return self.root / check_session_id(session_id)

    def history_path(self, session_id: str) -> Path:
        """Where a session's history.jsonl lives (``InvalidSessionIdError`` for a malformed id)."""
        return self._directory(session_id) / HISTORY

    def prompts_dir(self, session_id: str) -> Path:
        """Where a session keeps the prompts too long for its model's window, whole (created when one is)."""
        return self._directory(session_id) / PROMPTS

    def checkpoints_dir(self, session_id: str) -> Path:
        """Where a session keeps its workspace's checkpoints (``tools/checkpoints/``)."""
        return self._directory(session_id) / CHECKPOINTS

    def _existing(self, session_id: str) -> Path:
        path = self.history_path(session_id)
        if not path.is_file():
            raise UnknownSessionError(f"no session {session_id} in {self.root}; see `codling sessions list`")
        return path

    # -- writing --------------------------------------------------------------------------------------------

    def create(self, header: SessionHeader) -> HistoryFile:
        """Start a new session's directory with its header record."""
        directory = self._directory(header.session_id)
        if header.parent is not None:
            check_session_id(header.parent)
        record = header.record()  # validated before anything is created
        self.check()
        directory.mkdir(parents=True, exist_ok=False)
        file = HistoryFile(directory / HISTORY, header.session_id, self._redact)
        file.write(record)
        self._write_meta(header, title=None)
        return file

    def check(self) -> None:
        """Make sure sessions can be written here (creating the store's directory): ``StoreError`` saying what to
        change if not, before any session is started."""
        check_writable(self.root)

    def open(self, session_id: str) -> HistoryFile:
        """Open an existing session's history for appending (cutting a torn last line first)."""
        return HistoryFile(self._existing(session_id), session_id, self._redact)

    def recorder(
        self,
        header: SessionHeader,
        file: HistoryFile,
        *,
        title: str | None = None,
        on_title: Callable[[str], Awaitable[None]] | None = None,
    ) -> HistoryRecorder:
        """A recorder for the session that also keeps meta.json's title current."""

        async def titled(new_title: str) -> None:
            self._write_meta(header, new_title)
            if on_title is not None:
                await on_title(new_title)

        return HistoryRecorder(file, title=title, on_title=titled)

    def _write_meta(self, header: SessionHeader, title: str | None) -> None:
        """Replace meta.json atomically: a crash leaves the old file or the new one, never half of one."""
        meta = Meta(
            session_id=header.session_id,
            cwd=str(header.cwd),
            title=title,
            created_at=header.created_at,
            parent=header.parent,
            model=header.model,
        )
        directory = self._directory(header.session_id)
        text = redact_credentials(self._redact(json.dumps(meta.model_dump(), ensure_ascii=False)))
        data = text.encode("utf-8", errors="replace")
        fd, tmp = tempfile.mkstemp(prefix=".meta.", suffix=".tmp", dir=directory)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, directory / META)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    # -- reading --------------------------------------------------------------------------------------------

    def read(self, session_id: str) -> SessionLog:
        """Read a whole session back. The session is the one its directory names, whatever its header says."""
        stored = read_history(self._existing(session_id))
        if stored.header.session_id != session_id:
            log.warning(
                "%s: its header names session %r; using its directory's id", session_id, stored.header.session_id
            )
            stored.header = replace(stored.header, session_id=session_id)
        return stored

    def resolve(self, id_or_prefix: str) -> str:
        """The full id of the one session whose id, or whose random part (after the date), starts with
        ``id_or_prefix``; an ambiguous prefix's error lists the sessions it matches, newest first."""
        check_prefix(id_or_prefix)
        if is_session_id(id_or_prefix) and self.history_path(id_or_prefix).is_file():
            return id_or_prefix
        matches = [
            sid for sid in self._ids() if sid.startswith(id_or_prefix) or sid[DATE_LENGTH:].startswith(id_or_prefix)
        ]
        if not matches:
            raise UnknownSessionError(f"no session matches {id_or_prefix!r}; see `codling sessions list`")
        if len(matches) > 1:
            candidates = [s for s in self.list() if s.session_id in matches]
            shown = "; ".join(f"{s.session_id} ({s.title or 'untitled'})" for s in candidates[:AMBIGUOUS_SHOWN])
            more = f"; and {len(candidates) - AMBIGUOUS_SHOWN} more" if len(candidates) > AMBIGUOUS_SHOWN else ""
            raise SessionError(f"{id_or_prefix!r} matches {len(matches)} sessions: {shown}{more}; give more of the id")
        return matches[0]

    def _ids(self) -> list[str]:
        """The ids of the session directories holding a history."""
        try:
            with os.scandir(self.root) as entries:
                names = [e.name for e in entries if is_session_id(e.name)]
        except FileNotFoundError:
            return []
        except OSError as e:
            raise unusable(self.root, "cannot be read", e) from e
        return [name for name in names if (self.root / name / HISTORY).is_file()]

    def _updated(self) -> list[ListKey]:
        """Every session's list key, ``(updated_at, session_id)``, in ascending order (a list shows it reversed):
        one ``stat`` of each history, no metadata read."""
        keys: list[ListKey] = []
        for session_id in self._ids():
            try:
                keys.append((_timestamp(self.history_path(session_id).stat().st_mtime), session_id))
            except OSError:  # gone meanwhile
                continue
        keys.sort()
        return keys

    def _order(self, fresh: bool) -> list[ListKey]:
        """The list keys: read again when ``fresh`` or when sessions were made or deleted since (the sessions
        directory changed), else those of the last read, which the pages after a first one share."""
        try:
            stamp: int | None = self.root.stat().st_mtime_ns
        except OSError:
            stamp = None
        if fresh or self._ordered is None or self._ordered[0] != stamp:
            self._ordered = (stamp, self._updated())
        return self._ordered[1]

    def page(self, cwd: Path | None, after: ListKey | None, size: int) -> tuple[list[SessionListing], ListKey | None]:
        """Up to ``size`` sessions (only those working in ``cwd`` if given) that come after the key ``after`` in
        list order (from the first if None), and the key to give as ``after`` for the next page (None: no more).

        A first page reads every history's mtime for the order (no metadata); the pages after it seek into that
        order and read the metadata of the sessions they show (and, with ``cwd``, of those they pass over), so
        page 200 costs no more than page 1. A session made meanwhile sorts first, so it moves none of the others
        from one page to the next; one updated meanwhile keeps its place until the next first page."""
        keys = self._order(fresh=after is None)
        end = len(keys) if after is None else bisect.bisect_left(keys, after)
        found: list[tuple[ListKey, SessionListing]] = []
        wanted = str(cwd) if cwd is not None else None
        for index in range(end - 1, -1, -1):
            summary = self._summary(keys[index][1])
            if summary is not None and (wanted is None or str(summary.cwd) == wanted):
                found.append((keys[index], summary))
                if len(found) > size:
                    break
        shown = found[:size]
        return [summary for _, summary in shown], shown[-1][0] if len(found) > size else None

    def list(self, cwd: Path | None = None) -> list[SessionListing]:
        """Every readable session (only those working in ``cwd`` if given), most recently updated first."""
        found: list[SessionListing] = []
        wanted = str(cwd) if cwd is not None else None
        for session_id in self._ids():
            summary = self._summary(session_id)
            if summary is not None and (wanted is None or str(summary.cwd) == wanted):
                found.append(summary)
        found.sort(key=lambda s: (s.updated_at, s.session_id), reverse=True)
        return found

    def first_request(self, session_id: str) -> str:
        """A session's first request as typed, from the start of its history only (empty when it has none, or it is
        not in the first :data:`FIRST_REQUEST_BYTES`): what the session was about, also once the model retitled it."""
        try:
            with self.history_path(session_id).open("rb") as f:
                head = f.read(FIRST_REQUEST_BYTES)
        except (OSError, SessionError):
            return ""
        for line in head.split(b"\n")[:-1]:  # whole lines only
            if b'"kind":"turn_start"' not in line:
                continue
            try:
                started = TurnStartRecord.model_validate_json(line).events()[0]
            except ValidationError:
                continue
            return started.prompt if isinstance(started, TurnStarted) else ""
        return ""

    def latest(self, cwd: Path) -> SessionListing | None:
        """The most recently updated session working in ``cwd``."""
        sessions = self.list(cwd)
        return sessions[0] if sessions else None

    def _summary(self, session_id: str) -> SessionListing | None:
        try:
            mtime = self.history_path(session_id).stat().st_mtime
        except OSError:
            return None
        updated = _timestamp(mtime)
        meta = self._meta(session_id)
        if meta is None:
            return None
        return SessionListing(
            session_id=session_id,
            cwd=Path(meta.cwd),
            title=meta.title,
            created_at=meta.created_at,
            updated_at=updated,
            parent=meta.parent if is_session_id(meta.parent) else None,
            model=meta.model,
        )

    def _meta(self, session_id: str) -> Meta | None:
        """meta.json, or a new one rebuilt from the history when it is missing, damaged or names another
        session; None for a session whose history cannot be read."""
        path = self._directory(session_id) / META
        try:
            meta = Meta.model_validate_json(path.read_bytes())
            if meta.session_id == session_id:
                return meta
        except (OSError, ValidationError):
            pass
        # The cache is missing or wrong: rebuild it from the history, the source of truth.
        try:
            session = self.read(session_id)
        except (OSError, SessionError) as e:
            log.warning("%s: not a readable session (%s)", self._directory(session_id), e)
            return None
        try:
            self._write_meta(session.header, session.title)
        except OSError as e:  # a read-only store still lists
            log.warning("%s: cannot rewrite %s (%s)", self._directory(session_id), META, e)
        header = session.header
        return Meta(
            session_id=session_id,
            cwd=str(header.cwd),
            title=session.title,
            created_at=header.created_at,
            parent=header.parent,
            model=header.model,
        )

    # -- whole sessions -------------------------------------------------------------------------------------

    def fork(self, session_id: str, new_id: str, cwd: Path | None = None) -> SessionLog:
        """A new session holding a copy of ``session_id``'s history so far, recording its parent."""
        check_session_id(new_id)
        source = self.read(session_id)
        header = SessionHeader(
            session_id=new_id,
            cwd=cwd or source.header.cwd,
            model=source.model,
            mode=source.mode,
            additional_dirs=source.header.additional_dirs,
            parent=session_id,
        )
        title = f"{source.title} (fork)" if source.title else None
        file = self.create(header)
        try:
            for record in source.records[1:]:
                if not isinstance(record, SettingsRecord) or record.title is None:
                    file.write(record.model_copy(update={"session_id": new_id}))
            if title is not None:
                file.write(SettingsRecord(session_id=new_id, title=title))
        finally:
            file.close()
        # The copied history names its saved prompts by turn, and its checkpoints by number: the fork gets its own
        # copies (checkpoints only of the same working directory; their packs are linked, never changed in place).
        if (prompts := self.prompts_dir(session_id)).is_dir():
            shutil.copytree(prompts, self.prompts_dir(new_id), dirs_exist_ok=True)
        if (checkpoints := self.checkpoints_dir(session_id)).is_dir() and header.cwd == source.header.cwd:
            shutil.copytree(checkpoints, self.checkpoints_dir(new_id), copy_function=_link_or_copy, dirs_exist_ok=True)
        self._write_meta(header, title)
        return self.read(new_id)

    def delete(self, session_id: str) -> Path:
        """Remove a session's directory; returns what was removed. A session another process is writing to
        is not removed (``SessionError``)."""
        history = self._existing(session_id)
        if lock.held_elsewhere(HistoryFile.lock_path(history)):
            raise SessionHeldError(f"session {session_id} is open in another codling process; close it there first")
        directory = history.parent
        shutil.rmtree(directory)
        return directory


def _link_or_copy(source: str, destination: str) -> None:
    """Link ``destination`` to ``source`` if it is a checkpoint pack or index (written once, replaced whole,
    never changed in place), else copy it (the log is appended to)."""
    if Path(source).parent.name == "objects":
        try:
            os.link(source, destination)
            return
        except OSError:
            pass  # another file system: copied
    shutil.copy2(source, destination)
