"""Asking the person at the terminal whether a tool call may go ahead."""

from __future__ import annotations

import asyncio
from typing import TextIO

from codling.cli.draw import StyledWriter, diff_line_style, format_diff, is_terminal, one_line
from codling.cli.render import prompting
from codling.tools.ports import Decision, PermissionRequest

APPROVAL_DIFF_LINES = 80
"""How many diff lines a permission request shows; more than the renderer, since the user decides on them."""

MAX_ATTEMPTS = 3
"""How many times the question is asked before an unclear answer counts as "no"."""

PROMPT = "Allow? [y]es, [a]lways, [n]o: "

_ANSWERS: dict[str, Decision] = {
    "y": "allow_once",
    "yes": "allow_once",
    "a": "allow_always",
    "always": "allow_always",
    "n": "reject",
    "no": "reject",
    "": "reject",
}


class TerminalApprover:
    """The :class:`~codling.tools.ports.Approver` for an interactive terminal.

    Shows the request (its title, the actual command, or the path and the diff of an edit) on ``output`` and
    reads one answer per line from ``input``: y/yes allow once, a/always allow for the session, n/no/empty or
    end of input reject; anything else asks again, up to :data:`MAX_ATTEMPTS` times, then rejects.
    """

    def __init__(self, *, input: TextIO, output: TextIO, color: bool) -> None:
        self._input = input
        self._out = StyledWriter(output, color=color)
        self._color = color
        self._lock = asyncio.Lock()  # parallel tool calls must not ask (and read stdin) at the same time

    async def ask(self, request: PermissionRequest) -> Decision:
        """Show ``request`` and return the user's answer; raises ``asyncio.CancelledError`` with the turn."""
        async with self._lock:
            with prompting() as mid_line:
                if mid_line:
                    self._out.write("\n")
                self._show(request)
                try:
                    return await self._answer()
                except asyncio.CancelledError:
                    self._out.end_line()  # leave the prompt line, so what follows is not glued to it
                    raise

    def _show(self, request: PermissionRequest) -> None:
        self._out.write("Permission needed: ", "bold yellow")
        self._out.line(one_line(request.title), "bold")
        if request.kind == "execute":
            self._show_command(request.subject)
        elif request.subject:
            self._out.line(f"  {request.subject}")
        if request.diff is not None:
            for line in format_diff(request.diff, APPROVAL_DIFF_LINES):
                self._out.write("    ")
                self._out.line(line, diff_line_style(line) if self._color else None)

    def _show_command(self, command: str) -> None:
        # The whole command, every line of it: this is what the user is agreeing to run.
        first, *rest = command.splitlines() or [""]
        self._out.write("  $ ", "dim")
        self._out.line(first, "bold")
        for line in rest:
            self._out.line(f"    {line}", "bold")

    async def _answer(self) -> Decision:
        for _ in range(MAX_ATTEMPTS):
            self._out.write(PROMPT, "bold")
            line = await self._read_line()
            if not line:  # end of input: no one is there to say yes
                self._out.line()
                return "reject"
            if not is_terminal(self._input):
                self._out.line(line.rstrip("\n"))  # a terminal echoes the answer; a pipe or script does not
            decision = _ANSWERS.get(line.strip().lower())
            if decision is not None:
                return decision
            self._out.line("Please answer y, a or n.", "yellow")
        self._out.line("No clear answer: not allowed.", "yellow")
        return "reject"

    async def _read_line(self) -> str:
        """One line from the input ("" at its end), without blocking the event loop."""
        fd = _tty_fileno(self._input)
        if fd is None:
            return await asyncio.to_thread(_readline, self._input)
        # On a terminal, wait for the line in the event loop rather than in a thread: a thread blocked in
        # readline cannot be stopped, so after a cancelled turn asyncio.run would wait at exit for the user
        # to press Enter. In canonical mode the terminal is readable only once a whole line was typed.
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[None] = loop.create_future()
        try:
            loop.add_reader(fd, _set_once, ready)
        except (NotImplementedError, OSError, ValueError):  # e.g. the Windows proactor loop
            return await asyncio.to_thread(_readline, self._input)
        try:
            await ready
        finally:
            loop.remove_reader(fd)
        return _readline(self._input)


def _set_once(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _readline(stream: TextIO) -> str:
    try:
        return stream.readline()
    except (OSError, ValueError):  # closed or unreadable input counts as its end
        return ""


def _tty_fileno(stream: TextIO) -> int | None:
    if not is_terminal(stream):
        return None
    try:
        return stream.fileno()
    except (AttributeError, ValueError, OSError):
        return None
