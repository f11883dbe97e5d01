"""The turn ledger: what each turn did (``TurnRecap``), built from its events, persisted in its
``turn_end`` record and rendered into the next turns' context."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import assert_never

from codling.brain.context.budget import newest_that_fit
from codling.brain.context.digests import changed_files, display_path
from codling.brain.context.ledger_entries import TurnRecap, TurnStep
from codling.brain.events import (
    CompactionStarted,
    ContextCompacted,
    ContextWarning,
    Event,
    McpServerNotice,
    McpServersStarting,
    PlanUpdated,
    ProviderRetrying,
    Rewound,
    SessionTitled,
    SettingsChanged,
    SpecialTurnPersisted,
    TextDelta,
    ThoughtDelta,
    ToolCallFinished,
    ToolCallNote,
    ToolCallRunning,
    ToolCallStarted,
    ToolCallTerminal,
    TurnEnded,
    TurnFailed,
    TurnStarted,
    UsageUpdated,
)
from codling.brain.reasoning import text_segments
from codling.llm.tokens import count_tokens, truncate_to_tokens
from codling.text import clip
from codling.tools.diffs import change_size
from codling.tools.ports import COMMAND_TOOL, DELEGATE_TOOL
from codling.tools.salient import salient_lines
from codling.tools.specs import TOOL_SPECS
from codling.vocabulary import PlanStep

REQUEST_CHARS = 600
GOAL_CHARS = 200
DETAIL_CHARS = 300
ONE_LINE_CHARS = 320
ENTRY_TOKENS = 600
"""Most tokens one turn's full entry takes when rendered."""
REPLY_CHARS = 300
ERROR_CHARS = 500
COMMAND_CHARS = 200
OUTCOME_CHARS = 120
RENDER_TITLE_CHARS = 120
RENDER_STEPS = 12
RENDER_FILES = 10


def build_turn_recap(turn_number: int, events: Sequence[Event], previous_goal: str = "") -> TurnRecap:
    """The summary of one turn from its events, as the brain emitted them (``TurnEnded`` need not be there);
    ``previous_goal`` is the goal a short follow-up ("yes", "go on") keeps."""
    request = ""
    started: dict[str, ToolCallStarted] = {}
    finished: dict[str, ToolCallFinished] = {}
    error: str | None = None
    plan: tuple[PlanStep, ...] | None = None
    for event in events:
        match event:
            case TurnStarted():
                request = event.prompt
            case ToolCallStarted():
                started[event.call_id] = event
            case ToolCallFinished():
                finished[event.call_id] = event
            case TurnFailed():
                error = event.message
            case PlanUpdated():
                plan = event.steps
            case (
                TextDelta()
                | ThoughtDelta()
                | ToolCallTerminal()
                | ToolCallNote()
                | ToolCallRunning()
                | CompactionStarted()
                | ContextCompacted()
                | ProviderRetrying()
                | ContextWarning()
                | McpServersStarting()
                | McpServerNotice()
                | SettingsChanged()
                | UsageUpdated()
                | SpecialTurnPersisted()
                | SessionTitled()
                | TurnEnded()
                | Rewound()
            ):
                pass  # not what a turn did
            case _:
                assert_never(event)
    steps: list[TurnStep] = []
    changed: dict[Path, None] = {}
    commands: list[str] = []
    for call_id, start in started.items():
        end = finished.get(call_id)
        outcome = _outcome(start, end)
        steps.append(TurnStep(start.title, outcome, _paths(start, end), _detail(start, end)))
        for path in changed_files(end):
            changed.setdefault(path, None)
        if start.tool_name == COMMAND_TOOL:
            command = start.raw_input.get("command")
            shown = clip(" ".join(command.split()), COMMAND_CHARS) if isinstance(command, str) else "(no command)"
            commands.append(f"`{shown}` → {outcome}")
    flat = " ".join(request.split())
    return TurnRecap(
        turn_number=turn_number,
        request=clip(flat, REQUEST_CHARS),
        goal=goal_of(flat, previous_goal),
        steps=tuple(steps),
        files_changed=tuple(changed),
        commands=tuple(commands),
        reply=_sentences(final_words(events), REPLY_CHARS),
        error=None if error is None else clip(error.strip(), ERROR_CHARS),
        open_plan=tuple(s.step for s in plan if s.status != "completed") if plan is not None else (),
    )


def final_words(events: Sequence[Event]) -> str:
    """What the model said last in a turn: its last text segment that says anything. That is the turn's outcome
    ("Fixed: …", "Added three tests"), where the first words are often narration ("Let me look at…")."""
    said = [text for text in text_segments(events) if text.strip()]
    return said[-1] if said else ""


_FOLLOW_UP = re.compile(
    r"^(?:yes|yep|ok|okay|sure|go on|go ahead|continue|do it|please do|proceed|next|again|try again|thanks?)\b",
    re.IGNORECASE,
)


def goal_of(request: str, previous: str = "") -> str:
    """What a request is after: its first sentence, clipped; a short follow-up ("yes, go on") keeps
    ``previous``."""
    if previous and len(request) < 40 and _FOLLOW_UP.match(request):
        return previous
    end = _SENTENCE_END.search(request)
    first = request[: end.end()] if end is not None else request
    return clip(first.strip(), GOAL_CHARS)


def _detail(start: ToolCallStarted, end: ToolCallFinished | None) -> str:
    """What came of a call, in a few lines (see ``TurnStep.detail``)."""
    if end is None or end.status != "completed":
        return ""
    if start.tool_name == COMMAND_TOOL:
        body = end.text.split("\n", 1)[1] if "\n" in end.text else ""
        return "\n".join(salient_lines(body, max_lines=4, max_chars=DETAIL_CHARS))
    if end.diff is not None:  # counted as the tool counted it, so the two never disagree
        return f"{change_size(end.diff.old_text or '', end.diff.new_text)} lines"
    if start.tool_name in TOOL_SPECS and start.tool_kind in ("read", "search"):  # its summary's first lines
        lines = end.summary.strip().splitlines()
        return clip(" | ".join(line.strip() for line in lines[1:4]), DETAIL_CHARS) if len(lines) > 1 else ""
    if start.tool_name == DELEGATE_TOOL:
        return _sentences(end.text, DETAIL_CHARS)
    return ""


_STATUS = re.compile(r"exit code (-?\d+)|(timed out after [\d.]+s)|(stopped before it exited)")


def _outcome(start: ToolCallStarted, end: ToolCallFinished | None) -> str:
    if end is None:
        return "aborted"
    first_line = end.text.strip().split("\n", 1)[0].strip()
    if end.status == "failed":
        if first_line.startswith("aborted"):
            return clip(first_line, OUTCOME_CHARS)
        return "failed: " + clip(first_line, OUTCOME_CHARS) if first_line else "failed"
    if start.tool_name == COMMAND_TOOL and (status := _STATUS.match(first_line)):
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
    return clip(flat, limit)


def render_turn_recap(summary: TurnRecap, cwd: Path | None = None) -> str:
    """One turn in full as compact plain text (paths relative to ``cwd`` when inside it), bounded in size
    whatever the turn did: the request, each step with what came of it, files changed, the open plan items
    and the reply's gist."""
    lines = [f"Turn {summary.turn_number} — request: {summary.request or '(none)'}"]
    if summary.goal and not summary.request.startswith(summary.goal.rstrip("…")):
        lines.append(f"Goal: {summary.goal}")
    if summary.steps:
        lines.append("Steps:")
        for step in summary.steps[:RENDER_STEPS]:
            lines.append(f"- {clip(step.title, RENDER_TITLE_CHARS)} ({step.outcome})")
            lines += [f"    {line}" for line in step.detail.splitlines()]
        if len(summary.steps) > RENDER_STEPS:
            lines.append(f"- … {len(summary.steps) - RENDER_STEPS} more")
    if summary.files_changed:
        files = [display_path(p, cwd) for p in summary.files_changed[:RENDER_FILES]]
        if len(summary.files_changed) > RENDER_FILES:
            files.append(f"… {len(summary.files_changed) - RENDER_FILES} more")
        lines.append("Files changed: " + ", ".join(files))
    if summary.open_plan:
        lines.append("Open plan steps: " + "; ".join(clip(p, RENDER_TITLE_CHARS) for p in summary.open_plan[:8]))
    if summary.reply:
        lines.append(f"Reply: {summary.reply}")
    if summary.error:
        lines.append(f"Error: {summary.error}")
    return truncate_to_tokens("\n".join(lines), ENTRY_TOKENS)


def one_line(summary: TurnRecap, cwd: Path | None = None) -> str:
    """One turn in one line: its goal, what it changed or ran and how that went, and the reply's start."""
    parts = [f"Turn {summary.turn_number}: {summary.goal or summary.request or '(no request)'}"]
    if summary.files_changed:
        parts.append("changed " + ", ".join(display_path(p, cwd) for p in summary.files_changed[:4]))
    elif summary.commands:
        parts.append("ran " + "; ".join(summary.commands[-2:]))
    if summary.error:
        parts.append(f"failed: {summary.error}")
    elif summary.reply:
        parts.append(summary.reply)
    return clip(" — ".join(parts), ONE_LINE_CHARS)


FULL_TURNS = 2
"""How many of the latest turns the ledger shows in full."""


def render_ledger(summaries: Sequence[TurnRecap], budget_tokens: int, cwd: Path | None = None) -> str:
    """The turn ledger as the next request carries it, within ``budget_tokens``: the last two turns in full,
    earlier turns one line each, newest first as long as they fit (shown oldest first, with a note of how
    many were left out). Its cost does not grow with the session: it stops at the budget."""
    if not summaries or budget_tokens <= 0:
        return ""
    full = [render_turn_recap(s, cwd) for s in summaries[-FULL_TURNS:]]
    blocks: list[str] = []
    used = 0
    titles = ["# Last turn summary"] if len(full) == 1 else ["# Prior turn summary", "# Last turn summary"]
    for title, text in reversed(list(zip(titles, full, strict=True))):
        block = f"{title}\n{text}"
        cost = count_tokens(block) + 2
        if used + cost > budget_tokens:
            break
        blocks.insert(0, block)
        used += cost
    earlier = summaries[: max(0, len(summaries) - FULL_TURNS)]
    heading = "# Earlier turns (one line each)"
    room = budget_tokens - used - count_tokens(heading) - 16
    older, _ = newest_that_fit((one_line(s, cwd) for s in reversed(earlier)), room)
    if older or earlier:
        left = len(earlier) - len(older)
        note = [f"(… {left} earlier turns not shown)"] if left else []
        if older or note:
            blocks.insert(0, "\n".join([heading, *note, *older]))
    return "\n\n".join(blocks)
