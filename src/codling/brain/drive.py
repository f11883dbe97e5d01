"""One pydantic-ai agent run, translated into the brain's events as it happens.

``drive`` walks the run's nodes: a model request streams its text and thinking parts as ``TextDelta`` and
``ThoughtDelta``; a tool pass reports each call as ``ToolCallStarted`` and ``ToolCallFinished``. It knows
nothing of sessions: the caller sets the run up (history, limits, settings) and keeps the state.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from codling.brain.events import Event, StopReason, TextDelta, ThoughtDelta, ToolCallStarted, Usage
from codling.brain.turns import args_dict, stop_reason, tool_finished
from codling.tools.toolset import describe_call
from codling.tools.workspace import Workspace


@dataclass(frozen=True)
class RunOutcome:
    """How a run ended: its stop reason, its usage, and the input tokens its first request reported (0 when
    the provider reported none)."""

    stop: StopReason
    usage: Usage
    first_input_tokens: int


async def drive(run: Any, turn_id: str, send: Callable[[Event], None], workspace: Workspace) -> RunOutcome:
    """Drive ``run`` (an ``AgentRun`` from ``Agent.iter``) to its end, sending its events; a run that hits its
    request limit ends with ``max_turn_requests``."""
    from pydantic_ai import Agent
    from pydantic_ai.exceptions import UsageLimitExceeded
    from pydantic_ai.messages import FunctionToolCallEvent, FunctionToolResultEvent

    stop: StopReason = "end_turn"
    first_input: int | None = None
    events: Any
    try:
        async for node in run:
            if Agent.is_model_request_node(node):
                async with node.stream(run.ctx) as events:
                    async for ev in events:
                        if (streamed := _streamed(turn_id, ev)) is not None:
                            send(streamed)
                response = events.response
                stop = stop_reason(response.finish_reason)
                if first_input is None:
                    first_input = response.usage.input_tokens or 0
            elif Agent.is_call_tools_node(node):
                async with node.stream(run.ctx) as tool_events:
                    async for ev in tool_events:
                        if isinstance(ev, FunctionToolCallEvent):
                            send(tool_started(turn_id, ev.part, workspace))
                        elif isinstance(ev, FunctionToolResultEvent):
                            send(tool_finished(turn_id, ev.part))
    except UsageLimitExceeded:
        stop = "max_turn_requests"
    usage = run.usage
    return RunOutcome(stop, Usage(usage.input_tokens, usage.output_tokens, usage.requests), first_input or 0)


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
        return TextDelta(turn_id, text)
    if isinstance(piece, ThinkingPart | ThinkingPartDelta):
        return ThoughtDelta(turn_id, text)
    return None


def tool_started(turn_id: str, part: Any, workspace: Workspace) -> ToolCallStarted:
    """The event for a tool call the model made (``part`` is pydantic-ai's ``ToolCallPart``)."""
    args = args_dict(part)
    info = describe_call(part.tool_name, args, workspace)
    return ToolCallStarted(
        turn_id=turn_id,
        call_id=part.tool_call_id,
        tool_name=part.tool_name,
        title=info.title,
        tool_kind=info.kind,
        raw_input=args,
        locations=info.locations,
    )
