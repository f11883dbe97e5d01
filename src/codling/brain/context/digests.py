"""Tool-call digests: one plain-text entry per tool call, kept in the history across turns instead of provider
tool metadata (made from the tool's own summary, or its trimmed result); and the list of recently edited files.

Four things are easy to call a summary; each has its own name: a tool-call *digest* (here), a turn's *recap*
(``ledger_entries.TurnRecap``: what one turn did, for the next turns' prompt), the conversation *summary* a
compaction writes (``state.summary_entry``), and a session *listing* (``store.index.SessionListing``)."""

from __future__ import annotations

from pathlib import Path

from codling.brain.events import Event, ToolCallFinished, ToolCallStarted

MAX_SUMMARY_CHARS = 600
"""Most characters of a tool's result text kept when the tool gave no summary (and for a failure)."""
MAX_TOOL_SUMMARY_CHARS = 2_500
"""A safety cap on a tool's own summary (tools keep theirs shorter)."""
RECENT_FILES_LIMIT = 10


# --- one tool call -----------------------------------------------------------------------------------------


def _trim(text: str, limit: int = MAX_SUMMARY_CHARS) -> str:
    text = text.strip()
    if len(text) <= limit:
        return text
    head = text[: limit // 2].rstrip()
    tail = text[-limit // 2 :].lstrip()
    return f"{head}\n[… {len(text) - len(head) - len(tail)} characters trimmed …]\n{tail}"


def tool_call_digest(started: ToolCallStarted, finished: ToolCallFinished | None) -> str:
    """One entry saying what a tool call did and how it ended: its title and outcome, then (indented) the
    tool's own summary, or for a failure or a tool without one, its trimmed result text."""
    if finished is None:
        return f"- {started.title}: aborted before it finished"
    outcome = "failed" if finished.status == "failed" else "done"
    # A failed call has no tool output, so no summary: its text is the error message.
    summary = finished.summary.strip()
    body = _trim(summary, MAX_TOOL_SUMMARY_CHARS) if summary else _trim(finished.text)
    return f"- {started.title} ({outcome}):\n{_indent(body)}" if body else f"- {started.title} ({outcome})"


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())


def display_path(path: Path, cwd: Path | None) -> str:
    """``path`` relative to ``cwd`` when inside it, else as it is."""
    if cwd is not None and path.is_absolute() and path.is_relative_to(cwd) and path != cwd:
        return path.relative_to(cwd).as_posix()
    return str(path)


# --- recent files ------------------------------------------------------------------------------------------


def update_recent_files(recent: tuple[Path, ...], event: Event, limit: int = RECENT_FILES_LIMIT) -> tuple[Path, ...]:
    """``recent`` after ``event``: a completed edit or write moves its file to the end (most recent last);
    each file appears once and only the last ``limit`` are kept. Other events leave it as it is."""
    paths = changed_files(event) if isinstance(event, ToolCallFinished) else ()
    if not paths:
        return recent
    updated = (*(p for p in recent if p not in paths), *paths)
    return updated[-limit:] if limit > 0 else ()


def changed_files(finished: ToolCallFinished | None) -> tuple[Path, ...]:
    """The files a completed call changed: its diff's, then any others it reports (a delegate's edits)."""
    if finished is None or finished.status != "completed":
        return ()
    own = (finished.diff.path,) if finished.diff is not None else ()
    return (*own, *(p for p in finished.changed if p not in own))
