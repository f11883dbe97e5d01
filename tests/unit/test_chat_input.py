"""`codling chat`'s input line on prompt_toolkit, in process: keys typed into a pipe, the screen a dummy; what
each read returns, what completes, and where the history goes."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from prompt_toolkit.application import create_app_session
from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document
from prompt_toolkit.input import PipeInput, create_pipe_input
from prompt_toolkit.output import DummyOutput

from codling.cli.chat_commands import all_commands
from codling.cli.chat_input import HISTORY_FILE, ChatCompleter, PromptInput
from tests.fakes.deadlines import deadline

ENTER = "\r"
CTRL_C = "\x03"
CTRL_D = "\x04"
UP = "\x1b[A"


@pytest.fixture
def keys() -> Iterator[PipeInput]:
    """The keyboard: what the test sends reaches the input line as typed keys."""
    with create_pipe_input() as pipe, create_app_session(input=pipe, output=DummyOutput()):
        yield pipe


def redact(text: str) -> str:
    return text.replace("sk-secret-123456", "[REDACTED]")


def completions(completer: ChatCompleter, before_cursor: str) -> list[tuple[str, str]]:
    """(text inserted, what is shown) for each completion of the input so far."""
    found = completer.get_completions(Document(before_cursor), CompleteEvent(completion_requested=True))
    return [(c.text, c.display_text) for c in found]


def test_slash_commands_complete_at_the_start_and_paths_after_an_at(project: Path) -> None:
    (project / "src" / "util.py").write_text("")
    completer = ChatCompleter(all_commands(), project)
    assert completions(completer, "/re") == [("resume", "/resume"), ("rewind", "/rewind")]
    assert completions(completer, "/resume 2") == []  # the argument is not a command
    assert completions(completer, "look at @src/") == [("app.py", "app.py"), ("util.py", "util.py")]
    assert completions(completer, "look at @RE") == [("ADME.md", "README.md")]
    assert completions(completer, 'look at @"src') == []  # a quoted path is typed whole
    assert completions(completer, "look at src") == []


async def test_a_line_ending_in_a_backslash_goes_on_and_ctrl_c_clears_what_was_typed(
    keys: PipeInput, home: Path, project: Path
) -> None:
    line = PromptInput(home, all_commands(), project, redact)
    keys.send_text("first line\\" + ENTER + "second line" + ENTER)
    assert await line.read() == "first line\nsecond line"
    keys.send_text("never mind" + CTRL_C + "use the key sk-secret-123456" + ENTER)
    assert await line.read() == "use the key sk-secret-123456"
    keys.send_text(CTRL_C)
    with pytest.raises(KeyboardInterrupt):
        await line.read()
    keys.send_text(CTRL_D)
    with pytest.raises(EOFError):
        await line.read()
    # The history keeps what was sent, secrets redacted.
    history = (home / HISTORY_FILE).read_text()
    assert "+first line\n+second line\n" in history
    assert "+use the key [REDACTED]\n" in history and "sk-secret" not in history and "never mind" not in history


async def test_an_error_elsewhere_in_the_loop_does_not_take_over_the_input_line(
    keys: PipeInput, home: Path, project: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # (as a model client from an earlier turn, closed late on a loop that is gone, once hung a read for good:
    # prompt_toolkit printed the error and waited for Enter)
    line = PromptInput(home, all_commands(), project, redact)
    reading = asyncio.ensure_future(line.read())
    await asyncio.sleep(0)  # one step of the loop: the read runs until it waits for keys, its handlers set
    asyncio.get_running_loop().call_exception_handler({"message": "a stray error", "exception": RuntimeError("late")})
    keys.send_text("still here" + ENTER)
    assert await asyncio.wait_for(reading, deadline(10)) == "still here"
    assert "a stray error" in caplog.text  # logged as asyncio logs it


async def test_a_home_that_cannot_hold_the_history_keeps_it_in_memory(
    keys: PipeInput, tmp_path: Path, project: Path
) -> None:
    home = tmp_path / "home-is-a-file"
    home.write_text("")
    line = PromptInput(home, all_commands(), project, redact)
    keys.send_text("hello" + ENTER)
    assert await line.read() == "hello"
    keys.send_text(UP + ENTER)
    assert await line.read() == "hello"  # recalled from the history in memory
    assert home.read_text() == ""


async def test_keys_typed_into_the_prompt_are_not_kept_in_its_history(
    keys: PipeInput, home: Path, project: Path
) -> None:
    github, slack, aws = "ghp_" + "a1B2" * 9, "xoxb-1234567890-abcdefABCDEF", "AKIA" + "Z7" * 8
    line = PromptInput(home, all_commands(), project, redact)
    typed = f"use {github} and\\" + ENTER + f"{slack} then {aws}, not task-sk-learn" + ENTER
    keys.send_text(typed)
    assert await line.read() == f"use {github} and\n{slack} then {aws}, not task-sk-learn"  # as typed
    entry = (home / HISTORY_FILE).read_text().split("\n", 2)[2]  # after prompt_toolkit's "# <date>" line
    assert entry == "+use [redacted] and\n+[redacted] then [redacted], not task-sk-learn\n"


async def test_each_input_line_starts_with_the_mode_it_is_read_in(
    keys: PipeInput, home: Path, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    modes = iter(["ask", "yolo"])
    line = PromptInput(home, all_commands(), project, redact, mode=lambda: next(modes))
    keys.send_text("one" + ENTER)
    assert await line.read() == "one"
    keys.send_text("two" + ENTER)
    assert await line.read() == "two"
    shown = capsys.readouterr().out
    assert "[ask] › one" in shown and "[yolo] › two" in shown
    assert shown.index("[ask] ›") < shown.index("[yolo] ›")
