"""The first record of a session, as the code holds it.

Light on purpose: the terminal plans a new session (``cli/session_plan.py``) before its input line opens, and the
records' pydantic models (``store/records.py``) load only when a header is written or read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from codling.store.clock import now
from codling.vocabulary import PermissionMode

if TYPE_CHECKING:
    from codling.store.records import SessionRecord


@dataclass(frozen=True)
class SessionHeader:
    """The first record of a session: where it works and how it started (never secrets)."""

    session_id: str
    cwd: Path
    model: str
    mode: PermissionMode
    additional_dirs: tuple[Path, ...] = ()
    parent: str | None = None
    created_at: str = field(default_factory=now)

    def record(self) -> SessionRecord:
        """The ``session`` record."""
        from codling.store.records import SessionRecord

        return SessionRecord(
            ts=self.created_at,
            session_id=self.session_id,
            cwd=str(self.cwd),
            model=self.model,
            mode=self.mode,
            additional_dirs=[str(d) for d in self.additional_dirs],
            parent=self.parent,
        )

    @classmethod
    def from_record(cls, record: SessionRecord) -> SessionHeader:
        """The inverse of :meth:`record`."""
        return cls(
            session_id=record.session_id,
            cwd=Path(record.cwd),
            model=record.model,
            mode=record.mode,
            additional_dirs=tuple(Path(d) for d in record.additional_dirs),
            parent=record.parent,
            created_at=record.ts,
        )
