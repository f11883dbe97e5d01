"""What one turn did (``TurnRecap``): the turn ledger's entries.

Plain data with no imports of the brain's events, which carry it (``TurnEnded.summary``); ``ledger.py`` builds it
from a turn's events and renders it into the next turns' context.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class TurnStep:
    """One tool call of a turn: what it did (its title), how it ended, and the files it touched."""

    title: str
    outcome: str
    """"done", "exit 1" / "timed out after 5s" (commands), "failed: <reason>" or "aborted[: <reason>]"."""
    paths: tuple[Path, ...] = ()
    detail: str = ""
    """What came of it: a command's salient output lines, an edit's size (+added −removed), the key lines of a
    read, a search's count, the start of a delegate's answer."""


@dataclass(frozen=True)
class TurnRecap:
    """What one turn did, built from its events; the last two go into the next turn's prompt."""

    turn_number: int
    request: str
    """The user's request, trimmed."""
    steps: tuple[TurnStep, ...] = ()
    files_changed: tuple[Path, ...] = ()
    """Files edited or written (from the diffs), first change first, each once."""
    commands: tuple[str, ...] = ()
    """Commands run and how they ended, e.g. "`pytest -q` → exit 1"."""
    reply: str = ""
    """The start of the assistant's reply (whole sentences when possible)."""
    error: str | None = None
    """Why the turn failed, if it did."""
    open_plan: tuple[str, ...] = ()
    """The plan's steps not yet completed when the turn ended (if the turn set a plan)."""
    goal: str = ""
    """What the user is after: the request's first sentence (a short follow-up keeps the previous goal)."""
