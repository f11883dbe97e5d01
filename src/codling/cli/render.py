"""Terminal output for ``codling run``: observers of the brain's event stream.

:class:`TerminalRenderer` draws a turn for people (streamed text, thoughts, one line per tool call, diffs,
errors, a spinner while the model is thinking, reasoning blocks collapsed); :class:`JsonLinesRenderer` prints one
JSON object per event for scripts. The approver (``cli/approve.py``) shares the diff formatting and the styled
writer, and uses :func:`prompting` so that a permission question is never overdrawn by a spinner or by a tool
line. The ``write_*`` helpers draw one piece of a turn the same way here and in ``codling sessions show``
(``cli/transcript.py``).
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import re
import weakref
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

from rich.console import Console
from rich.live import Live
from rich.spinner import Spinner
from rich.text import Text

from codling.brain import compaction
from codling.brain.events import (
    CompactionStarted,
    ContextCompacted,
    Event,
    SessionTitled,
    SpecialTurnPersisted,
    StopReason,
    TextDelta,
    ThoughtDelta,
    ToolCallFinished,
    ToolCallStarted,
    TurnEnded,
    TurnFailed,
    TurnStarted,
)
from codling.brain.reasoning import BlockTracker, SegmentSplitter
from codling.tools.ports import FileDiff

DIFF_LINES = 40
"""How many diff lines the renderer shows for an edit before "… N more lines"."""

_FAILURE_CHARS = 200

_WORKING = "working…"

# C0/C1 control characters other than newline and tab: model text, tool output or file contents could
# otherwise move the cursor, recolor the terminal or hide part of a command the user is asked to approve.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def use_color(stream: TextIO, env: Mapping[str, str]) -> bool:
    """Whether to style output on ``stream``: only on a terminal, with ``NO_COLOR`` unset (any value counts,
    even empty) and ``TERM`` not ``dumb``."""
    return is_terminal(stream) and "NO_COLOR" not in env and env.get("TERM") != "dumb"


def printable(text: str) -> str:
    """``text`` safe to write to a terminal: control characters other than newline and tab are shown as
    ``\\xNN`` instead of being interpreted (a CR of a CRLF line end is dropped)."""
    text = text.replace("\r\n", "\n")
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def format_diff(diff: FileDiff, max_lines: int) -> list[str]:
    """The unified diff of ``diff`` (hunks only, 3 lines of context, no trailing newlines), at most
    ``max_lines`` lines plus a final "… N more lines" note when longer. A new file diffs against empty."""
    old = (diff.old_text or "").splitlines()
    new = diff.new_text.splitlines()
    # The caller already shows the path, so the ---/+++ header lines would only repeat it.
    lines = [line for line in difflib.unified_diff(old, new, lineterm="") if not line.startswith(("---", "+++"))]
    if len(lines) > max_lines:
        return [*lines[:max_lines], f"… {len(lines) - max_lines} more lines"]
    return lines


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
    """Writes text to one stream: styled through rich when ``color``, verbatim otherwise (so plain output
    never holds an escape code). Flushes every write, knows whether the cursor is mid-line, and can hold its
    output back for a while (see :func:`prompting`)."""

    def __init__(self, stream: TextIO, *, color: bool) -> None:
        self.stream = stream
        self.color = color
        self._console = (
            Console(
                file=stream,
                force_terminal=True,
                no_color=False,
                color_system="standard",
                highlight=False,
                soft_wrap=True,
            )
            if color
            else None
        )
        self._at_line_start = True
        self._held: list[tuple[str, str | None]] | None = None

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
            self._held.append((text, style))
            return
        self._emit(text, style)

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
        for text, style in held or ():
            self._emit(text, style)

    def _emit(self, text: str, style: str | None) -> None:
        if self._console is None:
            self.stream.write(text)
        else:
            self._console.print(Text(text, style=style or ""), end="")
        self.stream.flush()


# -- pieces of a turn, shared with the transcript ----------------------------------------------------------------


def write_tool_title(out: StyledWriter, title: str) -> None:
    """The start of a tool call's line: ``[tool] title`` plain, ``⏺ title`` styled (no newline)."""
    if out.color:
        out.write("⏺ ", "cyan")
        out.write(title, "bold")
    else:
        out.write(f"[tool] {title}")


def write_tool_status(out: StyledWriter, event: ToolCallFinished) -> None:
    """How a tool call ended, after its title (no newline); a failure shows the first line of its reason."""
    reason = _first_line(event.text) if event.status == "failed" else ""
    if not out.color:
        out.write(f" -> {event.status}" + (f": {reason}" if reason else ""))
    elif event.status == "completed":
        out.write("  ✓ done", "green")
    else:
        out.write("  ✗ failed" + (f": {reason}" if reason else ""), "red")


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


def write_stop_note(out: StyledWriter, stop_reason: StopReason) -> None:
    """A note for a turn that did not end normally (cancelled, out of requests or tokens); nothing otherwise."""
    out.end_line()
    if stop_reason == "cancelled":
        out.line("(cancelled)", "yellow")
    elif stop_reason != "end_turn":
        out.line(f"(stopped: {stop_reason})", "yellow")


# -- live rendering ----------------------------------------------------------------------------------------------


class _Spinner:
    """A transient rich spinner with a label; it erases itself when stopped, so the cursor is back where it
    started."""

    def __init__(self, stream: TextIO) -> None:
        self._console = Console(
            file=stream, force_terminal=True, color_system="standard", highlight=False, soft_wrap=True
        )
        self._live: Live | None = None
        self._spinner: Spinner | None = None

    def start(self, label: str = _WORKING) -> None:
        """Show the spinner with ``label``, or change the label of the running spinner in place."""
        text = Text(label, style="dim")
        if self._live is not None and self._spinner is not None:
            self._spinner.update(text=text)
            return
        self._spinner = Spinner("dots", text=text, style="cyan")
        # No stdout/stderr redirection: the renderer and the approver write to the real streams themselves.
        self._live = Live(
            self._spinner,
            console=self._console,
            transient=True,
            refresh_per_second=12.5,
            redirect_stdout=False,
            redirect_stderr=False,
        )
        self._live.start()

    def stop(self) -> None:
        live, self._live = self._live, None
        if live is not None:
            live.stop()


class _PromptGate:
    """Lets a question to the user (the approver) pause every terminal renderer.

    Events reach the renderer through the session's queue, so a tool line or a parallel tool's result may be
    drawn while the user is typing an answer, and a spinner may be running when the question appears. While a
    prompt is open every renderer's spinner is stopped and its output is held, then written when it closes.
    """

    def __init__(self) -> None:
        self.open_prompts = 0
        self.renderers: weakref.WeakSet[TerminalRenderer] = weakref.WeakSet()


_GATE = _PromptGate()


@contextmanager
def prompting() -> Iterator[bool]:
    """Hold every :class:`TerminalRenderer`'s output and stop its spinner while the user is asked something.

    Yields whether some renderer's output stopped mid-line, so the question can start on a fresh line.
    """
    renderers = list(_GATE.renderers)
    mid_line = any(not r.at_line_start for r in renderers)
    _GATE.open_prompts += 1
    for renderer in renderers:
        renderer._pause()
    try:
        yield mid_line
    finally:
        _GATE.open_prompts -= 1
        if _GATE.open_prompts == 0:
            for renderer in list(_GATE.renderers):
                renderer._resume()


@dataclasses.dataclass
class _OpenBlock:
    """The reasoning block being drawn: its tool calls so far."""

    calls: set[str] = dataclasses.field(default_factory=set)
    failed: int = 0
    orphans: int = 0  # results of calls whose start was never seen

    @property
    def tool_calls(self) -> int:
        return len(self.calls) + self.orphans


class TerminalRenderer:
    """Draws a turn's events on a terminal (or plainly into a pipe or file) as they arrive.

    ``color`` styles the output with rich; without it the output is plain text with no escape codes.
    ``interactive`` (with ``color``) shows a spinner on ``err`` (or ``out``) while waiting for the model.

    In a thinking turn (``TurnStarted.thinking``) each reasoning block (see :mod:`codling.brain.reasoning`) is
    collapsed into one ``reasoning (N tool calls)`` line: the thoughts and the tool lines inside the block are
    not printed, and neither is the diff of an edit made inside it (the edit is one of the N calls). A call
    inside a block that fails is counted (``reasoning (3 tool calls, 1 failed)``). Interactive, the line is the
    spinner's label while the block is open, its count updated in place; the final line is printed when the
    block closes, which is also the only time it is printed otherwise. A call of a block that finishes only after
    its block closed (parallel calls) prints a tool line if it failed, so the failure is not lost. Tools outside
    blocks, text, errors and non-thinking turns are drawn as they come.
    """

    def __init__(self, out: TextIO, *, err: TextIO | None = None, color: bool, interactive: bool) -> None:
        self._out = StyledWriter(out, color=color)
        self._color = color
        spinner_stream = err if err is not None and is_terminal(err) else out
        self._spinner = _Spinner(spinner_stream) if interactive and color else None
        self._thinking = False
        self._thought_written = False
        self._titles: dict[str, str] = {}  # call id -> title, for tool calls still running
        self._open_tool: str | None = None  # the call whose title ends the current line
        self._thinking_turn = False
        self._splitter = SegmentSplitter()
        self._tracker = BlockTracker()
        self._block: _OpenBlock | None = None
        self._collapsed: dict[str, str] = {}  # call id -> title, for calls of blocks already closed
        _GATE.renderers.add(self)

    @property
    def at_line_start(self) -> bool:
        """Whether the renderer's output ends with a newline (or is empty)."""
        return self._out.at_line_start

    async def __call__(self, event: Event) -> None:
        """Draw one event."""
        if isinstance(event, SessionTitled | SpecialTurnPersisted):
            return  # not part of a turn; a one-shot run shows neither
        if self._thinking_turn and not isinstance(event, TurnStarted) and self._reasoning(event):
            return
        self._stop_spinner()
        if not isinstance(event, ThoughtDelta):
            self._end_thought()
        match event:
            case TurnStarted():
                self.close()  # a block left open by a turn that never ended is drawn before the next turn
                self._reset()
                self._thinking_turn = event.thinking
                self._start_spinner()
            case TextDelta():
                self._text(event)
            case ThoughtDelta():
                self._thought(event)
            case ToolCallStarted():
                self._tool_started(event)
            case ToolCallFinished():
                self._tool_finished(event)
                if not self._titles:  # a tool still running (or asking) must not be overdrawn
                    self._start_spinner()
            case TurnFailed():
                write_error(self._out, event.message)
                self._open_tool = None
            case CompactionStarted():
                self._start_spinner()
            case ContextCompacted():
                self._out.end_line()
                write_tool_title(self._out, compaction.title(event.tokens_before, event.tokens_after, event.fallback))
                self._out.line()
                self._start_spinner()
            case TurnEnded():
                self._ended(event)

    def close(self) -> None:
        """Stop the spinner, if any; call when the turn is over or interrupted (an open block is drawn)."""
        if self._tracker.end():
            self._close_block()
        self._stop_spinner()

    # -- reasoning blocks ----------------------------------------------------------------------------------

    def _reasoning(self, event: Event) -> bool:
        """Place an event of a thinking turn in its block; whether it is collapsed (drawn by the block alone)."""
        if isinstance(event, TurnFailed | TurnEnded):
            if self._tracker.end():
                self._close_block()
            return False
        kind = self._splitter.feed(event)
        if kind is not None:
            step = self._tracker.feed(kind)
            if step.closed_before:
                self._close_block()
            if step.opened:
                self._open_block()
            if not step.in_block:
                return False
            block = self._block
            assert block is not None  # opened above or earlier
            if isinstance(event, ToolCallStarted):
                block.calls.add(event.call_id)
                self._collapsed[event.call_id] = one_line(event.title) or event.tool_name
            elif isinstance(event, ToolCallFinished):  # a result whose call was never seen
                block.orphans += 1
                block.failed += int(event.status == "failed")
            self._start_spinner()
            return True
        if isinstance(event, ThoughtDelta):
            return True  # a think segment always lies inside a block
        if isinstance(event, ToolCallFinished) and event.call_id in self._collapsed:
            title = self._collapsed.pop(event.call_id)
            if self._block is not None and event.call_id in self._block.calls:
                self._block.failed += int(event.status == "failed")
                self._start_spinner()
                return True
            if event.status == "failed":
                # Its block is already drawn without it: show the failure as a tool line of its own.
                self._titles[event.call_id] = title
                return False
            return True
        return False

    def _open_block(self) -> None:
        self._block = _OpenBlock()
        if not self._out.at_line_start:
            self._stop_spinner()
            self._fresh_line()

    def _close_block(self) -> None:
        block, self._block = self._block, None
        if block is None:
            return
        self._stop_spinner()
        self._end_thought()
        self._fresh_line()
        write_reasoning(self._out, block.tool_calls, block.failed)

    # -- events --------------------------------------------------------------------------------------------

    def _text(self, event: TextDelta) -> None:
        if self._open_tool is not None:
            self._fresh_line()
        self._out.write(event.text)

    def _thought(self, event: ThoughtDelta) -> None:
        if not self._thinking:
            self._fresh_line()
            self._thinking = True
            if not self._color:
                self._out.write("thinking: ")
        text = compact_thought(event.text)
        if self._out.at_line_start or not self._thought_written:
            text = text.lstrip("\n")
        self._thought_written = self._thought_written or bool(text)
        self._out.write(text, "dim italic")

    def _tool_started(self, event: ToolCallStarted) -> None:
        title = one_line(event.title) or event.tool_name
        self._titles[event.call_id] = title
        self._fresh_line()
        write_tool_title(self._out, title)
        self._open_tool = event.call_id

    def _tool_finished(self, event: ToolCallFinished) -> None:
        title = self._titles.pop(event.call_id, event.tool_name)
        if self._open_tool != event.call_id:
            # Something else was drawn since the call started: repeat its title so the status is not orphaned.
            self._fresh_line()
            write_tool_title(self._out, title)
        write_tool_status(self._out, event)
        self._out.write("\n")
        self._open_tool = None
        if event.diff is not None:
            write_diff(self._out, event.diff)

    def _ended(self, event: TurnEnded) -> None:
        self._fresh_line()
        write_stop_note(self._out, event.stop_reason)
        self._reset()

    # -- pieces --------------------------------------------------------------------------------------------

    def _fresh_line(self) -> None:
        self._out.end_line()
        self._open_tool = None

    def _end_thought(self) -> None:
        if self._thinking:
            self._thinking = self._thought_written = False
            self._fresh_line()

    def _reset(self) -> None:
        self._thinking = self._thought_written = False
        self._titles.clear()
        self._open_tool = None
        self._thinking_turn = False
        self._splitter = SegmentSplitter()
        self._tracker = BlockTracker()
        self._block = None
        self._collapsed.clear()

    def _start_spinner(self) -> None:
        # Only at the start of a line (the spinner line is erased and the cursor returns there) and never
        # over a question the approver is asking.
        if self._spinner is not None and self._out.at_line_start and _GATE.open_prompts == 0:
            block = self._block
            self._spinner.start(_WORKING if block is None else reasoning_label(block.tool_calls, block.failed))

    def _stop_spinner(self) -> None:
        if self._spinner is not None:
            self._spinner.stop()

    def _pause(self) -> None:
        self._stop_spinner()
        self._out.hold()

    def _resume(self) -> None:
        self._out.release()
        if self._block is not None:
            self._start_spinner()  # the open block's line is the spinner's: show it again after the question


class JsonLinesRenderer:
    """Prints each event as one JSON object per line (see :func:`event_to_json`), flushed per line."""

    def __init__(self, out: TextIO) -> None:
        self._out = out

    async def __call__(self, event: Event) -> None:
        """Print one event."""
        self._out.write(json.dumps(event_to_json(event), ensure_ascii=False) + "\n")
        self._out.flush()


def event_to_json(event: Event) -> dict[str, Any]:
    """``{"type": event.kind, **fields}`` with every dataclass field of the event made JSON-ready: paths
    as strings, datetimes as ISO 8601, nested dataclasses (usage, diffs, locations) as objects, tuples as
    lists. Generic over the event classes, so a new event or field needs no code here."""
    return {"type": event.kind, **_jsonable(event)}


def _jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_jsonable(v) for v in value]
    return value


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
