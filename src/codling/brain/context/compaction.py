"""Compaction: when the context fills, the history is replaced by recent user messages plus a summary.

1. ``compaction_input`` builds a bounded transcript of the history: each message capped, oldest messages dropped
   until it fits the summarizer's budget.
2. The model writes a handoff summary from it (``prompts/compact.md``) in the summarize special turn
   (``builtin_turns.summarize_turn``, driven by ``compactor.compact``).
3. If that reply is empty, failed or clearly unusable, ``fallback.fallback_summary`` builds one without the
   model (bounded, never from an earlier summary).
4. ``kept_user_messages`` keeps the first request and the most recent real user messages within a token budget
   (earlier summaries are never counted as user messages); ``rebuilt_history`` labels each as an earlier request
   (``EARLIER_REQUEST``) and appends one entry holding the summary behind ``SUMMARY_PREFIX``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from importlib import resources

from codling.brain.state import MESSAGE_TOKENS, HistoryEntry, summary_entry
from codling.llm.tokens import count_tokens, tail_tokens, truncate_to_tokens

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


SHRINK_SHARE = 0.6
"""How much of its budget a summarizer transcript keeps when the provider found the request too long."""
MIN_INPUT_TOKENS = 500
"""The smallest transcript budget ``shrink`` goes down to."""
MIN_MESSAGE_TOKENS = 32
"""No message is capped below this in the compaction input, however small the budget."""


def shrink(budget: int) -> int:
    """The transcript budget for the next try after the provider found the summarizer's request too long: 60%
    of ``budget``, at least ``MIN_INPUT_TOKENS`` (and never more than ``budget``). The caller builds
    ``compaction_input(entries, shrink(budget))`` again: the newest messages stay, the oldest go first; once the
    budget stops shrinking (``shrink(b) == b``) there is nothing more to try."""
    return min(budget, max(MIN_INPUT_TOKENS, int(budget * SHRINK_SHARE)))


def _capped(entry: HistoryEntry, cap: int) -> str:
    if entry.tokens <= cap:
        return entry.text
    half = max(1, (cap - 16) // 2)  # (room for the note between head and tail)
    head = truncate_to_tokens(entry.text, half)
    tail = tail_tokens(entry.text, half)
    return f"{head}\n[… {entry.tokens - cap} tokens trimmed …]\n{tail}"


def compaction_input(entries: Sequence[HistoryEntry], budget: int, cap: int = MESSAGE_CAP_TOKENS) -> str:
    """The history as a transcript for the summarizer, at most ``budget`` tokens (counted with ``count_tokens``
    on the transcript itself): each message capped at ``cap`` tokens (and at half the budget, so the newest
    message always has room), the newest kept, the oldest dropped first with a note saying how many.

    When the provider still finds the request too long, call it again with ``shrink(budget)``."""
    note_room = count_tokens(_dropped_note(len(entries))) + 2
    room = budget - note_room
    cap = max(MIN_MESSAGE_TOKENS, min(cap, room // 2))
    chosen: list[str] = []
    used = 0
    for entry in reversed(entries):
        block = f"### {_LABELS[entry.role]}\n{_capped(entry, cap)}"
        # An entry's own count (as a JSON string, plus its message) is never below its raw text's, so only a
        # capped block needs counting: the transcript stays within budget at a fraction of the counting.
        cost = (count_tokens(block) if entry.tokens > cap else entry.tokens + LABEL_TOKENS) + 2
        if used + cost > room:
            break
        chosen.append(block)
        used += cost
    dropped = len(entries) - len(chosen)
    chosen.reverse()
    if dropped:
        chosen.insert(0, _dropped_note(dropped))
    return "\n\n".join(chosen)


LABEL_TOKENS = 6
"""What a block's "### Assistant" line costs, at most."""


def _dropped_note(count: int) -> str:
    return f"[{count} older messages were left out to fit.]"


def usable(summary: str | None, transcript: str = "") -> bool:
    """Whether a model-written summary can replace the history: not empty, not a refusal, not garbage (too few
    words, one phrase repeated, or — given the ``transcript`` it summarises — words that are mostly not the
    conversation's: a summary names the files, commands and values it was given)."""
    if summary is None:
        return False
    text = summary.strip()
    if len(text) < MIN_SUMMARY_CHARS:
        return False
    lowered = text.lower()
    if lowered.startswith(("i'm sorry", "i am sorry", "i cannot", "i can't", "error", "as an ai")):
        return False
    words = _WORD.findall(lowered)
    if len(words) < MIN_SUMMARY_WORDS or len(set(words)) < len(words) * MIN_DISTINCT_SHARE:
        return False
    if not transcript:
        return True
    known = set(_WORD.findall(transcript.lower())) | _SUMMARY_WORDS
    distinct = set(words)
    return len(distinct & known) >= len(distinct) * MIN_KNOWN_SHARE


_WORD = re.compile(r"[a-z][a-z0-9_]{3,}")
MIN_SUMMARY_WORDS = 5
MIN_DISTINCT_SHARE = 0.2
"""Below this share of distinct words (of four letters or more), a summary is one phrase repeated."""
MIN_KNOWN_SHARE = 0.3
"""At least this share of a summary's distinct words must occur in what it summarises (or be the words any
summary uses): a real summary reuses the conversation's names; garbage does not."""
_SUMMARY_WORDS = frozenset(
    {
        *("goal", "goals", "state", "status", "progress", "next", "steps", "step", "done", "todo", "open"),
        *("decisions", "decided", "files", "changed", "constraints", "user", "user's", "assistant", "summary"),
        *("context", "task", "tasks", "remaining", "current", "notes", "pending", "tests", "test", "passed"),
        *("failed", "with", "that", "this", "from", "have", "will", "were", "been", "they", "them", "what", "when"),
        "which",
    }
)


MIN_CUT_TOKENS = 64
"""A message cut at the budget's edge is kept only if at least this much of it fits."""


def kept_user_messages(entries: Sequence[HistoryEntry], user_budget: int) -> list[HistoryEntry]:
    """The real user messages a compaction keeps verbatim, in chronological order, within ``user_budget``
    tokens as the history counts them (``HistoryEntry.tokens``); summaries are never counted as user messages.

    - The first user message of ``entries`` is always kept: it may be the only statement of the task. A quarter
      of the budget is set aside for it; it is cut (head and tail around ``CUT_NOTE``) if it does not fit in
      that and whatever the others left.
    - The others are collected newest first. One bigger than what is left is skipped when it is over half the
      budget (a pasted log) or when fewer than ``MIN_CUT_TOKENS`` are left, and collecting goes on, so one
      paste does not drop every shorter message before it; otherwise it is cut to what is left.
    """
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


CUT_NOTE = "[… cut to fit …]"


def _cut(entry: HistoryEntry, tokens: int) -> HistoryEntry:
    """``entry`` cut to at most ``tokens`` tokens as the history counts them (its head and tail around
    ``CUT_NOTE``; for any ``tokens`` above a few dozen)."""
    keep = tokens - MESSAGE_TOKENS - count_tokens(CUT_NOTE) - 4
    while True:
        half = max(1, keep // 2)
        text = f"{truncate_to_tokens(entry.text, half)}\n{CUT_NOTE}\n{tail_tokens(entry.text, half)}"
        cut = HistoryEntry.of(entry.role, text)
        # The history counts a message as a JSON string (escaped newlines and quotes): shrink until that fits.
        if cut.tokens <= tokens or half == 1:
            return cut
        keep -= cut.tokens - tokens


EARLIER_REQUEST = "[Earlier request, kept by compaction]\n"
"""Starts each user message a compaction kept, so the model does not read "fix the failure" or "don't change
anything" as orders given now (the kept messages, the summary and the new prompt reach it as one message).
Short: it is said once per kept message."""


def earlier_request(text: str) -> str:
    """``text`` labelled as an earlier request (once, however many compactions keep it)."""
    return EARLIER_REQUEST + text.removeprefix(EARLIER_REQUEST)


def rebuilt_history(kept_user_messages: Sequence[str], summary: str) -> list[HistoryEntry]:
    """The history a compaction leaves: the kept user messages, each labelled as an earlier request, then the
    summary. The live compaction and restoring one from disk both build it here."""
    kept = (HistoryEntry.of("user", earlier_request(text)) for text in kept_user_messages)
    return [*kept, summary_entry(summary)]
