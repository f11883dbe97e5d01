"""The summary compaction uses when the summarizer cannot help: built without the model, bounded, never nested.

It is assembled only from what the session keeps outside its history (the pinned instructions, the turn
ledger, the plan, recent files, delegates' answers) and from the first and the latest request and the end of
the latest reply; never from an earlier summary, so compacting again and again cannot nest summaries or grow
them. Each section has its share of the budget (min(2,000 tokens, 12% of the window)); what one leaves unused
goes to the next, and the whole is checked against the budget.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from codling.brain.context.budget import newest_that_fit
from codling.brain.context.summaries import display_path
from codling.llm.tokens import count_tokens, tail_tokens, truncate_to_tokens
from codling.tools.ports import PlanStep

NOTE = (
    "## Note\nThis summary was assembled without the model (the summarizer was unavailable): the user's pinned "
    "instructions, what each turn did, the plan and the latest exchange."
)

SHARES = {
    "pins": 0.15,
    "first": 0.10,
    "last": 0.12,
    "turns": 0.33,
    "plan": 0.08,
    "files": 0.05,
    "delegates": 0.07,
    "reply": 0.10,
}
"""Each section's share of the budget (after the note), in the order they are filled."""


@dataclass(frozen=True)
class FallbackInput:
    """What a fallback summary is made of."""

    pins: Sequence[str] = ()
    turns_recent: Sequence[str] = ()
    """The last turns' ledger entries in full, oldest first."""
    turns_older: Sequence[str] = ()
    """One line per earlier turn, oldest first."""
    plan: Sequence[PlanStep] = ()
    recent_files: Sequence[Path] = ()
    delegate_notes: Mapping[str, str] | None = None
    first_request: str = ""
    last_request: str = ""
    last_reply: str = ""
    cwd: Path | None = None


def fallback_summary(source: FallbackInput, budget_tokens: int) -> str:
    """The summary, at most ``budget_tokens`` tokens (see the module's docstring)."""
    room = max(0, budget_tokens - count_tokens(NOTE) - 4)
    builders = {
        "pins": lambda n: _lines("## Pinned instructions", [f"- {p}" for p in source.pins], n, newest_first=True),
        "first": lambda n: _text("## First request", source.first_request, n),
        "last": lambda n: (
            _text("## Latest request", source.last_request, n) if source.last_request != source.first_request else ""
        ),
        "turns": lambda n: _turns(source, n),
        "plan": lambda n: _lines(
            "## Plan (open steps)", [f"- [{s.status}] {s.step}" for s in source.plan if s.status != "completed"], n
        ),
        "files": lambda n: _lines(
            "## Files recently changed", [f"- {display_path(p, source.cwd)}" for p in source.recent_files], n
        ),
        "delegates": lambda n: _lines(
            "## Delegates' latest answers",
            [f"- {role}: {' '.join(answer.split())}" for role, answer in (source.delegate_notes or {}).items()],
            n,
        ),
        "reply": lambda n: _text("## End of the latest reply", source.last_reply, n, tail=True),
    }
    parts = [NOTE]
    carry = 0
    for name, share in SHARES.items():
        allowed = int(room * share) + carry
        text = builders[name](allowed)
        used = count_tokens(text) + 2 if text else 0
        carry = max(0, allowed - used)
        if text:
            parts.append(text)
    summary = "\n\n".join(parts)
    # Separators and re-tokenising at the seams can add a few tokens: the budget is a promise.
    return summary if count_tokens(summary) <= budget_tokens else truncate_to_tokens(summary, budget_tokens)


def _text(heading: str, text: str, tokens: int, *, tail: bool = False) -> str:
    text = text.strip()
    if not text or tokens <= count_tokens(heading) + 8:
        return ""
    room = tokens - count_tokens(heading) - 2
    if count_tokens(text) <= room:
        return f"{heading}\n{text}"
    if tail:
        return f"{heading}\n…{tail_tokens(text, room - 2)}"
    half = (room - 12) // 2
    return f"{heading}\n{truncate_to_tokens(text, half)}\n[… cut …]\n{tail_tokens(text, half)}"


def _lines(heading: str, lines: Sequence[str], tokens: int, *, newest_first: bool = False) -> str:
    """``lines`` under ``heading`` within ``tokens``: in order, or, with ``newest_first``, the last ones kept
    first (shown in their order), with a note of how many were left out."""
    if not lines:
        return ""
    used = count_tokens(heading) + 10
    order = range(len(lines) - 1, -1, -1) if newest_first else range(len(lines))
    chosen: set[int] = set()
    for index in order:
        cost = count_tokens(lines[index]) + 1
        if used + cost > tokens:
            break
        chosen.add(index)
        used += cost
    if not chosen:
        return ""
    out = [heading, *(lines[i] for i in sorted(chosen))]
    if left := len(lines) - len(chosen):
        out.append(f"(… {left} more left out)")
    return "\n".join(out)


def _turns(source: FallbackInput, tokens: int) -> str:
    """The turns: the latest in full, then as many earlier one-liners as fit, newest first."""
    heading = "## What each turn did"
    room = tokens - count_tokens(heading) - 12
    recent, used = newest_that_fit(reversed(source.turns_recent), room)
    older, _ = newest_that_fit(reversed(source.turns_older), room - used)
    if not recent and not older:
        return ""
    out = [heading]
    if left := len(source.turns_older) - len(older):
        out.append(f"(… {left} earlier turns left out)")
    return "\n".join([*out, *older, *recent])
