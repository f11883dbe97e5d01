"""Asking the person at the terminal whether a tool call may go ahead."""

from __future__ import annotations

import asyncio
import re
from typing import TextIO

from codling.cli.draw import StyledWriter, diff_line_style, diff_lines, is_terminal, one_line
from codling.cli.render import PromptGate
from codling.tools.ports import Answer, Decision, PermissionRequest, Rejection

APPROVAL_DIFF_LINES = 80
"""How many diff lines a permission request shows; more than the renderer, since the user decides on them."""

MAX_ATTEMPTS = 3
"""How many times the question is asked before an unclear answer counts as "no"."""

PROMPT = "Allow? [y]es, [n]o (or: n <reason>): "
"""The question when "always" is not offered and the diff is whole (see :func:`prompt_for`)."""


def prompt_for(request: PermissionRequest, cut: int) -> str:
    """The question under ``request``: "always" with what it covers when it is offered, and a way to see the
    ``cut`` diff lines not shown."""
    choices = ["[y]es"]
    if request.always is not None:
        choices.append(f"[a]lways ({request.always}, for this session)")
    if request.everywhere is not None:
        choices.append(f"[e]verywhere ({request.everywhere})")
    choices.append("[n]o (or: n <reason>)")
    if cut:
        choices.append(f"[v]iew all {cut:,} more diff lines")
    return f"Allow? {', '.join(choices)}: "


_ANSWERS: dict[str, Decision] = {
    "y": "allow_once",
    "yes": "allow_once",
    "a": "allow_always",
    "always": "allow_always",
    "e": "allow_everywhere",
    "everywhere": "allow_everywhere",
    "n": "reject",
    "no": "reject",
    "": "reject",
}
_REASON = re.compile(r"(?:n|no)[\s:,]+(?P<reason>\S.*)", re.IGNORECASE | re.DOTALL)
"""A "no" followed by the reason for it: ``n use ripgrep instead``."""


class TerminalApprover:
    """The :class:`~codling.tools.ports.Approver` for an interactive terminal.

    Shows the request (its title, the actual command, or the path and the diff of an edit, the first
    :data:`APPROVAL_DIFF_LINES` lines of it) on ``output`` and reads one answer per line from ``input``:
    y/yes allow once; a/always allow what the request's ``always`` says for the session (offered only when
    there is one); n/no, an empty line or end of input reject, and "n" followed by words rejects with those
    words as the reason the model is told; v shows the rest of a long diff. Anything else asks again, up to
    :data:`MAX_ATTEMPTS` times, then rejects. The ids of calls allowed after their diff was shown go into
    ``shown_diffs``, so the renderer does not draw the same diff again. While it asks, the renderers of ``gate``
    (the terminal's :class:`~codling.cli.render.PromptGate`; none if None) hold their output.
    """

    def __init__(
        self,
        *,
        input: TextIO,
        output: TextIO,
        color: bool,
        shown_diffs: set[str] | None = None,
        gate: PromptGate | None = None,
    ) -> None:
        self._input = input
        self._gate = gate if gate is not None else PromptGate()
        self._out = StyledWriter(output, color=color)
        self._color = color
        self._shown_diffs = shown_diffs if shown_diffs is not None else set()
        self._lock = asyncio.Lock()  # parallel tool calls must not ask (and read stdin) at the same time

    async def ask(self, request: PermissionRequest) -> Answer:
        """Show ``request`` and return the user's answer; raises ``asyncio.CancelledError`` with the turn."""
        async with self._lock:
            with self._gate.prompting() as mid_line:
                if mid_line:
                    self._out.write("\n")
                rest = self._show(request)
                try:
                    answer = await self._answer(request, rest)
                except asyncio.CancelledError:
                    self._out.end_line()  # leave the prompt line, so what follows is not glued to it
                    raise
        if request.diff is not None and answer in ("allow_once", "allow_always", "allow_everywhere"):
            self._shown_diffs.add(request.tool_call_id)
        return answer

    def _show(self, request: PermissionRequest) -> list[str]:
        """Draw the request; the diff lines left out (none if the diff is whole)."""
        self._out.write("Permission needed: ", "bold yellow")
        self._out.line(one_line(request.title), "bold")
        if request.kind == "execute":
            self._show_command(request.subject)
        elif request.subject:
            self._out.line(f"  {request.subject}")
        if request.diff is None:
            return []
        lines = diff_lines(request.diff)
        self._show_diff(lines[:APPROVAL_DIFF_LINES])
        rest = lines[APPROVAL_DIFF_LINES:]
        if rest:
            self._out.line(f"    … {len(rest):,} more lines", "dim")
        return rest

    def _show_diff(self, lines: list[str]) -> None:
        for line in lines:
            self._out.write("    ")
            self._out.line(line, diff_line_style(line) if self._color else None)

    def _show_command(self, command: str) -> None:
        # The whole command, every line of it: this is what the user is agreeing to run.
        first, *rest = command.splitlines() or [""]
        self._out.write("  $ ", "dim")
        self._out.line(first, "bold")
        for line in rest:
            self._out.line(f"    {line}", "bold")

    async def _answer(self, request: PermissionRequest, rest: list[str]) -> Answer:
        attempts = 0
        while attempts < MAX_ATTEMPTS:
            self._out.write(prompt_for(request, len(rest)), "bold")
            line = await self._read_line()
            if not line:  # end of input: no one is there to say yes
                self._out.line()
                return "reject"
            if not is_terminal(self._input):
                self._out.line(line.rstrip("\n"))  # a terminal echoes the answer; a pipe or script does not
            answer = line.strip()
            if answer.lower() in ("v", "view") and rest:
                self._show_diff(rest)
                rest = []  # all of it is on the screen now
                continue
            decision = _ANSWERS.get(answer.lower())
            if decision == "allow_always" and request.always is None:
                decision = None  # not offered: it would not be remembered
            if decision == "allow_everywhere" and request.everywhere is None:
                decision = None
            if decision is not None:
                return decision
            if reason := _REASON.fullmatch(answer):
                return Rejection(reason["reason"].strip())
            attempts += 1
            offered = ["y", *(["a"] if request.always else []), *(["e"] if request.everywhere else [])]
            self._out.line(f"Please answer {', '.join(offered)} or n.", "yellow")
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
