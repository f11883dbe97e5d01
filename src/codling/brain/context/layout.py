"""How a request is laid out: the context that changes from turn to turn."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from codling.brain.context.ledger import TurnExecutionSummary, render_turn_summary
from codling.brain.context.summaries import display_path


def turn_context(recent_files: Sequence[Path], summaries: Sequence[TurnExecutionSummary], cwd: Path) -> str:
    """The part of the prompt that changes each turn: the recently edited files (most recent last) and the
    last two turn summaries (oldest first). Empty when there is nothing to say."""
    parts: list[str] = []
    if recent_files:
        shown = ", ".join(display_path(p, cwd) for p in recent_files)
        parts.append(f"Recently edited files (most recent last): {shown}")
    kept = list(summaries[-2:])
    if len(kept) == 2:
        parts.append("# Prior turn summary\n" + render_turn_summary(kept[0], cwd))
    if kept:
        parts.append("# Last turn summary\n" + render_turn_summary(kept[-1], cwd))
    return "\n\n".join(parts)
