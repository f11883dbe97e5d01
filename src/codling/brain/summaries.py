"""Plain-text summaries of tool calls, kept in the history across turns instead of provider tool metadata."""

from __future__ import annotations

from codling.brain.events import ToolCallFinished, ToolCallStarted

MAX_SUMMARY_CHARS = 600


def _trim(text: str, limit: int = MAX_SUMMARY_CHARS) -> str:
    text = text.strip()
    if len(text) <= limit:
        return text
    head = text[: limit // 2].rstrip()
    tail = text[-limit // 2 :].lstrip()
    return f"{head}\n[… {len(text) - len(head) - len(tail)} characters trimmed …]\n{tail}"


def summarize_tool_call(started: ToolCallStarted, finished: ToolCallFinished | None) -> str:
    """One concrete line (plus trimmed output) saying what a tool call did and how it ended."""
    if finished is None:
        return f"- {started.title}: aborted before it finished"
    outcome = "failed" if finished.status == "failed" else "done"
    body = _trim(finished.text)
    return f"- {started.title} ({outcome}):\n{_indent(body)}" if body else f"- {started.title} ({outcome})"


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())
