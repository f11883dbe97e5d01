"""A session as the ACP agent serves it: the live session (``store/live.py``, what both front ends share) and
what only the protocol needs of it — the line of prompts waiting for its one turn, cancels that reach a prompt
still being prepared, the greeting a first prompt waits for, and when the client surely knows the session.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from codling.brain.session import ConversationSession
    from codling.store.live import LiveSession


@dataclass
class ServedSession:
    """One open session of the agent: its live session and the protocol's state around its turns."""

    live: LiveSession
    preparing_prompt: bool = False
    """A prompt was accepted and is being prepared (attachments read) before its turn starts."""
    cancel_pending: bool = False
    """A cancel arrived while the prompt was being prepared: the turn must not start."""
    greeting: asyncio.Task[None] | None = None
    """The greeting special turn, while it runs (see ``greet``)."""
    known_to_client: asyncio.Event = field(default_factory=asyncio.Event)
    """Set once the client has named the session in a request, so it surely knows it (an editor drops
    notifications for a session it has not registered yet)."""
    introduction: asyncio.Task[None] | None = None
    """What the client is told of the session once it knows it (its commands, its usage), while pending."""
    waiting: int = 0
    """How many prompts wait for their turn behind the running one."""
    stale_model: bool = False
    """The model's key was removed (a logout) while a turn ran: the model is built again before the next one."""
    _greeting_wait: asyncio.Future[Any] | None = None
    _turn_line: asyncio.Lock = field(default_factory=asyncio.Lock)
    """Held by the prompt whose turn runs (or is being prepared); the others wait in arrival order (asyncio's
    lock wakes its waiters first come, first served)."""
    _cancels: int = 0
    """How many cancels have arrived: a prompt that waited through one does not run."""

    @property
    def id(self) -> str:
        """The session id."""
        return self.live.id

    @property
    def brain(self) -> ConversationSession:
        """The live session's brain, which most of the protocol's requests work on."""
        return self.live.brain

    @asynccontextmanager
    async def turn_slot(self) -> AsyncIterator[bool]:
        """Wait until every prompt that came before this one has ended, and hold the session's one turn slot;
        yields False (run nothing) if a cancel arrived while this prompt waited."""
        asked = self._cancels
        self.waiting += 1
        try:
            await self._turn_line.acquire()
        finally:
            self.waiting -= 1
        try:
            yield self._cancels == asked
        finally:
            self._turn_line.release()

    def greet(self) -> None:
        """Start the greeting special turn in the background: its reply (only that) enters the history and
        reaches observers as ``SpecialTurnPersisted``; a failed greeting leaves the session as it was."""
        from codling.brain.builtin_turns import greeting_turn

        async def greeting() -> None:
            await self.brain.execute_special_turn(greeting_turn())

        self.greeting = self.brain.start_background(greeting())

    async def greeted(self) -> None:
        """Wait until the greeting, if one was started, is over (shown, failed or cancelled), or until ``cancel``
        cancels the prompt waiting for it (the greeting goes on). A prompt cancelled before it got here does not
        wait at all."""
        if self.greeting is None or self.cancel_pending:
            return
        # asyncio.wait never raises for the greeting's own failure, and cancelling it leaves the greeting alone.
        self._greeting_wait = waiter = asyncio.ensure_future(asyncio.wait([self.greeting]))
        try:
            await waiter
        except asyncio.CancelledError:
            if not self.cancel_pending:
                raise
        finally:
            self._greeting_wait = None
        if self.greeting.done():
            self.greeting = None

    def cancel(self) -> None:
        """Cancel the running turn, or the prompt being prepared for one, and every prompt waiting for its turn."""
        self._cancels += 1
        if self.brain.running:
            self.brain.cancel()
        elif self.preparing_prompt:
            self.cancel_pending = True
            if self._greeting_wait is not None:
                self._greeting_wait.cancel()

    async def close(self) -> None:
        """Stop introducing the session, then close it (``LiveSession.close``)."""
        if self.introduction is not None:
            self.introduction.cancel()
        await self.live.close()
