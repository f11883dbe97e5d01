"""ConversationSession: runs turns on pydantic-ai and emits the brain's typed events.

``stream(prompt)`` yields a turn's events as they happen; ``run(prompt)`` drives the same loop and returns a
``TurnResult``. Every event also goes, in order, to the session's observers. The turn itself runs in its own
task so that ``cancel()`` can stop it (and the tools it is running) at any await point.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from codling.brain.coalesce import TextCoalescer
from codling.brain.events import (
    Event,
    StopReason,
    TextDelta,
    ThoughtDelta,
    ToolCallFinished,
    ToolCallStarted,
    TurnEnded,
    TurnFailed,
    TurnStarted,
    Usage,
)
from codling.brain.prompt import PromptBlock, TextBlock, prompt_summary, render_prompt, system_prompt
from codling.brain.state import SessionState
from codling.brain.summaries import summarize_tool_call
from codling.config import PermissionMode
from codling.errors import SessionError
from codling.llm.catalog import ModelInfo
from codling.tools.base import ToolReport
from codling.tools.toolset import ToolDeps, build_toolset, describe_call

if TYPE_CHECKING:
    from pydantic_ai import Agent
    from pydantic_ai.models import Model

log = logging.getLogger(__name__)

Observer = Callable[[Event], Awaitable[None]]
"""Receives every event of every turn, in order."""

ModelFactory = Callable[[str], "Model"]

TOOL_RETRIES = 3
"""How often the model may retry a tool call whose arguments did not validate, per tool and turn."""


@dataclass(frozen=True)
class SessionOptions:
    """Bounds and behaviour of the turn loop."""

    max_requests_per_turn: int = 50
    """Model requests one turn may make; reaching it ends the turn with ``max_turn_requests``."""
    run_tools: bool = True
    """Whether the model is offered tools at all."""
    merge_window: float = 0.005
    """Coalescing: while text streams, deltas are merged and delivered at most once per this many seconds;
    the first delta of a run of text is never held (see ``brain/coalesce.py``). 0 merges only what is queued."""
    max_chunk_chars: int = 8192
    """Coalescing: the largest merged text delta."""


@dataclass(frozen=True)
class ToolCallRecord:
    """A tool call as it ended up in a turn."""

    started: ToolCallStarted
    finished: ToolCallFinished | None


@dataclass(frozen=True)
class TurnResult:
    """What ``run()`` returns: the turn's reply, how it ended, and its tool calls."""

    turn_id: str
    text: str
    stop_reason: StopReason
    usage: Usage
    error: str | None = None
    tool_calls: tuple[ToolCallRecord, ...] = ()


_DONE = object()

_ENDING_NOTES = {
    "cancelled": "[The user cancelled this turn.]",
    "interrupted": "[This turn was interrupted before it finished.]",
}


@dataclass
class _TurnLog:
    """What a turn produced so far; becomes the history entry whatever way the turn ends."""

    user_text: str
    text: list[str] = field(default_factory=list)
    calls: dict[str, ToolCallStarted] = field(default_factory=dict)
    finished: dict[str, ToolCallFinished] = field(default_factory=dict)
    error: str | None = None

    def apply(self, event: Event) -> None:
        """Take note of one event of the turn."""
        match event:
            case TextDelta():
                self.text.append(event.text)
            case ToolCallStarted():
                self.calls[event.call_id] = event
            case ToolCallFinished():
                self.finished[event.call_id] = event
            case TurnFailed():
                self.error = event.message

    def reply(self) -> str:
        parts = ["".join(self.text).strip()]
        if self.calls:
            lines = [summarize_tool_call(s, self.finished.get(cid)) for cid, s in self.calls.items()]
            parts.append("[Tool calls in this turn]\n" + "\n".join(lines))
        if self.error:
            parts.append(f"[Error] {self.error}")
        return "\n\n".join(p for p in parts if p)


class ConversationSession:
    """One conversation: its state, its tools, its observers and the turn loop."""

    def __init__(
        self,
        state: SessionState,
        deps: ToolDeps,
        *,
        model_factory: ModelFactory | None = None,
        options: SessionOptions | None = None,
    ) -> None:
        self.state = state
        self.deps = deps
        self.options = options or SessionOptions()
        self._model_factory = model_factory
        self._observers: list[Observer] = []
        self._agent: Agent[ToolDeps, str] | None = None
        self._task: asyncio.Task[None] | None = None
        self._cancel_requested = False

    # -- configuration -------------------------------------------------------------------------------------

    def subscribe(self, observer: Observer) -> Callable[[], None]:
        """Add an observer; returns a function that removes it."""
        self._observers.append(observer)
        return lambda: self._observers.remove(observer)

    def set_mode(self, mode: PermissionMode) -> None:
        """Change the permission mode; applies to the next tool call."""
        self.state.mode = mode
        self.deps.permissions.mode = mode

    def set_model(self, model: ModelInfo) -> None:
        """Switch models; the next turn uses the new one with the same history."""
        self.state.model = model
        self._agent = None

    @property
    def running(self) -> bool:
        """Whether a turn is in progress."""
        return self._task is not None and not self._task.done()

    async def stop(self) -> None:
        """Cancel the running turn, if any, and wait until it has ended."""
        if self._task is not None and not self._task.done():
            self.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    def cancel(self) -> None:
        """Stop the running turn (and its tools); it ends with stop reason ``cancelled``."""
        if self.running:
            assert self._task is not None
            self._cancel_requested = True
            self._task.cancel()

    # -- turns ---------------------------------------------------------------------------------------------

    async def run(self, prompt: str | tuple[PromptBlock, ...]) -> TurnResult:
        """Run one turn to its end and return the result."""
        text: list[str] = []
        calls: dict[str, ToolCallStarted] = {}
        finished: dict[str, ToolCallFinished] = {}
        error: str | None = None
        end: TurnEnded | None = None
        async for event in self.stream(prompt):
            match event:
                case TextDelta():
                    text.append(event.text)
                case ToolCallStarted():
                    calls[event.call_id] = event
                case ToolCallFinished():
                    finished[event.call_id] = event
                case TurnFailed():
                    error = event.message
                case TurnEnded():
                    end = event
        assert end is not None, "every turn ends with TurnEnded"
        records = tuple(ToolCallRecord(s, finished.get(cid)) for cid, s in calls.items())
        return TurnResult(end.turn_id, "".join(text), end.stop_reason, end.usage, error, records)

    async def stream(self, prompt: str | tuple[PromptBlock, ...]) -> AsyncIterator[Event]:
        """Run one turn, yielding its events as they happen (observers see each one first)."""
        if self.running:
            raise SessionError("a turn is already running in this session; cancel it or wait for it to end")
        blocks = (TextBlock(prompt),) if isinstance(prompt, str) else prompt
        queue: asyncio.Queue[Any] = asyncio.Queue()
        self._cancel_requested = False
        self._task = asyncio.create_task(self._turn(blocks, queue.put_nowait))
        coalescer = TextCoalescer(queue, window=self.options.merge_window, max_chars=self.options.max_chunk_chars)
        try:
            while (item := await coalescer.next()) is not _DONE:
                for observer in list(self._observers):
                    await observer(item)
                yield item
        finally:
            if not self._task.done():
                self._cancel_requested = True
                self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    def _get_agent(self) -> Agent[ToolDeps, str]:
        if self._agent is None:
            from pydantic_ai import Agent

            from codling.llm.providers import build_model

            factory = self._model_factory or build_model
            self._agent = Agent(
                factory(self.state.model.id),
                deps_type=ToolDeps,
                instructions=system_prompt(self.state.cwd, self.state.additional_dirs),
                toolsets=[build_toolset()] if self.options.run_tools else [],
                # Models often fix bad tool arguments on a second or third try; the default (1) fails too soon.
                retries=TOOL_RETRIES,
            )
        return self._agent

    async def _turn(self, blocks: tuple[PromptBlock, ...], emit: Callable[[Any], None]) -> None:
        """The turn loop: one pydantic-ai run, translated into brain events."""
        turn_id = uuid.uuid4().hex
        user_text = render_prompt(blocks)
        log_ = _TurnLog(user_text)

        def send(event: Event) -> None:
            log_.apply(event)
            emit(event)

        thinking = self.state.model.thinking
        send(TurnStarted(turn_id, prompt_summary(blocks), thinking, datetime.now(UTC), blocks))
        stop: StopReason = "end_turn"
        usage = Usage()
        try:
            stop, usage = await self._drive(turn_id, user_text, send)
        except asyncio.CancelledError:
            if not self._cancel_requested:
                raise
            stop = "cancelled"
        except Exception as e:
            failure = _describe_failure(e)
            self._close_open_calls(turn_id, log_, "aborted: the turn failed", send)
            send(TurnFailed(turn_id, failure))
            if not _is_expected_failure(e):
                log.exception("turn %s failed", turn_id)
        finally:
            self._record_turn(log_, "cancelled" if stop == "cancelled" else None)
        if stop == "cancelled":
            self._close_open_calls(turn_id, log_, "aborted: the user cancelled the turn", send)
        send(TurnEnded(turn_id, stop, usage, error=log_.error is not None))
        emit(_DONE)

    @staticmethod
    def _close_open_calls(turn_id: str, log_: _TurnLog, reason: str, send: Callable[[Event], None]) -> None:
        """Finish every tool call that started but never finished, so no client shows it running forever."""
        for call_id, started in list(log_.calls.items()):
            if call_id not in log_.finished:
                send(ToolCallFinished(turn_id, call_id, started.tool_name, "failed", reason))

    async def _drive(self, turn_id: str, user_text: str, send: Callable[[Event], None]) -> tuple[StopReason, Usage]:
        from pydantic_ai import Agent
        from pydantic_ai.exceptions import UsageLimitExceeded
        from pydantic_ai.messages import (
            FunctionToolCallEvent,
            FunctionToolResultEvent,
            PartDeltaEvent,
            PartStartEvent,
            TextPart,
            TextPartDelta,
            ThinkingPart,
            ThinkingPartDelta,
        )
        from pydantic_ai.settings import ModelSettings
        from pydantic_ai.usage import UsageLimits

        agent = self._get_agent()
        settings: ModelSettings = {"max_tokens": self.state.model.max_output_tokens}
        if self.state.model.thinking:
            settings["thinking"] = True
        limits = UsageLimits(request_limit=self.options.max_requests_per_turn)
        stop: StopReason = "end_turn"
        async with agent.iter(
            user_text,
            message_history=self.state.history,
            deps=self.deps,
            usage_limits=limits,
            model_settings=settings,
        ) as run:
            try:
                async for node in run:
                    if Agent.is_model_request_node(node):
                        async with node.stream(run.ctx) as events:
                            async for ev in events:
                                if isinstance(ev, PartStartEvent):
                                    part = ev.part
                                    if isinstance(part, TextPart) and part.content:
                                        send(TextDelta(turn_id, part.content))
                                    elif isinstance(part, ThinkingPart) and part.content:
                                        send(ThoughtDelta(turn_id, part.content))
                                elif isinstance(ev, PartDeltaEvent):
                                    delta = ev.delta
                                    if isinstance(delta, TextPartDelta) and delta.content_delta:
                                        send(TextDelta(turn_id, delta.content_delta))
                                    elif isinstance(delta, ThinkingPartDelta) and delta.content_delta:
                                        send(ThoughtDelta(turn_id, delta.content_delta))
                        stop = _stop_reason(events.response.finish_reason)
                    elif Agent.is_call_tools_node(node):
                        async with node.stream(run.ctx) as tool_events:
                            async for ev in tool_events:
                                if isinstance(ev, FunctionToolCallEvent):
                                    send(self._tool_started(turn_id, ev.part.tool_name, ev.part))
                                elif isinstance(ev, FunctionToolResultEvent):
                                    send(_tool_finished(turn_id, ev.part))
            except UsageLimitExceeded:
                stop = "max_turn_requests"
            run_usage = run.usage
        return stop, Usage(run_usage.input_tokens, run_usage.output_tokens, run_usage.requests)

    def _tool_started(self, turn_id: str, name: str, part: Any) -> ToolCallStarted:
        args = _args_dict(part)
        info = describe_call(name, args, self.deps.workspace)
        return ToolCallStarted(
            turn_id=turn_id,
            call_id=part.tool_call_id,
            tool_name=name,
            title=info.title,
            tool_kind=info.kind,
            raw_input=args,
            locations=info.locations,
        )

    def restore(self, events: Iterable[Event]) -> None:
        """Rebuild the text history from a recorded event stream (e.g. read back from history.jsonl).

        Each turn enters the history exactly as it did live; a turn whose end was never recorded (the process
        died) enters it with a note that it was interrupted.
        """
        log_: _TurnLog | None = None
        for event in events:
            if isinstance(event, TurnStarted):
                if log_ is not None:
                    self._record_turn(log_, "interrupted")
                log_ = _TurnLog(render_prompt(event.blocks) if event.blocks else event.prompt)
            elif log_ is not None:
                log_.apply(event)
                if isinstance(event, TurnEnded):
                    self._record_turn(log_, "cancelled" if event.stop_reason == "cancelled" else None)
                    log_ = None
        if log_ is not None:
            self._record_turn(log_, "interrupted")

    def _record_turn(self, log_: _TurnLog, ending: Literal["cancelled", "interrupted"] | None) -> None:
        """Append the turn to the text history (user text, then reply text with tool summaries)."""
        from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart

        reply = log_.reply()
        if ending is not None:
            note = _ENDING_NOTES[ending]
            reply = (reply + "\n\n" if reply else "") + note
        self.state.history.append(ModelRequest(parts=[UserPromptPart(log_.user_text)]))
        self.state.history.append(ModelResponse(parts=[TextPart(reply or "(no reply)")]))
        self.state.turn_count += 1


def _args_dict(part: Any) -> dict[str, Any]:
    try:
        args = part.args_as_dict()
    except (ValueError, TypeError, json.JSONDecodeError):
        return {"_raw": part.args}
    return args if isinstance(args, dict) else {"_raw": args}


def _tool_finished(turn_id: str, part: Any) -> ToolCallFinished:
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
        )
    content = part.content if isinstance(part.content, str) else part.model_response_str()
    failed = getattr(part, "outcome", "success") != "success"
    return ToolCallFinished(turn_id, part.tool_call_id, part.tool_name, "failed" if failed else "completed", content)


def _stop_reason(finish_reason: str | None) -> StopReason:
    if finish_reason == "length":
        return "max_tokens"
    if finish_reason == "content_filter":
        return "refusal"
    return "end_turn"


def _is_expected_failure(e: Exception) -> bool:
    from pydantic_ai.exceptions import AgentRunError

    return isinstance(e, AgentRunError)


def _describe_failure(e: Exception) -> str:
    """A message for the user: what failed, in words, without a traceback."""
    from pydantic_ai.exceptions import ModelAPIError, ModelHTTPError, UnexpectedModelBehavior

    from codling.errors import CodlingError

    if isinstance(e, ModelHTTPError):
        return f"The model provider returned HTTP {e.status_code} for {e.model_name}: {_body_message(e.body)}"
    if isinstance(e, ModelAPIError):
        return f"The model provider failed ({e.model_name}): {e.message}"
    if isinstance(e, UnexpectedModelBehavior):
        return f"The model's response could not be used: {e.message}"
    if isinstance(e, CodlingError):
        return str(e)
    return f"Internal error: {type(e).__name__}: {e}"


def _body_message(body: object) -> str:
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
    return str(body)[:500] if body else "no details"
