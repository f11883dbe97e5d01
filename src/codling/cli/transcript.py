"""A recorded session as a readable transcript, for ``codling sessions show``.

Each turn gets a header line (number, local start time, whether it was a thinking turn), the user's prompt, and
its timeline drawn with the live renderer's pieces (``cli/render.py``), so a session reads the same afterwards
as it did while it ran: the replies' markdown rendered block by block when styled, tool lines with their status,
edits' diffs trimmed, errors, and the reasoning blocks of thinking turns collapsed into ``reasoning (N tool
calls)`` lines (:mod:`codling.brain.reasoning`). The chat shows a resumed session's last turn with it too.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TextIO, assert_never

from codling.brain.branches import abandoned
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
    Usage,
    UsageUpdated,
)
from codling.brain.reasoning import ReasoningBlock, Segment, TimelineItem, segment_turn, split_segments
from codling.cli.draw import (
    StyledWriter,
    compact_thought,
    one_line,
    write_diff,
    write_error,
    write_plan,
    write_reasoning,
    write_stop_note,
    write_tool_result,
    write_tool_status,
    write_tool_title,
)
from codling.cli.markdown import MarkdownBlocks
from codling.tools.base import PLAN_TOOL

INTERRUPTED_NOTE = "(interrupted: the agent stopped before this turn finished)"
"""Shown under a turn whose end was never recorded (the process died or was killed)."""

TIME_FORMAT = "%Y-%m-%d %H:%M"
"""How a turn's start time is shown, in local time."""


ABANDONED_NOTE = "abandoned: a rewind took the conversation back to before it"
"""Shown in the header of a turn a rewind abandoned (the model is no longer sent it)."""


@dataclass
class _Turn:
    started: TurnStarted
    events: list[Event] = field(default_factory=list)
    abandoned: bool = False


def print_transcript(events: Sequence[Event], out: TextIO, *, color: bool, first_turn: int = 1) -> None:
    """Write the conversation that ``events`` (a whole session, e.g. ``SessionLog.events``) hold to ``out``.

    Turns are separated by a blank line. A thinking turn's reasoning blocks are collapsed into one line each (the
    thoughts, tool lines and diffs inside a block are not shown); everything else is drawn as the live renderer
    draws it. A failed turn ends with its error, a cancelled or stopped one with a note, and a turn whose
    ``TurnEnded`` is missing with :data:`INTERRUPTED_NOTE`. ``color`` styles the output; without it the output
    holds no escape codes (not even from the recorded content). What a special turn added to the conversation
    between turns (a greeting) is shown where it came, under its type; other events outside turns are not.
    Turns are numbered from ``first_turn`` (for the tail of a session). Styled, the replies are rendered markdown
    laid out to the terminal's width, as live; plain, they are the text the model wrote.
    """
    writer = StyledWriter(out, color=color)
    number = first_turn - 1
    for index, block in enumerate(_split_turns(events)):
        if index:
            writer.line()
        if isinstance(block, _Turn):
            number += 1
            _write_turn(writer, number, block)
        elif isinstance(block, Rewound):
            writer.line(describe_rewind(block), "yellow")
        else:
            _write_special(writer, block)


def describe_rewind(rewound: Rewound) -> str:
    """One line saying what a rewind did."""
    what = {"both": "code and conversation", "code": "code", "conversation": "conversation"}[rewound.scope]
    files = f" ({len(rewound.files)} file{'s' if len(rewound.files) != 1 else ''} put back)" if rewound.files else ""
    return f"↶ Rewound the {what} to before turn {rewound.turn_number}{files}"


def _split_turns(events: Sequence[Event]) -> list[_Turn | SpecialTurnPersisted | Rewound]:
    """A history's turns, each with the events it draws, and what is shown between them (special turns, a
    rewind made outside any turn)."""
    blocks: list[_Turn | SpecialTurnPersisted | Rewound] = []
    turn: _Turn | None = None  # the turn still open, if any
    gone = abandoned(events)
    for index, event in enumerate(events):
        match event:
            case TurnStarted():
                turn = _Turn(event, abandoned=index in gone)
                blocks.append(turn)
            case Rewound():
                if turn is None:
                    blocks.append(event)
            case SpecialTurnPersisted():
                if turn is None and event.persistence != "replace-above" and event.interactions:
                    blocks.append(event)
            case TextDelta() | ThoughtDelta() | ToolCallStarted() | ToolCallFinished() | PlanUpdated() | TurnFailed():
                if turn is not None:
                    turn.events.append(event)
            case TurnEnded():
                if turn is not None:
                    turn.events.append(event)
                turn = None
            case (
                CompactionStarted()
                | ContextCompacted()
                | ToolCallTerminal()
                | ToolCallNote()
                | ToolCallRunning()
                | ProviderRetrying()
                | ContextWarning()
                | McpServersStarting()
                | McpServerNotice()
                | SettingsChanged()
                | UsageUpdated()
                | SessionTitled()
            ):
                pass  # a compaction is the history's, not the turn's work; the rest is never recorded as an event
            case _:
                assert_never(event)
    return blocks


def _write_special(out: StyledWriter, special: SpecialTurnPersisted) -> None:
    out.line(special.turn_type.replace("_", " ").capitalize(), "bold")
    for interaction in special.interactions:
        if interaction.kind == "user":
            for line in interaction.text.splitlines() or [""]:
                out.write(">", "cyan")
                out.line(f" {line}" if line.strip() else "")
        elif interaction.kind == "assistant":
            _write_text(out, interaction.text)
            out.end_line()
        elif interaction.kind == "thought":
            out.line(compact_thought(interaction.text), "dim")
        elif interaction.kind == "tool_result":  # it starts with the call's title: the call needs no line
            out.line(interaction.text, "dim")


def _write_turn(out: StyledWriter, number: int, turn: _Turn) -> None:
    started = turn.started
    header = f"Turn {number} · {started.started_at.astimezone().strftime(TIME_FORMAT)}"
    out.line(header + (" · thinking" if started.thinking else ""), "bold")
    if turn.abandoned:
        out.line(f"({ABANDONED_NOTE})", "yellow")
    for line in (started.prompt or "").splitlines() or [""]:
        out.write(">", "cyan")
        out.line(f" {line}" if line.strip() else "")

    # Only thinking turns are grouped; other turns show their thoughts and tools as they came, as live.
    items: Sequence[TimelineItem] = segment_turn(turn.events) if started.thinking else split_segments(turn.events)
    plans = _plans_by_call(turn.events)
    for item in items:
        segments = item.segments if isinstance(item, ReasoningBlock) else (item,)
        if isinstance(item, ReasoningBlock):
            out.end_line()
            write_reasoning(out, item.tool_calls, item.failed_tool_calls)
        else:
            _write_segment(out, item)
        # A plan set inside the item is drawn after it (the last one, for a collapsed block).
        shown = [plans[f.call_id] for s in segments if (f := s.finished) is not None and f.call_id in plans]
        if shown:
            write_plan(out, shown[-1].steps)

    ended: TurnEnded | None = None
    for event in turn.events:
        if isinstance(event, TurnFailed):
            write_error(out, event.message)
        elif isinstance(event, TurnEnded):
            ended = event
    out.end_line()
    if ended is None:
        out.line(INTERRUPTED_NOTE, "yellow")
    else:
        write_stop_note(out, ended.stop_reason)


def _write_segment(out: StyledWriter, segment: Segment) -> None:
    match segment.kind:
        case "text":
            _write_text(out, segment.text)
        case "think":
            out.end_line()
            if not out.color:
                out.write("thinking: ")
            out.line(compact_thought(segment.text).strip("\n"), "dim italic")
        case "tool":
            started, finished = segment.started, segment.finished
            out.end_line()
            if started is not None:
                write_tool_title(out, one_line(started.title) or started.tool_name)
            else:
                write_tool_title(out, finished.tool_name if finished is not None else "")
            _write_result(out, finished)


def _write_text(out: StyledWriter, text: str) -> None:
    """A reply's text as the live renderer draws it: styled, as markdown cut into the same blocks, each rendered
    (a blank line between them); plain, as written."""
    if not out.color:
        out.write(text)
        return
    blocks = MarkdownBlocks()
    for index, block in enumerate(block for block in (*blocks.feed(text), blocks.flush()) if block):
        if index:
            out.write("\n")  # the blank line that separated the blocks in the source
        out.markdown(block)


def _write_result(out: StyledWriter, finished: ToolCallFinished | None) -> None:
    if finished is None:
        # Recorded sessions close every call a turn left open, so this is a call the process died in.
        out.line(" -> interrupted" if not out.color else "  … interrupted", "yellow")
        return
    write_tool_status(out, finished)
    out.write("\n")
    write_tool_result(out, finished)
    if finished.diff is not None:
        write_diff(out, finished.diff)


def _plans_by_call(events: Sequence[Event]) -> dict[str, PlanUpdated]:
    """The plan each call of a turn set (the last, if several): an ``update_plan`` call's is the plan right
    after it finished; a plan that comes while a call is still running (a planner delegate's) is that call's."""
    plans: dict[str, PlanUpdated] = {}
    running: list[str] = []
    just_planned: str | None = None
    for event in events:
        if isinstance(event, ToolCallStarted):
            running.append(event.call_id)
            just_planned = None
        elif isinstance(event, ToolCallFinished):
            if event.call_id in running:
                running.remove(event.call_id)
            just_planned = event.call_id if event.tool_name == PLAN_TOOL else None
        elif isinstance(event, PlanUpdated):
            owner = just_planned or (running[-1] if running else None)
            if owner is not None:
                plans[owner] = event
    return plans


def spent_line(events: Iterable[Event]) -> str | None:
    """What a session's turns spent, on one line (tokens, the prompt cache's share, cost), or None when no
    turn reported any tokens."""
    ended = [event for event in events if isinstance(event, TurnEnded)]
    spent = sum((event.usage for event in ended), Usage())
    if spent.input_tokens + spent.output_tokens == 0:
        return None
    line = f"spent: {spent.input_tokens:,} input tokens"
    if spent.cache_read_tokens or spent.cache_write_tokens:
        share = spent.cache_read_tokens / spent.input_tokens if spent.input_tokens else 0.0
        line += (
            f" ({spent.cache_read_tokens:,} read from the prompt cache, {share:.0%}; "
            f"{spent.cache_write_tokens:,} written to it)"
        )
    line += f", {spent.output_tokens:,} output tokens, {spent.requests:,} model requests"
    costs = [event.cost for event in ended if event.cost is not None]
    if costs:
        line += f"; about ${sum(costs):,.4f} at list prices"
    return line
