"""The reasoning-block rule: segment_turn on whole turns, and BlockTracker agreeing with it on every case."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import cast

import pytest

from codling.brain.events import (
    Event,
    TextDelta,
    ThoughtDelta,
    ToolCallFinished,
    ToolCallStarted,
    TurnEnded,
    TurnFailed,
    TurnStarted,
)
from codling.brain.reasoning import (
    BlockTracker,
    ReasoningBlock,
    Segment,
    SegmentKind,
    SegmentSplitter,
    TimelineItem,
    group_blocks,
    segment_turn,
    split_segments,
)

T = "t1"

Shape = list[str | list[str]]
"""A grouped timeline by kind: a string for a segment outside blocks, a list of kinds for a block."""


def shape(items: Sequence[TimelineItem]) -> Shape:
    return [[s.kind for s in item.segments] if isinstance(item, ReasoningBlock) else item.kind for item in items]


def turn_events(kinds: Sequence[str]) -> list[Event]:
    """A turn whose timeline has one segment of each kind, think and text in two deltas each."""
    events: list[Event] = [TurnStarted(T, "go", thinking=True, started_at=datetime(2025, 1, 1, tzinfo=UTC))]
    for n, kind in enumerate(kinds):
        if kind == "think":
            events += [ThoughtDelta(T, f"thought {n}"), ThoughtDelta(T, " more")]
        elif kind == "text":
            events += [TextDelta(T, f"text {n}"), TextDelta(T, " more")]
        else:
            events += [
                ToolCallStarted(T, f"c{n}", "read_file", f"Read {n}", "read", {}),
                ToolCallFinished(T, f"c{n}", "read_file", "completed", "ok"),
            ]
    events.append(TurnEnded(T, "end_turn"))
    return events


def tracked(kinds: Sequence[SegmentKind]) -> Shape:
    """The grouping the incremental form produces: blocks as the tracker opens and closes them."""
    result: Shape = []
    block: list[str] | None = None
    tracker = BlockTracker()
    for kind in kinds:
        step = tracker.feed(kind)
        if step.closed_before:
            assert block is not None
            result.append(block)
            block = None
        if step.opened:
            assert block is None
            block = []
        assert step.in_block == (block is not None) == tracker.in_block
        if block is not None:
            block.append(kind)
        else:
            result.append(kind)
    if tracker.end():
        assert block is not None
        result.append(block)
    else:
        assert block is None
    assert not tracker.in_block
    return result


CASES: list[tuple[str, Shape]] = [
    ("think tool think tool text", [["think", "tool", "think", "tool"], "text"]),
    ("think tool tool", [["think", "tool"], "tool"]),
    ("think text", [["think"], "text"]),
    ("tool think text", ["tool", ["think"], "text"]),
    ("think tool text think tool think text", [["think", "tool"], "text", ["think", "tool", "think"], "text"]),
    ("think tool tool think tool", [["think", "tool"], "tool", ["think", "tool"]]),
    ("", []),
    ("text", ["text"]),
    ("tool", ["tool"]),
    ("think", [["think"]]),
    ("tool think tool text", ["tool", ["think", "tool"], "text"]),
    ("text tool text", ["text", "tool", "text"]),
    ("think tool", [["think", "tool"]]),
    ("think tool think", [["think", "tool", "think"]]),
]


@pytest.mark.parametrize(("kinds", "expected"), CASES, ids=[c[0] or "empty" for c in CASES])
def test_segment_turn(kinds: str, expected: Shape) -> None:
    assert shape(segment_turn(turn_events(kinds.split()))) == expected


@pytest.mark.parametrize(("kinds", "expected"), CASES, ids=[c[0] or "empty" for c in CASES])
def test_the_incremental_form_agrees_on_the_table(kinds: str, expected: Shape) -> None:
    assert tracked(cast(list[SegmentKind], kinds.split())) == expected


def test_the_incremental_form_agrees_on_every_timeline_up_to_seven_segments() -> None:
    kinds: tuple[SegmentKind, ...] = ("think", "tool", "text")
    for length in range(8):
        for combo in itertools.product(kinds, repeat=length):
            assert tracked(combo) == shape(group_blocks([Segment(kind, ()) for kind in combo])), combo
            # From events too: the splitter's segment starts, fed to the tracker, as a live renderer does.
            events = turn_events(combo)
            splitter = SegmentSplitter()
            starts = [kind for kind in map(splitter.feed, events) if kind is not None]
            assert tracked(starts) == shape(segment_turn(events)), combo


def test_segments_keep_their_events_and_blocks_count_their_calls() -> None:
    failing: list[Event] = [
        TurnStarted(T, "go", thinking=True, started_at=datetime(2025, 1, 1, tzinfo=UTC)),
        ThoughtDelta(T, "a"),
        ThoughtDelta(T, "b"),
        ToolCallStarted(T, "x", "run_command", "Run x", "execute", {}),
        ToolCallFinished(T, "x", "run_command", "failed", "boom"),
        ThoughtDelta(T, "c"),
        ToolCallStarted(T, "y", "run_command", "Run y", "execute", {}),
        ToolCallFinished(T, "y", "run_command", "completed", "ok"),
        TextDelta(T, "Done"),
        TurnFailed(T, "later"),
        TurnEnded(T, "end_turn", error=True),
    ]
    items = segment_turn(failing)
    assert len(items) == 2
    block, text = items
    assert isinstance(block, ReasoningBlock) and isinstance(text, Segment)
    assert (block.tool_calls, block.failed_tool_calls) == (2, 1)
    think, tool = block.segments[:2]
    assert think.text == "ab" and think.started is None and not think.failed
    assert tool.events == tuple(failing[3:5]) and tool.failed and tool.text == ""
    assert text.text == "Done"


def test_parallel_calls_keep_their_results_and_finishes_do_not_split_deltas() -> None:
    events: list[Event] = [
        ThoughtDelta(T, "a"),
        ToolCallStarted(T, "x", "read_file", "Read x", "read", {}),
        ToolCallStarted(T, "y", "read_file", "Read y", "read", {}),
        ToolCallFinished(T, "x", "read_file", "completed", "ok"),
        ThoughtDelta(T, "b"),
        ToolCallFinished(T, "y", "read_file", "failed", "no"),
        ThoughtDelta(T, "c"),
    ]
    segments = split_segments(events)
    assert [s.kind for s in segments] == ["think", "tool", "tool", "think"]
    assert [s.events for s in segments[1:3]] == [(events[1], events[3]), (events[2], events[5])]
    assert segments[3].text == "bc"  # y's result belongs to y, so "b" and "c" are one run of thought
    assert shape(group_blocks(segments)) == [["think", "tool"], "tool", ["think"]]


def test_a_result_whose_call_was_never_seen_is_a_tool_segment_of_its_own() -> None:
    orphan = ToolCallFinished(T, "z", "run_command", "failed", "aborted")
    segments = split_segments([ThoughtDelta(T, "a"), orphan, TextDelta(T, "b")])
    assert [(s.kind, s.events) for s in segments][1] == ("tool", (orphan,))
    block = segment_turn([ThoughtDelta(T, "a"), orphan, TextDelta(T, "b")])[0]
    assert isinstance(block, ReasoningBlock) and (block.tool_calls, block.failed_tool_calls) == (1, 1)


def test_the_splitter_reports_only_segment_starts() -> None:
    splitter = SegmentSplitter()
    events: list[Event] = [
        TurnStarted(T, "go", thinking=True, started_at=datetime(2025, 1, 1, tzinfo=UTC)),
        ThoughtDelta(T, "a"),
        ThoughtDelta(T, "b"),
        ToolCallStarted(T, "x", "read_file", "Read x", "read", {}),
        ToolCallFinished(T, "x", "read_file", "completed", "ok"),
        ToolCallFinished(T, "w", "read_file", "completed", "ok"),
        TextDelta(T, "c"),
        TextDelta(T, "d"),
        TurnFailed(T, "e"),
        TurnEnded(T, "end_turn"),
    ]
    assert [splitter.feed(e) for e in events] == [None, "think", None, "tool", None, "tool", "text", None, None, None]
