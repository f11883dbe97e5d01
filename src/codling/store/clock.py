"""The time records are stamped with."""

from __future__ import annotations

from datetime import UTC, datetime


def now() -> str:
    """The current UTC time as written in records."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
