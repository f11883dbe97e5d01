"""Drawing on a terminal: the styled writer, safe text, diffs, and the pieces of a turn.

:class:`StyledWriter` writes styled text (markdown through rich), or plain text with no escape code at all.
The ``write_*`` helpers draw one piece of a turn (a tool line and its status, a diff, an error, a collapsed
reasoning block, a stop note) the same way live (``cli/render.py``), in ``codling sessions show``
(``cli/transcript.py``) and in permission questions (``cli/approve.py``).
"""

from __future__ import annotations

import difflib
import functools
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar, TextIO

from codling.cli.output_tail import output_tail

if TYPE_CHECKING:  # the brain's events and the tools' types load at the first turn, not before the input line
    from rich.console import Console, ConsoleOptions, ConsoleRenderable, JustifyMethod, RenderResult
    from rich.markdown import Markdown, MarkdownElement
    from rich.segment import Segment

    from codling.brain.events import ToolCallFinished
    from codling.vocabulary import FileDiff, PlanStep, StopReason

DIFF_LINES = 40
"""How many diff lines the renderer shows for an edit before "… N more lines"."""

_FAILURE_CHARS = 200

_TABLE_COLUMN_WIDTH = 3
"""Columns a markdown table needs per column to show every character (rich folds a cell into what it has, but
gives a column no width at all past about this)."""

# C0/C1 control characters other than newline and tab: model text, tool output or file contents could
# otherwise move the cursor, recolor the terminal or hide part of a command the user is asked to approve.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")

_SGR = {
    "bold": "1",
    "dim": "2",
    "italic": "3",
    "underline": "4",
    "reverse": "7",
    "black": "30",
    "red": "31",
    "green": "32",
    "yellow": "33",
    "blue": "34",
    "magenta": "35",
    "cyan": "36",
    "white": "37",
}
"""The SGR codes of the plain styles, as rich writes them with the standard colours: text in these styles is
written without importing rich (~40 ms), which the chat's input line would otherwise wait for."""


def use_color(stream: TextIO, env: Mapping[str, str]) -> bool:
    """Whether to style output on ``stream``: only on a terminal, with ``NO_COLOR`` unset (any value counts,
    even empty) and ``TERM`` not ``dumb``."""
    return is_terminal(stream) and "NO_COLOR" not in env and env.get("TERM") != "dumb"


def can_animate(stream: TextIO, env: Mapping[str, str]) -> bool:
    """Whether ``stream`` is a terminal that can redraw a line (a spinner): any terminal but ``TERM=dumb``."""
    return is_terminal(stream) and env.get("TERM") != "dumb"


def printable(text: str) -> str:
    """``text`` safe to write to a terminal: control characters other than newline and tab are shown as
    ``\\xNN`` instead of being interpreted (a CR of a CRLF line end is dropped)."""
    text = text.replace("\r\n", "\n")
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def format_diff(diff: FileDiff, max_lines: int) -> list[str]:
    """The unified diff of ``diff`` (hunks only, 3 lines of context, no trailing newlines), at most
    ``max_lines`` lines plus a final "… N more lines" note when longer. A new file diffs against empty."""
    lines = diff_lines(diff)
    if len(lines) > max_lines:
        return [*lines[:max_lines], f"… {len(lines) - max_lines} more lines"]
    return lines


def diff_lines(diff: FileDiff) -> list[str]:
    """Every line of the unified diff of ``diff`` (hunks only, 3 lines of context, no trailing newlines)."""
    old = (diff.old_text or "").splitlines()
    new = diff.new_text.splitlines()
    # The caller already shows the path, so the ---/+++ header lines would only repeat it.
    return [line for line in difflib.unified_diff(old, new, lineterm="") if not line.startswith(("---", "+++"))]


def diff_line_style(line: str) -> str | None:
    """The rich style of one line from :func:`format_diff`."""
    if line.startswith("+"):
        return "green"
    if line.startswith("-"):
        return "red"
    if line.startswith("@@"):
        return "cyan"
    if line.startswith("…"):
        return "dim"
    return None


class StyledWriter:
    """Writes text to one stream: styled when ``color`` (markdown and uncommon styles through rich, made on first use),
    verbatim otherwise (so plain output never holds an escape code). Flushes every write, knows whether the cursor
    is mid-line, and can hold its output back for a while (see :class:`~codling.cli.render.PromptGate`).

    Styled markdown is laid out to ``width`` columns (None: the terminal's): every block wraps, code and table
    cells fold a word longer than the width, so no character is ever cut off."""

    def __init__(self, stream: TextIO, *, color: bool, width: int | None = None) -> None:
        self.stream = stream
        self.color = color
        self._width = width  # None: the terminal's (or $COLUMNS)
        self._console: Console | None = None
        self._at_line_start = True
        self._held: list[tuple[str, str | None, bool]] | None = None

    @property
    def at_line_start(self) -> bool:
        """Whether the last character written (or held) was a newline, or nothing was written yet."""
        return self._at_line_start

    def write(self, text: str, style: str | None = None) -> None:
        """Write ``text`` (made :func:`printable`) in ``style``, a rich style such as ``"bold red"``."""
        text = printable(text)
        if not text:
            return
        self._at_line_start = text.endswith("\n")
        if self._held is not None:
            self._held.append((text, style, False))
            return
        self._emit(text, style)

    def markdown(self, text: str) -> None:
        """Write one complete markdown block, rendered by rich (headings, emphasis, lists, highlighted code)
        when styled, as it is otherwise; the cursor ends at the start of a line."""
        text = printable(text)
        if not text:
            return
        self.end_line()
        self._at_line_start = True
        if self._held is not None:
            self._held.append((text, None, True))
            return
        self._emit(text, None, markdown=True)

    def line(self, text: str = "", style: str | None = None) -> None:
        """Write ``text`` and a newline."""
        self.write(text, style)
        self.write("\n")

    def end_line(self) -> None:
        """Move to the start of a line unless the cursor is already there."""
        if not self._at_line_start:
            self.write("\n")

    def hold(self) -> None:
        """Keep further writes back until :meth:`release`."""
        if self._held is None:
            self._held = []

    def release(self) -> None:
        """Write whatever was held back, in order."""
        held, self._held = self._held, None
        for text, style, markdown in held or ():
            self._emit(text, style, markdown=markdown)

    def _emit(self, text: str, style: str | None, *, markdown: bool = False) -> None:
        if not self.color:
            self.stream.write(text + "\n" if markdown else text)
        elif markdown:
            from rich.segment import Segment, Segments

            # Laid out to the width, not soft-wrapped: to rich, soft wrap means neither wrapping nor cropping,
            # yet a list item, quote, code block or table is drawn in a box of the console's width, which then
            # cut its lines at the edge for good (issue 32). The padding to the width is dropped, so a copied
            # line has no trailing blanks and a terminal made narrower does not wrap blanks into extra lines.
            console = self._rich()
            lines = console.render_lines(_markdown(text), console.options, pad=False)
            console.print(Segments(segment for line in lines for segment in (*_rstrip(line), Segment.line())))
        elif (codes := _sgr(style)) is not None:
            self.stream.write("\n".join(f"\x1b[{codes}m{line}\x1b[0m" if line else "" for line in text.split("\n")))
        elif not style:
            self.stream.write(text)
        else:
            from rich.text import Text

            self._rich().print(Text(text, style=style), end="")
        self.stream.flush()

    def _rich(self) -> Console:
        """The rich console styled text and markdown are drawn with, made on first use."""
        if self._console is None:
            from rich.console import Console

            self._console = Console(
                file=self.stream,
                width=self._width,
                force_terminal=True,
                no_color=False,
                color_system="standard",
                highlight=False,
                soft_wrap=True,
            )
        return self._console


def _sgr(style: str | None) -> str | None:
    """The SGR parameters of ``style`` when every word of it is in :data:`_SGR` (None otherwise, or for none)."""
    words = style.split() if style else []
    if not words or any(word not in _SGR for word in words):
        return None
    return ";".join(_SGR[word] for word in words)


def _rstrip(line: list[Segment]) -> list[Segment]:
    """A rendered line without the blanks at its end."""
    from rich.segment import Segment

    while line and not line[-1].control and not line[-1].text.rstrip(" "):
        line = line[:-1]
    if line and not line[-1].control:
        last = line[-1]
        line = [*line[:-1], Segment(last.text.rstrip(" "), last.style)]
    return line


def _markdown(text: str) -> ConsoleRenderable:
    """``text`` as rich markdown whose table cells fold a word too long for their column (rich's own end it with
    an ellipsis, losing the rest)."""
    return _folding_markdown()(text, code_theme="ansi_dark")


@functools.cache
def _folding_markdown() -> type[Markdown]:
    # Made on first use: rich.markdown (and markdown-it) stay out of the start-up of light commands.
    from rich.markdown import Markdown, TableDataElement, TableElement
    from rich.text import Text

    class FoldingCell(TableDataElement):
        def __init__(self, justify: JustifyMethod) -> None:
            super().__init__(justify)
            self.content.overflow = "fold"

    class NarrowTable(TableElement):
        """A table too wide for its columns to show anything (rich gives some no width at all) is drawn a row
        at a time, a ``header: cell`` line per column."""

        def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
            header = [cell.content for cell in self.header.row.cells] if self.header and self.header.row else []
            if _TABLE_COLUMN_WIDTH * len(header) + 1 <= options.max_width:
                yield from super().__rich_console__(console, options)
                return
            for index, row in enumerate(self.body.rows if self.body is not None else []):
                if index:
                    yield Text()
                for name, cell in zip(header, row.cells, strict=False):
                    yield Text.assemble((name.plain, "bold"), ": ", cell.content)

    class FoldingMarkdown(Markdown):
        elements: ClassVar[dict[str, type[MarkdownElement]]] = {
            **Markdown.elements,
            "table_open": NarrowTable,
            "td_open": FoldingCell,
            "th_open": FoldingCell,
        }

    return FoldingMarkdown


# -- pieces of a turn, shared with the transcript ----------------------------------------------------------------


def write_tool_title(out: StyledWriter, title: str) -> None:
    """The start of a tool call's line: ``[tool] title`` plain, ``⏺ title`` styled (no newline)."""
    if out.color:
        out.write("⏺ ", "cyan")
        out.write(title, "bold")
    else:
        out.write(f"[tool] {title}")


OUTPUT_TAIL = 6
"""How many of a command's last output lines a tool line shows (``--verbose``: all of them, uncapped), each cut
at :data:`~codling.cli.output_tail.LINE_CHARS` characters with a note of how many more it had."""


def write_tool_status(out: StyledWriter, event: ToolCallFinished) -> None:
    """How a tool call ended, after its title (no newline): a command's exit status, else done or failed (a
    failure shows the first line of its reason)."""
    if (command := _command(event)) is not None:
        status = command[0]
        ok = status == "exit code 0"
        if not out.color:
            out.write(f" -> {status}")
        else:
            out.write(f"  {'✓' if ok else '✗'} {status}", "green" if ok else "red")
        return
    reason = _first_line(event.text) if event.status == "failed" else ""
    if not out.color:
        out.write(f" -> {event.status}" + (f": {reason}" if reason else ""))
    elif event.status == "completed":
        out.write("  ✓ done", "green")
    else:
        out.write("  ✗ failed" + (f": {reason}" if reason else ""), "red")


def _command(event: ToolCallFinished) -> tuple[str, str] | None:
    """A finished command's status line and output; None for other calls."""
    from codling.tools.base import command_result
    from codling.tools.ports import COMMAND_TOOL

    if event.tool_name != COMMAND_TOOL or event.status != "completed":
        return None
    return command_result(event.text)


def write_tool_result(out: StyledWriter, event: ToolCallFinished, *, verbose: bool = False) -> None:
    """What a finished call did, under its tool line: a command's last output lines (all with ``verbose``), a
    delegate's steps and report. Nothing for other calls (an edit's diff is drawn by :func:`write_diff`)."""
    from codling.tools.ports import DELEGATE_TOOL

    if (command := _command(event)) is not None:
        # (Counted from the whole output, through the notes of any cut, not from what was kept of it.)
        tail = output_tail(command[1], None if verbose else OUTPUT_TAIL)
        if tail.earlier:
            out.line(f"    … {tail.earlier:,} earlier lines (--verbose shows all)", "dim")
        for line in tail.lines:
            out.line("    " + printable(line), "dim")
    elif event.tool_name == DELEGATE_TOOL and event.status == "completed":
        steps = event.shown.steps if event.shown is not None else ""
        for line in steps.splitlines():
            out.line("    " + printable(line), "dim")
        for line in event.text.strip().splitlines():
            out.line("    " + printable(line))


def write_diff(out: StyledWriter, diff: FileDiff) -> None:
    """An edit's diff under its tool line: indented, at most :data:`DIFF_LINES` lines."""
    for line in format_diff(diff, DIFF_LINES):
        out.write("    ")
        out.line(line, diff_line_style(line) if out.color else None)


def compact_thought(text: str) -> str:
    """Thought text as shown: thoughts are context, not the answer, so blank lines inside them are dropped."""
    return re.sub(r"\n{2,}", "\n", printable(text))


def reasoning_label(tool_calls: int, failed: int = 0) -> str:
    """The text of a collapsed reasoning block: ``reasoning`` when it called no tool, else e.g.
    ``reasoning (1 tool call)`` or ``reasoning (3 tool calls, 1 failed)``."""
    if tool_calls == 0:
        return "reasoning"
    calls = "1 tool call" if tool_calls == 1 else f"{tool_calls} tool calls"
    return f"reasoning ({calls}, {failed} failed)" if failed else f"reasoning ({calls})"


def write_reasoning(out: StyledWriter, tool_calls: int, failed: int = 0) -> None:
    """A collapsed reasoning block as one line (see :func:`reasoning_label`); failures stand out in red."""
    label = reasoning_label(tool_calls, failed)
    if out.color and failed:
        head, _, tail = label.rpartition(f"{failed} failed")
        out.write(head, "dim")
        out.write(f"{failed} failed", "red")
        out.line(tail, "dim")
    else:
        out.line(label, "dim")


def write_error(out: StyledWriter, message: str) -> None:
    """A failed turn's error on its own line: ``Error: message``, with a bold red ``Error:`` when styled."""
    out.end_line()
    if out.color:
        out.write("Error:", "bold red")
        out.line(f" {message}")
    else:
        out.line(f"Error: {message}")


STOP_NOTES: dict[StopReason, str] = {
    "end_turn": "",
    "cancelled": "(cancelled)",
    "max_turn_requests": "(stopped: the turn made as many model requests as it may)",
    "max_cost": "(stopped: the turn's spend passed its cap, --max-cost)",
    "max_tokens": "(stopped: the reply reached the model's output token limit)",
    "refusal": "(stopped: the model refused to answer)",
}
"""What a turn's end says under it, in words (a stop reason's name meant nothing to a reader); none for a
normal end. ``codling run`` adds a line on stderr with the figures and what to do next."""


def write_stop_note(out: StyledWriter, stop_reason: StopReason) -> None:
    """A note for a turn that did not end normally (cancelled, at a limit, refused); nothing otherwise."""
    out.end_line()
    if note := STOP_NOTES[stop_reason]:
        out.line(note, "yellow")


def is_terminal(stream: TextIO) -> bool:
    """Whether ``stream`` is a terminal; ``False`` for closed streams and objects without ``isatty``."""
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):  # closed or not a real stream
        return False


def one_line(text: str) -> str:
    """``text`` on one line: its non-blank lines stripped and joined by spaces."""
    return " ".join(line.strip() for line in text.splitlines() if line.strip())


def _first_line(text: str) -> str:
    for line in text.strip().splitlines():
        line = line.strip()
        if line:
            return line if len(line) <= _FAILURE_CHARS else line[: _FAILURE_CHARS - 1] + "…"
    return ""


_PLAN_STYLES = {"completed": "dim", "in_progress": "bold", "pending": None}


def write_plan(out: StyledWriter, steps: Sequence[PlanStep]) -> None:
    """The model's plan as an indented checklist: ``[x]`` done (dim), ``[>]`` in progress (bold), ``[ ]`` to do."""
    from codling.vocabulary import STATUS_MARKS

    for step in steps:
        out.line(f"    {STATUS_MARKS[step.status]} {one_line(step.step)}", _PLAN_STYLES[step.status])
