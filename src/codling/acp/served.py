"""A session as the ACP agent serves it: the live session (``store/live.py``, what both front ends share) and
what only the protocol needs of it — the line of prompts waiting for its one turn, cancels that reach a prompt
still being prepared, the greeting a first prompt waits for, and when the client surely knows the session.

A new session is answered before it is live (``AgentCore._open_later``): its brain and history are made right
after the response, once the warm-up thread has imported them. Until then the session is *opening*: requests
that need it wait for it (``ready``), a cancel is counted for the prompt waiting in its turn line, and a session
that could not be opened answers every request with the reason.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from acp import RequestError

if TYPE_CHECKING:
    from codling.brain.session import ConversationSession
    from codling.store.live import LiveSession


@dataclass
class ServedSession:
    """One open (or opening) session of the agent: its live session and the protocol's state around its turns."""

    id: str
    """The session id."""
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
    _live: LiveSession | None = None
    _opened: asyncio.Future[None] = field(default_factory=lambda: asyncio.get_running_loop().create_future())
    """Done once the session is live, or holds the ``RequestError`` saying why it could not be opened."""

    def opened(self, live: LiveSession) -> None:
        """The session is live: requests waiting for it go on."""
        self._live = live
        self._opened.set_result(None)

    def failed(self, error: RequestError) -> None:
        """The session could not be opened: every request naming it gets ``error`` (unless it was live already)."""
        if not self._opened.done():
            self._opened.set_exception(error)
            self._opened.exception()  # retrieved: asyncio need not report it if no request ever comes

    async def ready(self) -> None:
        """Return once the session is live; raise the ``RequestError`` if it could not be opened."""
        await asyncio.shield(self._opened)

    @property
    def is_live(self) -> bool:
        """Whether the session is live (not opening, not failed)."""
        return self._live is not None

    @property
    def live(self) -> LiveSession:
        """The live session: only once ``ready`` (or ``is_live``) says so."""
        if self._live is None:
            raise RuntimeError(f"session {self.id} is not live yet")
        return self._live

    @property
    def brain(self) -> ConversationSession:
        """The live session's brain, which most of the protocol's requests work on."""
        return self.live.brain

    @asynccontextmanager
    async def turn_slot(self) -> AsyncIterator[bool]:
        """Wait until the session is live and every prompt that came before this one has ended, and hold the
        session's one turn slot; yields False (run nothing) if a cancel arrived while this prompt waited."""
        asked = self._cancels
        self.waiting += 1
        try:
            await self.ready()
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
        if self._live is None:
            return  # opening: the prompts waiting for it see the count
        if self.brain.running:
            self.brain.cancel()
        elif self.preparing_prompt:
            self.cancel_pending = True
            if self._greeting_wait is not None:
                self._greeting_wait.cancel()

    async def close(self) -> None:
        """Stop introducing the session, then close it (``LiveSession.close``); one still opening is closed once
        live, one that could not be opened has nothing to close."""
        with contextlib.suppress(RequestError):
            await self.ready()
        if self.introduction is not None:
            self.introduction.cancel()
        if self._live is not None:
            await self._live.close()
