"""The summary compaction uses when the summarizer cannot help: built without the model, bounded, never nested.

It is assembled from what the session keeps outside its history (the pinned instructions, the turn ledger,
the plan, recent files, delegates' answers), the facts and decisions the history holds (``context/facts.py``:
values the user gave anywhere in a message, what the assistant decided, values tools showed), the first and
the latest request and the end of the latest reply. Of an earlier summary it takes only fact lines (its facts
section, or a model summary's lines with concrete values), so one failed summarizer call does not erase what
the summaries before it kept, and compacting again and again cannot nest summaries or grow them.

Each section has its share of the budget (``SHARES``; the caller passes ``Budget.fallback``); what a section
does not need goes to the sections that need more (``share_out``), and the whole is measured with
``count_tokens``: it is never longer than the budget.

Usage: ``fallback_summary(FallbackInput(pins=..., turns_recent=..., ...), budget_tokens)``; every field is
optional, so a session with no plan, no delegates or no ledger yet simply has fewer sections.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from codling.brain.context.budget import newest_that_fit
from codling.brain.context.digests import display_path
from codling.brain.context.facts import FACTS_HEADING, grouped
from codling.llm.tokens import count_tokens, tail_tokens, truncate_to_tokens
from codling.vocabulary import PlanStep

NOTE = (
    "## Note\nThis summary was assembled without the model (the summarizer was unavailable): the user's pinned "
    "instructions, the facts and decisions of the conversation, what each turn did, the plan and the latest "
    "exchange."
)

SHARES = {
    "pins": 0.05,
    "facts": 0.42,
    "first": 0.05,
    "last": 0.05,
    "turns": 0.2,
    "plan": 0.07,
    "files": 0.04,
    "delegates": 0.05,
    "reply": 0.07,
}
"""Each section's share of the budget (after the note), in the order they appear; a section that needs less
leaves the rest to the others."""

MIN_SECTION_TOKENS = 16
"""A section given less room than this is left out rather than shown as a stub."""


@dataclass(frozen=True)
class FallbackInput:
    """What a fallback summary is made of: only what the session keeps beside its history (never a summary)."""

    pins: Sequence[str] = ()
    """The pinned instructions' texts, oldest first (the newest are kept when they do not all fit)."""
    facts: Sequence[str] = ()
    """Facts and decisions found in the history and carried from an earlier summary (``context/facts.py``),
    least important first: those at the end are kept when they do not all fit."""
    turns_recent: Sequence[str] = ()
    """The last turns' ledger entries in full, oldest first."""
    turns_older: Sequence[str] = ()
    """One line per earlier turn, oldest first (the newest are kept; the rest are counted in a note)."""
    plan: Sequence[PlanStep] = ()
    """The plan; its completed steps are left out."""
    recent_files: Sequence[Path] = ()
    delegate_notes: Mapping[str, str] | None = None
    """Each delegate role's latest answer."""
    first_request: str = ""
    """The first user request of the session (head and tail kept when it is long)."""
    last_request: str = ""
    """The latest user request (left out when it is the first)."""
    last_reply: str = ""
    """The latest reply (its end kept when it is long)."""
    cwd: Path | None = None
    """Files are shown relative to it."""


def fallback_summary(source: FallbackInput, budget_tokens: int) -> str:
    """The summary, at most ``budget_tokens`` tokens as ``count_tokens`` counts them (see the module's
    docstring): the note, then each non-empty section under its heading. Sections that need less than their
    share (``SHARES``) give the rest to those that need more (``share_out``)."""
    room = max(0, budget_tokens - count_tokens(NOTE) - 2)
    builders = _builders(source)
    for _ in range(3):
        summary = _assemble(builders, room)
        over = count_tokens(summary) - budget_tokens
        if over <= 0:
            return summary
        room -= over + 4  # the seams between sections cost a little more than counted: take it from the room
    # A last resort the loop above should never reach: the budget is a promise.
    return truncate_to_tokens(summary, budget_tokens)


Builder = Callable[[int], str]
"""A section: its text within the given tokens ("" when it has nothing, or no room)."""


def _builders(source: FallbackInput) -> dict[str, Builder]:
    return {
        "pins": lambda n: _lines("## Pinned instructions", [f"- {p}" for p in source.pins], n, newest_first=True),
        "facts": lambda n: _lines(FACTS_HEADING, [f"- {f}" for f in grouped(source.facts)], n, newest_first=True),
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
        # The ledger's latest entry holds its reply's gist: the end of the reply only when there is no ledger.
        "reply": lambda n: (
            "" if source.turns_recent else _text("## End of the latest reply", source.last_reply, n, tail=True)
        ),
    }


def _assemble(builders: Mapping[str, Builder], room: int) -> str:
    whole = {name: build(room) for name, build in builders.items()}
    needs = {name: _cost(text) for name, text in whole.items()}
    given = share_out(room, needs, SHARES)
    parts = [NOTE]
    for name, build in builders.items():
        text = whole[name] if given[name] >= needs[name] else build(given[name] - 2)
        if text:
            parts.append(text)
    return "\n\n".join(parts)


def _cost(text: str) -> int:
    return count_tokens(text) + 2 if text else 0  # (and the blank line before it)


def share_out(room: int, needs: Mapping[str, int], shares: Mapping[str, float]) -> dict[str, int]:
    """``room`` tokens shared among sections: each is offered its share of what is left (by ``shares``, among
    the sections still wanting more); one that needs no more than its offer gets what it needs, and what it
    leaves is offered again to the others, until every section is satisfied or the room is shared out."""
    given = dict.fromkeys(needs, 0)
    wanting = {name for name, need in needs.items() if need > 0}
    left = room
    while wanting and left > 0:
        total = sum(shares[name] for name in wanting)
        offer = {name: int(left * shares[name] / total) for name in wanting}
        satisfied = {name for name in wanting if needs[name] <= offer[name]}
        if not satisfied:
            given.update(offer)
            break
        for name in satisfied:
            given[name] = needs[name]
            left -= needs[name]
        wanting -= satisfied
    return given


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
    """The turns within ``tokens``: the latest ones in full (the newest cut to half the room if even it does
    not fit), then as many earlier one-liners as fit, newest first, and how many were left out."""
    heading = "## What each turn did"
    room = tokens - count_tokens(heading) - 14  # (the heading's line break and the note)
    if room < MIN_SECTION_TOKENS or not (source.turns_recent or source.turns_older):
        return ""
    recent, used = newest_that_fit(reversed(source.turns_recent), room)
    if not recent and source.turns_recent:
        latest = truncate_to_tokens(source.turns_recent[-1], room // 2) + "\n[… cut]"
        recent, used = [latest], count_tokens(latest) + 1
    older, _ = newest_that_fit(reversed(source.turns_older), room - used)
    out = [heading]
    if left := len(source.turns_older) + len(source.turns_recent) - len(older) - len(recent):
        out.append(f"(… {left} earlier turns left out)")
    return "\n".join([*out, *older, *recent])
