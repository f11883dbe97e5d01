"""How a request is laid out: the context that changes from turn to turn.

A user turn's request carries the recently edited files (``recent_files_note``) in its context block, not the
turn ledger: the turns since the last compaction are in the history itself, and the turns before it are in
the compaction's summary (the fallback summary is built from the ledger), so a ledger there would say the
same things twice. A delegate, which sees no history, gets both (``turn_context``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from codling.brain.context.ledger import render_ledger
from codling.brain.context.summaries import display_path
from codling.brain.context.turns import TurnExecutionSummary


def recent_files_note(recent_files: Sequence[Path], cwd: Path) -> str:
    """The recently edited files, most recent last ("" when there are none)."""
    if not recent_files:
        return ""
    return "Recently edited files (most recent last): " + ", ".join(display_path(p, cwd) for p in recent_files)


def turn_context(
    recent_files: Sequence[Path], summaries: Sequence[TurnExecutionSummary], cwd: Path, budget_tokens: int = 3_000
) -> str:
    """What a delegate is told of the session so far: the recently edited files (most recent last) and the
    turn ledger within ``budget_tokens`` (see ``render_ledger``). Empty when there is nothing to say."""
    parts = [note] if (note := recent_files_note(recent_files, cwd)) else []
    if ledger := render_ledger(summaries, budget_tokens, cwd):
        parts.append(ledger)
    return "\n\n".join(parts)
