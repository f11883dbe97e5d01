"""One pydantic-ai agent run, translated into the brain's events as it happens.

``drive`` walks the run's nodes: a model request streams its text and thinking parts as ``TextDelta`` and
``ThoughtDelta`` (or, without streaming, sends each response's parts whole once it has arrived); a tool pass
reports each call as ``ToolCallStarted`` and ``ToolCallFinished``. It knows nothing of sessions: the caller sets
the run up (history, limits, settings) and keeps the state. User turns and special turns both run through it.

A provider cannot make a turn lie, hang or swell here: a streamed response that ends without saying why it
finished (no finish reason: the connection was cut), a stream that sends nothing for ``idle_timeout`` seconds
and one whose text passes :data:`RESPONSE_MAX_CHARS` all end the run with a ``ModelError`` saying so; the text
already streamed stays sent, so the failed turn keeps it, followed by the error.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

from codling.brain.events import Event, PlanUpdated, TextDelta, ThoughtDelta, ToolCallStarted, Usage
from codling.brain.failures import describe_failure
from codling.brain.spend import usage_of
from codling.brain.turns import args_dict, plan_of, stop_reason, tool_finished
from codling.errors import ModelError
from codling.text import clean_text
from codling.tools.deps import ToolDeps
from codling.vocabulary import StopReason


async def drive(
    run: Any,
    turn_id: str,
    send: Callable[[Event], None],
    deps: ToolDeps,
    first_input: Callable[[int], None] = lambda _tokens: None,
    *,
    stream: bool = True,
    idle_timeout: float | None = None,
) -> tuple[StopReason, Usage]:
    """Drive ``run`` (an ``AgentRun`` from ``Agent.iter``) to its end, sending its events, and return how it
    stopped and its usage; a run that hits its request limit ends with ``max_turn_requests``, one stopped by its
    spending cap (``brain/spend_cap.py``) with ``max_cost``. ``first_input``
    gets the input tokens of the first response as soon as it arrives (when the provider reports them). With
    ``stream=False`` each model request is made without streaming and its response is sent whole. A streamed
    response that goes ``idle_timeout`` seconds without an event, or ends without a finish reason, is an error."""
    from pydantic_ai import Agent
    from pydantic_ai.exceptions import ModelAPIError, ModelTimeoutError, UsageLimitExceeded

    driver = _Driver(turn_id, send, deps, first_input, idle_timeout)
    try:
        async for node in run:
            if Agent.is_model_request_node(node) and stream:
                await driver.streamed_request(node, run.ctx)
            elif Agent.is_call_tools_node(node):
                if not stream:
                    driver.whole_response(node.model_response)
                await driver.tool_calls(node, run.ctx)
    except UsageLimitExceeded as e:
        from codling.brain.spend_cap import CostLimitReached

        driver.stop = "max_cost" if isinstance(e, CostLimitReached) else "max_turn_requests"
    except ModelTimeoutError as e:
        if e.phase not in ("read", None) or idle_timeout is None:
            raise
        raise ModelError(stalled(idle_timeout)) from e
    except ModelAPIError as e:
        if _ended_unfinished(e):
            raise ModelError(CUT_OFF) from e
        raise
    return driver.stop, usage_of(run.usage)


class _Driver:
    """What one run's walk keeps between its nodes (how the last response stopped, how many have arrived), and
    one method per kind of node."""

    def __init__(
        self,
        turn_id: str,
        send: Callable[[Event], None],
        deps: ToolDeps,
        first_input: Callable[[int], None],
        idle_timeout: float | None,
    ) -> None:
        self.turn_id, self.send, self.deps = turn_id, send, deps
        self.first_input, self.idle_timeout = first_input, idle_timeout
        self.stop: StopReason = "end_turn"
        self.responses = 0

    def answered(self, response: Any) -> None:
        """A response arrived whole: it says how the run stops so far; the first one's input tokens are told."""
        self.stop = stop_reason(response.finish_reason)
        if self.responses == 0 and response.usage.input_tokens:
            self.first_input(response.usage.input_tokens)
        self.responses += 1

    async def streamed_request(self, node: Any, ctx: Any) -> None:
        """A model request, streamed: its text and thinking sent as they come, within the size and idle limits."""
        from pydantic_ai.exceptions import ModelAPIError, ModelTimeoutError

        async with node.stream(ctx) as events:
            streamed_chars = 0
            try:
                async for ev in _paced(events, self.idle_timeout):
                    if (streamed := _streamed(self.turn_id, ev)) is not None:
                        streamed_chars += len(streamed.text)
                        if streamed_chars > RESPONSE_MAX_CHARS:
                            raise ModelError(TOO_LONG)
                        self.send(streamed)
            except ModelAPIError as e:
                if streamed_chars == 0 or isinstance(e, ModelTimeoutError) or _ended_unfinished(e):
                    raise
                raise ModelError(broke_off(e)) from e
        _clean_parts(events.response)
        if events.response.finish_reason is None and events.response.provider_name is not None:
            raise ModelError(CUT_OFF)
        self.answered(events.response)

    def whole_response(self, response: Any) -> None:
        """A model request made without streaming: it ran as the run advanced, and its response arrives with the
        tool pass that follows; its parts are sent whole."""
        _clean_parts(response)
        self.answered(response)
        for part in response.parts:
            if (whole := _whole(self.turn_id, part)) is not None:
                self.send(whole)

    async def tool_calls(self, node: Any, ctx: Any) -> None:
        """A tool pass: each call sent as it starts and as it finishes (with the plan a plan call set)."""
        from pydantic_ai.messages import FunctionToolCallEvent, FunctionToolResultEvent

        async with node.stream(ctx) as tool_events:
            async for ev in tool_events:
                if isinstance(ev, FunctionToolCallEvent):
                    self.send(tool_started(self.turn_id, ev.part, self.deps))
                elif isinstance(ev, FunctionToolResultEvent):
                    self.send(tool_finished(self.turn_id, ev.part))
                    if (plan := plan_of(ev.part)) is not None:
                        self.send(PlanUpdated(self.turn_id, plan))


RESPONSE_MAX_CHARS = 1_048_576
"""The most text (reply and thinking) one streamed response may bring: far past any real answer (a model's
output limit is ~128k tokens, ~500k characters). Past it the stream is stopped, so a provider gone wrong
cannot make codling hold, record and re-process tens of megabytes (a 50 MB reply held every session up 12 s
and made history.jsonl 50 MB)."""

TOO_LONG = (
    f"The model's reply passed {RESPONSE_MAX_CHARS:,} characters, so codling stopped it there; what arrived is "
    "kept above. Ask for less at once, or for long output to be written to a file."
)

CUT_OFF = (
    "The model provider's stream was cut off before the reply was finished (the provider never said it was "
    "complete), so the reply above is incomplete. Ask again to continue."
)


def _ended_unfinished(e: Exception) -> bool:
    """Whether ``e`` is a stream that ended without a finish reason: pydantic-ai's OpenAI chat stream raises
    exactly this when the profile requires one (llm/providers.py asks for it)."""
    from pydantic_ai.exceptions import ModelAPIError

    return type(e) is ModelAPIError and "without a `finish_reason`" in e.message


def broke_off(e: Exception) -> str:
    """The error of a provider that failed after its reply had begun (an ``error`` event mid-stream, a dropped
    connection): not retried, since the user has seen part of the reply already."""
    from pydantic_ai.exceptions import ModelConnectionError

    if isinstance(e, ModelConnectionError):
        failure = f"The connection to the model provider for {e.model_name} was lost ({e.message.rstrip('.')})"
    else:
        failure = describe_failure(e)
    return f"{failure}, partway through the reply: what arrived is kept above, incomplete. Ask again to continue."


def stalled(idle_timeout: float) -> str:
    """The error of a provider that went silent for ``idle_timeout`` seconds."""
    return (
        f"No data from the model provider for {idle_timeout:g} s, so the reply was stopped; what arrived before "
        "is kept above. Ask again to continue (stream_idle_timeout in config.toml sets how long codling waits)."
    )


async def _paced(events: Any, idle_timeout: float | None) -> AsyncIterator[Any]:
    """The stream's events; a ``ModelError`` once ``idle_timeout`` seconds pass without the next one."""
    iterator = aiter(events)
    while True:
        try:
            async with asyncio.timeout(idle_timeout) as deadline:
                ev = await anext(iterator)
        except StopAsyncIteration:
            return
        except TimeoutError as e:
            if idle_timeout is None or not deadline.expired():
                raise
            raise ModelError(stalled(idle_timeout)) from e
        yield ev


def _streamed(turn_id: str, ev: Any) -> TextDelta | ThoughtDelta | None:
    """The text or thought delta a model-stream event carries (a part starting with text, or more text)."""
    from pydantic_ai.messages import (
        PartDeltaEvent,
        PartStartEvent,
        TextPart,
        TextPartDelta,
        ThinkingPart,
        ThinkingPartDelta,
    )

    piece: Any
    if isinstance(ev, PartStartEvent):
        piece, text = ev.part, getattr(ev.part, "content", None)
    elif isinstance(ev, PartDeltaEvent):
        piece, text = ev.delta, getattr(ev.delta, "content_delta", None)
    else:
        return None
    if not text:
        return None
    if isinstance(piece, TextPart | TextPartDelta):
        return TextDelta(turn_id, clean_text(text))
    if isinstance(piece, ThinkingPart | ThinkingPartDelta):
        return ThoughtDelta(turn_id, clean_text(text))
    return None


def _clean_parts(response: Any) -> None:
    """Clean the text of a provider's response in place, once, as it arrives: a lone surrogate in it would
    make every later request of the session fail to encode (the run's messages hold this very response)."""
    from pydantic_ai.messages import TextPart, ThinkingPart

    for part in response.parts:
        if isinstance(part, TextPart | ThinkingPart):
            part.content = clean_text(part.content)


def _whole(turn_id: str, part: Any) -> TextDelta | ThoughtDelta | None:
    """A whole response part (from a request made without streaming) as one text or thought delta."""
    from pydantic_ai.messages import TextPart, ThinkingPart

    if isinstance(part, TextPart) and part.content:
        return TextDelta(turn_id, part.content)
    if isinstance(part, ThinkingPart) and part.content:
        return ThoughtDelta(turn_id, part.content)
    return None


def tool_started(turn_id: str, part: Any, deps: ToolDeps) -> ToolCallStarted:
    """The event for a tool call the model made (``part`` is pydantic-ai's ``ToolCallPart``)."""
    from codling.tools.mcp.mcp_toolset import describe_any  # imports pydantic-ai, which a turn has loaded already

    args = args_dict(part)
    info = describe_any(part.tool_name, args, deps)
    return ToolCallStarted(
        turn_id=turn_id,
        call_id=part.tool_call_id,
        tool_name=part.tool_name,
        title=info.title,
        tool_kind=info.kind,
        raw_input=args,
        locations=info.locations,
    )
