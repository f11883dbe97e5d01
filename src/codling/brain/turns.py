"""Turn bookkeeping shared by the live turn loop and by restoring a session from recorded events."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, assert_never

from codling.brain.builtin_turns import prompt_text
from codling.brain.context.digests import tool_call_digest
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
from codling.brain.prompt import PromptBlock, TextBlock, render_prompt
from codling.brain.reasoning import SegmentSplitter, join_segments
from codling.brain.slash import PROMPT_COMMANDS, parse_command
from codling.tools.base import ToolReport
from codling.vocabulary import PlanStep, StopReason

if TYPE_CHECKING:  # pydantic-ai is imported only once a turn runs (the chat imports this module)
    from pydantic_ai.messages import ToolReturnPart

ENDING_NOTES = {
    "cancelled": "[The user cancelled this turn.]",
    "interrupted": "[This turn was interrupted before it finished.]",
}

Ending = Literal["cancelled", "interrupted"]


def turn_text(blocks: tuple[PromptBlock, ...]) -> str:
    """The user's side of a turn as the history keeps it: the prompt rendered, or a prompt command's prompt."""
    command = command_of(blocks)
    if command is not None and command[0] in PROMPT_COMMANDS:
        return prompt_text(command[0])
    return render_prompt(blocks)


REPLY_MAX_CHARS = 262_144
"""The most characters of the model's text in one turn the conversation keeps (what later requests carry back
to it and what is counted): a 10 MB reply is shown and recorded whole, but carried back cut (issue 29 D1)."""


def kept_reply(text: str) -> str:
    """The model's text as the history keeps it: whole, or past :data:`REPLY_MAX_CHARS` its head and tail
    around a note saying how much was cut."""
    if len(text) <= REPLY_MAX_CHARS:
        return text
    head = REPLY_MAX_CHARS * 3 // 4
    tail = REPLY_MAX_CHARS - head
    note = (
        f"\n[cut: {len(text) - head - tail:,} characters more of this reply were here; codling keeps at most "
        f"{REPLY_MAX_CHARS:,} characters of a reply in the conversation. Write long output to a file instead.]\n"
    )
    return text[:head] + note + text[-tail:]


@dataclass
class TurnLog:
    """What a turn produced so far; becomes the history entry whatever way the turn ends."""

    turn_number: int
    user_text: str
    events: list[Event] = field(default_factory=list)
    segments: list[list[str]] = field(default_factory=list)
    """The turn's text deltas, one list per segment: a run of text between thoughts and tool calls (what the
    model said at one step)."""
    calls: dict[str, ToolCallStarted] = field(default_factory=dict)
    finished: dict[str, ToolCallFinished] = field(default_factory=dict)
    error: str | None = None
    context: str = ""
    """The context block the turn's request carried before the prompt (the last attempt's; "" for none)."""
    _splitter: SegmentSplitter = field(default_factory=SegmentSplitter, repr=False)

    def apply(self, event: Event) -> None:
        """Take note of one event of the turn."""
        self.events.append(event)
        starts = self._splitter.feed(event)
        match event:
            case TextDelta():
                if starts == "text" or not self.segments:
                    self.segments.append([])
                self.segments[-1].append(event.text)
            case ToolCallStarted():
                self.calls[event.call_id] = event
            case ToolCallFinished():
                self.finished[event.call_id] = event
            case TurnFailed():
                self.error = event.message
            case TurnEnded() if event.context:
                self.context = event.context
            case (
                TurnStarted()
                | ThoughtDelta()
                | ToolCallTerminal()
                | ToolCallNote()
                | ToolCallRunning()
                | PlanUpdated()
                | CompactionStarted()
                | ContextCompacted()
                | ProviderRetrying()
                | ContextWarning()
                | McpServersStarting()
                | McpServerNotice()
                | SettingsChanged()
                | UsageUpdated()
                | SpecialTurnPersisted()
                | SessionTitled()
                | TurnEnded()
                | Rewound()
            ):
                pass  # the text history keeps none of them
            case _:
                assert_never(event)

    @property
    def text(self) -> str:
        """Everything the model said in the turn, each step's text a paragraph of its own (never glued to the
        next: "…at all).Fixed.")."""
        return join_segments("".join(segment) for segment in self.segments)

    def open_calls(self) -> list[ToolCallStarted]:
        """Tool calls that started and never finished."""
        return [s for cid, s in self.calls.items() if cid not in self.finished]

    def reply(self, ending: Ending | None = None) -> str:
        """The assistant's side of the turn as history text: reply, tool digests, error, ending note."""
        parts = [kept_reply(self.text)]
        if self.calls:
            lines = [tool_call_digest(s, self.finished.get(cid)) for cid, s in self.calls.items()]
            parts.append("[Tool calls in this turn]\n" + "\n".join(lines))
        if self.error:
            parts.append(f"[Error] {self.error}")
        if ending is not None:
            parts.append(ENDING_NOTES[ending])
        return "\n\n".join(p for p in parts if p) or "(no reply)"


def typed_text(blocks: tuple[PromptBlock, ...]) -> str:
    """What the user typed in a prompt (its text blocks; attachments left out)."""
    return "\n\n".join(b.text for b in blocks if isinstance(b, TextBlock))


def command_of(blocks: tuple[PromptBlock, ...]) -> tuple[str, str] | None:
    """The slash command a prompt consists of: a single text block such as "/compact keep the API notes"."""
    if len(blocks) != 1 or not isinstance(blocks[0], TextBlock):
        return None
    return parse_command(blocks[0].text)


def args_dict(part: Any) -> dict[str, Any]:
    """A tool call's arguments as a dict, whatever the model sent."""
    try:
        args = part.args_as_dict()
    except (ValueError, TypeError, json.JSONDecodeError):
        return {"_raw": part.args}
    return args if isinstance(args, dict) else {"_raw": args}


def tool_finished(turn_id: str, part: ToolReturnPart) -> ToolCallFinished:
    """A ToolCallFinished for pydantic-ai's result part (``outcome="retried"`` for arguments that did not
    validate, failed)."""
    report = getattr(part, "metadata", None)
    if isinstance(report, ToolReport):
        output = report.output
        text = output.text if output is not None and not report.failed else report.error or ""
        return ToolCallFinished(
            turn_id=turn_id,
            call_id=part.tool_call_id,
            tool_name=part.tool_name,
            status="failed" if report.failed else "completed",
            text=text,
            diff=output.diff if output else None,
            locations=output.locations if output else (),
            summary=output.summary if output else "",
            terminal_id=output.terminal_id if output else None,
            changed=output.changed if output else (),
            ended_by="rejected" if report.rejected else None,
            shown=output.shown if output and not report.failed else None,
            checkpoint=report.checkpoint,
            approved_by=report.approved_by,
        )
    content = part.content if isinstance(part.content, str) else part.model_response_str()
    failed = part.outcome != "success"
    return ToolCallFinished(turn_id, part.tool_call_id, part.tool_name, "failed" if failed else "completed", content)


def plan_of(part: Any) -> tuple[PlanStep, ...] | None:
    """The plan a tool result set (``update_plan``), if any."""
    report = getattr(part, "metadata", None)
    if isinstance(report, ToolReport) and report.output is not None and not report.failed:
        return report.output.plan
    return None


def stop_reason(finish_reason: str | None) -> StopReason:
    """ACP's stop reason for a model's finish reason."""
    if finish_reason == "length":
        return "max_tokens"
    if finish_reason == "content_filter":
        return "refusal"
    return "end_turn"
