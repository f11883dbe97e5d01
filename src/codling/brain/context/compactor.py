"""Compaction's work (run by ``turn_kinds/compaction.Compaction``): through the summarize special turn, announced
within the user's turn.

Observers see ``CompactionStarted``, then (once the summary replaced the history) ``ContextCompacted`` and a
``UsageUpdated``; never the summarize request itself. The summarize turn (``builtin_turns.summarize_turn``)
reads the history as the user turns send it (so a provider's prefix cache serves it) when it fits beside the
summary request, else a bounded transcript of it; its answer, or the deterministic fallback when the model
fails, times out or answers with something unusable, replaces the history together with the recent user
messages.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from codling.brain.builtin_turns import SUMMARY_HEADROOM, summarize_turn
from codling.brain.builtin_turns import summarize_prompt as _prompt_for
from codling.brain.context import compaction
from codling.brain.context.budget import Budget
from codling.brain.context.compaction import DEFAULT_THRESHOLD
from codling.brain.context.facts import ranked_facts
from codling.brain.context.fallback import FallbackInput, fallback_summary
from codling.brain.context.ledger import FULL_TURNS, one_line, render_turn_recap
from codling.brain.context.pins import render_pins
from codling.brain.events import (
    CompactionReason,
    CompactionStarted,
    ContextCompacted,
)
from codling.brain.interactions import Interaction
from codling.brain.special_config import SpecialTurnConfig, SpecialTurnResult
from codling.brain.state import SessionState
from codling.llm.tokens import count_tokens

if TYPE_CHECKING:
    from codling.brain.turn_context import TurnContext


BREAKER_FAILURES = 2
"""After this many compactions in a row whose summarizer failed, the summarizer is skipped for a while."""
BREAKER_SKIPS = 3
"""How many compactions then use the fallback summary without asking the summarizer, before it is tried again."""

SHRINK_TRIES = 2
"""How often a summarizer request the provider found too long is trimmed (oldest messages first) and sent again."""


LEAVES_SHARE = 0.48
"""What a compaction leaves — the next request with the kept messages and the summary — is at most this share of
what a request may hold (issue 28 asks for half; the margin covers the provider counting a little more than
codling), so the session has room to work before it compacts again. The user's new prompt is not part of it
(a pasted log is what it is): it only has to fit beside."""
KEPT_SHARE = 0.25
"""Of the room a compaction leaves the conversation, the share of the user messages it keeps (the summary has
the rest)."""
MIN_KEPT_TOKENS = 128
MIN_SUMMARY_TOKENS = 256
"""Floors below which a window too small for codling gets them anyway (it was told it is too small)."""


@dataclass(frozen=True)
class Leaves:
    """What one compaction may leave: the kept user messages' tokens and the summary's (model or fallback)."""

    kept_user: int
    summary: int
    fallback: int


def leaves(budget: Budget, overhead: int, pending: int = 0) -> Leaves:
    """The compaction's shares of the room the next request has up to ``LEAVES_SHARE`` of the input limit, past
    ``overhead`` (system prompt, tools, context block); each at most the window's own share (``Budget``), so a
    large window is not given more than before. A ``pending`` prompt (the user's new input, a pasted log) is
    not what the compaction leaves: it only has to fit beside it, so it can shrink the summary but never
    starve it below what the room gives."""
    room = int(budget.input_limit * LEAVES_SHARE) - overhead
    kept = max(MIN_KEPT_TOKENS, min(budget.kept_user, int(room * KEPT_SHARE)))
    rest = room - kept
    fits = budget.input_limit - overhead - pending - kept
    return Leaves(
        kept_user=kept,
        summary=max(MIN_SUMMARY_TOKENS, min(budget.summary, rest, fits)),
        fallback=max(MIN_SUMMARY_TOKENS, min(budget.fallback, rest, fits)),
    )


def summarizer_open(state: SessionState) -> bool:
    """Whether the circuit breaker is open: the summarizer kept failing, so this compaction skips it."""
    return state.summarizer_failures >= BREAKER_FAILURES and state.summarizer_skips < BREAKER_SKIPS


def count_compaction(state: SessionState, event: ContextCompacted) -> None:
    """Keep the circuit breaker's count after a compaction (live and on restore, so both decide alike)."""
    if event.skipped:
        state.summarizer_skips += 1
    elif event.fallback:
        state.summarizer_failures += 1
        state.summarizer_skips = 0
    else:
        state.summarizer_failures = state.summarizer_skips = 0


def fallback_input(state: SessionState, kept: Sequence[str] = (), pins_shown: str = "") -> FallbackInput:
    """What the session keeps outside its history, for a summary built without the model; nothing the next
    request says anyway: not the user messages the compaction keeps (``kept``) or a fact quoted from them, not
    the pins the context block shows (``pins_shown``, the rendered block: only those left out for room)."""
    summaries = state.turn_recaps
    last_user = next((e.text for e in reversed(state.entries) if e.role == "user"), "")
    first = state.first_request
    last = summaries[-1].request if summaries else last_user
    return FallbackInput(
        pins=[p.text for p in state.pins if f"- {p.text}" not in pins_shown],
        facts=[
            f for f in ranked_facts(state.entries) if not any(f.removeprefix("User: ").rstrip("…") in t for t in kept)
        ],
        turns_recent=[render_turn_recap(s, state.cwd) for s in summaries[-FULL_TURNS:]],
        turns_older=[one_line(s, state.cwd) for s in summaries[:-FULL_TURNS]],
        plan=state.plan,
        recent_files=state.recent_files,
        delegate_notes=state.delegate_notes,
        first_request="" if _said(first, kept) else first,
        last_request="" if _said(last, kept) else last,
        last_reply=next((e.text for e in reversed(state.entries) if e.role == "assistant"), ""),
        cwd=state.cwd,
    )


def _said(request: str, kept: Sequence[str]) -> bool:
    """Whether a request (as the ledger flattened it) is one of the kept user messages."""
    flat = " ".join(request.split())
    return bool(flat) and any(flat == " ".join(text.removeprefix(compaction.EARLIER_REQUEST).split()) for text in kept)


async def compact(
    turn: TurnContext,
    call_id: str,
    reason: CompactionReason,
    instructions: str | None = None,
    pending: int = 0,
) -> None:
    """Replace the session's history by recent user messages plus a summary, telling observers (through the
    turn's own channel) before and after, on the card ``call_id``. ``pending`` is what the next request adds to
    the context as it stands (the turn's prompt), so before and after are the next request's size."""
    session, state, turn_id, send = turn.session, turn.state, turn.id, turn.send
    engine = session.context
    before = engine.context_used() + pending
    send(CompactionStarted(turn_id, call_id, before, reason))
    model = state.model
    entries = list(state.entries)
    budget_of = Budget.of(model, DEFAULT_THRESHOLD)
    shares = leaves(budget_of, engine.overhead(), pending)
    kept = compaction.kept_user_messages(entries, shares.kept_user)

    def fallback() -> str:
        kept_texts = [e.text for e in kept]
        shown = render_pins(state.pins, budget_of.pins)
        return fallback_summary(fallback_input(state, kept_texts, shown), shares.fallback)

    def finish(summary: str, kept_texts: tuple[str, ...], fallback_used: bool, skipped: bool) -> None:
        note = ""
        if skipped and state.summarizer_skips == 0:
            note = (
                f"The summarizer failed {state.summarizer_failures} times in a row, so the next {BREAKER_SKIPS} "
                "compactions use a summary assembled without it; then it is tried again"
            )
        event = ContextCompacted(
            turn_id, call_id, summary, kept_texts, before, 0, fallback_used, reason, skipped=skipped, note=note
        )
        count_compaction(state, event)
        send(replace(event, tokens_after=engine.context_used() + pending))
        send(engine.usage_event(turn_id))

    if summarizer_open(state):
        summary = fallback()
        kept_texts = tuple(e.text for e in kept)
        state.replace_history(compaction.rebuilt_history(kept_texts, summary))
        finish(summary, kept_texts, True, True)
        return

    budget = compaction.input_budget(model.context_limit, model.max_output_tokens)
    shrinks = iter(range(SHRINK_TRIES))

    def summarizer(transcript: str, history: bool) -> SpecialTurnConfig:
        return summarize_turn(
            transcript,
            history=history,
            instructions=instructions,
            length=shares.summary,
            keep=[Interaction("user", compaction.earlier_request(e.text)) for e in kept],
            kept=[e.text for e in kept],
            max_tokens=int(shares.summary * SUMMARY_HEADROOM),
            fallback=fallback,
            metadata={"reason": reason},
            shrink=shrink,
        )

    def shrink(sent: SpecialTurnConfig) -> SpecialTurnConfig | None:
        """After the provider found the request too long: the transcript instead of the history, then the
        transcript again with its oldest messages left out."""
        nonlocal budget
        if not sent.share_prefix:
            if next(shrinks, None) is None:
                return None
            budget = compaction.shrink(budget)
        return summarizer(compaction.compaction_input(entries, budget), history=False)

    transcript = compaction.compaction_input(entries, budget)
    request = count_tokens(
        _prompt_for(compaction.compaction_prompt(), instructions, shares.summary, [e.text for e in kept])
    )
    # The history as the user turns send it, when it fits beside the request: a prefix cache then serves it.
    fits = engine.overhead() + state.history_tokens + request <= budget_of.input_limit
    config = summarizer(transcript, history=fits)

    async def announce(result: SpecialTurnResult) -> None:
        # Recorded as the user wrote them: the label is the history's (``rebuilt_history`` adds it on restore).
        kept_texts = tuple(
            i.text.removeprefix(compaction.EARLIER_REQUEST) for i in result.persisted if i.kind == "user"
        )
        finish(result.output, kept_texts, result.fallback, False)

    await session.execute_special_turn(config, announce=announce)
