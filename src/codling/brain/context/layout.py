"""How a request is laid out: the context that changes from turn to turn.

A user turn's request carries, before the prompt, a context block (``<session-context>``): today's date, the
pinned instructions and facts, and the recently edited files (``recent_files_note``). It is part of the
turn's user message in the history (``HistoryEntry.context``), so the next turn's request starts with exactly
the bytes this one sent and a provider's prefix cache serves them; and it says only what the blocks the history
already holds do not (``unshown``): the date once a day, a pin when it is new, the files when they changed. A
compaction replaces the history and so the blocks it held: the next block says everything again.

The turn ledger is not in the block: the turns since the last compaction are in the history itself, and the
turns before it are in the compaction's summary (the fallback summary is built from the ledger), so a ledger
there would say the same things twice. A delegate, which sees no history, gets both (``turn_context``)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence, Set
from pathlib import Path

from codling.brain.context.digests import display_path
from codling.brain.context.ledger import render_ledger
from codling.brain.context.ledger_entries import TurnRecap

CONTEXT_OPEN = "<session-context>"
CONTEXT_CLOSE = "</session-context>"
CONTEXT_NOTE = "What codling keeps track of in this session (not written by the user; a later note adds to this one):"

Section = tuple[str, list[str]]
"""A part of the context block: its heading ("" for none) and its lines."""

RECENT_FILES = "Recently edited files (most recent last): "
WITHDRAWN_HEADING = "# No longer in force (the user withdrew them)"
WITHDRAWN = "- (withdrawn) "


def sections_of(text: str) -> list[Section]:
    """A rendered part of the block (such as ``render_pins``'s) as sections: a line starting with "# " begins one."""
    sections: list[Section] = []
    for line in text.splitlines():
        if line.startswith("# "):
            sections.append((line, []))
        elif sections:
            sections[-1][1].append(line)
        else:
            sections.append(("", [line]))
    return sections


def withdrawn(texts: Iterable[str]) -> Section | None:
    """The section saying the pins of ``texts`` were withdrawn (None when there are none); ``unshown`` says each
    once."""
    gone = [WITHDRAWN + text for text in texts]
    return (WITHDRAWN_HEADING, gone) if gone else None


def unshown(sections: Iterable[Section], shown: Set[str]) -> str:
    """The lines of ``sections`` that no block in the history showed (``shown``), each under its heading (one
    the history's blocks showed already is named without its explanation in parentheses, so a request does not
    say it twice); "" when the history's blocks say it all."""
    parts: list[str] = []
    for heading, lines in sections:
        new = [line for line in lines if line and line not in shown]
        if new and heading in shown:
            heading = heading.split(" (", 1)[0]
        if new:
            parts.append("\n".join([heading, *new] if heading else new))
    return "\n\n".join(parts)


def recent_files_note(recent_files: Sequence[Path], cwd: Path) -> str:
    """The recently edited files, most recent last ("" when there are none)."""
    if not recent_files:
        return ""
    return RECENT_FILES + ", ".join(display_path(p, cwd) for p in recent_files)


def turn_context(
    recent_files: Sequence[Path], summaries: Sequence[TurnRecap], cwd: Path, budget_tokens: int = 3_000
) -> str:
    """What a delegate is told of the session so far: the recently edited files (most recent last) and the
    turn ledger within ``budget_tokens`` (see ``render_ledger``). Empty when there is nothing to say."""
    parts = [note] if (note := recent_files_note(recent_files, cwd)) else []
    if ledger := render_ledger(summaries, budget_tokens, cwd):
        parts.append(ledger)
    return "\n\n".join(parts)
