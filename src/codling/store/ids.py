"""Session ids: the one fixed form codling gives out, checked wherever an id arrives from outside.

An id is ``YYYYMMDD-`` plus 12 lowercase hex digits (``20261122-0b9f3c2a41de``). It becomes a directory name
under ``$CODLING_HOME/sessions``, so anything else (``..``, slashes, NUL, overlong text) is refused before it
can reach a path.
"""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime

from codling.errors import InvalidSessionIdError

SESSION_ID = re.compile(r"[0-9]{8}-[0-9a-f]{12}")
"""The whole form of a session id."""

_PREFIX = re.compile(r"[0-9a-f-]{1,21}")
"""What a user may type to name a session by the start of its id."""


def new_session_id() -> str:
    """A fresh session id: time-ordered, so ids sort by creation."""
    return f"{datetime.now(UTC).strftime('%Y%m%d')}-{uuid.uuid4().hex[:12]}"


def is_session_id(value: object) -> bool:
    """Whether ``value`` is a well-formed session id."""
    return isinstance(value, str) and SESSION_ID.fullmatch(value) is not None


def check_session_id(value: object) -> str:
    """``value`` if it is a well-formed session id; raise ``InvalidSessionIdError`` otherwise."""
    if not is_session_id(value):
        raise InvalidSessionIdError(f"{_shown(value)} is not a session id (they look like 20261122-0b9f3c2a41de)")
    assert isinstance(value, str)
    return value


def check_prefix(value: str) -> str:
    """``value`` if it may be the start of a session id (digits, lowercase hex and ``-``); raise
    ``InvalidSessionIdError`` otherwise."""
    if _PREFIX.fullmatch(value) is None:
        raise InvalidSessionIdError(
            f"{_shown(value)} is not a session id or the start of one (they look like 20261122-0b9f3c2a41de)"
        )
    return value


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "…"
