"""The turn ledger: what each turn did (``TurnExecutionSummary``), built from its events, persisted in its
``turn_end`` record and rendered into the next turns' context."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from codling.brain.context.summaries import changed_files, display_path
from codling.brain.events import Event, TextDelta, ToolCallFinished, ToolCallStarted, TurnFailed, TurnStarted

REQUEST_CHARS = 300
REPLY_CHARS = 300
ERROR_CHARS = 500
COMMAND_CHARS = 200
OUTCOME_CHARS = 120
RENDER_TITLE_CHARS = 120
RENDER_STEPS = 12
RENDER_FILES = 10
RENDER_COMMANDS = 8


@dataclass(frozen=True)
class TurnStep:
    """One tool call of a turn: what it did (its title), how it ended, and the files it touched."""

    title: str
    outcome: str
    """"done", "exit 1" / "timed out after 5s" (commands), "failed: <reason>" or "aborted[: <reason>]"."""
    paths: tuple[Path, ...] = ()


@dataclass(frozen=True)
class TurnExecutionSummary:
    """What one turn did, built from its events; the last two go into the next turn's prompt."""

    turn_number: int
    request: str
    """The user's request, trimmed."""
    steps: tuple[TurnStep, ...] = ()
    files_changed: tuple[Path, ...] = ()
    """Files edited or written (from the diffs), first change first, each once."""
    commands: tuple[str, ...] = ()
    """Commands run and how they ended, e.g. "`pytest -q` → exit 1"."""
    reply: str = ""
    """The start of the assistant's reply (whole sentences when possible)."""
    error: str | None = None
    """Why the turn failed, if it did."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able form (for history.jsonl); ``from_dict`` restores it exactly."""
        return {
            "turn_number": self.turn_number,
            "request": self.request,
            "steps": [{"title": s.title, "outcome": s.outcome, "paths": [str(p) for p in s.paths]} for s in self.steps],
            "files_changed": [str(p) for p in self.files_changed],
            "commands": list(self.commands),
            "reply": self.reply,
            "error": self.error,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TurnExecutionSummary:
        """The summary ``to_dict`` produced (missing optional fields take their defaults)."""
        return cls(
            turn_number=int(data["turn_number"]),
            request=str(data.get("request", "")),
            steps=tuple(
                TurnStep(str(s["title"]), str(s["outcome"]), tuple(Path(p) for p in s.get("paths", ())))
                for s in data.get("steps", ())
            ),
            files_changed=tuple(Path(p) for p in data.get("files_changed", ())),
            commands=tuple(str(c) for c in data.get("commands", ())),
            reply=str(data.get("reply", "")),
            error=None if data.get("error") is None else str(data["error"]),
        )


def build_turn_summary(turn_number: int, events: Sequence[Event]) -> TurnExecutionSummary:
    """The summary of one turn from its events, as the brain emitted them (``TurnEnded`` need not be there)."""
    request = ""
    started: dict[str, ToolCallStarted] = {}
    finished: dict[str, ToolCallFinished] = {}
    text: list[str] = []
    error: str | None = None
    for event in events:
        match event:
            case TurnStarted():
                request = event.prompt
            case ToolCallStarted():
                started[event.call_id] = event
            case ToolCallFinished():
                finished[event.call_id] = event
            case TextDelta():
                text.append(event.text)
            case TurnFailed():
                error = event.message
    steps: list[TurnStep] = []
    changed: dict[Path, None] = {}
    commands: list[str] = []
    for call_id, start in started.items():
        end = finished.get(call_id)
        outcome = _outcome(start, end)
        steps.append(TurnStep(start.title, outcome, _paths(start, end)))
        for path in changed_files(end):
            changed.setdefault(path, None)
        if start.tool_name == "run_command":
            command = start.raw_input.get("command")
            shown = _clip(" ".join(command.split()), COMMAND_CHARS) if isinstance(command, str) else "(no command)"
            commands.append(f"`{shown}` → {outcome}")
    return TurnExecutionSummary(
        turn_number=turn_number,
        request=_clip(" ".join(request.split()), REQUEST_CHARS),
        steps=tuple(steps),
        files_changed=tuple(changed),
        commands=tuple(commands),
        reply=_sentences("".join(text), REPLY_CHARS),
        error=None if error is None else _clip(error.strip(), ERROR_CHARS),
    )


_STATUS = re.compile(r"exit code (-?\d+)|(timed out after [\d.]+s)|(stopped before it exited)")


def _outcome(start: ToolCallStarted, end: ToolCallFinished | None) -> str:
    if end is None:
        return "aborted"
    first_line = end.text.strip().split("\n", 1)[0].strip()
    if end.status == "failed":
        if first_line.startswith("aborted"):
            return _clip(first_line, OUTCOME_CHARS)
        return "failed: " + _clip(first_line, OUTCOME_CHARS) if first_line else "failed"
    if start.tool_name == "run_command" and (status := _STATUS.match(first_line)):
        code, timed_out, stopped = status.groups()
        return f"exit {code}" if code is not None else timed_out or stopped
    return "done"


def _paths(start: ToolCallStarted, end: ToolCallFinished | None) -> tuple[Path, ...]:
    paths: dict[Path, None] = {}
    for location in start.locations:
        paths.setdefault(location.path, None)
    if end is not None:
        if end.diff is not None:
            paths.setdefault(end.diff.path, None)
        for location in end.locations:
            paths.setdefault(location.path, None)
    return tuple(paths)


def _clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters (at a word break when one is near), ending in "…" when cut."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    if space >= limit * 2 // 3:
        cut = cut[:space]
    return cut.rstrip() + "…"


_SENTENCE_END = re.compile(r"[.!?](?=\s)")


def _sentences(text: str, limit: int) -> str:
    """The start of ``text`` on one line, at most ``limit`` characters: whole sentences when at least one
    fits, else cut at a word break."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    ends = [m.end() for m in _SENTENCE_END.finditer(flat, 0, limit)]
    if ends and ends[-1] >= limit // 3:
        return flat[: ends[-1]] + " …"
    return _clip(flat, limit)


def render_turn_summary(summary: TurnExecutionSummary, cwd: Path | None = None) -> str:
    """The summary as compact plain text for the prompt (paths relative to ``cwd`` when inside it), bounded in
    size whatever the turn did."""
    lines = [f"Turn {summary.turn_number} — request: {summary.request or '(none)'}"]
    if summary.steps:
        shown = [f"{_clip(s.title, RENDER_TITLE_CHARS)} ({s.outcome})" for s in summary.steps[:RENDER_STEPS]]
        if len(summary.steps) > RENDER_STEPS:
            shown.append(f"… {len(summary.steps) - RENDER_STEPS} more")
        lines.append("Steps: " + "; ".join(shown))
    if summary.files_changed:
        files = [display_path(p, cwd) for p in summary.files_changed[:RENDER_FILES]]
        if len(summary.files_changed) > RENDER_FILES:
            files.append(f"… {len(summary.files_changed) - RENDER_FILES} more")
        lines.append("Files changed: " + ", ".join(files))
    if summary.commands:
        commands = list(summary.commands[-RENDER_COMMANDS:])
        if len(summary.commands) > RENDER_COMMANDS:
            commands.insert(0, f"… {len(summary.commands) - RENDER_COMMANDS} earlier")
        lines.append("Commands: " + "; ".join(commands))
    if summary.reply:
        lines.append(f"Reply: {summary.reply}")
    if summary.error:
        lines.append(f"Error: {summary.error}")
    return "\n".join(lines)
