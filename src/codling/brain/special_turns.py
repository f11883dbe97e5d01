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

The built-ins (summarize, title, greeting) are in ``brain/builtin_turns.py``.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal, assert_never

from codling.brain.context.overflow import is_context_overflow
from codling.brain.context.summaries import summarize_tool_call
from codling.brain.drive import drive
from codling.brain.events import (
    CompactionStarted,
    ContextCompacted,
    ContextWarning,
    Event,
    McpServerNotice,
    McpServersStarting,
    PlanUpdated,
    ProviderRetrying,
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
from codling.brain.interactions import Interaction, InteractionKind
from codling.brain.special_config import Announce, SpecialTurnConfig, SpecialTurnResult
from codling.brain.spend import Spend, priced
from codling.brain.state import HistoryEntry, Role, SessionState, summary_entry
from codling.errors import SpecialTurnError
from codling.llm.providers import history_breakpoint, prompt_cache_settings
from codling.tools.ports import ToolProgress

if TYPE_CHECKING:
    from pydantic_ai import Agent

    from codling.brain.host import SessionHost

log = logging.getLogger(__name__)

_ROLE_OF_KIND: dict[str, Role] = {
    "user": "user",
    "assistant": "assistant",
    "summary": "summary",
    "tool_result": "assistant",
}
"""Where each kind goes in the model's history (a kind not named here is recorded but not shown to the model)."""


class SpecialTurns:
    """Runs a session's special turns and applies their persistence one at a time, in start order."""

    def __init__(self, session: SessionHost) -> None:
        self._session = session
        self._last: asyncio.Future[None] | None = None
        """Resolved when the most recently started special turn is over (persisted, failed or cancelled)."""

    async def execute(self, config: SpecialTurnConfig, announce: Announce | None = None) -> SpecialTurnResult:
        """Run one special turn and persist its result as configured.

        Without ``announce`` the special turn stands between user turns: its persistence waits for the special
        turns started before it, then for the user turn in progress (if any) to finish, so its record never
        lands inside a turn and a restored session is the live one. With ``announce`` it is part of the user
        turn that runs it (compaction announces ``ContextCompacted`` within its turn): it persists at once,
        and ``announce`` replaces the ``SpecialTurnPersisted`` notification."""
        session = self._session
        # The history is read now, once: what the model sees and what a replace-above result replaces agree.
        history = _messages(config.messages) if config.messages is not None else session.state.messages()
        read = _Mark.of(session.state)
        if config.persistence == "ephemeral":
            return self._with_fallback(config, await self._attempt(config, history))
        if announce is not None:
            result = self._with_fallback(config, await self._attempt(config, history))
            return await self._persist(config, result, read, announce)
        if session.inside_turn():
            raise SpecialTurnError(
                "a special turn that persists waits for the user turn to be over, so it cannot be awaited inside "
                "that turn (in an observer): start it with session.start_background(...) instead"
            )
        # A chain of futures, one per special turn, each resolved once its turn is over and the one before it
        # is too, so results persist in start order even when a turn in the middle fails or is cancelled.
        previous, mine = self._last, asyncio.get_running_loop().create_future()
        self._last = mine
        try:
            result = self._with_fallback(config, await self._attempt(config, history))
            if previous is not None:
                await asyncio.shield(previous)
            await self._session.turn_over()
            return await self._persist(config, result, read, None)
        finally:
            _resolve_after(mine, previous)

    async def _attempt(self, config: SpecialTurnConfig, history: list[Any]) -> SpecialTurnResult:
        try:
            output, interactions = await asyncio.wait_for(self._shrinking(config, history), config.timeout)
            if config.accept is not None and not config.accept(output):
                return _failed(config, "error", f"the answer was not usable: {output[:200]!r}")
        except TimeoutError:
            return _failed(config, "timeout", f"no answer within {config.timeout:g}s")
        except Exception as e:  # a special turn never breaks the session: its failure is its result
            # With a fallback the failure is handled (and shown where it matters, e.g. "fallback summary").
            level = logging.INFO if config.fallback else logging.WARNING
            log.log(level, "special turn %s failed: %s", config.turn_type, e)
            return _failed(config, "error", f"{type(e).__name__}: {e}")
        return SpecialTurnResult(config.turn_type, "ok", output, metadata=config.metadata, interactions=interactions)

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
                    history = _messages(smaller.messages)
                config = smaller

    async def _run(self, config: SpecialTurnConfig, history: list[Any]) -> tuple[str, tuple[Interaction, ...]]:
        """One attempt through the turn loop user turns use (``drive``), on ``history`` (a copy), its events
        kept to itself: the output and what the model did (thoughts, tool calls and results, text)."""
        from pydantic_ai.capabilities import ProcessHistory
        from pydantic_ai.usage import UsageLimits

        from codling.brain.sanitize import sanitize_messages
        from codling.llm.providers import agent_class

        session = self._session
        model = session.model_for(config.model)
        instructions = config.instructions if config.instructions is not None else session.instructions()
        toolsets = [session.toolset(config.tool_filter)] if config.run_tools and not config.tool_filter.empty else []
        if config.share_prefix:
            toolsets = [_switched_off(toolset) for toolset in session.turn_toolsets()]
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
            session.spend_aside(Spend(usage, priced(session.model_info(config.model), usage)))
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


def interactions_of(events: Sequence[Event]) -> tuple[Interaction, ...]:
    """A run's events as interactions, in order: each stretch of thinking or text as one ``thought`` or
    ``assistant``, each tool call as a ``tool_call`` (its title) and a ``tool_result`` (what it did, as the
    plain-text summary the history keeps of user turns' tool calls)."""
    out: list[Interaction] = []
    started: dict[str, ToolCallStarted] = {}
    for event in events:
        match event:
            case TextDelta() | ThoughtDelta():
                kind: InteractionKind = "assistant" if isinstance(event, TextDelta) else "thought"
                if out and out[-1].kind == kind:
                    out[-1] = Interaction(kind, out[-1].text + event.text)
                else:
                    out.append(Interaction(kind, event.text))
            case ToolCallStarted():
                started[event.call_id] = event
                out.append(Interaction("tool_call", event.title))
            case ToolCallFinished() if event.call_id in started:
                out.append(Interaction("tool_result", summarize_tool_call(started[event.call_id], event)))
            case (
                TurnStarted()
                | ToolCallTerminal()
                | ToolCallNote()
                | ToolCallRunning()
                | ToolCallFinished()
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
                | TurnFailed()
                | TurnEnded()
            ):
                pass  # not an interaction (a result whose call was not seen neither)
            case _:
                assert_never(event)
    return tuple(out)


def _messages(interactions: Sequence[Interaction]) -> list[Any]:
    """Override messages as pydantic-ai messages (see ``SpecialTurnConfig.messages``)."""
    from pydantic_ai.messages import ModelRequest, SystemPromptPart

    out: list[Any] = []
    for interaction in interactions:
        if interaction.kind == "system":
            out.append(ModelRequest(parts=[SystemPromptPart(interaction.text)]))
        elif interaction.kind == "context":
            out.append(HistoryEntry.of("user", interaction.text).message())
        elif interaction.kind in _ROLE_OF_KIND:
            out.append(_entry(interaction).message())
    return out


def _entry(interaction: Interaction) -> HistoryEntry:
    if interaction.kind == "summary":
        return summary_entry(interaction.text)
    return HistoryEntry.of(_ROLE_OF_KIND[interaction.kind], interaction.text)


def persisted_entries(interactions: Sequence[Interaction]) -> list[HistoryEntry]:
    """The history entries persisted interactions become (live, and when a session is restored from its
    records). As for user turns, the model's history keeps text: user and assistant messages, summaries, and
    tool results as their plain-text summaries, merged into the assistant's reply; the other kinds (thoughts,
    tool calls, system and context) stay in the record, for transcripts and replays, and out of the history."""
    entries: list[HistoryEntry] = []
    for interaction in interactions:
        role = _ROLE_OF_KIND.get(interaction.kind)
        if role is None:
            continue
        if role == "assistant" and entries and entries[-1].role == "assistant":
            entries[-1] = HistoryEntry.of("assistant", f"{entries[-1].text}\n\n{interaction.text}")
        else:
            entries.append(_entry(interaction))
    return entries
