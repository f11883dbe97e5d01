"""Special turns: model requests that are not the user's turn (summaries, titles, greetings, checks).

A special turn runs through the loop user turns use (``brain/drive.py``) on an isolated copy of the session's
history, with its own overrides (messages, model, tools, streaming), unseen by observers: its events become the
result's ``interactions`` instead. Nobody watches it, so nobody is asked: its tools run only as far as the
permission mode allows without a question. Nothing it does reaches the session unless its persistence strategy
says so, and then only what its filter allows:

* ``persist-result``: the result enters the history (a greeting),
* ``persist-all``: the input and the result enter the history,
* ``ephemeral``: nothing is persisted (validation, titles),
* ``replace-above``: the result replaces the history (a summary).

A failure, a timeout or an output the turn's ``accept`` check rejects returns an error result and leaves the
session exactly as it was, unless the turn has a ``fallback``: then the fallback's output (built without the
model) is persisted in its place and the result says so. Several special turns may run at once; their
persistence is applied one at a time, in the order they were started, and never inside a user turn: a result
ready while a turn runs waits for it to end (ephemeral turns persist nothing, so they never wait). Compaction
is the exception: it is part of the user turn that runs it, and persists at once (see ``execute``).

Each special turn is a ``SpecialTask``, with the lifecycle every kind of turn has (``brain/turn_task.py``);
``SpecialTurns`` orders their persistence. The built-ins (summarize, title, greeting) are in
``brain/builtin_turns.py``; the interactions as history, ``brain/special_history.py``.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from codling.brain.context.overflow import is_context_overflow
from codling.brain.drive import drive
from codling.brain.events import (
    Event,
    SpecialTurnPersisted,
)
from codling.brain.interactions import Interaction
from codling.brain.special_config import Announce, SpecialTurnConfig, SpecialTurnResult
from codling.brain.special_history import interactions_of, messages_of, persisted_entries
from codling.brain.spend import Spend, priced
from codling.brain.state import SessionState
from codling.brain.turn_task import TurnTask, perform
from codling.errors import SpecialTurnError
from codling.llm.providers import history_breakpoint, prompt_cache_settings
from codling.tools.ports import ToolProgress

if TYPE_CHECKING:
    from pydantic_ai import Agent

    from codling.brain.host import SessionHost
    from codling.brain.turn_context import TurnSlot

log = logging.getLogger(__name__)


class SpecialTurns:
    """Runs a session's special turns and applies their persistence one at a time, in start order."""

    def __init__(self, session: SessionHost, turns: TurnSlot) -> None:
        self._session = session
        self._turns = turns
        self._last: asyncio.Future[None] | None = None
        """Resolved when the most recently started special turn is over (persisted, failed or cancelled)."""

    async def execute(self, config: SpecialTurnConfig, announce: Announce | None = None) -> SpecialTurnResult:
        """Run one special turn (a ``SpecialTask``) and persist its result as configured.

        Without ``announce`` the special turn stands between user turns: its persistence waits for the special
        turns started before it, then for the user turn in progress (if any) to finish, so its record never
        lands inside a turn and a restored session is the live one. With ``announce`` it is part of the user
        turn that runs it (compaction announces ``ContextCompacted`` within its turn): it persists at once,
        and ``announce`` replaces the ``SpecialTurnPersisted`` notification."""
        if config.persistence == "ephemeral" or announce is not None:
            return await perform(SpecialTask(self._session, config, announce))
        if self._turns.inside():
            raise SpecialTurnError(
                "a special turn that persists waits for the user turn to be over, so it cannot be awaited inside "
                "that turn (in an observer): start it with session.start_background(...) instead"
            )
        # A chain of futures, one per special turn, each resolved once its turn is over and the one before it
        # is too, so results persist in start order even when a turn in the middle fails or is cancelled.
        previous, mine = self._last, asyncio.get_running_loop().create_future()
        self._last = mine
        try:
            return await perform(SpecialTask(self._session, config, None, previous, self._turns))
        finally:
            _resolve_after(mine, previous)


class SpecialTask(TurnTask[SpecialTurnResult]):
    """One special turn: ``start`` reads the history, ``run`` asks the model (isolated from the session),
    ``abort`` makes a failure or a timeout its result (a cancel goes through), ``finish`` falls back when it
    must and persists, after ``previous`` and the user turn in ``turns`` (if given) are over."""

    kind = "special"

    def __init__(
        self,
        session: SessionHost,
        config: SpecialTurnConfig,
        announce: Announce | None,
        previous: asyncio.Future[None] | None = None,
        turns: TurnSlot | None = None,
    ) -> None:
        self._session = session
        self.config = config
        self._announce = announce
        self._previous = previous
        self._turns = turns
        self._history: list[Any] = []
        self._read = _Mark.of(session.state)
        self.result = _failed(config, "error", "the special turn did not run")

    def start(self) -> None:
        """Read the history now, once: what the model sees and what a replace-above result replaces agree."""
        config, state = self.config, self._session.state
        self._history = messages_of(config.messages) if config.messages is not None else state.messages()
        self._read = _Mark.of(state)

    async def run(self) -> None:
        """Ask the model, within the turn's time limit; an answer ``accept`` rejects is a failure."""
        config = self.config
        output, interactions = await asyncio.wait_for(self._shrinking(config, self._history), config.timeout)
        if config.accept is not None and not config.accept(output):
            self.result = _failed(config, "error", f"the answer was not usable: {output[:200]!r}")
            return
        self.result = SpecialTurnResult(
            config.turn_type, "ok", output, metadata=config.metadata, interactions=interactions
        )

    def abort(self, error: Exception | asyncio.CancelledError) -> bool:
        """A special turn never breaks the session: its failure is its result (a cancel goes through)."""
        config = self.config
        if isinstance(error, TimeoutError):
            self.result = _failed(config, "timeout", f"no answer within {config.timeout:g}s")
            return True
        if not isinstance(error, Exception):
            return False
        # With a fallback the failure is handled (and shown where it matters, e.g. "fallback summary").
        level = logging.INFO if config.fallback else logging.WARNING
        log.log(level, "special turn %s failed: %s", config.turn_type, error)
        self.result = _failed(config, "error", f"{type(error).__name__}: {error}")
        return True

    async def finish(self) -> SpecialTurnResult:
        """The result, or the fallback's; persisted as configured, once it may be."""
        config = self.config
        result = self._with_fallback(config, self.result)
        if config.persistence == "ephemeral":
            return result
        if self._previous is not None:
            await asyncio.shield(self._previous)
        if self._turns is not None:
            await self._turns.over()
        return await self._persist(config, result, self._read, self._announce)

    @staticmethod
    def _with_fallback(config: SpecialTurnConfig, result: SpecialTurnResult) -> SpecialTurnResult:
        if result.ok or config.fallback is None:
            return result
        log.info("special turn %s: using its fallback (%s)", config.turn_type, result.error)
        try:
            output = config.fallback()
        except Exception as e:
            log.warning("special turn %s: its fallback failed too: %s", config.turn_type, e, exc_info=True)
            return replace(result, error=f"{result.error}; the fallback failed too: {type(e).__name__}: {e}")
        return SpecialTurnResult(config.turn_type, "ok", output, result.error, metadata=result.metadata, fallback=True)

    async def _shrinking(self, config: SpecialTurnConfig, history: list[Any]) -> tuple[str, tuple[Interaction, ...]]:
        """``_run``, and when the provider finds the request too long, again with ``config.shrink``'s shorter
        prompt for as long as it has one."""
        while True:
            try:
                return await self._run(config, history)
            except Exception as e:
                smaller = config.shrink(config) if config.shrink is not None and is_context_overflow(e) else None
                if smaller is None:
                    raise
                log.info("special turn %s: the request was too long; trying a smaller one", config.turn_type)
                if smaller.messages is not None and config.messages is None:
                    history = messages_of(smaller.messages)
                config = smaller

    async def _run(self, config: SpecialTurnConfig, history: list[Any]) -> tuple[str, tuple[Interaction, ...]]:
        """One attempt through the turn loop user turns use (``drive``), on ``history`` (a copy), its events
        kept to itself: the output and what the model did (thoughts, tool calls and results, text)."""
        from pydantic_ai.capabilities import ProcessHistory
        from pydantic_ai.usage import UsageLimits

        from codling.brain.sanitize import sanitize_messages
        from codling.llm.providers import agent_class

        session = self._session
        model = session.models.model_for(config.model)
        instructions = config.instructions if config.instructions is not None else session.models.instructions()
        offers_tools = config.run_tools and not config.tool_filter.empty
        toolsets = [session.models.toolset(config.tool_filter)] if offers_tools else []
        if config.share_prefix:
            toolsets = [_switched_off(toolset) for toolset in session.models.turn_toolsets()]
        # Nobody watches a special turn, so nobody can be asked (gated tools run only if the mode allows them),
        # nothing it runs is shown (its terminals report to nowhere), and it hands nothing to delegates (whose
        # tool a request sharing the user turns' prefix still lists, as they do: no call runs there).
        deps = replace(
            session.deps,
            permissions=session.deps.permissions.unattended(),
            progress=ToolProgress(),
            delegator=session.deps.delegator if config.share_prefix else None,
        )
        agent: Agent[Any, str] = agent_class()(
            model,
            deps_type=type(deps),
            instructions=instructions,
            toolsets=toolsets,
            capabilities=[ProcessHistory(sanitize_messages)],  # the same well-formed history user turns get
        )
        events: list[Event] = []
        model_id = config.model or session.state.model.id
        prompt: Any = config.prompt
        if config.share_prefix and (mark := history_breakpoint(model_id, session.options.prompt_cache, history)):
            prompt = [*mark, config.prompt]  # the history it shares with the turns is read from the cache
        async with agent.iter(
            prompt,
            message_history=history,
            deps=deps,
            model_settings=_settings(config, session.state.session_id, model_id, model),
            usage_limits=UsageLimits(request_limit=session.options.max_requests_per_turn),
        ) as run:
            stop, usage = await drive(
                run, "", events.append, deps, stream=not config.force_non_streaming, idle_timeout=config.idle_timeout
            )
            session.aside.add(Spend(usage, priced(session.models.model_info(config.model), usage)))
            if run.result is None:
                raise SpecialTurnError(f"the special turn stopped before it answered ({stop})")
            return run.result.output, interactions_of(events)

    async def _persist(
        self, config: SpecialTurnConfig, result: SpecialTurnResult, read: _Mark, announce: Announce | None
    ) -> SpecialTurnResult:
        if not result.ok or config.persistence == "ephemeral":
            return result
        state = self._session.state
        replaced: int | None = None
        if config.persistence == "replace-above":
            if state.replacements != read.replacements:
                error = "the history was replaced while this special turn ran, so its result no longer applies"
                return replace(result, status="error", error=error, fallback=False)
            # What entered the history after the special turn read it is not in its result: it stays after it.
            replaced = read.entries if len(state.entries) > read.entries else None
        answer = [Interaction("assistant", result.output)]
        if config.persistence == "replace-above":
            produced = [*config.keep, Interaction("summary", result.output)]
        elif config.persistence == "persist-all":  # a fallback has no interactions of its own: its answer
            produced = [Interaction("user", config.prompt), *(result.interactions or answer)]
        else:
            produced = answer
        kept = config.persistence_filter.apply(produced)
        if config.persistence == "replace-above":
            state.replace_history(persisted_entries(kept), replaced)
        else:
            for entry in persisted_entries(kept):
                state.add(entry)
        persisted = replace(result, persisted=tuple(kept))
        if announce is not None:
            await announce(persisted)
        else:
            await self._session.notify(
                SpecialTurnPersisted(
                    config.turn_type,
                    config.persistence,
                    persisted.persisted,
                    dict(config.metadata),
                    replaced,
                    uuid.uuid4().hex,
                )
            )
        return persisted


def _settings(config: SpecialTurnConfig, session_id: str, model_id: str, model: Any) -> Any:
    """The request settings a special turn asks for (pydantic-ai's ``ModelSettings``): its answer's cap, its
    read timeout, no tool calls when it shares the user turns' prefix, and the session's prompt cache key (so
    the provider serves the prefix the turns cached), if it has them; None without any."""
    settings: dict[str, Any] = prompt_cache_settings(model_id, getattr(model, "base_url", None), session_id)
    if config.max_tokens is not None:
        settings["max_tokens"] = config.max_tokens
    if config.idle_timeout is not None:
        settings["timeout"] = config.idle_timeout
    if config.share_prefix:
        settings["tool_choice"] = "none"
    return settings or None


TOOLS_OFF = "Tools are switched off for this request: answer with text only."


def _switched_off(toolset: Any) -> Any:
    """``toolset`` with its definitions offered as they are (the request's prefix stays a user turn's) and
    every call refused, for a provider that ignores ``tool_choice`` none."""
    from pydantic_ai import ModelRetry
    from pydantic_ai.toolsets import WrapperToolset

    class SwitchedOff(WrapperToolset[Any]):
        async def call_tool(self, name: str, tool_args: dict[str, Any], ctx: Any, tool: Any) -> Any:
            raise ModelRetry(TOOLS_OFF)

    return SwitchedOff(toolset)


def _failed(config: SpecialTurnConfig, status: Literal["error", "timeout"], error: str) -> SpecialTurnResult:
    return SpecialTurnResult(config.turn_type, status, error=error, metadata=config.metadata)


@dataclass(frozen=True)
class _Mark:
    """The history as a special turn read it: how many entries, after how many replacements."""

    entries: int
    replacements: int

    @classmethod
    def of(cls, state: SessionState) -> _Mark:
        """The history of ``state`` as it is now."""
        return cls(len(state.entries), state.replacements)


def _resolve_after(future: asyncio.Future[None], previous: asyncio.Future[None] | None) -> None:
    """Resolve ``future`` now, or once ``previous`` is resolved if it is not yet."""

    def resolve(_: object = None) -> None:
        if not future.done():
            future.set_result(None)

    if previous is None or previous.done():
        resolve()
    else:
        previous.add_done_callback(resolve)
