"""The session store: one directory per session under ``$CODLING_HOME/sessions``.

``<id>/history.jsonl`` is the truth. ``<id>/meta.json`` is a small cache of what listing needs (cwd, title,
parent, model), rewritten only when the title changes and rebuilt from the history when missing or corrupt;
``updated_at`` is the history file's modification time. Listing therefore reads one small file per session.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from codling.errors import SessionError, UnknownSessionError
from codling.secrecy import Redactor
from codling.store.history import HistoryFile, HistoryRecorder, SessionHeader, SessionLog, read_history

log = logging.getLogger(__name__)

HISTORY = "history.jsonl"
META = "meta.json"


@dataclass(frozen=True)
class SessionSummary:
    """What a session list shows."""

    session_id: str
    cwd: Path
    title: str | None
    created_at: str
    updated_at: str
    parent: str | None = None
    model: str = ""


class SessionStore:
    """Creates, opens, lists, forks and deletes sessions on disk."""

    def __init__(self, home: Path, redact: Redactor | None = None) -> None:
        self.root = home / "sessions"
        self._redact = redact or Redactor([])

    def history_path(self, session_id: str) -> Path:
        """Where a session's history.jsonl lives."""
        return self.root / session_id / HISTORY

    # -- writing --------------------------------------------------------------------------------------------

    def create(self, header: SessionHeader) -> HistoryFile:
        """Start a new session's directory with its header record."""
        directory = self.root / header.session_id
        directory.mkdir(parents=True, exist_ok=False)
        file = HistoryFile(directory / HISTORY, header.session_id, self._redact)
        file.write_record(header.record())
        self._write_meta(header, title=None)
        return file

    def open(self, session_id: str) -> HistoryFile:
        """Open an existing session's history for appending (cutting a torn last line first)."""
        path = self.history_path(session_id)
        if not path.exists():
            raise UnknownSessionError(f"no session {session_id} in {self.root}")
        return HistoryFile(path, session_id, self._redact)

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
        meta = {
            "session_id": header.session_id,
            "cwd": str(header.cwd),
            "title": title,
            "created_at": header.created_at,
            "parent": header.parent,
            "model": header.model,
        }
        path = self.root / header.session_id / META
        tmp = path.with_suffix(".tmp")
        tmp.write_text(self._redact(json.dumps(meta, ensure_ascii=False)), encoding="utf-8")
        os.replace(tmp, path)

    # -- reading --------------------------------------------------------------------------------------------

    def read(self, session_id: str) -> SessionLog:
        """Read a whole session back."""
        path = self.history_path(session_id)
        if not path.exists():
            raise UnknownSessionError(f"no session {session_id} in {self.root}")
        return read_history(path)

    def resolve(self, id_or_prefix: str) -> str:
        """The full id of the one session whose id starts with ``id_or_prefix``."""
        if (self.root / id_or_prefix / HISTORY).exists():
            return id_or_prefix
        if not id_or_prefix or not self.root.exists():
            raise UnknownSessionError(f"no session matches {id_or_prefix!r}")
        matches = [p.name for p in self.root.iterdir() if p.name.startswith(id_or_prefix) and (p / HISTORY).exists()]
        if not matches:
            raise UnknownSessionError(f"no session matches {id_or_prefix!r}; see `codling sessions list`")
        if len(matches) > 1:
            raise SessionError(f"{id_or_prefix!r} matches {len(matches)} sessions; give more of the id")
        return matches[0]

    def list(self, cwd: Path | None = None) -> list[SessionSummary]:
        """Every readable session (only those working in ``cwd`` if given), most recently updated first."""
        if not self.root.exists():
            return []
        found: list[SessionSummary] = []
        wanted = str(cwd) if cwd is not None else None
        with os.scandir(self.root) as entries:
            for entry in entries:
                summary = self._summary(Path(entry.path))
                if summary is not None and (wanted is None or str(summary.cwd) == wanted):
                    found.append(summary)
        found.sort(key=lambda s: (s.updated_at, s.session_id), reverse=True)
        return found

    def latest(self, cwd: Path) -> SessionSummary | None:
        """The most recently updated session working in ``cwd``."""
        sessions = self.list(cwd)
        return sessions[0] if sessions else None

    def _summary(self, directory: Path) -> SessionSummary | None:
        try:
            mtime = (directory / HISTORY).stat().st_mtime
        except OSError:
            return None
        updated = datetime.fromtimestamp(mtime, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        meta = self._read_meta(directory)
        if meta is None:
            return None
        return SessionSummary(
            session_id=meta["session_id"],
            cwd=Path(meta["cwd"]),
            title=meta.get("title"),
            created_at=meta.get("created_at", updated),
            updated_at=updated,
            parent=meta.get("parent"),
            model=meta.get("model", ""),
        )

    def _read_meta(self, directory: Path) -> dict[str, Any] | None:
        try:
            meta = json.loads((directory / META).read_text(encoding="utf-8"))
            if isinstance(meta, dict) and "session_id" in meta and "cwd" in meta:
                return meta
        except (OSError, ValueError):
            pass
        # The cache is missing or damaged: rebuild it from the history, the source of truth.
        try:
            session = read_history(directory / HISTORY)
        except (OSError, SessionError) as e:
            log.warning("%s: not a readable session (%s)", directory, e)
            return None
        self._write_meta(session.header, session.title)
        return self._read_meta(directory) if (directory / META).exists() else None

    # -- whole sessions -------------------------------------------------------------------------------------

    def fork(self, session_id: str, new_id: str, cwd: Path | None = None) -> SessionLog:
        """A new session holding a copy of ``session_id``'s history so far, recording its parent."""
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
                if record.get("kind") != "settings" or "title" not in record:
                    file.write_record({**record, "session_id": new_id})
            if title is not None:
                file.append({"kind": "settings", "title": title})
        finally:
            file.close()
        self._write_meta(header, title)
        return self.read(new_id)

    def delete(self, session_id: str) -> Path:
        """Remove a session's directory; returns what was removed."""
        directory = self.root / session_id
        if not (directory / HISTORY).exists():
            raise UnknownSessionError(f"no session {session_id} in {self.root}")
        shutil.rmtree(directory)
        return directory
