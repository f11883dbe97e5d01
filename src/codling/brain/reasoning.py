"""Reasoning blocks: how a thinking turn's timeline is grouped for display (DESIGN.md section 3).

A turn's timeline is a sequence of *segments*: ``think`` (consecutive thought deltas), ``text`` (consecutive
text deltas) and ``tool`` (one tool call: its ``ToolCallStarted`` and its ``ToolCallFinished``). The rule:

- a reasoning block starts at a think segment;
- a tool that is followed by another think stays in the block;
- the block ends before a text segment, or after a tool that is not followed by a think.

So ``think tool think tool text`` is one block ``[think tool think tool]`` then the text; ``think tool tool`` is
a block ``[think tool]`` then a tool outside it; ``tool think text`` is a tool, a block ``[think]``, the text.
A turn may hold several blocks. Segments outside blocks are shown as they came.

Two forms apply the rule: :func:`segment_turn` (and :func:`group_blocks`) for a whole recorded turn, and
:class:`BlockTracker`, fed one segment kind at a time, for a renderer that draws the turn as it streams.
:class:`SegmentSplitter` finds the segment boundaries for both, so they cannot disagree about what a segment is.
The rule does not look at the turn's thinking flag: callers decide whether to group a turn at all.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal, assert_never

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

SegmentKind = Literal["think", "tool", "text"]
"""What a segment of a turn's timeline holds."""


@dataclass(frozen=True)
class Segment:
    """One segment of a turn's timeline and the events it covers, in arrival order.

    A think or text segment holds only :class:`ThoughtDelta` or only :class:`TextDelta` events. A tool segment
    holds the call's :class:`ToolCallStarted` and, once it came, its :class:`ToolCallFinished` (which may have
    arrived after later segments had started, e.g. for parallel calls); a finish whose start was never seen
    makes a tool segment of its own.
    """

    kind: SegmentKind
    events: tuple[Event, ...]

    @property
    def text(self) -> str:
        """The segment's thought or reply text, joined (empty for a tool segment)."""
        return "".join(e.text for e in self.events if isinstance(e, TextDelta | ThoughtDelta))

    @property
    def started(self) -> ToolCallStarted | None:
        """The tool call's start, if this is a tool segment that has one."""
        return next((e for e in self.events if isinstance(e, ToolCallStarted)), None)

    @property
    def finished(self) -> ToolCallFinished | None:
        """The tool call's result, if this is a tool segment whose call finished."""
        return next((e for e in self.events if isinstance(e, ToolCallFinished)), None)

    @property
    def failed(self) -> bool:
        """Whether this is a tool call that finished with ``failed``."""
        finished = self.finished
        return finished is not None and finished.status == "failed"


@dataclass(frozen=True)
class ReasoningBlock:
    """A run of segments shown collapsed: it starts with a think segment and holds thinks and tools only."""

    segments: tuple[Segment, ...]

    @property
    def tool_calls(self) -> int:
        """How many tool calls the block holds."""
        return sum(1 for s in self.segments if s.kind == "tool")

    @property
    def failed_tool_calls(self) -> int:
        """How many of the block's tool calls failed."""
        return sum(1 for s in self.segments if s.failed)


TimelineItem = Segment | ReasoningBlock
"""One entry of a grouped timeline: a segment outside any block, or a whole block."""


class SegmentSplitter:
    """Finds segment boundaries in a turn's events as they arrive.

    :meth:`feed` returns the kind of the segment an event starts, or ``None`` when the event continues the
    current segment (another delta of the same kind, or the finish of a call whose start was seen) or is not
    part of the timeline (``TurnStarted``, ``TurnFailed``, ``TurnEnded``). A call's finish does not end a run of
    deltas: it belongs to the call's segment, wherever that began.
    """

    def __init__(self) -> None:
        self._last: SegmentKind | None = None
        self._calls: set[str] = set()

    def feed(self, event: Event) -> SegmentKind | None:
        """The kind of the segment ``event`` starts, if it starts one."""
        kind: SegmentKind
        match event:
            case ThoughtDelta():
                if self._last == "think":
                    return None
                kind = "think"
            case TextDelta():
                if self._last == "text":
                    return None
                kind = "text"
            case ToolCallStarted():
                self._calls.add(event.call_id)
                kind = "tool"
            case ToolCallFinished():
                if event.call_id in self._calls:
                    return None
                kind = "tool"
            case (
                TurnStarted()
                | ToolCallTerminal()
                | ToolCallNote()
                | ToolCallRunning()
                | ToolCallFinished()
                | PlanUpdated()
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
                | TurnFailed()
                | TurnEnded()
                | Rewound()
            ):
                return None  # no segment's content
            case _:
                assert_never(event)
        self._last = kind
        return kind


def split_segments(events: Iterable[Event]) -> list[Segment]:
    """The segments of one turn's events, in the order they started (turn start, failure and end are skipped)."""
    splitter = SegmentSplitter()
    kinds: list[SegmentKind] = []
    members: list[list[Event]] = []
    call_segment: dict[str, int] = {}  # call id -> index of its segment, so a late finish joins its call
    for event in events:
        kind = splitter.feed(event)
        if kind is not None:
            kinds.append(kind)
            members.append([event])
            if isinstance(event, ToolCallStarted):
                call_segment[event.call_id] = len(members) - 1
        elif isinstance(event, ToolCallFinished) and event.call_id in call_segment:
            members[call_segment[event.call_id]].append(event)
        elif isinstance(event, TextDelta | ThoughtDelta):
            members[-1].append(event)
    return [Segment(kind, tuple(group)) for kind, group in zip(kinds, members, strict=True)]


def group_blocks(segments: Sequence[Segment]) -> list[TimelineItem]:
    """Group ``segments`` into reasoning blocks by the rule of this module; other segments stay as they are."""
    items: list[TimelineItem] = []
    i = 0
    while i < len(segments):
        if segments[i].kind != "think":
            items.append(segments[i])
            i += 1
            continue
        block = [segments[i]]
        i += 1
        while i < len(segments):
            following = segments[i].kind
            if following == "text":
                break  # the block ends before text
            block.append(segments[i])
            i += 1
            if following == "tool" and not (i < len(segments) and segments[i].kind == "think"):
                break  # ... or after a tool that no think follows
        items.append(ReasoningBlock(tuple(block)))
    return items


def text_segments(events: Iterable[Event]) -> list[str]:
    """The text of each text segment of a turn, in order: what the model said at each step."""
    return [segment.text for segment in split_segments(events) if segment.kind == "text"]


def join_segments(texts: Iterable[str]) -> str:
    """Text segments as one text, each a paragraph of its own (blank ones left out)."""
    return "\n\n".join(stripped for text in texts if (stripped := text.strip()))


def segment_turn(events: Sequence[Event]) -> list[TimelineItem]:
    """One turn's timeline grouped into segments and reasoning blocks.

    ``events`` are the events of a single turn. ``TurnStarted``, ``TurnFailed`` and ``TurnEnded`` belong to no
    segment and are left out: a caller showing the turn reads the thinking flag, the error and the stop reason
    from them itself (a ``TurnFailed`` comes after every event of the timeline, so it is shown after it).
    """
    return group_blocks(split_segments(events))


@dataclass(frozen=True)
class BlockStep:
    """What :meth:`BlockTracker.feed` decided about one new segment."""

    closed_before: bool
    """A block was open and ended before this segment."""
    opened: bool
    """This segment opened a new block."""
    in_block: bool
    """This segment is inside a block (the one it opened or one that was already open)."""


class BlockTracker:
    """The block rule applied one segment at a time, for output drawn while a turn streams.

    Feed the kind of every segment as it starts (see :class:`SegmentSplitter`) and call :meth:`end` when the
    timeline is over. A block that ends after a tool is only known to have ended when the next segment starts
    (or at the end), since only a following think would have kept it open.
    """

    def __init__(self) -> None:
        # None: no block open; otherwise the kind of the block's last segment.
        self._last: SegmentKind | None = None

    @property
    def in_block(self) -> bool:
        """Whether a block is open."""
        return self._last is not None

    def feed(self, kind: SegmentKind) -> BlockStep:
        """Place a new segment of ``kind``."""
        if self._last is None:
            if kind == "think":
                self._last = kind
                return BlockStep(closed_before=False, opened=True, in_block=True)
            return BlockStep(closed_before=False, opened=False, in_block=False)
        # A block is open: text always ends it; after a tool only a think keeps it open.
        if kind == "text" or (kind == "tool" and self._last == "tool"):
            self._last = None
            return BlockStep(closed_before=True, opened=False, in_block=False)
        self._last = kind
        return BlockStep(closed_before=False, opened=False, in_block=True)

    def end(self) -> bool:
        """The timeline is over: whether that closed an open block. The tracker is ready for a new timeline."""
        was_open = self._last is not None
        self._last = None
        return was_open
