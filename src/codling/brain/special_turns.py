"""Special turns: model requests that are not the user's turn (summaries, titles, greetings, checks).

A special turn runs on an isolated copy of the session's history, with its own overrides (messages, model,
tools, streaming), unseen by observers. Nothing it does reaches the session unless its persistence strategy
says so, and then only what its filter allows:

* ``persist-result``: the result enters the history (a greeting),
* ``persist-all``: the input and the result enter the history,
* ``ephemeral``: nothing is persisted (validation, titles),
* ``replace-above``: the result replaces the history (a summary).

A failure or a timeout returns an error result and leaves the session exactly as it was. Several special
turns may run at once; their persistence is applied one at a time, in the order they were started.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from codling.brain.events import SpecialTurnPersisted
from codling.brain.interactions import DEFAULT, Interaction, InteractionFilter
from codling.brain.state import SUMMARY_PREFIX, HistoryEntry

if TYPE_CHECKING:
    from codling.brain.session import ConversationSession

log = logging.getLogger(__name__)

Persistence = Literal["persist-result", "persist-all", "ephemeral", "replace-above"]

_ROLE_OF_KIND = {"user": "user", "assistant": "assistant", "summary": "summary"}


@dataclass(frozen=True)
class SpecialTurnConfig:
    """What a special turn asks, and what becomes of its answer."""

    prompt: str
    """The request (the last user message of the special turn)."""
    turn_type: str = "special"
    messages: Sequence[Interaction] | None = None
    """Messages to send instead of a copy of the session's history (None: the history)."""
    instructions: str | None = None
    """System instructions instead of the session's (None: the session's)."""
    model: str | None = None
    """A model id instead of the session's."""
    tool_filter: str = "-*"
    """Which tools the model may call: "-*" none, "*" all, or a comma-separated list of tool names."""
    run_tools: bool = False
    force_non_streaming: bool = True
    timeout: float = 120.0
    persistence: Persistence = "ephemeral"
    persistence_filter: InteractionFilter = DEFAULT
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SpecialTurnResult:
    """How a special turn ended: its output, or the error that stopped it."""

    turn_type: str
    status: Literal["ok", "error", "timeout"]
    output: str = ""
    error: str | None = None
    persisted: tuple[Interaction, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """Whether the special turn produced an output."""
        return self.status == "ok"


class SpecialTurns:
    """Runs a session's special turns and applies their persistence one at a time, in start order."""

    def __init__(self, session: ConversationSession) -> None:
        self._session = session
        self._last: asyncio.Future[None] | None = None
        """Resolved when the most recently started special turn is over (persisted, failed or cancelled)."""

    async def execute(self, config: SpecialTurnConfig) -> SpecialTurnResult:
        """Run one special turn and persist its result as configured."""
        # Each turn waits for the one started before it to be over before persisting: a chain of futures,
        # each resolved in a finally block, so a failed or cancelled turn never holds up the ones after it.
        previous, mine = self._last, asyncio.get_running_loop().create_future()
        self._last = mine
        try:
            result = await self._attempt(config)
            if previous is not None:
                await asyncio.shield(previous)
            if result.ok:
                result = await self._persist(config, result)
            return result
        finally:
            if not mine.done():
                mine.set_result(None)

    async def _attempt(self, config: SpecialTurnConfig) -> SpecialTurnResult:
        try:
            output = await asyncio.wait_for(self._run(config), config.timeout)
        except TimeoutError:
            error = f"no answer within {config.timeout:g}s"
            return SpecialTurnResult(config.turn_type, "timeout", error=error, metadata=config.metadata)
        except Exception as e:  # a special turn never breaks the session: its failure is its result
            log.warning("special turn %s failed: %s", config.turn_type, e)
            return SpecialTurnResult(
                config.turn_type, "error", error=f"{type(e).__name__}: {e}", metadata=config.metadata
            )
        return SpecialTurnResult(config.turn_type, "ok", output, metadata=config.metadata)

    async def _run(self, config: SpecialTurnConfig) -> str:
        from pydantic_ai import Agent

        session = self._session
        model = session.model_for(config.model)
        instructions = config.instructions if config.instructions is not None else session.instructions()
        toolsets = [session.toolset(config.tool_filter)] if config.run_tools and config.tool_filter != "-*" else []
        agent: Agent[Any, str] = Agent(
            model, deps_type=type(session.deps), instructions=instructions, toolsets=toolsets
        )
        # An isolated copy: the special turn reads the history as it is now and never writes to it.
        history = (
            [_entry(i).message() for i in config.messages if i.kind in _ROLE_OF_KIND]
            if config.messages is not None
            else session.state.messages()
        )
        if config.force_non_streaming:
            result = await agent.run(config.prompt, message_history=history, deps=session.deps)
            return result.output
        async with agent.run_stream(config.prompt, message_history=history, deps=session.deps) as streamed:
            return await streamed.get_output()

    async def _persist(self, config: SpecialTurnConfig, result: SpecialTurnResult) -> SpecialTurnResult:
        if config.persistence == "ephemeral":
            return result
        produced = [Interaction("summary" if config.persistence == "replace-above" else "assistant", result.output)]
        if config.persistence == "persist-all":
            produced = [Interaction("user", config.prompt), *produced]
        kept = [i for i in config.persistence_filter.apply(produced) if i.kind in _ROLE_OF_KIND]
        state = self._session.state
        if config.persistence == "replace-above":
            state.replace_history(persisted_entries(kept))
        else:
            for entry in persisted_entries(kept):
                state.add(entry)
        persisted = tuple(kept)
        await self._session.notify(
            SpecialTurnPersisted(config.turn_type, config.persistence, persisted, dict(config.metadata))
        )
        return SpecialTurnResult(config.turn_type, "ok", result.output, None, persisted, result.metadata)


def _entry(interaction: Interaction) -> HistoryEntry:
    if interaction.kind == "summary" and not interaction.text.startswith(SUMMARY_PREFIX):
        return HistoryEntry.of("summary", SUMMARY_PREFIX + interaction.text)
    return HistoryEntry.of(_ROLE_OF_KIND[interaction.kind], interaction.text)  # type: ignore[arg-type]


def persisted_entries(interactions: Sequence[Interaction]) -> list[HistoryEntry]:
    """The history entries a persisted special turn added (for restoring a session from its records)."""
    return [_entry(i) for i in interactions if i.kind in _ROLE_OF_KIND]
