"""A compaction (``Compaction``): the history replaced by recent user messages plus a summary, as a step of
the user turn that needs it (``/compact``, the threshold before a turn's first request, between two requests,
after the provider's overflow). The work is ``context/compactor.py``'s; cancelled, the compaction's card is
closed as not done."""

from __future__ import annotations

import asyncio
import uuid

from codling.brain.context import compactor
from codling.brain.events import CompactionReason, TextDelta, ToolCallFinished
from codling.brain.turn_context import TurnContext
from codling.brain.turn_task import TurnTask, perform


class Compaction(TurnTask[None]):
    """One compaction within ``turn`` (see the module's docstring). ``pending`` is what the next request adds
    to the context as it stands (the turn's prompt), so before and after are the next request's size."""

    kind = "compaction"

    def __init__(
        self, turn: TurnContext, reason: CompactionReason, instructions: str | None = None, pending: int = 0
    ) -> None:
        self.turn = turn
        self.reason: CompactionReason = reason
        self.instructions = instructions
        self.pending = pending
        self.call_id: str | None = None
        """The compaction's card (None until it started)."""

    async def run(self) -> None:
        """Compact, or say there is nothing to compact."""
        turn = self.turn
        if not turn.state.entries:
            turn.send(TextDelta(turn.id, "There is nothing to compact yet."))
            return
        self.call_id = f"compact-{uuid.uuid4().hex[:12]}"
        await compactor.compact(turn, self.call_id, self.reason, self.instructions, self.pending)

    def abort(self, error: Exception | asyncio.CancelledError) -> bool:
        """A cancel closes the card (the history stays as it was); the error goes on to the turn."""
        if isinstance(error, asyncio.CancelledError) and self.call_id is not None:
            reason = "cancelled: the history was not compacted"
            self.turn.send(ToolCallFinished(self.turn.id, self.call_id, "compact", "failed", reason))
        return False

    async def finish(self) -> None:
        """Nothing more: the compactor announced the result."""


async def compact_if_due(turn: TurnContext, prompt: str) -> None:
    """Before a user turn's first request: compact when the context engine says the request would pass the
    compaction point and compaction can help (see ``ContextEngine.compaction_due``)."""
    engine = turn.context
    pending = engine.compaction_due(turn.id, turn.send, prompt)
    if pending is None:
        return
    await perform(Compaction(turn, "threshold", pending=pending))
    engine.after_compaction(turn.id, turn.send, pending)
