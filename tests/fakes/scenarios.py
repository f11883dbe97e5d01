"""Scripted model scenarios on pydantic-ai's FunctionModel.

A ``Script`` is a list of model responses, each a sequence of items (text chunks, thoughts, tool calls, or a
failure). The same script serves streaming and non-streaming requests, and records every request it gets.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ThinkingPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, DeltaThinkingPart, DeltaToolCall, FunctionModel
from pydantic_ai.profiles import ModelProfile

from codling.brain.builtin_turns import prompt_text
from codling.brain.context.layout import CONTEXT_CLOSE
from tests.fakes.deadlines import deadline


@dataclass(frozen=True)
class Say:
    """Reply text, streamed as the given chunks."""

    chunks: tuple[str, ...]

    def __init__(self, *chunks: str) -> None:
        object.__setattr__(self, "chunks", chunks)


@dataclass(frozen=True)
class Think:
    """Visible reasoning."""

    text: str


@dataclass(frozen=True)
class Call:
    """A tool call."""

    tool: str
    args: dict[str, Any]
    call_id: str


@dataclass(frozen=True)
class Fail:
    """The request fails with this exception."""

    error: Exception


@dataclass(frozen=True)
class Wait:
    """Pause mid-response (lets a test cancel while the model is 'thinking')."""

    seconds: float


@dataclass(frozen=True)
class Until:
    """Pause mid-response until the test sets this event (proves text is delivered before the reply ends)."""

    event: asyncio.Event


class Gate(asyncio.Event):
    """An event for ``Until`` that also tells the test when the script got there: ``reached`` is set once the
    model waits on the gate, so the test knows the request is in progress without guessing how long it takes."""

    def __init__(self) -> None:
        super().__init__()
        self.reached = asyncio.Event()

    async def wait(self) -> Literal[True]:
        self.reached.set()
        return await super().wait()

    async def arrival(self, within: float = 10.0) -> None:
        """Wait until the model waits on the gate (a liveness deadline: a test fails rather than hangs)."""
        async with asyncio.timeout(deadline(within)):
            await self.reached.wait()


def user_prompt(text: str) -> str:
    """What the user wrote, from a user message as codling sends it: the text after the turn's context block
    (``<session-context>…</session-context>``, see brain/context/layout.py), or all of it when there is none."""
    _, found, after = text.rpartition(CONTEXT_CLOSE)
    return after.lstrip("\n") if found else text


Item = Say | Think | Call | Fail | Wait | Until
Response = Sequence[Item]


@dataclass
class Script:
    """Model responses in order; after the last, ``fallback`` (if any) answers.

    Title requests (the title special turn, recognised by its instructions) never take a scripted response:
    ``title`` answers them and they are kept apart in ``title_requests``, so a script written for the user's
    turns stays the same whether or not sessions get titles.
    """

    responses: list[Response]
    fallback: Callable[[list[ModelMessage]], Response] | None = None
    title: Response = (Say("Scripted session title"),)
    requests: list[list[ModelMessage]] = field(default_factory=list)
    tools: list[list[str]] = field(default_factory=list)
    """The names of the tools each request in ``requests`` offered."""
    infos: list[AgentInfo] = field(default_factory=list)
    """What else each request in ``requests`` carried besides its messages: instructions, settings."""
    title_requests: list[list[ModelMessage]] = field(default_factory=list)

    def _next(self, messages: list[ModelMessage], info: AgentInfo) -> Response:
        if info.instructions == prompt_text("title"):
            self.title_requests.append(list(messages))
            return self.title
        self.requests.append(list(messages))
        self.tools.append([t.name for t in info.function_tools])
        self.infos.append(info)
        if self.responses:
            return self.responses.pop(0)
        if self.fallback is not None:
            return self.fallback(messages)
        raise AssertionError("the model was called more often than the script allows")

    async def _respond(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        parts: list[Any] = []
        for item in self._next(messages, info):
            match item:
                case Say():
                    parts.append(TextPart("".join(item.chunks)))
                case Think():
                    parts.append(ThinkingPart(item.text))
                case Call():
                    parts.append(ToolCallPart(item.tool, json.dumps(item.args), tool_call_id=item.call_id))
                case Fail():
                    raise item.error
                case Wait():
                    await asyncio.sleep(item.seconds)
                case Until():
                    await item.event.wait()
        return ModelResponse(parts=parts)

    async def _stream(self, messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        index = 0
        for item in self._next(messages, info):
            match item:
                case Say():
                    for chunk in item.chunks:
                        yield chunk
                case Think():
                    index += 1
                    yield {1000 + index: DeltaThinkingPart(content=item.text)}
                case Call():
                    index += 1
                    yield {
                        2000 + index: DeltaToolCall(
                            name=item.tool, json_args=json.dumps(item.args), tool_call_id=item.call_id
                        )
                    }
                case Fail():
                    raise item.error
                case Wait():
                    await asyncio.sleep(item.seconds)
                case Until():
                    await item.event.wait()

    def model(self, profile: dict[str, Any] | None = None) -> FunctionModel:
        """A FunctionModel answering from this script (streaming and non-streaming); ``profile``: what it says it
        supports (e.g. ``supports_thinking``: pydantic-ai passes a ``thinking`` setting on only then)."""
        return FunctionModel(
            self._respond,
            stream_function=self._stream,
            model_name="scripted",
            profile=cast(ModelProfile, profile) if profile is not None else None,
        )

    def factory(self) -> Callable[[str], FunctionModel]:
        """A model factory for ConversationSession / CodlingAgent that always returns this script's model."""
        model = self.model()
        return lambda _model_id: model
