"""How a request is laid out: the context that changes from turn to turn."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from codling.brain.context.ledger import render_ledger
from codling.brain.context.summaries import display_path
from codling.brain.context.turns import TurnExecutionSummary


def turn_context(
    recent_files: Sequence[Path], summaries: Sequence[TurnExecutionSummary], cwd: Path, budget_tokens: int = 3_000
) -> str:
    """The part of the prompt that changes each turn: the recently edited files (most recent last) and the
    turn ledger within ``budget_tokens`` (see ``render_ledger``). Empty when there is nothing to say."""
    parts: list[str] = []
    if recent_files:
        shown = ", ".join(display_path(p, cwd) for p in recent_files)
        parts.append(f"Recently edited files (most recent last): {shown}")
    if ledger := render_ledger(summaries, budget_tokens, cwd):
        parts.append(ledger)
    return "\n\n".join(parts)
