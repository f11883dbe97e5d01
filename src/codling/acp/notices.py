"""Brain events → the newer protocol's ``notice`` and ``compaction_update`` values, for a client that advertised
them (``session.notices``, ``session.compaction``): pure functions, as ``translate`` is for the SDK's updates.

A client that advertised neither gets the tool-call cards ``translate`` makes for these events, as before.
"""

from __future__ import annotations

import re
from typing import assert_never

from codling.acp.newer import CompactionUpdate, Notice
from codling.brain.events import (
    CompactionStarted,
    ContextCompacted,
    ContextWarning,
    McpServerNotice,
    ProviderRetrying,
)

NOTICED = (ContextWarning, McpServerNotice, ProviderRetrying)
"""The events a client that presents notices is told of by notice (or not at all), never by a card. The wait
for MCP servers is not one of them: it has a beginning and an end, which a card shows and a notice (which
nothing can update) cannot; it would read "Starting MCP servers…" for ever."""

RETRY_HINT = "codling sends the request again by itself; cancel the turn to stop waiting."
"""The description of a retry's notice: what happens next, and what the user can do."""

_FIRST_CLAUSE = re.compile(r"(?<=\S)(?:: |; |\. )")


def headline(message: str) -> tuple[str, str | None]:
    """A notice's title and description from one message: its first clause (up to the first ": ", "; " or
    ". "), and the rest (None when there is no rest)."""
    found = _FIRST_CLAUSE.search(message)
    if found is None or not message[: found.start()].strip():
        return message.strip(), None
    rest = message[found.end() :].strip()
    return message[: found.start()].strip(), rest or None


Noticed = ContextWarning | McpServerNotice | ProviderRetrying
"""The kinds of ``NOTICED``."""


def notice(event: Noticed) -> Notice | None:
    """The notice a client that presents notices gets for ``event`` (None: nothing, e.g. a retry's wait
    ending: a notice is not updated). Every one is a warning: the turn goes on, without what failed."""
    match event:
        case ContextWarning():
            title, description = headline(event.message)
            return Notice("warning", title, description)
        case McpServerNotice():
            # The session goes on without the server's tools: a warning, as the schema's own example has it.
            return Notice("warning", event.message, event.detail or None)
        case ProviderRetrying() if event.status == "waiting":
            return Notice("warning", event.title, RETRY_HINT)
        case ProviderRetrying():
            # The retry began or was cancelled: the user sees the turn go on, or their own cancel. Giving up is
            # the turn's failure, which the prompt's error says (with the attempts made); a notice would say it
            # twice.
            return None
        case _:
            assert_never(event)


def compaction_update(event: CompactionStarted | ContextCompacted, *, replaying: bool) -> CompactionUpdate | None:
    """The compaction update for a compaction's start or end (None: a replayed start, since a replay shows each
    recorded compaction once, completed)."""
    match event:
        case CompactionStarted():
            return None if replaying else CompactionUpdate(event.call_id, "in_progress")
        case ContextCompacted():
            return CompactionUpdate(
                event.call_id,
                "completed",
                summary=(*_fallback_note(event), event.summary),
                tokens_before=event.tokens_before,
                tokens_after=event.tokens_after,
                fallback=event.fallback,
            )
        case _:
            assert_never(event)


def _fallback_note(event: ContextCompacted) -> tuple[str, ...]:
    """What the user should know about this compaction beyond its summary, said once (the summarizer is being
    skipped), as a block before it. (A summary codling assembled without the model says so itself.)"""
    return (f"{event.note}.",) if event.fallback and event.note else ()
