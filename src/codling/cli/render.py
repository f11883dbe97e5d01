"""Terminal output for ``codling run``: observers of the brain's event stream.

:class:`TerminalRenderer` draws a turn for people (streamed text, thoughts, one line per tool call, diffs,
errors, a spinner while the model is thinking, reasoning blocks collapsed); what scripts get (``--json``, the
last message) is ``cli/script_output.py``'s. The approver (``cli/approve.py``) shares a :class:`PromptGate` with the
renderer so that a permission question is never overdrawn by a spinner or by a tool line. The drawing itself
(styled writer, diffs, the pieces of a turn) is in ``cli/draw.py``, shared with ``codling sessions show`` and
the approver.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO, assert_never

from codling.brain.context import compaction
from codling.brain.events import (
    CompactionStarted,
    ContextCompacted,
    ContextWarning,
    Event,
    McpServerNotice,
    McpServersStarting,
    PlanUpdated,
    ProviderRetrying,
    Rewound,
    SessionTitled,
    SettingsChanged,
    SpecialTurnPersisted,
    TextDelta,
    ThoughtDelta,
    ToolCallFinished,
    ToolCallNote,
    ToolCallRunning,
    ToolCallStarted,
    ToolCallTerminal,
    TurnEnded,
    TurnFailed,
    TurnStarted,
    UsageUpdated,
)
from codling.brain.reasoning import BlockTracker, SegmentSplitter
from codling.cli.draw import (
    StyledWriter,
    compact_thought,
    is_terminal,
    one_line,
    reasoning_label,
    write_diff,
    write_error,
    write_plan,
    write_reasoning,
    write_stop_note,
    write_tool_result,
    write_tool_status,
    write_tool_title,
)
from codling.cli.markdown import MarkdownBlocks
from codling.cli.spinner import WORKING, Spinner
from codling.tools.approval import approved_note

# -- live rendering ----------------------------------------------------------------------------------------------


class PromptGate:
    """Lets a question to the user (the approver) pause the terminal renderers drawing on the same terminal.

    Events reach a renderer through the session's queue, so a tool line or a parallel tool's result may be
    drawn while the user is typing an answer, and a spinner may be running when the question appears. While a
    prompt is open every renderer of the gate has its spinner stopped and its output held, written when it
    closes. One gate serves one terminal: ``cli/oneshot.terminal_views`` gives its renderer and its approver the
    same one.
    """

    def __init__(self) -> None:
        self._open_prompts = 0
        self._renderers: list[TerminalRenderer] = []

    @property
    def is_open(self) -> bool:
        """Whether a question is being asked."""
        return self._open_prompts > 0

    def add(self, renderer: TerminalRenderer) -> None:
        """Let the gate's questions pause ``renderer``."""
        self._renderers.append(renderer)

    @contextmanager
    def prompting(self) -> Iterator[bool]:
        """Hold the renderers' output and stop their spinners while the user is asked something.

        Yields whether some renderer's output stopped mid-line, so the question can start on a fresh line.
        """
        mid_line = any(not r.at_line_start for r in self._renderers)
        self._open_prompts += 1
        for renderer in self._renderers:
            renderer._pause()
        try:
            yield mid_line
        finally:
            self._open_prompts -= 1
            if self._open_prompts == 0:
                for renderer in self._renderers:
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
    ``interactive`` shows a spinner with the time waited on ``err`` (or ``out``) while the model or a tool works:
    in colour with ``color``, plain without it (``NO_COLOR`` still shows progress).
    A finished command shows its exit status and its last output lines (all of them if ``verbose``), a
    delegate its steps and report.
    ``gate`` is the :class:`PromptGate` of the terminal (the approver asking on it holds the same one), so no
    tool line or spinner is drawn over a question; without one, the renderer has a gate of its own.

    In a thinking turn (``TurnStarted.thinking``) each reasoning block (see :mod:`codling.brain.reasoning`) is
    collapsed into one ``reasoning (N tool calls)`` line: the thoughts and the tool lines inside the block are
    not printed, and neither is the diff of an edit made inside it (the edit is one of the N calls). A call
    inside a block that fails is counted (``reasoning (3 tool calls, 1 failed)``). Interactive, the line is the
    spinner's label while the block is open, its count updated in place; the final line is printed when the
    block closes, which is also the only time it is printed otherwise. A call of a block that finishes only after
    its block closed (parallel calls) prints a tool line if it failed, so the failure is not lost. Tools outside
    blocks, text, errors and non-thinking turns are drawn as they come.
    """

    def __init__(
        self,
        out: TextIO,
        *,
        err: TextIO | None = None,
        color: bool,
        interactive: bool,
        verbose: bool = False,
        shown_diffs: set[str] | None = None,
        markdown: bool = True,
        gate: PromptGate | None = None,
    ) -> None:
        self._out = StyledWriter(out, color=color)
        self._verbose = verbose
        self._shown_diffs = shown_diffs if shown_diffs is not None else set()
        """Calls whose diff the user saw when allowing them (``TerminalApprover``): not drawn twice."""
        self._markdown = MarkdownBlocks() if color and markdown else None
        """Styled, the reply's text is drawn as rendered markdown, a block at a time (plain: as it streams)."""
        self._blocks_drawn = False
        """Whether a markdown block of the current text segment was drawn (the next one gets a blank line)."""
        # Notes about the provider (retry waits) go to stderr, so a piped answer on stdout stays the answer.
        self._notes = self._out if err is None else StyledWriter(err, color=color and is_terminal(err))
        self._color = color
        spinner_stream = err if err is not None and is_terminal(err) else out
        self._spinner = Spinner(spinner_stream, color=color) if interactive else None
        self._thinking = False
        self._thought_written = False
        self._titles: dict[str, str] = {}  # call id -> title, for tool calls still running
        self._open_tool: str | None = None  # the call whose title ends the current line
        self._thinking_turn = False
        self._splitter = SegmentSplitter()
        self._tracker = BlockTracker()
        self._block: _OpenBlock | None = None
        self._collapsed: dict[str, str] = {}  # call id -> title, for calls of blocks already closed
        self._gate = gate if gate is not None else PromptGate()
        self._gate.add(self)

    @property
    def at_line_start(self) -> bool:
        """Whether the renderer's output ends with a newline (or is empty)."""
        return self._out.at_line_start

    async def __call__(self, event: Event) -> None:
        """Draw one event (which kinds are drawn is ``brain/event_contract.py``'s ``drawn``)."""
        match event:
            case TurnStarted():
                self._turn_started(event)
            case TextDelta():
                self._text_delta(event)
            case ThoughtDelta():
                self._thought_delta(event)
            case ToolCallStarted():
                self._tool_call_started(event)
            case ToolCallFinished():
                self._tool_call_finished(event)
            case PlanUpdated():
                self._plan_updated(event)
            case CompactionStarted() | ContextCompacted():
                self._compaction(event)
            case TurnFailed() | TurnEnded():
                self._turn_over(event)
            case ProviderRetrying() | McpServersStarting() | ContextWarning() | McpServerNotice():
                self._aside(event)
            case (
                ToolCallNote()
                | ToolCallTerminal()
                | ToolCallRunning()
                | UsageUpdated()
                | SettingsChanged()
                | SessionTitled()
                | SpecialTurnPersisted()
                | Rewound()
            ):
                # An editor's view of a running call (the terminal shows the call's line and its result), nothing
                # to draw (the spinner keeps going), or not part of a turn (a one-shot run shows neither).
                pass
            case _:
                assert_never(event)

    def close(self) -> None:
        """Stop the spinner, if any; call when the turn is over or interrupted (an open block is drawn)."""
        self._flush_markdown()
        if self._tracker.end():
            self._close_block()
        self._stop_spinner()

    # -- reasoning blocks ----------------------------------------------------------------------------------

    def _reasoning(self, event: Event) -> bool:
        """Place an event of a thinking turn in its block; whether it is collapsed (drawn by the block alone)."""
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

    def _turn_piece(self, event: Event) -> bool:
        """Close what ``event`` ends (the text segment's last block, a line of thoughts, the spinner) and place it
        in its reasoning block; whether it is drawn on its own (False: the block's line stands for it)."""
        if not isinstance(event, TextDelta):
            self._flush_markdown()  # the text segment is over: its last block is drawn before what comes next
        if self._thinking_turn and self._reasoning(event):
            return False
        if not (isinstance(event, TextDelta) and self._markdown is not None):
            self._stop_spinner()  # (markdown text keeps it going until a block is drawn)
        if not isinstance(event, ThoughtDelta):
            self._end_thought()
        return True

    def _turn_started(self, event: TurnStarted) -> None:
        self._flush_markdown()
        self._stop_spinner()
        self._end_thought()
        self.close()  # a block left open by a turn that never ended is drawn before the next turn
        self._reset()
        self._thinking_turn = event.thinking
        self._start_spinner()

    def _text_delta(self, event: TextDelta) -> None:
        if not self._turn_piece(event):
            return
        if self._markdown is not None:
            self._markdown_text(event)
        else:
            self._text(event)

    def _thought_delta(self, event: ThoughtDelta) -> None:
        if self._turn_piece(event):
            self._thought(event)

    def _tool_call_started(self, event: ToolCallStarted) -> None:
        if self._turn_piece(event):
            self._tool_started(event)

    def _tool_call_finished(self, event: ToolCallFinished) -> None:
        if self._turn_piece(event):
            self._tool_finished(event)
            self._start_spinner()  # for the calls still running, if any (never over a question)

    def _plan_updated(self, event: PlanUpdated) -> None:
        if not self._turn_piece(event):
            return
        self._fresh_line()
        write_plan(self._out, event.steps)
        self._open_tool = None
        if not self._titles:  # a tool still running (or asking) must not be overdrawn
            self._start_spinner()

    def _compaction(self, event: CompactionStarted | ContextCompacted) -> None:
        if not self._turn_piece(event):
            return
        if isinstance(event, ContextCompacted):
            self._out.end_line()
            title = compaction.title(event.tokens_before, event.tokens_after, event.fallback, event.note)
            write_tool_title(self._out, title)
            self._out.line()
        self._start_spinner()  # (the compaction's wait, or the turn's going on)

    def _turn_over(self, event: TurnFailed | TurnEnded) -> None:
        self._flush_markdown()
        if self._thinking_turn and self._tracker.end():
            self._close_block()
        self._stop_spinner()
        self._end_thought()
        if isinstance(event, TurnFailed):
            write_error(self._out, event.message)
            self._open_tool = None
        else:
            self._ended(event)

    def _aside(self, event: ProviderRetrying | McpServersStarting | ContextWarning | McpServerNotice) -> None:
        """A dim note beside the reply: a wait's start (the provider's retry, MCP servers starting: a failure has
        a notice of its own), a warning about the context, a server that failed."""
        self._flush_markdown()
        match event:
            case ProviderRetrying() | McpServersStarting():
                if event.status == "waiting":
                    self._note(event.title)
            case ContextWarning():
                self._note(event.message)
            case McpServerNotice():
                self._note(event.message + (f"\n{event.detail}" if event.detail else ""))
            case _:
                assert_never(event)

    def _text(self, event: TextDelta) -> None:
        if self._open_tool is not None:
            self._fresh_line()
        self._out.write(event.text)

    def _markdown_text(self, event: TextDelta) -> None:
        """Streamed text, drawn as rendered markdown block by block as each block completes; until then the
        spinner says the model is still writing."""
        assert self._markdown is not None
        blocks = self._markdown.feed(event.text)
        if blocks:
            self._stop_spinner()
            self._end_thought()
            for block in blocks:
                self._markdown_block(block)
        if self._markdown.pending:
            self._start_spinner()

    def _markdown_block(self, block: str) -> None:
        if self._open_tool is not None:
            self._fresh_line()
            self._open_tool = None
        if self._blocks_drawn:
            self._out.write("\n")  # the blank line that separated the blocks in the source
        self._out.markdown(block)
        self._blocks_drawn = True

    def _flush_markdown(self) -> None:
        if self._markdown is None:
            return
        rest = self._markdown.flush()
        if rest:
            self._stop_spinner()
            self._markdown_block(rest)
        self._blocks_drawn = False

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
        if self._spinner is not None and not self._gate.is_open:
            # Live, a running call is the spinner's label, with the time it has taken (a 30 s command is not a
            # still screen); its line, with the outcome, is drawn when it ends.
            self._open_tool = None
            self._start_spinner()
            return
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
        if event.approved_by is not None:
            self._out.line(f"  {approved_note(event.approved_by)}", "dim")
        self._open_tool = None
        write_tool_result(self._out, event, verbose=self._verbose)
        if event.call_id in self._shown_diffs:
            self._shown_diffs.discard(event.call_id)
        elif event.diff is not None:
            write_diff(self._out, event.diff)

    def _note(self, text: str) -> None:
        """One dim line beside the reply: the provider refused and when the request goes out again, or a
        warning about the context."""
        self._stop_spinner()
        if self._notes is self._out or is_terminal(self._out.stream):
            self._fresh_line()  # on a shared screen, the note must not land in the middle of the reply
        self._notes.end_line()
        self._notes.line(text, "dim")
        self._start_spinner()

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
        if self._spinner is not None and self._out.at_line_start and not self._gate.is_open:
            block = self._block
            if block is not None:
                self._spinner.start(reasoning_label(block.tool_calls, block.failed))
            else:  # the latest call still running, if any
                self._spinner.start(next(reversed(self._titles.values()), WORKING))

    def _stop_spinner(self) -> None:
        if self._spinner is not None:
            self._spinner.stop()

    def _pause(self) -> None:
        self._flush_markdown()  # what the model wrote before the question is shown before it
        self._stop_spinner()
        self._out.hold()

    def _resume(self) -> None:
        self._out.release()
        if self._block is not None or self._titles:
            # The open block's line, or the running call, is the spinner's: show it again after the question.
            self._start_spinner()
