"""What a running turn knows (``TurnContext``) and the session's one slot for it (``TurnSlot``).

A turn context is made by ``ConversationSession.stream()`` for each turn, so nothing of a turn needs resetting
before the next one. It holds the session the turn reads (its state, options, models, context engine), the
turn's log, its channel to the stream (``send``: the log, the session's state and the observers, in that
order), its cancellation, and what its requests found out (the provider's first count, the endpoint, the
context block). The turn kinds (``brain/turn_kinds/``), the model turn, compaction and the slash commands all
reach the turn through it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from codling.brain.delivery import Barrier
from codling.brain.events import Event
from codling.brain.host import SessionHost
from codling.brain.state import SessionState
from codling.brain.turns import TurnLog

if TYPE_CHECKING:
    from codling.brain.context.engine import ContextEngine
    from codling.brain.context.requests import TurnRequests
    from codling.llm.providers import Endpoint

DONE = object()
"""The last item a turn puts on its stream's queue (after ``TurnEnded``)."""

STOP_DELIVERY_SECONDS = 10
"""How long ``TurnSlot.stop`` waits for a cancelled turn's last events to reach the observers."""

Follow = Callable[[SessionState, TurnLog, Event], None]
"""What the session keeps of each event as it happens (``restore.follow``, shared with restoring)."""


@dataclass(eq=False)
class TurnContext:
    """One turn, from ``stream()`` until its last event reached the observers."""

    id: str
    session: SessionHost
    log: TurnLog
    put: Callable[[Any], None]
    """Puts an item on the stream's queue (events, barriers, ``DONE``)."""
    follow: Follow
    consumer: asyncio.Task[Any] | None
    """The task iterating ``stream()``: it hands the turn's events to the observers."""
    emit: Callable[[Any], None] | None = None
    """``put`` while something consumes the queue; None after, so a barrier put there would never resolve."""
    delivered: asyncio.Event = field(default_factory=asyncio.Event)
    """Set once the turn's last event reached the observers."""
    task: asyncio.Task[Any] | None = None
    """The task running the turn itself."""
    cancel_requested: bool = False
    started: bool = False
    """The turn got past its first events: cancelling its task now lets it say that it ended (a turn that has
    not started sees ``cancel_requested`` when it does)."""
    notices: Callable[[Event], None] | None = None
    """Where MCP servers' notices go while the turn runs (its ``send``, once the servers were awaited)."""
    first_input: int = 0
    """The input tokens the provider reported for the turn's first request (0: none yet)."""
    first_input_history: int = 0
    """``SessionState.replacements`` when they were reported (a later compaction makes them stale)."""
    requests: TurnRequests | None = None
    """The turn's model requests as the context engine sees them (None: none yet)."""
    endpoint: Endpoint | None = None
    """Where the turn's requests go (named when they fail)."""
    title_due: tuple[str, str] | None = None
    """The request and reply a title could name the session after (a user turn with a reply sets it)."""
    block: str = ""
    """The context block the turn's latest request carried before the prompt (see ``context/layout.py``)."""
    checkpoint: int | None = None
    """The workspace's checkpoint taken before the turn (None: none was)."""

    def __post_init__(self) -> None:
        self.emit = self.put

    @property
    def state(self) -> SessionState:
        """The session's state, as the turn reads and changes it."""
        return self.session.state

    @property
    def context(self) -> ContextEngine:
        """The session's context engine."""
        return self.session.context

    def send(self, event: Event) -> None:
        """The turn's event: into its log, into the session's state, then to the stream (observers, client)."""
        self.log.apply(event)
        self.follow(self.session.state, self.log, event)
        self.put(event)

    async def delivered_so_far(self) -> None:
        """Wait until every event sent so far has been handed to the observers (see ``brain/delivery.py``)."""
        emit = self.emit
        if emit is None:
            return
        barrier: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        emit(Barrier(barrier))
        await barrier

    @property
    def running(self) -> bool:
        """Whether the turn's task has not finished."""
        return self.task is not None and not self.task.done()

    @property
    def in_progress(self) -> bool:
        """Whether the turn runs, or its last events have not yet reached the observers."""
        return self.running or not self.delivered.is_set()

    def cancel(self) -> None:
        """Stop the turn if it runs; it ends with stop reason ``cancelled``."""
        if self.task is None or self.task.done():
            return
        self.cancel_requested = True
        # A turn that has not started yet sees the flag when it does; cancelling its task now would kill it
        # before it could say that it ended.
        if self.started:
            self.task.cancel()

    async def ended(self) -> None:
        """Wait until the turn's task is over, however it ended (without cancelling it if the wait is)."""
        if self.task is not None:
            await asyncio.wait({self.task})

    def first_input_reported(self, tokens: int) -> None:
        """The provider's input tokens for the turn's first request, counted against the history as it is now."""
        self.first_input = tokens
        self.first_input_history = self.session.state.replacements


class TurnSlot:
    """The session's current turn: at most one runs; the latest is kept once it ended (its events may still be
    on their way to the observers)."""

    def __init__(self) -> None:
        self.current: TurnContext | None = None

    @property
    def running(self) -> bool:
        """Whether a turn is in progress."""
        return self.current is not None and self.current.running

    def cancel(self) -> None:
        """Stop the running turn (and its tools); it ends with stop reason ``cancelled``."""
        if self.current is not None:
            self.current.cancel()

    async def stop(self) -> None:
        """Cancel the running turn, if any; wait until it has ended and its last event was delivered."""
        turn = self.current
        if turn is None:
            return
        turn.cancel()
        await turn.ended()
        # The stream's consumer still has to hand the turn's last events to the observers (the recorder).
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(turn.delivered.wait(), STOP_DELIVERY_SECONDS)

    async def delivered(self) -> None:
        """Wait until every event the current turn emitted so far has been handed to the observers."""
        if self.current is not None:
            await self.current.delivered_so_far()

    def inside(self) -> bool:
        """Whether the calling task is part of the turn in progress (the turn itself, or the stream's consumer
        handing its events to the observers): such a caller cannot wait for the turn to be over."""
        turn = self.current
        return turn is not None and turn.in_progress and asyncio.current_task() in (turn.task, turn.consumer)

    async def over(self) -> None:
        """Wait until no user turn is in progress: the last one added its prompt and reply to the history and
        its events reached every observer (so what persists now is recorded after the turn, not inside it)."""
        while (turn := self.current) is not None and turn.in_progress:
            if turn.running:
                await turn.ended()
            else:
                await turn.delivered.wait()
