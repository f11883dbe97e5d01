"""Watching a session's events in tests."""

from __future__ import annotations

from codling.brain.events import Event
from codling.brain.session import ConversationSession


def observed(session: ConversationSession) -> list[Event]:
    """A list that receives every event ``session`` emits from now on, in order."""
    seen: list[Event] = []

    async def observer(event: Event) -> None:
        seen.append(event)

    session.subscribe(observer)
    return seen
