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

    stop: StopReason = "end_turn"
    first_input: int | None = None
    events: Any
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
