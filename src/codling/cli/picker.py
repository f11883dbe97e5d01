"""Choosing a session to resume at the terminal (``codling run --resume`` with no id, ``/resume`` in a chat)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from codling.store.index import SessionSummary

PICKER_SIZE = 10
"""How many sessions the picker offers (the most recently updated)."""

MAX_ATTEMPTS = 3
"""How many unclear answers the picker takes before it gives up."""


def age(updated_at: str, now: datetime) -> str:
    """How long ago an ISO timestamp was, in the largest whole unit: ``just now``, ``5 min ago``, ``3 days ago``."""
    try:
        then = datetime.fromisoformat(updated_at.replace("Z", "+00:00"))
    except ValueError:
        return updated_at
    seconds = max(0, int((now - then).total_seconds()))
    for unit, size in (("day", 86_400), ("h", 3_600), ("min", 60)):
        if seconds >= size:
            count = seconds // size
            return f"{count} {unit}{'s' if unit == 'day' and count > 1 else ''} ago"
    return "just now"


def offer(sessions: Sequence[SessionSummary], *, output: TextIO, now: datetime, where: str) -> list[SessionSummary]:
    """Write the first :data:`PICKER_SIZE` of ``sessions`` (newest first) as a numbered list on ``output``: title,
    age and id. The sessions listed, in their numbers' order."""
    offered = list(sessions[:PICKER_SIZE])
    if not offered:
        return offered
    more = f" (the newest {len(offered)} of {len(sessions)})" if len(sessions) > len(offered) else ""
    output.write(f"Sessions {where}{more}:\n")
    for number, summary in enumerate(offered, start=1):
        title = summary.title or "(untitled)"
        output.write(f"{number:>3}. {title}  · {age(summary.updated_at, now)} · {summary.session_id}\n")
    return offered


def pick_session(
    sessions: Sequence[SessionSummary], *, input: TextIO, output: TextIO, now: datetime, where: str
) -> str | None:
    """Offer the first :data:`PICKER_SIZE` of ``sessions`` (newest first) as a numbered list on ``output`` and
    read the choice from ``input``: a number, Enter for the newest, ``q`` (or end of input) for none. The chosen
    session's id, or None."""
    offered = offer(sessions, output=output, now=now, where=where)
    if not offered:
        return None
    for _ in range(MAX_ATTEMPTS):
        output.write(f"Resume which? [1-{len(offered)}, Enter: 1, q: none] ")
        output.flush()
        line = input.readline()
        if not line:  # end of input
            output.write("\n")
            return None
        answer = line.strip().lower()
        if answer in ("q", "quit"):
            return None
        if answer == "":
            return offered[0].session_id
        if answer.isdigit() and 1 <= int(answer) <= len(offered):
            return offered[int(answer) - 1].session_id
        output.write(f"{answer!r} is not one of the numbers shown.\n")
    return None
