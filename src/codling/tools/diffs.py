"""Diffs as the tools show them: the edit's diff for the model and the user, a short one for its summary, and
its size (``+3 −1``) — one home, so the tool's text and the turn ledger never count an edit differently.
(No pydantic-ai here: the ledger imports this when a session is restored.)"""

from __future__ import annotations

import difflib

DIFF_MAX_LINES = 80
SUMMARY_DIFF_LINES = 40
"""Most diff lines an edit's summary keeps."""
SUMMARY_DIFF_CHARS = 800
"""Most characters of diff an edit's summary keeps (the history keeps the summary across turns)."""
SUMMARY_LINE_CHARS = 160
"""Longest line a summary keeps whole."""


def summary_diff(old: str, new: str, max_lines: int = SUMMARY_DIFF_LINES, max_chars: int = SUMMARY_DIFF_CHARS) -> str:
    """The diff for an edit's summary: hunks only (the summary names the file), cut to ``max_lines`` lines
    and about ``max_chars`` characters (long lines are clipped)."""
    lines = list(difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm=""))[2:]  # no ---/+++ header
    kept: list[str] = []
    size = 0
    for line in lines[:max_lines]:
        entry = line if len(line) <= SUMMARY_LINE_CHARS else line[: SUMMARY_LINE_CHARS - 1] + "…"
        if kept and size + len(entry) + 1 > max_chars:
            break
        kept.append(entry)
        size += len(entry) + 1
    if len(kept) < len(lines):
        kept.append(f"[… {len(lines) - len(kept)} more diff lines cut]")
    return "\n".join(kept)


def change_size(old: str, new: str) -> str:
    """``+3 −1``: the lines added and removed from ``old`` to ``new``."""
    added = removed = 0
    # The first two lines are the ---/+++ header; a removed "-- x" line would look like one.
    for line in list(difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=0))[2:]:
        if line.startswith("+"):
            added += 1
        elif line.startswith("-"):
            removed += 1
    return f"+{added} −{removed}"


def unified_diff(old: str, new: str, shown: str, max_lines: int = DIFF_MAX_LINES) -> str:
    """A unified diff of two texts, cut to ``max_lines`` lines with a note saying how many were left out."""
    lines = list(
        difflib.unified_diff(
            old.splitlines(), new.splitlines(), fromfile=f"a/{shown}", tofile=f"b/{shown}", lineterm=""
        )
    )
    if len(lines) > max_lines:
        lines = [*lines[:max_lines], f"[… {len(lines) - max_lines} more diff lines]"]
    return "\n".join(lines)
