"""Choosing a session to resume at the terminal (``codling run --resume`` with no id, ``/resume`` in a chat).

Every session of the directory can be reached, with a plain line of input: the list shows :data:`PAGE_SIZE` at a
time, newest first, numbered on from page to page (``m`` shows more), and words typed instead of a number list only
the sessions whose title, first request or id holds them all. A number chooses from the list shown last. Each
session is one line of plain text, which a narrow terminal wraps.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from codling.store.index import SessionListing

PAGE_SIZE = 10
"""How many sessions the picker shows at a time (the most recently updated first)."""

MAX_ATTEMPTS = 3
"""How many unclear answers in a row the picker takes before it gives up."""

MORE = ("m", "more")
"""The answers that show the next page."""

ALL = "*"
"""The answer that lists every session again after a filter."""

NUMBER_DIGITS = 3
"""``/resume N`` with at most this many digits names a number of the list; more digits start a session id (its
date)."""


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


About = Callable[["SessionListing"], str]
"""A session's first request (``SessionStore.first_request``), read only for a session its title does not match."""


def matching(sessions: Sequence[SessionListing], words: str, about: About | None = None) -> list[SessionListing]:
    """The sessions whose title, id or (``about``) first request holds every one of ``words`` (ignoring case), in
    their order."""
    wanted = words.casefold().split()

    def holds(text: str) -> bool:
        return all(word in text.casefold() for word in wanted)

    def matches(session: SessionListing) -> bool:
        known = f"{session.title or ''} {session.session_id}"
        return holds(known) or (about is not None and holds(f"{known} {about(session)}"))

    return [s for s in sessions if matches(s)]


@dataclass(frozen=True)
class Listing:
    """What a picker lists: the sessions it chooses from (all of a place's, or those matching ``words``), newest
    first, and how many of them it has shown so far (the numbers a user may answer with)."""

    sessions: tuple[SessionListing, ...]
    where: str
    """Whose sessions: ``in DIR`` or ``in every directory``."""
    total: int
    """How many sessions the place has, filtered or not."""
    words: str = ""
    """The filter's words; empty: every session."""
    shown: int = 0

    @property
    def remaining(self) -> int:
        """How many sessions of the list are not shown yet."""
        return len(self.sessions) - self.shown

    def chosen(self, number: int) -> SessionListing | None:
        """The session shown as ``number``, or None when no such number was shown."""
        return self.sessions[number - 1] if 1 <= number <= self.shown else None


def listing(sessions: Sequence[SessionListing], where: str, words: str = "", about: About | None = None) -> Listing:
    """The list of ``sessions`` (newest first) to show from its start: those matching ``words`` (:func:`matching`),
    or all."""
    words = " ".join(words.split())
    return Listing(tuple(matching(sessions, words, about) if words else sessions), where, len(sessions), words)


def show_page(shown: Listing, output: TextIO, now: datetime) -> Listing:
    """Write the next :data:`PAGE_SIZE` sessions of ``shown`` on ``output``, numbered on from the last page (a
    heading first when it is the first page): title, age and id. The listing with those counted as shown."""
    start = shown.shown
    page = shown.sessions[start : start + PAGE_SIZE]
    if start == 0:
        output.write(heading(shown) + ":\n")
    for number, summary in enumerate(page, start=start + 1):
        title = summary.title or "(untitled)"
        output.write(f"{number:>3}. {title}  · {age(summary.updated_at, now)} · {summary.session_id}\n")
    return replace(shown, shown=start + len(page))


def heading(shown: Listing) -> str:
    """What a listing lists: ``Sessions in /p matching “parser” (3 of 25)``, ``Sessions in /p (25, newest first)``."""
    if shown.words:
        return f"Sessions {shown.where} matching “{shown.words}” ({len(shown.sessions)} of {shown.total})"
    return f"Sessions {shown.where} ({shown.total}, newest first)"


def no_match(shown: Listing) -> str:
    """What to say when no session matches a listing's words."""
    return f"No session {shown.where} has “{shown.words}” in its title, first request or id."


def pick_session(
    sessions: Sequence[SessionListing],
    *,
    input: TextIO,
    output: TextIO,
    now: datetime,
    where: str,
    about: About | None = None,
) -> str | None:
    """Offer ``sessions`` (newest first) a page at a time on ``output`` and read the choice from ``input``: a number
    shown, Enter for the first shown, ``m`` for more, words to list only the sessions holding them (in their title,
    id or ``about`` first request; ``*``: all again), ``q`` (or end of input) for none. The chosen session's id, or
    None."""
    if not sessions:
        return None
    current = show_page(listing(sessions, where), output, now)
    unclear = 0
    while unclear < MAX_ATTEMPTS:
        more = f", m: {current.remaining} more" if current.remaining else ""
        output.write(f"Resume which? [number, words to filter{more}, Enter: 1, q: none] ")
        output.flush()
        line = input.readline()
        if not line:  # end of input
            output.write("\n")
            return None
        answer = line.strip()
        if answer.lower() in ("q", "quit"):
            return None
        if answer == "":
            return current.sessions[0].session_id
        if answer.isdigit():
            if (summary := current.chosen(int(answer))) is not None:
                return summary.session_id
            output.write(f"{answer} is not one of the numbers shown.\n")
            unclear += 1
            continue
        if answer.lower() in MORE:
            if not current.remaining:
                output.write(f"That is all of them ({len(current.sessions)}); type words to filter, or a number.\n")
                unclear += 1
                continue
            current, unclear = show_page(current, output, now), 0
            continue
        filtered = listing(sessions, where, "" if answer == ALL else answer, about)
        if not filtered.sessions:
            output.write(no_match(filtered) + f" Other words, or {ALL} for all.\n")
            unclear += 1
            continue
        current, unclear = show_page(filtered, output, now), 0
    return None
