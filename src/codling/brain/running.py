"""The state of one user turn while it runs (``RunningTurn``): made by ``ConversationSession.stream()`` for each
turn, so nothing of a turn needs resetting before the next one."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from codling.brain.events import Event
from codling.llm.providers import Endpoint

if TYPE_CHECKING:
    from codling.brain.context.requests import TurnRequests


@dataclass(eq=False)
class RunningTurn:
    """One user turn, from ``stream()`` until its last event reached the observers."""

    id: str
    emit: Callable[[Any], None] | None
    """Puts an item on the stream's queue (events, barriers); None once nothing consumes it, so a barrier put
    there would never resolve."""
    consumer: asyncio.Task[Any] | None
    """The task iterating ``stream()``: it hands the turn's events to the observers."""
    delivered: asyncio.Event = field(default_factory=asyncio.Event)
    """Set once the turn's last event reached the observers."""
    task: asyncio.Task[None] | None = None
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
    """The request and reply the title special turn names the session after, once the turn is delivered."""
    block: str = ""
    """The context block the turn's latest request carried before the prompt (see ``context/layout.py``)."""

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

    def first_input_reported(self, tokens: int, replacements: int) -> None:
        """The provider's input tokens for the turn's first request, counted against the history as it is
        now (``replacements``)."""
        self.first_input = tokens
        self.first_input_history = replacements
