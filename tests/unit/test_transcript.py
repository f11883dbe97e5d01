"""``codling sessions show``: a recorded session printed turn by turn."""

from __future__ import annotations

import io
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

import pytest

from codling.brain.events import (
    Event,
    SpecialTurnPersisted,
    TextDelta,
    ThoughtDelta,
    ToolCallFinished,
    ToolCallStarted,
    TurnEnded,
    TurnFailed,
    TurnStarted,
    Usage,
)
from codling.brain.interactions import Interaction
from codling.brain.prompt import TextBlock
from codling.cli.transcript import print_transcript
from codling.store.header import SessionHeader
from codling.store.history import HistoryFile, HistoryRecorder, read_history
from codling.vocabulary import FileDiff

EDIT = FileDiff(Path("/p/src/a.py"), "x = 1\ny = 2\n", "x = 10\ny = 2\n")


@pytest.fixture(autouse=True)
def local_time(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Local time is UTC+05:30 (no daylight saving), so the test shows the conversion from UTC."""
    monkeypatch.setenv("TZ", "Asia/Kolkata")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def started(turn: str, prompt: str, *, thinking: bool = False, minute: int = 0) -> TurnStarted:
    at = datetime(2025, 1, 2, 3, minute, 30, tzinfo=UTC)
    return TurnStarted(turn, prompt, thinking, at, (TextBlock(prompt),))


def call(turn: str, call_id: str, title: str, tool: str = "run_command") -> ToolCallStarted:
    return ToolCallStarted(turn, call_id, tool, title, "execute", {})


def result(
    turn: str,
    call_id: str,
    *,
    tool: str = "run_command",
    status: Literal["completed", "failed"] = "completed",
    text: str = "ok",
    diff: FileDiff | None = None,
) -> ToolCallFinished:
    return ToolCallFinished(turn, call_id, tool, status, text, diff)


SESSION: list[Event] = [
    # 1: a normal turn with a command and an edit
    started("a", "fix the failing test\nin src/a.py"),
    ThoughtDelta("a", "Let me look.\n\n"),
    TextDelta("a", "I'll run the tests."),
    call("a", "c1", "Run `pytest -q`"),
    result("a", "c1", text="1 failed"),
    call("a", "c2", "Edit src/a.py", "edit_file"),
    result("a", "c2", tool="edit_file", diff=EDIT),
    TextDelta("a", "Fixed.\n"),
    TurnEnded("a", "end_turn", Usage(10, 5, 3)),
    # 2: a thinking turn with two reasoning blocks
    started("b", "now make it faster", thinking=True, minute=10),
    ThoughtDelta("b", "Profile first."),
    call("b", "c3", "Run `python -m cProfile a.py`"),
    result("b", "c3", status="failed", text="No module named a"),
    ThoughtDelta("b", "Edit instead."),
    call("b", "c4", "Edit src/a.py", "edit_file"),
    result("b", "c4", tool="edit_file", diff=EDIT),  # inside the block: no diff
    TextDelta("b", "I cached the lookup."),
    ThoughtDelta("b", "Check it."),
    TextDelta("b", " It is faster now.\n"),
    TurnEnded("b", "end_turn"),
    # 3: a failed turn
    started("c", "and the docs", minute=20),
    TextDelta("c", "Writing"),
    TurnFailed("c", "model error: 401 Incorrect API key provided"),
    TurnEnded("c", "end_turn", error=True),
    # 4: the process died in the middle of a command
    started("d", "deploy", minute=30),
    call("d", "c5", "Run `make deploy`"),
]

PLAIN = (
    "Turn 1 · 2025-01-02 08:30\n"
    "> fix the failing test\n"
    "> in src/a.py\n"
    "thinking: Let me look.\n"
    "I'll run the tests.\n"
    "[tool] Run `pytest -q` -> completed\n"
    "[tool] Edit src/a.py -> completed\n"
    "    @@ -1,2 +1,2 @@\n"
    "    -x = 1\n"
    "    +x = 10\n"
    "     y = 2\n"
    "Fixed.\n"
    "\n"
    "Turn 2 · 2025-01-02 08:40 · thinking\n"
    "> now make it faster\n"
    "reasoning (2 tool calls, 1 failed)\n"
    "I cached the lookup.\n"
    "reasoning\n"
    " It is faster now.\n"
    "\n"
    "Turn 3 · 2025-01-02 08:50\n"
    "> and the docs\n"
    "Writing\n"
    "Error: model error: 401 Incorrect API key provided\n"
    "\n"
    "Turn 4 · 2025-01-02 09:00\n"
    "> deploy\n"
    "[tool] Run `make deploy` -> interrupted\n"
    "(interrupted: the agent stopped before this turn finished)\n"
)


def transcript(events: list[Event], *, color: bool = False) -> str:
    out = io.StringIO()
    print_transcript(events, out, color=color)
    return out.getvalue()


def test_plain_transcript_of_a_session() -> None:
    assert transcript(SESSION) == PLAIN


async def test_a_session_read_back_from_disk_prints_the_same(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    file = HistoryFile(path, "s1")
    file.write(SessionHeader("s1", tmp_path, "test:model", "ask").record())
    recorder = HistoryRecorder(file)
    for event in SESSION:
        await recorder(event)
    file.close()
    assert transcript(read_history(path).events) == PLAIN


def test_cancelled_and_stopped_turns_say_so() -> None:
    events: list[Event] = [
        started("a", "one"),
        TextDelta("a", "partial"),
        TurnEnded("a", "cancelled"),
        started("b", "two", minute=1),
        TurnEnded("b", "max_turn_requests"),
    ]
    assert transcript(events) == (
        "Turn 1 · 2025-01-02 08:30\n> one\npartial\n(cancelled)\n\n"
        "Turn 2 · 2025-01-02 08:31\n> two\n(stopped: the turn made as many model requests as it may)\n"
    )


def test_plain_transcript_has_no_escape_codes_even_from_the_content() -> None:
    events: list[Event] = [
        started("a", "\x1b[31mred prompt"),
        TextDelta("a", "\x1b[2Jcleared"),
        TurnEnded("a", "end_turn"),
    ]
    text = transcript([*SESSION, *events])
    assert "\x1b" not in text
    assert text.endswith("> \\x1b[31mred prompt\n\\x1b[2Jcleared\n")


def test_color_transcript_is_styled() -> None:
    text = transcript(SESSION, color=True)
    assert "\x1b[1mTurn 2 · 2025-01-02 08:40 · thinking\x1b[0m\n" in text
    assert "\x1b[36m>\x1b[0m now make it faster\n" in text
    assert "\x1b[2mreasoning (2 tool calls, \x1b[0m\x1b[31m1 failed\x1b[0m\x1b[2m)\x1b[0m\n" in text
    assert "\x1b[2mreasoning\x1b[0m\n" in text
    assert "\x1b[1;31mError:\x1b[0m model error: 401 Incorrect API key provided\n" in text
    assert "⏺ \x1b[0m\x1b[1mRun `pytest -q`\x1b[0m\x1b[32m  ✓ done\x1b[0m\n" in text
    assert "\x1b[32m+x = 10\x1b[0m" in text
    assert "Profile first" not in text and "No module named a" not in text


def test_an_empty_session_prints_nothing() -> None:
    assert transcript([]) == ""


def test_a_greeting_is_shown_where_it_came_and_summaries_are_not() -> None:
    greeting = SpecialTurnPersisted("greeting", "persist-result", (Interaction("assistant", "Hi! Ready."),))
    summary = SpecialTurnPersisted("summarize", "replace-above", (Interaction("summary", "the gist"),))
    events: list[Event] = [greeting, started("a", "one"), TextDelta("a", "done"), TurnEnded("a", "end_turn"), summary]
    assert transcript(events) == "Greeting\nHi! Ready.\n\nTurn 1 · 2025-01-02 08:30\n> one\ndone\n"


def test_a_special_turn_that_used_tools_shows_its_thoughts_and_results() -> None:
    worked = SpecialTurnPersisted(
        "probe",
        "persist-all",
        (
            Interaction("user", "check a.txt"),
            Interaction("thought", "read it\n\nthen answer"),
            Interaction("tool_call", "Read a.txt"),
            Interaction("tool_result", "- Read a.txt (done):\n    Read a.txt: line 1 of 1"),
            Interaction("assistant", "It says alpha."),
        ),
    )
    assert transcript([worked]) == (
        "Probe\n> check a.txt\nread it\nthen answer\n"
        "- Read a.txt (done):\n    Read a.txt: line 1 of 1\nIt says alpha.\n"
    )
