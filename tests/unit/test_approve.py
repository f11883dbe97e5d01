"""TerminalApprover: what it shows and how scripted answers become decisions."""

from __future__ import annotations

import asyncio
import gc
import io
import os
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

import pytest

from codling.brain.events import TextDelta, ToolCallStarted, TurnStarted
from codling.cli.approve import PROMPT, TerminalApprover
from codling.cli.render import TerminalRenderer
from codling.tools.ports import Decision, FileDiff, PermissionRequest

RUN = PermissionRequest("c1", "run_command", "execute", "Run `pytest -q`", "pytest -q")
EDIT = PermissionRequest(
    "c2",
    "edit_file",
    "edit",
    "Edit src/a.py",
    "/p/src/a.py",
    diff=FileDiff(Path("/p/src/a.py"), "x = 1\ny = 2\n", "x = 10\ny = 2\n"),
)


@pytest.fixture(autouse=True)
def _no_stray_renderers() -> None:
    # Renderers left over by other tests would make the approver start on a fresh line.
    gc.collect()


async def ask(script: str, request: PermissionRequest = RUN, color: bool = False) -> tuple[Decision, str]:
    output = io.StringIO()
    approver = TerminalApprover(input=io.StringIO(script), output=output, color=color)
    decision = await approver.ask(request)
    return decision, output.getvalue()


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        ("y\n", "allow_once"),
        (" Yes \n", "allow_once"),
        ("a\n", "allow_always"),
        ("always\n", "allow_always"),
        ("n\n", "reject"),
        ("no\n", "reject"),
        ("\n", "reject"),
        ("", "reject"),
        ("maybe\ny\n", "allow_once"),
        ("what\nhuh\n?\ny\n", "reject"),
    ],
)
async def test_answers_become_decisions(script: str, expected: Decision) -> None:
    decision, _ = await ask(script)
    assert decision == expected


async def test_shows_the_actual_command() -> None:
    decision, shown = await ask("y\n")
    assert decision == "allow_once"
    assert shown == f"Permission needed: Run `pytest -q`\n  $ pytest -q\n{PROMPT}y\n"


async def test_shows_every_line_of_a_multi_line_command() -> None:
    request = PermissionRequest("c1", "run_command", "execute", "Run `cd src && make`", "cd src &&\nmake all")
    _, shown = await ask("n\n", request)
    assert shown == f"Permission needed: Run `cd src && make`\n  $ cd src &&\n    make all\n{PROMPT}n\n"


async def test_shows_the_path_and_the_diff_of_an_edit() -> None:
    decision, shown = await ask("a\n", EDIT)
    assert decision == "allow_always"
    assert shown == (
        "Permission needed: Edit src/a.py\n"
        "  /p/src/a.py\n"
        "    @@ -1,2 +1,2 @@\n"
        "    -x = 1\n"
        "    +x = 10\n"
        "     y = 2\n"
        f"{PROMPT}a\n"
    )


async def test_asks_again_on_an_unclear_answer_then_gives_up() -> None:
    _, shown = await ask("maybe\ny\n")
    assert shown.endswith(f"{PROMPT}maybe\nPlease answer y, a or n.\n{PROMPT}y\n")
    decision, shown = await ask("1\n2\n3\ny\n")
    assert decision == "reject"
    assert shown.count(PROMPT) == 3 and shown.endswith("No clear answer: not allowed.\n")


async def test_end_of_input_rejects_and_ends_the_prompt_line() -> None:
    decision, shown = await ask("")
    assert decision == "reject"
    assert shown.endswith(f"{PROMPT}\n")


async def test_control_characters_in_the_command_are_made_visible() -> None:
    request = PermissionRequest("c1", "run_command", "execute", "Run `rm x`", "rm x\x1b[2K; echo hidden")
    _, shown = await ask("n\n", request)
    assert "\x1b" not in shown
    assert "  $ rm x\\x1b[2K; echo hidden\n" in shown


async def test_color_output_is_styled_and_shows_the_diff() -> None:
    _, shown = await ask("y\n", EDIT, color=True)
    assert "\x1b[" in shown
    assert "\x1b[32m+x = 10\x1b[0m" in shown and "\x1b[31m-x = 1\x1b[0m" in shown
    assert "/p/src/a.py" in shown


# -- a real terminal -----------------------------------------------------------------------------------------


@pytest.fixture
def tty() -> Iterator[tuple[TextIO, int]]:
    if not hasattr(os, "openpty"):
        pytest.skip("needs a pseudo-terminal")
    master, slave = os.openpty()
    stream = os.fdopen(slave, "r")
    try:
        yield stream, master
    finally:
        stream.close()
        os.close(master)


async def wait_for(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.01)


async def test_on_a_terminal_the_answer_is_read_without_blocking_the_loop(tty: tuple[TextIO, int]) -> None:
    stream, master = tty
    output = io.StringIO()
    approver = TerminalApprover(input=stream, output=output, color=False)
    task = asyncio.create_task(approver.ask(RUN))
    await wait_for(lambda: output.getvalue().endswith(PROMPT))
    os.write(master, b"a\n")
    assert await asyncio.wait_for(task, 5) == "allow_always"


async def test_cancelling_a_question_leaves_no_reader_behind(tty: tuple[TextIO, int]) -> None:
    stream, master = tty
    output = io.StringIO()
    approver = TerminalApprover(input=stream, output=output, color=False)
    task = asyncio.create_task(approver.ask(RUN))
    await wait_for(lambda: output.getvalue().endswith(PROMPT))
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert output.getvalue().endswith(f"{PROMPT}\n")
    # The next question gets the next line: nothing is still waiting on the terminal.
    task = asyncio.create_task(approver.ask(RUN))
    await wait_for(lambda: output.getvalue().endswith(PROMPT))
    os.write(master, b"y\n")
    assert await asyncio.wait_for(task, 5) == "allow_once"


async def test_renderer_output_waits_until_the_question_is_answered(tty: tuple[TextIO, int]) -> None:
    stream, master = tty
    shared = io.StringIO()  # stdout and stderr on one screen
    renderer = TerminalRenderer(shared, color=False, interactive=False)
    await renderer(TurnStarted("t", "go", False, datetime.now(UTC)))
    await renderer(TextDelta("t", "Let me run it"))
    approver = TerminalApprover(input=stream, output=shared, color=False)
    task = asyncio.create_task(approver.ask(RUN))
    await wait_for(lambda: shared.getvalue().endswith(PROMPT))
    await renderer(ToolCallStarted("t", "c1", "run_command", "Run `pytest -q`", "execute", {}))
    assert shared.getvalue().endswith(PROMPT)  # the tool line does not land on the prompt line
    os.write(master, b"y\n")
    assert await asyncio.wait_for(task, 5) == "allow_once"
    assert shared.getvalue() == (
        f"Let me run it\nPermission needed: Run `pytest -q`\n  $ pytest -q\n{PROMPT}\n[tool] Run `pytest -q`"
    )
