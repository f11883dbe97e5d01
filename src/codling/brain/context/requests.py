"""Every model request of a turn fitted into the window: a pydantic-ai capability given to each user-turn run.

Before each request (``before_model_request``) the turn's messages are measured (o200k, each part counted
once per session). A request that fits the input limit goes as it is. Past it, the tool results of this turn
the model has already read give way to their plain-text summaries, oldest first (deterministic, no model call:
the summary each tool wrote, ``ToolOutput.summary``); if that is not enough, the history before the turn is
compacted Codex-style, between two requests of the turn (``compact_history``); only then do the results the
model has not seen yet give way. What is cut stays cut for the rest of the turn (the run's own messages are
changed). ``max_tokens`` is set per request to the room the window has left.

The input tokens the provider reports for each request are compared with codling's count of it
(``reported``): a server that cut the request silently gives its window away, and the turn's next requests
fit it.

A provider that still answers "context too long" is handled here first (``on_model_request_error``): when
its answer reveals a window smaller than the budget's (``learn``: see ``window.py``), the request is fitted to
that window and made again, as the turn's next ones will be; otherwise the turn's tool results all give way
to their summaries and the request is made once more, before the turn loop falls back to compacting the
history and retrying the turn.

The request is then sanitised (``brain/sanitize.py``) on its way out only, so the run's messages keep the
turn's own shape (its user request is the last message holding the user's prompt).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import RetryModelRequest
from pydantic_ai.messages import (
    BinaryContent,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryFeedbackPart,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from codling.brain.context.budget import IMAGE_TOKENS, MESSAGE_OVERHEAD_TOKENS, Budget
from codling.brain.context.layout import CONTEXT_CLOSE, CONTEXT_OPEN
from codling.brain.context.overflow import is_context_overflow
from codling.brain.context.tools import definitions_tokens
from codling.brain.sanitize import sanitize_messages
from codling.llm.tokens import count_wire_tokens, truncate_to_tokens
from codling.tools.base import ToolReport

log = logging.getLogger(__name__)

SUMMARISED = "[This tool result was replaced by its summary to keep the request within the model's window.]\n"
"""Starts a tool result that gave way to its summary (the model knows the full output is gone)."""

SUMMARY_FALLBACK_TOKENS = 150
"""What is kept of a result whose tool wrote no summary."""


def part_tokens(part: Any) -> int:
    """Tokens one message part adds to a request, as a JSON string in a chat API's body (images by estimate)."""
    if isinstance(part, UserPromptPart):
        if isinstance(part.content, str):
            return count_wire_tokens(part.content)
        return sum(
            count_wire_tokens(item) if isinstance(item, str) else IMAGE_TOKENS if isinstance(item, BinaryContent) else 0
            for item in part.content
        )
    if isinstance(part, TextPart | ThinkingPart | SystemPromptPart):
        return count_wire_tokens(part.content)
    if isinstance(part, ToolCallPart):
        # The arguments travel as a JSON string inside the JSON body: escaped twice.
        return count_wire_tokens(part.tool_name) + count_wire_tokens(part.args_as_json_str()) + MESSAGE_OVERHEAD_TOKENS
    if isinstance(part, ToolReturnPart):
        return count_wire_tokens(part.model_response_str()) + MESSAGE_OVERHEAD_TOKENS
    if isinstance(part, RetryFeedbackPart):  # reaches the model as a user or system message with this text
        return count_wire_tokens(part.model_response()) + MESSAGE_OVERHEAD_TOKENS
    return 0


@dataclass
class TokenCounter:
    """Counts messages, each part once (parts are kept alive here, so their ids stay theirs).

    One counter lasts as long as its session, so the history's parts are counted once, not again every turn
    (tokenizing the whole history before each turn grew with the conversation). A part that a turn's
    requests no longer carry (compacted away) is forgotten at the end of the next turn (``next_turn``)."""

    count: Callable[[Any], int] = part_tokens
    """How one part is counted."""
    _counts: dict[int, tuple[Any, int]] = field(default_factory=dict)
    _earlier: dict[int, tuple[Any, int]] = field(default_factory=dict)
    """The previous turn's counts: moved to ``_counts`` when seen again, dropped with the next turn."""

    def next_turn(self) -> None:
        """Start a turn: what the last turn counted is kept only as far as this one sees it again."""
        self._earlier, self._counts = self._counts, {}

    def part(self, part: Any) -> int:
        """The tokens of ``part``, counted on first sight."""
        key = id(part)
        known = self._counts.get(key) or self._earlier.get(key)
        if known is not None and known[0] is part:
            self._counts[key] = known
            return known[1]
        tokens = self.count(part)
        self._counts[key] = (part, tokens)
        return tokens

    def message(self, message: ModelMessage) -> int:
        """The tokens of one message, its role markers included."""
        return MESSAGE_OVERHEAD_TOKENS + sum(self.part(p) for p in message.parts)

    def messages(self, messages: list[ModelMessage]) -> int:
        """The tokens of a message list."""
        return sum(self.message(m) for m in messages)


def turn_start(messages: list[ModelMessage]) -> int:
    """The index of the turn's own request: the last message holding a user prompt (what follows it are the
    turn's responses and tool results; what precedes it is the history)."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, ModelRequest) and any(isinstance(p, UserPromptPart) for p in message.parts):
            return index
    return 0


def with_block(request: ModelMessage, block: str) -> ModelMessage:
    """The turn's own request with its prompt behind ``block`` instead of the context block it had."""
    if not isinstance(request, ModelRequest):
        return request

    def prompt(text: str) -> str:
        before = text.startswith(CONTEXT_OPEN) and CONTEXT_CLOSE in text
        bare = text.partition(CONTEXT_CLOSE)[2].removeprefix("\n\n") if before else text
        return f"{block}\n\n{bare}" if block else bare

    parts: list[Any] = []
    for part in request.parts:
        if isinstance(part, UserPromptPart):
            content = part.content
            if isinstance(content, str):
                content = prompt(content)
            elif content and isinstance(content[0], str):
                content = [prompt(content[0]), *content[1:]]
            part = replace(part, content=content)
        parts.append(part)
    return replace(request, parts=parts)


def summarised(part: ToolReturnPart, max_tokens: int = 1_000) -> ToolReturnPart | None:
    """The result as its summary (at most ``max_tokens``), or None when it already is one (or the summary
    would not be shorter)."""
    content = part.model_response_str()
    if content.startswith(SUMMARISED):
        return None
    report = part.metadata
    summary = ""
    if isinstance(report, ToolReport):
        summary = report.output.summary.strip() if report.output is not None else (report.error or "")
    if not summary:
        summary = truncate_to_tokens(content, SUMMARY_FALLBACK_TOKENS) + "\n[… rest dropped]"
    text = SUMMARISED + truncate_to_tokens(summary, max_tokens)
    if len(text) >= len(content):
        return None
    return replace(part, content=text)


@dataclass
class TurnRequests(AbstractCapability[Any]):
    """Fits each request of one turn into ``budget`` (see the module's docstring)."""

    budget: Budget
    system_tokens: Callable[[], int]
    """What the system prompt takes of every request (the tool definitions are counted as offered)."""
    compact_history: Callable[[], Awaitable[tuple[list[ModelMessage], str] | None]]
    """Compacts the session's history mid-turn; returns the new history's messages and the context block the
    turn's prompt carries from then on (None: nothing to do)."""
    counter: TokenCounter = field(default_factory=TokenCounter)
    last_input: int = 0
    """The estimated input tokens of the latest request."""
    learn: Callable[[Exception], Budget | None] | None = None
    """Told of each overflow first: the budget of the smaller window the provider's answer revealed, now the
    session's, or None (nothing learned)."""
    reported: Callable[[int, int], Budget | None] | None = None
    """Told the input tokens the provider reported for each request and codling's count of it: the budget of
    the smaller window they reveal (a server that cut the request silently), now the session's, or None."""
    _retry: list[ModelMessage] | None = None

    def fixed_tokens(self, request_context: Any) -> int:
        """What the request carries besides its messages: the system prompt and the tools it offers."""
        return self.system_tokens() + definitions_tokens(request_context.model_request_parameters.function_tools)

    async def before_model_request(self, ctx: Any, request_context: Any) -> Any:
        messages = await self.fit(list(request_context.messages), self.fixed_tokens(request_context))
        ctx.messages[:] = messages
        return self._outgoing(request_context, messages)

    async def prepare_model_request(self, ctx: Any, request_context: Any) -> Any:
        if self._retry is None:
            return request_context
        messages, self._retry = self._retry, None
        return self._outgoing(request_context, messages)

    async def after_model_request(self, ctx: Any, *, request_context: Any, response: ModelResponse) -> ModelResponse:
        tokens = response.usage.input_tokens
        if self.reported is not None and tokens and (budget := self.reported(tokens, self.last_input)) is not None:
            self.budget = budget  # the turn's next requests fit the window the server has
        return response

    async def on_model_request_error(self, ctx: Any, *, request_context: Any, error: Exception) -> ModelResponse:
        if not is_context_overflow(error):
            raise error
        messages = list(ctx.messages)
        if self.learn is not None and (budget := self.learn(error)) is not None:
            # The catalog overstated the window: this request and the rest of the turn's fit the real one (a
            # window learned is smaller than the last, so this cannot repeat forever). The request is made
            # again if that changes it: fewer messages, or less room asked for the answer.
            answer = self.budget.answer_room(self.last_input)
            self.budget = budget
            fitted = await self.fit(messages, self.fixed_tokens(request_context))
            if fitted != messages or budget.answer_room(self.last_input) < answer:
                ctx.messages[:] = fitted
                self._retry = fitted
                raise RetryModelRequest()
        shrunk, saved = self._summarise(messages, turn_start(messages), target=0, newest_too=True)
        if not saved:
            raise error  # nothing of this turn's own is left to cut: the turn loop compacts the history
        log.info("context overflow reported by the provider: %d tool results of this turn summarised", saved)
        ctx.messages[:] = shrunk
        self._retry = shrunk
        raise RetryModelRequest()

    def _outgoing(self, request_context: Any, messages: list[ModelMessage]) -> Any:
        sent = sanitize_messages(messages)
        request_context.messages = sent
        self.last_input = self.fixed_tokens(request_context) + self.counter.messages(sent)
        settings = dict(request_context.model_settings or {})
        settings["max_tokens"] = self.budget.answer_room(self.last_input)
        request_context.model_settings = settings
        return request_context

    async def fit(self, messages: list[ModelMessage], fixed: int) -> list[ModelMessage]:
        """``messages`` within the input limit if it can be done, giving up as little as it takes, in this order:
        this turn's tool results the model has already read give way to their summaries (oldest first), then
        the history before the turn is compacted (when it holds more than a compaction would leave), and only
        then do the results the model has not seen yet; the oldest history messages are left out last. A
        request that fits is sent as it is: the compaction point is for the history between turns, and a
        fresh result is never squashed while the request would have held it. ``fixed`` is what the request
        carries besides the messages."""
        limit = self.budget.input_limit - fixed
        if self.counter.messages(messages) <= limit:
            return messages
        start = turn_start(messages)
        messages, _ = self._summarise(messages, start, limit, newest_too=False)
        if self.counter.messages(messages) <= limit:
            return messages
        leaves = self.budget.kept_user + self.budget.summary
        if self.counter.messages(messages[:start]) > leaves:
            compacted = await self.compact_history()
            if compacted is not None:
                history, block = compacted
                # The blocks the compaction took said what this one may have left out: it says it all again.
                messages = [*history, with_block(messages[start], block), *messages[start + 1 :]]
                if self.counter.messages(messages) <= limit:
                    return messages
        messages, _ = self._summarise(messages, turn_start(messages), limit, newest_too=True)
        return self._drop_oldest(messages, fixed)

    def _drop_oldest(self, messages: list[ModelMessage], fixed: int) -> list[ModelMessage]:
        """The last resort when even a compacted history leaves the request over the input limit (a window too
        small for codling): the oldest history messages after the first are left out of this turn's requests
        (the session's history keeps them), so the provider is not sent what it must refuse."""
        limit = self.budget.input_limit - fixed
        start = turn_start(messages)
        while self.counter.messages(messages) > limit and start > 1:
            messages = [messages[0], *messages[2:]]
            start -= 1
        return messages

    def _summarise(
        self, messages: list[ModelMessage], start: int, target: int, *, newest_too: bool
    ) -> tuple[list[ModelMessage], int]:
        """Replace this turn's tool results by their summaries, oldest first, until ``target`` is met; the
        newest request's results only with ``newest_too``. Returns the messages and how many were replaced."""
        out = list(messages)
        total = self.counter.messages(out)
        last = len(out) - 1
        saved = 0
        for index in range(start + 1, len(out)):
            if total <= target:
                break
            message = out[index]
            if not isinstance(message, ModelRequest) or (index == last and not newest_too):
                continue
            parts = list(message.parts)
            before = saved
            for i, part in enumerate(parts):
                if total <= target:
                    break
                short = summarised(part, self.budget.tool_output // 4) if isinstance(part, ToolReturnPart) else None
                if short is not None:
                    total += self.counter.part(short) - self.counter.part(part)
                    parts[i] = short
                    saved += 1
            if saved > before:
                out[index] = replace(message, parts=parts)
        return out, saved
