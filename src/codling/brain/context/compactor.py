"""Compaction as a session does it: through the summarize special turn, announced within the user's turn.

Observers see ``CompactionStarted``, then (once the summary replaced the history) ``ContextCompacted`` and a
``UsageUpdated``; never the summarize request itself. The summarize turn (``builtin_turns.summarize_turn``)
gets a bounded transcript of the history; its answer, or the deterministic fallback when the model fails,
times out or answers with something unusable, replaces the history together with the recent user messages.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

from codling.brain.builtin_turns import summarize_turn
from codling.brain.context import compaction
from codling.brain.events import (
    CompactionReason,
    CompactionStarted,
    ContextCompacted,
    Event,
    TextDelta,
    ToolCallFinished,
)
from codling.brain.interactions import Interaction
from codling.brain.special_config import SpecialTurnResult

if TYPE_CHECKING:
    from codling.brain.host import SessionHost


async def compact(
    session: SessionHost,
    turn_id: str,
    send: Callable[[Event], None],
    reason: CompactionReason,
    instructions: str | None = None,
) -> None:
    """Replace the session's history by recent user messages plus a summary, telling observers (through
    ``send``, the turn's own channel) before and after."""
    state = session.state
    if not state.entries:
        send(TextDelta(turn_id, "There is nothing to compact yet."))
        return
    call_id = f"compact-{uuid.uuid4().hex[:12]}"
    before = session.context_used()
    send(CompactionStarted(turn_id, call_id, before, reason))
    model = state.model
    entries = list(state.entries)
    kept = compaction.kept_user_messages(entries, compaction.kept_user_budget(model.context_limit))

    def fallback() -> str:
        return compaction.fallback_summary(
            entries,
            recent_files=state.recent_files,
            commands=[c for s in state.turn_summaries for c in s.commands],
            delegate_results=[f"{role}: {reply}" for role, reply in state.delegate_notes.items()],
        )

    config = summarize_turn(
        compaction.compaction_input(entries, compaction.input_budget(model.context_limit, model.max_output_tokens)),
        instructions=instructions,
        keep=[Interaction("user", e.text) for e in kept],
        max_tokens=model.max_output_tokens,
        fallback=fallback,
        metadata={"reason": reason},
    )

    async def announce(result: SpecialTurnResult) -> None:
        kept_texts = tuple(i.text for i in result.persisted if i.kind == "user")
        after = session.context_used()
        send(ContextCompacted(turn_id, call_id, result.output, kept_texts, before, after, result.fallback, reason))
        send(session.usage_event(turn_id))

    try:
        await session.execute_special_turn(config, announce=announce)
    except asyncio.CancelledError:
        send(ToolCallFinished(turn_id, call_id, "compact", "failed", "cancelled: the history was not compacted"))
        raise
