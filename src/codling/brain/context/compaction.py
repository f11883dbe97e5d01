"""Compaction: when the context fills, the history is replaced by recent user messages plus a summary.

1. ``compaction_input`` builds a bounded transcript of the history: each message capped, oldest messages dropped
   until it fits the summarizer's budget.
2. The model writes a handoff summary from it (``prompts/compact.md``) in the summarize special turn
   (``builtin_turns.summarize_turn``, driven by ``compactor.compact``).
3. If that reply is empty, failed or clearly unusable, ``fallback.fallback_summary`` builds one without the
   model (bounded, never from an earlier summary).
4. ``rebuild`` keeps the first request and the most recent real user messages within a token budget
   (``kept_user_messages``; earlier summaries are never counted as user messages) and appends one entry
   holding the summary behind ``SUMMARY_PREFIX``.
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib import resources

from codling.brain.state import HistoryEntry, summary_entry
from codling.llm.tokens import tail_tokens, truncate_to_tokens

DEFAULT_THRESHOLD = 0.7
"""Compact before a turn once the context passes this share of the model's limit."""

MESSAGE_CAP_TOKENS = 2_000
"""No single message takes more than this in the compaction input."""

MIN_SUMMARY_CHARS = 40

_LABELS = {"user": "User", "assistant": "Assistant", "summary": "Earlier summary"}


def title(tokens_before: int, tokens_after: int, fallback: bool, note: str = "") -> str:
    """How a finished compaction is shown: the token counts before and after (the next request's, predicted),
    and what the user should know about it."""
    shown = " (fallback summary)" if fallback else ""
    return f"Compacted context: {tokens_before:,} → {tokens_after:,} tokens{shown}" + (f". {note}" if note else "")


def compaction_prompt() -> str:
    """The summarizer's instructions."""
    return resources.files("codling.brain").joinpath("prompts/compact.md").read_text(encoding="utf-8").strip()


def input_budget(context_limit: int, max_output_tokens: int) -> int:
    """Tokens the summarizer may be given: the window minus room for its prompt and its answer."""
    return max(1_000, int(context_limit * 0.8) - min(max_output_tokens, context_limit // 4) - 1_000)


def _capped(entry: HistoryEntry, cap: int) -> str:
    if entry.tokens <= cap:
        return entry.text
    half = cap // 2
    head = truncate_to_tokens(entry.text, half)
    tail = tail_tokens(entry.text, half)
    return f"{head}\n[… {entry.tokens - cap} tokens trimmed …]\n{tail}"


def compaction_input(entries: Sequence[HistoryEntry], budget: int, cap: int = MESSAGE_CAP_TOKENS) -> str:
    """The history as a transcript for the summarizer, at most ``budget`` tokens (estimated from the per-entry
    counts): each message capped at ``cap`` tokens, the oldest dropped first."""
    chosen: list[str] = []
    used = 0
    for entry in reversed(entries):
        cost = min(entry.tokens, cap) + 8
        if used + cost > budget:
            break
        chosen.append(f"### {_LABELS[entry.role]}\n{_capped(entry, cap)}")
        used += cost
    dropped = len(entries) - len(chosen)
    chosen.reverse()
    if dropped:
        chosen.insert(0, f"[{dropped} older messages were left out to fit.]")
    return "\n\n".join(chosen)


def usable(summary: str | None) -> bool:
    """Whether a model-written summary can replace the history (non-empty, not a refusal or an echo)."""
    if summary is None:
        return False
    text = summary.strip()
    if len(text) < MIN_SUMMARY_CHARS:
        return False
    lowered = text.lower()
    return not lowered.startswith(("i'm sorry", "i am sorry", "i cannot", "i can't", "error", "as an ai"))


MIN_CUT_TOKENS = 64
"""A message cut at the budget's edge is kept only if at least this much of it fits."""


def kept_user_messages(entries: Sequence[HistoryEntry], user_budget: int) -> list[HistoryEntry]:
    """The real user messages a compaction keeps verbatim, in chronological order, within ``user_budget``
    tokens (summaries are never counted as user messages): the first request always (cut if it must be: it may
    be the only statement of the task), then the most recent ones, newest first. A message too big for what
    is left is skipped when it would take more than half the budget (a pasted log), else cut to what is left;
    either way collecting goes on, so one long paste does not drop every shorter message before it."""
    users = [e for e in entries if e.role == "user"]
    if not users:
        return []
    first = users[0]
    reserved = min(first.tokens, user_budget // 4)
    left = user_budget - reserved
    kept: list[HistoryEntry] = []
    for entry in reversed(users[1:]):
        if entry.tokens <= left:
            kept.append(entry)
            left -= entry.tokens
        elif entry.tokens <= user_budget // 2 and left >= MIN_CUT_TOKENS:
            kept.append(_cut(entry, left))
            left = 0
    kept.reverse()
    head = first if first.tokens <= reserved + left else _cut(first, reserved + left)
    return [head, *kept]


def _cut(entry: HistoryEntry, tokens: int) -> HistoryEntry:
    """``entry`` cut to about ``tokens`` tokens (its head and tail around a note)."""
    half = max(1, (tokens - 16) // 2)
    text = f"{truncate_to_tokens(entry.text, half)}\n[… cut to fit …]\n{tail_tokens(entry.text, half)}"
    return HistoryEntry.of(entry.role, text)


def rebuild(entries: Sequence[HistoryEntry], summary: str, user_budget: int) -> list[HistoryEntry]:
    """Recent real user messages within ``user_budget`` tokens (chronological), then the summary."""
    return [*kept_user_messages(entries, user_budget), summary_entry(summary)]


def rebuilt_history(kept_user_messages: Sequence[str], summary: str) -> list[HistoryEntry]:
    """The history a recorded compaction left (for restoring a session from disk)."""
    return [*(HistoryEntry.of("user", text) for text in kept_user_messages), summary_entry(summary)]
