"""TerminalApprover: what it shows and how scripted answers become decisions."""

from __future__ import annotations

import asyncio
import io
import os
import sys
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

import pytest

from codling.brain.events import TextDelta, ToolCallFinished, ToolCallStarted, TurnStarted
from codling.cli.approve import APPROVAL_DIFF_LINES, TerminalApprover, prompt_for
from codling.cli.approve import PROMPT as PLAIN_PROMPT
from codling.cli.oneshot import terminal_views
from codling.cli.render import PromptGate, TerminalRenderer
from codling.tools.ports import Answer, Decision, PermissionRequest, Rejection
from codling.vocabulary import FileDiff
from tests.fakes.deadlines import deadline

RUN = PermissionRequest("c1", "run_command", "execute", "Run `pytest -q`", "pytest -q", always="every `pytest` command")
EDIT = PermissionRequest(
    "c2",
    "edit_file",
    "edit",
    "Edit src/a.py",
    "/p/src/a.py",
    diff=FileDiff(Path("/p/src/a.py"), "x = 1\ny = 2\n", "x = 10\ny = 2\n"),
    always="every edit",
)
PROMPT = prompt_for(RUN, 0)


async def ask(
    script: str, request: PermissionRequest = RUN, color: bool = False, shown: set[str] | None = None
) -> tuple[Answer, str]:
    output = io.StringIO()
    approver = TerminalApprover(input=io.StringIO(script), output=output, color=color, shown_diffs=shown)
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
    assert shown == f"Permission needed: Run `cd src && make`\n  $ cd src &&\n    make all\n{PLAIN_PROMPT}n\n"


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
        f"{prompt_for(EDIT, 0)}a\n"
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
    request = PermissionRequest("c1", "run_command", "execute", "Run `rm x`", "rm x\x1b[2K; echo hidden", always=None)
    _, shown = await ask("n\n", request)
    assert "\x1b" not in shown
    assert "  $ rm x\\x1b[2K; echo hidden\n" in shown


async def test_color_output_is_styled_and_shows_the_diff() -> None:
    _, shown = await ask("y\n", EDIT, color=True)
    assert "\x1b[" in shown
    assert "\x1b[32m+x = 10\x1b[0m" in shown and "\x1b[31m-x = 1\x1b[0m" in shown
    assert "/p/src/a.py" in shown


def test_the_prompt_says_what_always_covers_and_offers_it_only_when_remembered() -> None:
    assert prompt_for(RUN, 0) == (
        "Allow? [y]es, [a]lways (every `pytest` command, for this session), [n]o (or: n <reason>): "
    )
    assert prompt_for(replace(RUN, always=None), 0) == PLAIN_PROMPT == "Allow? [y]es, [n]o (or: n <reason>): "
    assert prompt_for(EDIT, 120) == (
        "Allow? [y]es, [a]lways (every edit, for this session), [n]o (or: n <reason>), [v]iew all 120 more diff lines: "
    )


async def test_always_is_not_an_answer_when_it_is_not_offered() -> None:
    decision, shown = await ask("a\ny\n", replace(RUN, always=None))
    assert decision == "allow_once"
    assert f"{PLAIN_PROMPT}a\nPlease answer y or n.\n" in shown


@pytest.mark.parametrize(
    ("script", "reason"),
    [
        ("n use ripgrep instead\n", "use ripgrep instead"),
        ("No: the tests are slow, run only test_a.py\n", "the tests are slow, run only test_a.py"),
        ("n,   not now  \n", "not now"),
    ],
)
async def test_no_with_words_rejects_with_the_reason(script: str, reason: str) -> None:
    assert (await ask(script))[0] == Rejection(reason)


async def test_a_long_diff_is_cut_and_view_shows_the_rest_once() -> None:
    old = "".join(f"line {i}\n" for i in range(200))
    new = "".join(f"line {i} changed\n" for i in range(200))
    request = replace(EDIT, diff=FileDiff(Path("/p/src/a.py"), old, new))
    decision, shown = await ask("v\ny\n", request)
    assert decision == "allow_once"
    before, after = shown.split("    … 321 more lines\n")
    assert before.count("\n    +line ") + before.count("\n    -line ") == APPROVAL_DIFF_LINES - 1
    assert f"{prompt_for(request, 321)}v\n" in after
    # All of it, once each line, then the question without the view choice.
    assert all(shown.count(f"    +line {i} changed\n") == 1 for i in range(200))
    assert after.endswith(f"{prompt_for(request, 0)}y\n")


async def test_an_allowed_diff_is_noted_so_the_renderer_does_not_draw_it_again() -> None:
    shown: set[str] = set()
    await ask("n\n", EDIT, shown=shown)
    assert shown == set()
    await ask("y\n", EDIT, shown=shown)
    assert shown == {"c2"}
    out = io.StringIO()
    renderer = TerminalRenderer(out, color=False, interactive=False, shown_diffs=shown)
    finished = ToolCallFinished("t", "c2", "edit_file", "completed", "Edited src/a.py", diff=EDIT.diff)
    await renderer(ToolCallStarted("t", "c2", "edit_file", "Edit src/a.py", "edit", {}))
    await renderer(finished)
    assert "+x = 10" not in out.getvalue() and shown == set()
    await renderer(ToolCallStarted("t", "c3", "edit_file", "Edit src/a.py", "edit", {}))
    await renderer(replace(finished, call_id="c3"))  # not asked about: its diff is drawn
    assert "+x = 10" in out.getvalue()


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


class Screen(io.StringIO):
    """Output a test can wait on: ``shows(text)`` returns once what was written so far ends with ``text``."""

    def __init__(self) -> None:
        super().__init__()
        self._written = asyncio.Event()

    def write(self, text: str) -> int:
        self._written.set()
        return super().write(text)

    async def shows(self, text: str, within: float = 5.0) -> None:
        """Wait for ``text`` at the end of the output (a liveness deadline: a test fails, not hangs)."""
        async with asyncio.timeout(deadline(within)):
            while not self.getvalue().endswith(text):
                self._written.clear()
                await self._written.wait()


async def test_on_a_terminal_the_answer_is_read_without_blocking_the_loop(tty: tuple[TextIO, int]) -> None:
    stream, master = tty
    output = Screen()
    approver = TerminalApprover(input=stream, output=output, color=False)
    task = asyncio.create_task(approver.ask(RUN))
    await output.shows(PROMPT)
    os.write(master, b"a\n")
    assert await asyncio.wait_for(task, deadline(5)) == "allow_always"


async def test_cancelling_a_question_leaves_no_reader_behind(tty: tuple[TextIO, int]) -> None:
    stream, master = tty
    output = Screen()
    approver = TerminalApprover(input=stream, output=output, color=False)
    task = asyncio.create_task(approver.ask(RUN))
    await output.shows(PROMPT)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert output.getvalue().endswith(f"{PROMPT}\n")
    # The next question gets the next line: nothing is still waiting on the terminal.
    task = asyncio.create_task(approver.ask(RUN))
    await output.shows(PROMPT)
    os.write(master, b"y\n")
    assert await asyncio.wait_for(task, deadline(5)) == "allow_once"


async def test_renderer_output_waits_until_the_question_is_answered(tty: tuple[TextIO, int]) -> None:
    stream, master = tty
    shared = Screen()  # stdout and stderr on one screen
    gate = PromptGate()
    renderer = TerminalRenderer(shared, color=False, interactive=False, gate=gate)
    await renderer(TurnStarted("t", "go", False, datetime.now(UTC)))
    await renderer(TextDelta("t", "Let me run it"))
    approver = TerminalApprover(input=stream, output=shared, color=False, gate=gate)
    task = asyncio.create_task(approver.ask(RUN))
    await shared.shows(PROMPT)
    await renderer(ToolCallStarted("t", "c1", "run_command", "Run `pytest -q`", "execute", {}))
    assert shared.getvalue().endswith(PROMPT)  # the tool line does not land on the prompt line
    os.write(master, b"y\n")
    assert await asyncio.wait_for(task, deadline(5)) == "allow_once"
    assert shared.getvalue() == (
        f"Let me run it\nPermission needed: Run `pytest -q`\n  $ pytest -q\n{PROMPT}\n[tool] Run `pytest -q`"
    )


async def test_a_terminal_s_renderer_and_approver_share_its_gate(monkeypatch: pytest.MonkeyPatch) -> None:
    screen = io.StringIO()  # stdout and stderr on one screen, as on a terminal
    monkeypatch.setattr(sys, "stdin", io.StringIO("y\n"))
    monkeypatch.setattr(sys, "stderr", screen)
    renderer, approver = terminal_views(screen, err=None, approve=True, verbose=False)
    assert approver is not None
    await renderer(TurnStarted("t", "go", False, datetime.now(UTC)))
    await renderer(TextDelta("t", "Let me run it"))
    assert await approver.ask(RUN) == "allow_once"
    # The approver knows the renderer stopped mid-line, so the question starts on a line of its own.
    assert screen.getvalue() == f"Let me run it\nPermission needed: Run `pytest -q`\n  $ pytest -q\n{PROMPT}y\n"


async def test_a_closed_input_is_the_end_of_input_and_rejects() -> None:
    closed = io.StringIO("y\n")
    closed.close()
    output = io.StringIO()
    approver = TerminalApprover(input=closed, output=output, color=False)
    assert await approver.ask(RUN) == "reject"
    assert output.getvalue() == f"Permission needed: Run `pytest -q`\n  $ pytest -q\n{PROMPT}\n"


class TerminalWithoutDescriptor(io.StringIO):
    """A stream that says it is a terminal but has no file descriptor the loop could watch (a wrapper's)."""

    def isatty(self) -> bool:
        return True


class UnwatchableTerminal(io.TextIOWrapper):
    """A terminal whose descriptor the event loop cannot watch (as on loops without ``add_reader``): here a
    regular file, which epoll refuses."""

    def isatty(self) -> bool:
        return True


async def test_a_terminal_the_loop_cannot_watch_is_read_all_the_same(tmp_path: Path) -> None:
    answers = tmp_path / "answers"
    answers.write_text("a\n")
    with answers.open("rb") as raw:
        unwatchable = UnwatchableTerminal(raw, encoding="utf-8")
        approver = TerminalApprover(input=unwatchable, output=io.StringIO(), color=False)
        assert await asyncio.wait_for(approver.ask(RUN), 5) == "allow_always"
        unwatchable.detach()


async def test_a_terminal_without_a_descriptor_is_read_all_the_same() -> None:
    approver = TerminalApprover(input=TerminalWithoutDescriptor("n use make\n"), output=io.StringIO(), color=False)
    assert await asyncio.wait_for(approver.ask(RUN), 5) == Rejection("use make")


@pytest.mark.parametrize(("script", "expected"), [("e\n", "allow_everywhere"), ("everywhere\n", "allow_everywhere")])
async def test_always_everywhere_is_a_choice_where_it_is_offered(script: str, expected: Answer) -> None:
    request = replace(RUN, everywhere="every `pytest` command, in every session")
    decision, shown = await ask(script, request)
    assert decision == expected
    assert "[e]verywhere (every `pytest` command, in every session), [n]o" in shown
    # Not offered (a chain, a protected path): "e" is no answer.
    decision, shown = await ask("e\nn\n")
    assert (decision, "Please answer y, a or n." in shown) == ("reject", True)
