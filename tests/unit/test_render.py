"""The terminal and JSON-lines renderers, fed whole scripted event sequences."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from rich.spinner import Spinner as RichSpinner

from codling.brain.events import (
    CompactionStarted,
    ContextCompacted,
    ContextWarning,
    Event,
    McpServerNotice,
    TextDelta,
    ThoughtDelta,
    ToolCallFinished,
    ToolCallRunning,
    ToolCallStarted,
    TurnEnded,
    TurnFailed,
    TurnStarted,
    Usage,
)
from codling.brain.prompt import ImageBlock, TextBlock
from codling.cli.draw import format_diff, printable, use_color
from codling.cli.render import PromptGate, TerminalRenderer
from codling.cli.script_output import JsonLinesRenderer, event_to_json
from codling.cli.spinner import Spinner, waited
from codling.secrecy import Redactor
from codling.tools.base import ShownResult
from codling.vocabulary import FileDiff, Location, StopReason

T = "t1"
STARTED_AT = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
EDIT = FileDiff(Path("/p/src/a.py"), "x = 1\ny = 2\n", "x = 10\ny = 2\n")


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def started(prompt: str = "fix it") -> TurnStarted:
    return TurnStarted(T, prompt, thinking=False, started_at=STARTED_AT)


def call(call_id: str, title: str, tool: str = "run_command", kind: str = "execute") -> ToolCallStarted:
    return ToolCallStarted(T, call_id, tool, title, kind, {"arg": call_id})  # type: ignore[arg-type]


def done(call_id: str, tool: str = "run_command", text: str = "ok", diff: FileDiff | None = None) -> ToolCallFinished:
    return ToolCallFinished(T, call_id, tool, "completed", text, diff=diff)


def failed(call_id: str, text: str, tool: str = "read_file") -> ToolCallFinished:
    return ToolCallFinished(T, call_id, tool, "failed", text)


async def feed(renderer: TerminalRenderer | JsonLinesRenderer, events: Iterable[Event]) -> None:
    for event in events:
        await renderer(event)


async def render_plain(events: Iterable[Event]) -> str:
    out = io.StringIO()
    renderer = TerminalRenderer(out, color=False, interactive=False)
    await feed(renderer, events)
    renderer.close()
    return out.getvalue()


FULL_TURN: list[Event] = [
    started(),
    ThoughtDelta(T, "Let me"),
    ThoughtDelta(T, " look.\n\n"),
    TextDelta(T, "I'll run the tests."),
    call("c1", "Run `pytest -q`"),
    done("c1", text="3 passed"),
    TextDelta(T, "Now the edit."),
    call("c2", "Edit src/a.py", "edit_file", "edit"),
    done("c2", "edit_file", diff=EDIT),
    call("c3", "Read missing.py", "read_file", "read"),
    failed("c3", "\nFile not found: missing.py\nmore detail"),
    TextDelta(T, "All "),
    TextDelta(T, "green.\n"),
    TurnEnded(T, "end_turn", Usage(10, 5, 2)),
]


async def test_plain_transcript_of_a_whole_turn() -> None:
    assert await render_plain(FULL_TURN) == (
        "thinking: Let me look.\n"
        "I'll run the tests.\n"
        "[tool] Run `pytest -q` -> completed\n"
        "Now the edit.\n"
        "[tool] Edit src/a.py -> completed\n"
        "    @@ -1,2 +1,2 @@\n"
        "    -x = 1\n"
        "    +x = 10\n"
        "     y = 2\n"
        "[tool] Read missing.py -> failed: File not found: missing.py\n"
        "All green.\n"
    )


async def test_parallel_tool_calls_repeat_the_title_on_their_status_line() -> None:
    events: list[Event] = [
        started(),
        call("a", "Read a.py", "read_file", "read"),
        call("b", "Read b.py", "read_file", "read"),
        done("a", "read_file"),
        done("b", "read_file"),
        TextDelta(T, "Both read."),
        TurnEnded(T, "end_turn"),
    ]
    assert await render_plain(events) == (
        "[tool] Read a.py\n[tool] Read b.py\n[tool] Read a.py -> completed\n[tool] Read b.py -> completed\nBoth read.\n"
    )


async def test_thoughts_are_compact_and_prefixed_once_per_run() -> None:
    events: list[Event] = [
        started(),
        ThoughtDelta(T, "\nfirst\n\n\nsecond"),
        TextDelta(T, "Answer."),
        ThoughtDelta(T, "again"),
        TurnEnded(T, "end_turn"),
    ]
    assert await render_plain(events) == "thinking: first\nsecond\nAnswer.\nthinking: again\n"


async def test_failed_turn_shows_the_error_on_its_own_line() -> None:
    events: list[Event] = [
        started(),
        TextDelta(T, "Working"),
        TurnFailed(T, "model error: 401 Incorrect API key provided"),
        TurnEnded(T, "end_turn", error=True),
    ]
    assert await render_plain(events) == "Working\nError: model error: 401 Incorrect API key provided\n"


@pytest.mark.parametrize(
    ("reason", "note"),
    [
        ("cancelled", "(cancelled)"),
        ("max_turn_requests", "(stopped: the turn made as many model requests as it may)"),
        ("max_cost", "(stopped: the turn's spend passed its cap, --max-cost)"),
        ("max_tokens", "(stopped: the reply reached the model's output token limit)"),
        ("refusal", "(stopped: the model refused to answer)"),
    ],
)
async def test_a_turn_that_did_not_end_normally_says_so(reason: StopReason, note: str) -> None:
    events: list[Event] = [started(), TextDelta(T, "partial"), TurnEnded(T, reason)]
    assert await render_plain(events) == f"partial\n{note}\n"


async def test_an_empty_turn_prints_nothing() -> None:
    assert await render_plain([started(), TurnEnded(T, "end_turn")]) == ""


async def test_text_is_written_as_each_delta_arrives() -> None:
    out = io.StringIO()
    renderer = TerminalRenderer(out, color=False, interactive=False)
    await renderer(started())
    await renderer(TextDelta(T, "Hel"))
    assert out.getvalue() == "Hel"
    await renderer(TextDelta(T, "lo"))
    assert out.getvalue() == "Hello"


async def test_plain_output_has_no_escape_codes_even_from_the_content() -> None:
    events = [*FULL_TURN[:-1], TextDelta(T, "\x1b[31mred\x1b[0m\n"), TurnEnded(T, "cancelled")]
    text = await render_plain(events)
    assert "\x1b" not in text
    assert "\\x1b[31mred\\x1b[0m\n(cancelled)\n" in text


async def test_color_output_is_styled_and_keeps_the_text() -> None:
    out = io.StringIO()
    renderer = TerminalRenderer(out, color=True, interactive=False)
    await feed(renderer, [*FULL_TURN[:-1], TurnFailed(T, "boom"), TurnEnded(T, "end_turn", error=True)])
    text = out.getvalue()
    assert "\x1b[" in text
    assert "thinking:" not in text
    assert "\x1b[2;3mLet me\x1b[0m" in text  # thoughts dim and italic
    assert "⏺ \x1b[0m\x1b[1mRun `pytest -q`\x1b[0m\x1b[32m  ✓ done\x1b[0m\n" in text
    assert "\x1b[32m+x = 10\x1b[0m" in text and "\x1b[31m-x = 1\x1b[0m" in text
    assert "\x1b[31m  ✗ failed: File not found: missing.py\x1b[0m" in text
    assert "\x1b[1;31mError:\x1b[0m boom\n" in text
    assert "All green.\n" in text


def test_format_diff_trims_long_diffs_with_a_note() -> None:
    new = "".join(f"line {i}\n" for i in range(10))
    assert format_diff(FileDiff(Path("/p/new.txt"), None, new), 4) == [
        "@@ -0,0 +1,10 @@",
        "+line 0",
        "+line 1",
        "+line 2",
        "… 7 more lines",
    ]


def test_format_diff_of_an_unchanged_file_is_empty() -> None:
    assert format_diff(FileDiff(Path("/p/a.py"), "x\n", "x\n"), 10) == []


def test_printable_shows_control_characters_instead_of_sending_them() -> None:
    assert printable("a\r\nb\tc\x1b[2K\x07\n") == "a\nb\tc\\x1b[2K\\x07\n"


async def test_long_diffs_are_trimmed_in_the_transcript() -> None:
    diff = FileDiff(Path("/p/big.txt"), None, "".join(f"{i}\n" for i in range(100)))
    text = await render_plain([started(), call("w", "Write big.txt", "write_file", "edit"), done("w", diff=diff)])
    lines = text.splitlines()
    assert lines[0] == "[tool] Write big.txt -> completed"
    assert lines[-1] == "    … 61 more lines"
    assert len(lines) == 1 + 40 + 1


# -- thinking turns: reasoning blocks collapsed ------------------------------------------------------------------


def thinking_started(prompt: str = "fix it") -> TurnStarted:
    return TurnStarted(T, prompt, thinking=True, started_at=STARTED_AT)


THINKING_TURN: list[Event] = [
    thinking_started(),
    ThoughtDelta(T, "Which test fails?"),
    call("c1", "Run `pytest -q`"),
    done("c1", text="1 failed"),
    ThoughtDelta(T, "The assert in a.py."),
    call("c2", "Edit src/a.py", "edit_file", "edit"),
    done("c2", "edit_file", diff=EDIT),  # inside the block: no diff
    TextDelta(T, "Fixed the "),
    TextDelta(T, "assert."),
    ThoughtDelta(T, "Check again."),
    call("c3", "Read a.py", "read_file", "read"),
    call("c4", "Run `pytest`"),  # a tool no think precedes: the block ends before it
    failed("c3", "permission denied"),  # c3 is in the drawn block: its failure gets a line of its own
    done("c4", text="all passed"),
    ThoughtDelta(T, "Good."),
    call("c5", "Read b.py", "read_file", "read"),
    failed("c5", "no such file"),
    ThoughtDelta(T, "Never mind."),
    TextDelta(T, "Done.\n"),
    ThoughtDelta(T, "Nothing else."),
    TurnEnded(T, "end_turn", Usage(10, 5, 4)),
]


async def test_plain_thinking_turn_collapses_each_reasoning_block() -> None:
    assert await render_plain(THINKING_TURN) == (
        "reasoning (2 tool calls)\n"
        "Fixed the assert.\n"
        "reasoning (1 tool call)\n"
        "[tool] Run `pytest`\n"
        "[tool] Read a.py -> failed: permission denied\n"
        "[tool] Run `pytest` -> completed\n"
        "reasoning (1 tool call, 1 failed)\n"
        "Done.\n"
        "reasoning\n"
    )


async def test_color_thinking_turn_shows_the_collapsed_lines_and_no_thoughts() -> None:
    out = io.StringIO()
    renderer = TerminalRenderer(out, color=True, interactive=False)
    await feed(renderer, THINKING_TURN)
    text = out.getvalue()
    assert "\x1b[2mreasoning (2 tool calls)\x1b[0m\n" in text
    assert "\x1b[2mreasoning (1 tool call, \x1b[0m\x1b[31m1 failed\x1b[0m\x1b[2m)\x1b[0m\n" in text
    assert "Fixed the assert.\n" in text and "Done.\n" in text
    for hidden in ("Which test", "Check again", "Never mind", "thinking", "Edit src/a.py", "x = 10", "Read b.py"):
        assert hidden not in text


async def test_plain_prints_a_block_only_when_it_closes() -> None:
    out = io.StringIO()
    renderer = TerminalRenderer(out, color=False, interactive=False)
    await feed(
        renderer, [thinking_started(), TextDelta(T, "Let me see"), ThoughtDelta(T, "hm"), call("c1", "Run `ls`")]
    )
    assert out.getvalue() == "Let me see\n"
    await feed(renderer, [done("c1"), ThoughtDelta(T, "ok"), call("c2", "Run `ls -a`"), done("c2")])
    assert out.getvalue() == "Let me see\n"
    await renderer(TextDelta(T, "Two files."))
    assert out.getvalue() == "Let me see\nreasoning (2 tool calls)\nTwo files."


async def test_an_error_closes_the_open_block_first() -> None:
    events: list[Event] = [
        thinking_started(),
        ThoughtDelta(T, "hm"),
        call("c1", "Run `make`"),
        failed("c1", "aborted: the turn failed"),
        TurnFailed(T, "model error: overloaded"),
        TurnEnded(T, "end_turn", error=True),
    ]
    assert await render_plain(events) == "reasoning (1 tool call, 1 failed)\nError: model error: overloaded\n"


async def test_close_draws_a_block_left_open_and_the_next_turn_starts_clean() -> None:
    out = io.StringIO()
    renderer = TerminalRenderer(out, color=False, interactive=False)
    await feed(renderer, [thinking_started(), ThoughtDelta(T, "hm"), call("c1", "Run `a`")])
    renderer.close()
    renderer.close()
    assert out.getvalue() == "reasoning (1 tool call)\n"
    await feed(renderer, [started(), ThoughtDelta(T, "shown"), call("c2", "Run `b`"), done("c2")])
    assert out.getvalue() == "reasoning (1 tool call)\nthinking: shown\n[tool] Run `b` -> completed\n"


def draw_frame(renderer: TerminalRenderer) -> None:
    """Draw the running spinner's frame now, rather than wait for its refresh thread."""
    assert renderer._spinner is not None and renderer._spinner._live is not None
    renderer._spinner._live.refresh()


def spinner_label(renderer: TerminalRenderer) -> str:
    assert renderer._spinner is not None
    return renderer._spinner._label


async def test_interactive_block_is_the_spinner_label_until_it_closes() -> None:
    out, err = FakeTTY(), FakeTTY()
    renderer = TerminalRenderer(out, err=err, color=True, interactive=True, markdown=False)
    try:
        await feed(renderer, [thinking_started(), TextDelta(T, "Looking"), ThoughtDelta(T, "hm")])
        assert spinning(renderer) and spinner_label(renderer) == "reasoning"
        await feed(renderer, [ThoughtDelta(T, " more"), call("c1", "Run `ls`")])
        assert spinning(renderer) and spinner_label(renderer) == "reasoning (1 tool call)"
        await feed(renderer, [failed("c1", "nope"), ThoughtDelta(T, "so"), call("c2", "Run `ls -a`"), done("c2")])
        assert spinning(renderer) and spinner_label(renderer) == "reasoning (2 tool calls, 1 failed)"
        draw_frame(renderer)
        assert "reasoning (2 tool calls, 1 failed)" in err.getvalue()
        assert out.getvalue() == "Looking\n"  # nothing of the block on out while it is open
        await renderer(TextDelta(T, "Found it."))
        assert not spinning(renderer)
        assert out.getvalue() == (
            "Looking\n\x1b[2mreasoning (2 tool calls, \x1b[0m\x1b[31m1 failed\x1b[0m\x1b[2m)\x1b[0m\nFound it."
        )
        await renderer(TurnEnded(T, "end_turn"))
        assert not spinning(renderer)
    finally:
        renderer.close()


async def test_a_question_inside_a_block_pauses_its_line_and_shows_it_again() -> None:
    gate = PromptGate()
    renderer = TerminalRenderer(io.StringIO(), err=FakeTTY(), color=True, interactive=True, gate=gate)
    try:
        await feed(renderer, [thinking_started(), ThoughtDelta(T, "hm")])
        with gate.prompting():
            assert not spinning(renderer)
            await renderer(call("c1", "Run `rm x`"))
            assert not spinning(renderer)  # never over the question
        assert spinning(renderer) and spinner_label(renderer) == "reasoning (1 tool call)"
    finally:
        renderer.close()


# -- spinner ------------------------------------------------------------------------------------------------


def spinning(renderer: TerminalRenderer) -> bool:
    return renderer._spinner is not None and renderer._spinner._live is not None


async def test_spinner_runs_while_waiting_for_the_model_and_never_over_text() -> None:
    out, err = io.StringIO(), FakeTTY()
    renderer = TerminalRenderer(out, err=err, color=True, interactive=True, markdown=False)
    try:
        await renderer(started())
        assert spinning(renderer)
        draw_frame(renderer)
        assert "working…" in err.getvalue()
        await renderer(TextDelta(T, "Hi"))
        assert not spinning(renderer)
        assert out.getvalue() == "Hi"  # the spinner is on err, the text alone on out
        await renderer(TextDelta(T, "\n"))
        await renderer(call("c1", "Run `ls`"))
        assert spinning(renderer) and spinner_label(renderer) == "Run `ls`"  # the running call, timed
        await renderer(ToolCallRunning(T, "c1"))
        assert spinning(renderer) and spinner_label(renderer) == "Run `ls`"  # its work began: still timed
        assert out.getvalue() == "Hi\n"  # its line comes with its outcome
        await renderer(done("c1"))
        assert spinning(renderer) and spinner_label(renderer) == "working…"  # back to waiting for the model
        assert out.getvalue() == "Hi\n\x1b[36m⏺ \x1b[0m\x1b[1mRun `ls`\x1b[0m\x1b[32m  ✓ done\x1b[0m\n"
        await renderer(TurnEnded(T, "end_turn"))
        assert not spinning(renderer)
    finally:
        renderer.close()
        renderer.close()
    assert not spinning(renderer)


async def test_the_spinner_names_the_call_still_running() -> None:
    renderer = TerminalRenderer(io.StringIO(), err=FakeTTY(), color=True, interactive=True)
    try:
        await feed(renderer, [started(), call("a", "Run `a`"), call("b", "Run `b`")])
        assert spinner_label(renderer) == "Run `b`"
        await renderer(done("b"))
        assert spinning(renderer) and spinner_label(renderer) == "Run `a`"
        await renderer(done("a"))
        assert spinning(renderer) and spinner_label(renderer) == "working…"
    finally:
        renderer.close()


async def test_no_spinner_when_not_interactive() -> None:
    err = FakeTTY()
    renderer = TerminalRenderer(io.StringIO(), err=err, color=True, interactive=False)
    await renderer(started())
    assert not spinning(renderer)
    renderer.close()
    assert err.getvalue() == ""


async def test_without_colour_the_spinner_still_shows_progress_in_plain_characters() -> None:
    err = FakeTTY()
    renderer = TerminalRenderer(io.StringIO(), err=err, color=False, interactive=True)
    try:
        await renderer(started())
        assert spinning(renderer)
        draw_frame(renderer)
        assert "working…" in err.getvalue()
        assert re.search(r"\x1b\[[0-9;]*m", err.getvalue()) is None  # no colour or style codes
    finally:
        renderer.close()


def spinner_text(spinner: Spinner) -> str:
    """The label and the time waited, as the spinner's frame shows them now."""
    frame = spinner.frame()
    assert isinstance(frame, RichSpinner)
    return str(frame.text)


def test_the_spinner_counts_the_wait_from_when_it_appeared() -> None:
    now = [100.0]
    spinner = Spinner(FakeTTY(), color=False, clock=lambda: now[0])
    spinner.start()
    try:
        assert spinner_text(spinner) == "working…"
        now[0] = 112.4
        spinner.start("Run `make test`")  # a new label: the same wait
        assert spinner_text(spinner) == "Run `make test` 12s"
        now[0] = 100 + 125
        assert spinner_text(spinner) == "Run `make test` 2m 05s"
    finally:
        spinner.stop()
    assert [waited(s) for s in (0.2, 1.0, 59.9, 60.0, 3_725.0)] == ["", "1s", "59s", "1m 00s", "62m 05s"]


async def test_a_prompt_stops_the_spinner_and_holds_output_until_it_closes() -> None:
    out = io.StringIO()
    gate = PromptGate()
    renderer = TerminalRenderer(out, err=FakeTTY(), color=False, interactive=False, gate=gate)
    await feed(renderer, [started(), TextDelta(T, "Let me run it")])
    with gate.prompting() as mid_line:
        assert mid_line
        await renderer(call("c1", "Run `make`"))
        assert out.getvalue() == "Let me run it"
    assert out.getvalue() == "Let me run it\n[tool] Run `make`"

    other = PromptGate()
    colored = TerminalRenderer(io.StringIO(), err=FakeTTY(), color=True, interactive=True, gate=other)
    try:
        await colored(started())
        with gate.prompting():  # another terminal's question: this one goes on drawing
            assert spinning(colored)
        with other.prompting():
            assert not spinning(colored)
            await colored(done("x"))
            assert not spinning(colored)  # never restarted over the question
    finally:
        colored.close()


# -- markdown --------------------------------------------------------------------------------------------------

REPLY = "# Summary\n\nThe **parser** is fine.\n\n```python\nprint('hi')\n```\nDone"


async def test_styled_text_is_rendered_as_markdown_block_by_block() -> None:
    out, err = FakeTTY(), FakeTTY()
    renderer = TerminalRenderer(out, err=err, color=True, interactive=True)
    try:
        await renderer(started())
        await renderer(TextDelta(T, "# Summary\n\nThe **par"))
        heading = out.getvalue()
        assert "Summary" in heading and "#" not in heading and "par" not in heading  # the heading block, alone
        assert spinning(renderer)  # the paragraph is still being written
        await renderer(TextDelta(T, REPLY.removeprefix("# Summary\n\nThe **par")))
        await renderer(call("c1", "Run `ls`"))  # the segment ends: its last block is drawn first
        await renderer(done("c1"))
        shown = out.getvalue()
        assert "**" not in shown and "```" not in shown
        assert "\x1b[1m" in shown and "parser" in shown  # bold, without the asterisks
        assert "print('hi')" in re.sub(r"\x1b\[[0-9;]*m", "", shown)  # highlighted: split by colour codes
        assert shown.index("Done") < shown.index("Run `ls`")
    finally:
        renderer.close()


async def test_plain_text_streams_raw_markdown_and_a_pending_block_is_drawn_on_close() -> None:
    plain = io.StringIO()
    renderer = TerminalRenderer(plain, color=False, interactive=False)
    await feed(renderer, [started(), TextDelta(T, REPLY)])
    assert plain.getvalue() == REPLY  # piped or NO_COLOR: the text as written, as it comes
    styled = FakeTTY()
    renderer = TerminalRenderer(styled, color=True, interactive=False)
    await feed(renderer, [started(), TextDelta(T, "unfinished *thought*")])
    assert styled.getvalue() == ""
    renderer.close()  # interrupted: what was written is still shown
    assert "unfinished" in styled.getvalue() and "*" not in styled.getvalue()


async def test_markdown_text_from_the_model_cannot_smuggle_escape_codes() -> None:
    out = FakeTTY()
    renderer = TerminalRenderer(out, color=True, interactive=False)
    await feed(renderer, [started(), TextDelta(T, "hi \x1b[2J there\n\n")])
    assert "\x1b[2J" not in out.getvalue() and "\\x1b[2J" in out.getvalue()


# -- JSON lines ----------------------------------------------------------------------------------------------


async def test_json_lines_one_object_per_event_with_every_field() -> None:
    out = io.StringIO()
    renderer = JsonLinesRenderer(out)
    finished = ToolCallFinished(
        T, "c2", "edit_file", "completed", "ok", diff=EDIT, locations=(Location(Path("/p/src/a.py"), 1),)
    )
    events: list[Event] = [
        started(),
        TextDelta(T, "héllo"),
        call("c1", "Run `ls`"),
        finished,
        TurnEnded(T, "end_turn", Usage(10, 5, 2)),
    ]
    for index, event in enumerate(events):
        await renderer(event)
        assert out.getvalue().count("\n") == index + 1  # each line is out as soon as its event is
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert lines == [
        {
            "type": "turn_started",
            "turn_id": T,
            "prompt": "fix it",
            "thinking": False,
            "started_at": "2025-01-02T03:04:05+00:00",
            "blocks": [],
            "checkpoint": None,
        },
        {"type": "text_delta", "turn_id": T, "text": "héllo"},
        {
            "type": "tool_call_started",
            "turn_id": T,
            "call_id": "c1",
            "tool_name": "run_command",
            "title": "Run `ls`",
            "tool_kind": "execute",
            "raw_input": {"arg": "c1"},
            "locations": [],
        },
        {
            "type": "tool_call_finished",
            "turn_id": T,
            "call_id": "c2",
            "tool_name": "edit_file",
            "status": "completed",
            "text": "ok",
            "diff": {"path": "/p/src/a.py", "old_text": "x = 1\ny = 2\n", "new_text": "x = 10\ny = 2\n"},
            "locations": [{"path": "/p/src/a.py", "line": 1}],
            "summary": "",
            "terminal_id": None,
            "changed": [],
            "ended_by": None,
            "shown": None,
            "checkpoint": None,
            "approved_by": None,
        },
        {
            "type": "turn_ended",
            "turn_id": T,
            "stop_reason": "end_turn",
            "usage": {
                "input_tokens": 10,
                "output_tokens": 5,
                "requests": 2,
                "cache_read_tokens": 0,
                "cache_write_tokens": 0,
                "cache_write_1h_tokens": 0,
            },
            "error": False,
            "summary": None,
            "context_tokens": 0,
            "cost": None,
            "window": None,
            "context": "",
            "checkpoint": None,
        },
    ]
    assert lines == [event_to_json(e) for e in events]


def test_event_to_json_of_a_new_file_diff_keeps_the_null() -> None:
    event = done("w", diff=FileDiff(Path("/p/n.txt"), None, "new\n"))
    assert event_to_json(event)["diff"] == {"path": "/p/n.txt", "old_text": None, "new_text": "new\n"}


# -- use_color -----------------------------------------------------------------------------------------------


class FakeStream(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


@pytest.mark.parametrize(
    ("tty", "env", "expected"),
    [
        (True, {}, True),
        (True, {"TERM": "xterm-256color"}, True),
        (False, {}, False),
        (True, {"NO_COLOR": "1"}, False),
        (True, {"NO_COLOR": ""}, False),
        (True, {"TERM": "dumb"}, False),
    ],
)
def test_use_color(tty: bool, env: dict[str, str], expected: bool) -> None:
    assert use_color(FakeStream(tty), env) is expected


def test_use_color_on_a_closed_stream_is_false() -> None:
    stream = io.StringIO()
    stream.close()
    assert use_color(stream, {}) is False


def test_json_lines_name_an_image_instead_of_carrying_it() -> None:
    image = ImageBlock("A" * 4000, "image/png", "file:///tmp/shot.png")
    started = TurnStarted("t", "look @shot.png", False, datetime(2025, 1, 2, tzinfo=UTC), (TextBlock("look"), image))
    blocks = event_to_json(started)["blocks"]
    assert blocks == [
        {"text": "look"},
        {"type": "image", "mime_type": "image/png", "uri": "file:///tmp/shot.png", "bytes": 3000},
    ]


# --- what a call did ----------------------------------------------------------------------------------------

LONG_OUTPUT = "\n".join(f"line {i}" for i in range(1, 3001))


async def test_a_command_shows_its_exit_status_and_its_last_output_lines() -> None:
    turn: list[Event] = [
        started(),
        call("c1", "Run make"),
        done("c1", text=f"exit code 3\n{LONG_OUTPUT}\n"),
        TextDelta(T, "Hm."),
    ]
    tail = "".join(f"    line {i}\n" for i in range(2995, 3001))
    assert await render_plain(turn) == (
        f"[tool] Run make -> exit code 3\n    … 2,994 earlier lines (--verbose shows all)\n{tail}Hm."
    )
    out = io.StringIO()
    verbose = TerminalRenderer(out, color=False, interactive=False, verbose=True)
    await feed(verbose, turn)
    assert out.getvalue().count("\n    line ") == 3000
    colored = io.StringIO()
    await feed(TerminalRenderer(colored, color=True, interactive=False), turn)
    assert "✗ exit code 3" in colored.getvalue() and "✓ done" not in colored.getvalue()


async def test_a_successful_command_and_a_timed_out_one() -> None:
    turn: list[Event] = [
        started(),
        call("c1", "Run true"),
        done("c1", text="exit code 0\n(no output)\n"),
        call("c2", "Run sleep 99"),
        done("c2", text="timed out after 60s, process group killed\nstarted\n"),
    ]
    assert await render_plain(turn) == (
        "[tool] Run true -> exit code 0\n    (no output)\n"
        "[tool] Run sleep 99 -> timed out after 60s, process group killed\n    started\n"
    )


async def test_a_delegate_shows_its_steps_and_its_report() -> None:
    steps = "✓ Read a.py\n✓ Run pytest — exit code 0"
    finished = ToolCallFinished(
        T, "d1", "delegate", "completed", "The tests pass; a.py is fine.", shown=ShownResult(steps=steps)
    )
    text = await render_plain([started(), call("d1", "Delegate: check the tests", "delegate", "think"), finished])
    assert text == (
        "[tool] Delegate: check the tests -> completed\n"
        "    ✓ Read a.py\n    ✓ Run pytest — exit code 0\n"
        "    The tests pass; a.py is fine.\n"
    )


# -- context, compaction and MCP notes ----------------------------------------------------------------------


async def test_context_and_server_notes_and_a_compaction_get_lines_of_their_own() -> None:
    events: list[Event] = [
        started(),
        TextDelta(T, "Reading"),
        ContextWarning(T, "w1", "The context is fuller than the window."),
        McpServerNotice(T, "m1", "docs", "MCP server docs stopped working", "Traceback: boom"),
        McpServerNotice(T, "m2", "web", "MCP server web offers 80 tools; the model gets 40"),
        CompactionStarted(T, "k1", 12_000, "threshold"),
        ContextCompacted(T, "k1", "summary", (), 12_000, 3_000, fallback=True, note="The summarizer failed"),
        TextDelta(T, "Done."),
        TurnEnded(T, "end_turn"),
    ]
    assert await render_plain(events) == (
        "Reading\n"
        "The context is fuller than the window.\n"
        "MCP server docs stopped working\nTraceback: boom\n"
        "MCP server web offers 80 tools; the model gets 40\n"
        "[tool] Compacted context: 12,000 → 3,000 tokens (fallback summary). The summarizer failed\n"
        "Done.\n"
    )


async def test_a_note_on_stderr_leaves_the_reply_on_a_terminal_at_a_fresh_line() -> None:
    out, err = FakeTTY(), io.StringIO()
    renderer = TerminalRenderer(out, err=err, color=False, interactive=False)
    await feed(renderer, [started(), TextDelta(T, "Half a line"), ContextWarning(T, "w1", "Nearly full.")])
    await feed(renderer, [TextDelta(T, "and more."), TurnEnded(T, "end_turn")])
    assert (out.getvalue(), err.getvalue()) == ("Half a line\nand more.\n", "Nearly full.\n")


async def test_text_while_a_tool_runs_starts_below_its_line() -> None:
    events: list[Event] = [
        started(),
        call("c1", "Run `make`"),
        TextDelta(T, "While it builds: "),
        TextDelta(T, "nothing else to do."),
        done("c1"),
        TurnEnded(T, "end_turn"),
    ]
    assert await render_plain(events) == (
        "[tool] Run `make`\nWhile it builds: nothing else to do.\n[tool] Run `make` -> completed\n"
    )


async def test_styled_text_while_a_tool_runs_starts_below_its_line() -> None:
    out = FakeTTY()
    renderer = TerminalRenderer(out, color=True, interactive=False)
    await feed(renderer, [started(), call("c1", "Run `make`"), TextDelta(T, "It builds.\n\n")])
    lines = re.sub(r"\x1b\[[0-9;]*m", "", out.getvalue()).splitlines()
    assert lines[0].endswith("Run `make`") and lines[1].strip() == "It builds."


async def test_a_blocks_call_that_ends_after_the_block_closed_is_drawn_only_if_it_failed() -> None:
    events: list[Event] = [
        thinking_started(),
        ThoughtDelta(T, "Read both, in parallel."),
        call("c1", "Read a.py", "read_file", "read"),
        TextDelta(T, "Reading."),
        done("c1", "read_file"),  # its block was drawn when the text began: nothing more to say
        TurnEnded(T, "end_turn"),
    ]
    assert await render_plain(events) == "reasoning (1 tool call)\nReading.\n"


async def test_a_result_whose_call_was_never_seen_counts_in_its_block() -> None:
    events: list[Event] = [
        thinking_started(),
        ThoughtDelta(T, "Where was I?"),
        failed("lost", "interrupted"),  # e.g. the call started before this renderer was subscribed
        ThoughtDelta(T, "Again."),
        TextDelta(T, "Done."),
        TurnEnded(T, "end_turn"),
    ]
    assert await render_plain(events) == "reasoning (1 tool call, 1 failed)\nDone.\n"


async def test_json_lines_redact_a_secret_split_across_two_deltas() -> None:
    # (issue 29 D8: each delta is a line of its own, where a stream's redaction cannot see the secret whole)
    secret = "ghp_Secr3tTokenValue0123456789"
    out = io.StringIO()
    renderer = JsonLinesRenderer(out, Redactor([secret]))
    for event in (
        TextDelta("t", "The token is "),
        TextDelta("t", secret[:12]),
        TextDelta("t", secret[12:] + " as written."),
        TurnEnded("t", "end_turn"),
    ):
        await renderer(event)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert secret[:6] not in out.getvalue()
    assert "".join(line["text"] for line in lines if line["type"] == "text_delta") == (
        "The token is [redacted] as written."
    )
    assert lines[-1]["type"] == "turn_ended"
