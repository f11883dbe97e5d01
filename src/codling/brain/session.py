"""ConversationSession: runs turns on pydantic-ai and emits the brain's typed events.

``stream(prompt)`` yields a turn's events as they happen; ``run(prompt)`` drives the same loop and returns a
``TurnResult``. Every event also goes, in order, to the session's observers. The turn itself runs in its own
task so that ``cancel()`` can stop it (and the tools it is running) at any await point.

Before a turn whose context would pass the compaction threshold, and when the provider reports that the context
overflowed (then the request is retried once), the history is compacted through the summarize special turn
(``brain/compactor.py``). A prompt of ``/compact [instructions]`` compacts on demand.

With ``SessionOptions.auto_title``, the first turn of a new session is followed by the title special turn (in
the background; ``settle()`` waits for it), which ends with one ``SessionTitled`` event.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from codling.brain.builtin_turns import clean_title, fallback_title, title_turn
from codling.brain.coalesce import TextCoalescer
from codling.brain.commands import AGENTS_FILE, run_slash_command
from codling.brain.context import tools
from codling.brain.context.engine import ContextEngine
from codling.brain.context.ledger import build_turn_summary
from codling.brain.context.pins import pins_after
from codling.brain.delegates import SessionDelegator
from codling.brain.delivery import Barrier, DeliveredFirst, TurnProgress
from codling.brain.events import (
    ContextWarning,
    Event,
    McpServerNotice,
    McpServersStarting,
    McpStartStatus,
    SessionTitled,
    ToolCallFinished,
    ToolCallStarted,
    TurnEnded,
    TurnStarted,
    Usage,
    UsageUpdated,
)
from codling.brain.failures import is_expected_failure, turn_failed
from codling.brain.host import ModelFactory
from codling.brain.images import may_see_images
from codling.brain.model_turn import ModelTurn
from codling.brain.options import TOOLS_SPENT_NOTE, SessionOptions
from codling.brain.prompt import (
    ImageBlock,
    PromptBlock,
    TextBlock,
    cap_prompt,
    prompt_cut_warning,
    prompt_summary,
    system_prompt,
)
from codling.brain.restore import follow, record_turn, restore
from codling.brain.running import RunningTurn
from codling.brain.slash import PROMPT_COMMANDS
from codling.brain.special_config import Announce, SpecialTurnConfig, SpecialTurnResult
from codling.brain.special_turns import SpecialTurns
from codling.brain.spend import Spend, priced
from codling.brain.state import SessionState
from codling.brain.thinking import Thinking
from codling.brain.turns import Ending, TurnLog, command_of, turn_text, typed_text
from codling.errors import SessionError
from codling.llm.catalog import ModelInfo
from codling.tools.deps import ToolDeps
from codling.tools.specs import ToolFilter
from codling.vocabulary import PermissionMode, StopReason

if TYPE_CHECKING:
    from pydantic_ai import Agent
    from pydantic_ai.models import Model

    from codling.tools.mcp.servers import McpNotice

log = logging.getLogger(__name__)

Observer = Callable[[Event], Awaitable[None]]
"""Receives every event of every turn, in order."""


TOOL_RETRIES = 3
"""How often the model may retry a tool call whose arguments did not validate, per tool and turn."""


@dataclass(frozen=True)
class ToolCallRecord:
    """A tool call as it ended up in a turn."""

    started: ToolCallStarted
    finished: ToolCallFinished | None


@dataclass(frozen=True)
class TurnResult:
    """What ``run()`` returns: the turn's reply, how it ended, its tool calls and how full the context is."""

    turn_id: str
    text: str
    stop_reason: StopReason
    usage: Usage
    error: str | None = None
    tool_calls: tuple[ToolCallRecord, ...] = ()
    context: UsageUpdated | None = None
    cost: float | None = None
    """What the turn cost at the model's list price, in US dollars (None: the price is not known)."""


_DONE = object()


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
        self._system_prompt: str | None = None
        self._turn: RunningTurn | None = None
        """The latest user turn (kept once it ended: ``in_turn`` asks whether its events were delivered)."""
        self._special_turns: SpecialTurns | None = None
        self._titled = False
        """The title special turn was started, or the session was restored (it has its title)."""
        self._no_images: set[str] = set()
        """Models whose provider refused this session's images: they are told the names from then on."""
        self._spent_aside = Spend()
        """Spent beside the turns' own requests, not yet in a turn's record (see ``spend_aside``)."""
        self._background: set[asyncio.Task[None]] = set()
        self.context = ContextEngine(self)
        approver = deps.permissions.approver
        # The session's own view of the permissions it was given (same mode, same remembered answers): its
        # approver lets every event so far reach the observers before it asks.
        permissions = deps.permissions.view(DeliveredFirst(approver, self._delivered) if approver else None)
        delegator = deps.delegator
        if self.options.delegates and delegator is None:  # (the option is read at each request too)
            delegator = SessionDelegator(self)
        self.deps = replace(deps, permissions=permissions, delegator=delegator)
        if deps.mcp is not None:
            deps.mcp.listen(self._mcp_notice)

    # -- configuration -------------------------------------------------------------------------------------

    def subscribe(self, observer: Observer) -> Callable[[], None]:
        """Add an observer; returns a function that removes it."""
        self._observers.append(observer)
        return lambda: self._observers.remove(observer)

    def set_mode(self, mode: PermissionMode) -> None:
        """Change the permission mode; applies to the next tool call."""
        self.state.mode = mode
        self.deps.permissions.mode = mode

    def set_thinking(self, thinking: Thinking) -> None:
        """Change whether (and how hard) a model that can think does; applies from the next model request."""
        self.state.thinking = thinking

    def set_model(self, model: ModelInfo) -> None:
        """Switch models; the next turn uses the new one with the same history (and the catalog's window:
        one learned from the old model's server is forgotten)."""
        self.state.use_model(model)
        self._agent = None

    @property
    def running(self) -> bool:
        """Whether a turn is in progress."""
        return self._turn is not None and self._turn.running

    async def settle(self) -> None:
        """Wait for the session's background work (the title special turn) to finish."""
        while self._background:
            await asyncio.gather(*self._background, return_exceptions=True)

    def cancel_background(self) -> None:
        """Stop the session's background work (a title being made: the fallback title stays)."""
        for task in list(self._background):
            task.cancel()

    async def stop(self) -> None:
        """Cancel the running turn, if any, and the session's background work; wait until the turn has ended,
        its last event was delivered and the background work is over."""
        turn = self._turn
        if turn is not None:
            turn.cancel()
            await turn.ended()
            # The stream's consumer still has to hand the turn's last events to the observers (the recorder).
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(turn.delivered.wait(), 10)
        # Last: the end of a first turn may just have started the title.
        self.cancel_background()
        await self.settle()

    async def close(self) -> None:
        """End the session: :meth:`stop`, then stop its MCP servers (their processes end)."""
        await self.stop()
        if self.deps.mcp is not None:
            await self.deps.mcp.stop()

    def start_servers(self) -> None:
        """Start the session's MCP servers in the background (a turn waits for those still starting)."""
        if self.deps.mcp is not None:
            self.deps.mcp.start()

    def _mcp_notice(self, notice: McpNotice) -> None:
        """Show an MCP server's notice: within the running turn, or to the observers between turns."""
        send = self._turn.notices if self._turn is not None else None
        turn_id = self._turn.id if self._turn is not None and send is not None else ""
        event = McpServerNotice(turn_id, f"mcp-{uuid.uuid4().hex[:12]}", notice.server, notice.message, notice.detail)
        if send is not None:
            send(event)
        else:
            self.start_background(self.notify(event))

    async def _servers_ready(self, turn: RunningTurn, send: Callable[[Event], None]) -> None:
        """Wait for the MCP servers still starting; from now on their notices go into this turn."""
        if self.deps.mcp is None:
            return
        turn.notices = send
        mcp = self.deps.mcp
        mcp.start()
        if not mcp.starting():
            return
        # A card while the turn waits (a first message may wait many seconds for slow servers), updated as each
        # server settles and settled when the wait ends.
        call_id = f"mcp-start-{uuid.uuid4().hex[:12]}"

        def progress(status: McpStartStatus) -> McpServersStarting:
            servers = mcp.servers
            return McpServersStarting(
                turn.id,
                call_id,
                tuple(s.spec.name for s in servers if not s.is_settled),
                ready=sum(s.status == "ready" for s in servers),
                failed=sum(s.status == "failed" for s in servers),
                total=len(servers),
                status=status,
            )

        send(progress("waiting"))
        try:
            for settled in asyncio.as_completed([s.settled() for s in mcp.starting()]):
                await settled
                if mcp.starting():
                    send(progress("progress"))
        except asyncio.CancelledError:
            send(progress("cancelled"))
            raise
        send(progress("ready"))

    def cancel(self) -> None:
        """Stop the running turn (and its tools); it ends with stop reason ``cancelled``."""
        if self._turn is not None:
            self._turn.cancel()

    async def _delivered(self) -> None:
        """Wait until every event emitted so far has been handed to the observers (see ``brain/delivery.py``)."""
        emit = self._turn.emit if self._turn is not None else None
        if emit is None:
            return
        barrier: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        emit(Barrier(barrier))
        await barrier

    # -- special turns -------------------------------------------------------------------------------------

    @property
    def special_turns(self) -> SpecialTurns:
        """Runs this session's special turns (see ``brain/special_turns.py``)."""
        if self._special_turns is None:
            self._special_turns = SpecialTurns(self)
        return self._special_turns

    async def execute_special_turn(
        self, config: SpecialTurnConfig, announce: Announce | None = None
    ) -> SpecialTurnResult:
        """Run a model request that is not the user's turn, isolated from the session; persist its result as
        ``config.persistence`` says (``announce`` replaces the default ``SpecialTurnPersisted`` notification)."""
        return await self.special_turns.execute(config, announce)

    async def _name_session(self, request: str, reply: str) -> None:
        """The title special turn; its fallback (the first request) stands in when the model cannot help, or
        is not to be asked."""
        if not self.options.model_titles:
            await self.notify(SessionTitled(fallback_title(request), "fallback"))
            return
        result = await self.execute_special_turn(title_turn(request, reply, model=self.options.title_model))
        title = result.output if result.fallback else clean_title(result.output)
        await self.notify(SessionTitled(title, "fallback" if result.fallback else "model"))

    def _wants_title(self, log_: TurnLog, ending: Ending | None) -> bool:
        """Whether the turn that just ended should be followed by the title special turn: the first turn of a
        new session that was neither cancelled nor a failure without any reply (else the next such turn)."""
        if not self.options.auto_title or self._titled:
            return False
        self._titled = ending is None and (log_.error is None or bool(log_.text))
        return self._titled

    def inside_turn(self) -> bool:
        """Whether the calling task is part of the turn in progress (the turn itself, or the stream's consumer
        handing its events to the observers): such a caller cannot wait for the turn to be over."""
        turn = self._turn
        return turn is not None and turn.in_progress and asyncio.current_task() in (turn.task, turn.consumer)

    async def turn_over(self) -> None:
        """Wait until no user turn is in progress: the last one added its prompt and reply to the history and
        its events reached every observer (so what persists now is recorded after the turn, not inside it)."""
        while (turn := self._turn) is not None and turn.in_progress:
            if turn.running:
                await turn.ended()
            else:
                await turn.delivered.wait()

    def start_background(self, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """Run ``work`` (e.g. a special turn) beside the turns: ``settle()`` waits for it, ``stop()`` cancels it."""
        task = asyncio.get_running_loop().create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    def spawn(self, state: SessionState, deps: ToolDeps, options: SessionOptions) -> ConversationSession:
        """A new session with this one's model factory (a delegate runs in one)."""
        return ConversationSession(state, deps, model_factory=self._model_factory, options=options)

    def spent_aside(self) -> Spend:
        """What was spent beside the running turn's own requests so far (counted in it when it ends)."""
        return self._spent_aside

    def spend_aside(self, spend: Spend) -> None:
        """Count what was spent beside the turns' own requests (a delegate's turn, a special turn such as the
        summarizer's or the title's) in the next turn to end: the running one, or the next one for what was
        spent between turns (a title named after its turn), since a session's spend lives in its turns'
        records."""
        self._spent_aside += spend

    def model_info(self, model_id: str | None) -> ModelInfo:
        """The catalog's entry for ``model_id`` (None: the session's model)."""
        if model_id is None or model_id == self.state.model.id:
            return self.state.model
        models = self.options.models
        return models.catalog.get(model_id) if models is not None else ModelInfo(model_id, known=False)

    @property
    def model_factory(self) -> ModelFactory | None:
        """How this session builds models from ids (None: from the providers); delegates use the same."""
        return self._model_factory

    def model_for(self, model_id: str | None) -> Model:
        """The session's pydantic-ai model, or the model ``model_id`` names."""
        if model_id is None or model_id == self.state.model.id:
            return self.agent().model  # type: ignore[return-value]
        return self._build_model(model_id)

    def _build_model(self, model_id: str) -> Model:
        if self._model_factory is not None:
            return self._model_factory(model_id)
        from codling.llm.providers import build_model

        return build_model(model_id, idle_timeout=self.options.stream_idle_timeout, cache=self.options.prompt_cache)

    def instructions(self) -> str:
        """The session's system prompt (static part), built once per session."""
        if self._system_prompt is None:
            self._system_prompt = system_prompt(self.state.cwd, self.state.additional_dirs)
            if self.options.role_instructions:
                self._system_prompt += "\n" + self.options.role_instructions.strip() + "\n"
        return self._system_prompt

    def toolset(self, tool_filter: ToolFilter) -> Any:
        """The session's tools that ``tool_filter`` allows."""
        from pydantic_ai.toolsets import FilteredToolset

        from codling.tools.toolset import build_toolset

        return FilteredToolset(build_toolset(), lambda _ctx, tool: tool_filter.allows(tool.name))

    def turn_toolsets(self) -> list[Any]:
        """The toolsets a user turn offers, in the order its requests list them: codling's tools, then the MCP
        servers'."""
        return [self._turn_toolset(), *self._mcp_toolsets()]

    def _turn_toolset(self) -> Any:
        """The tools of user turns; ``run_tools`` and ``max_tool_passes`` are read at each request, so options
        changed between turns apply to the next one."""
        from pydantic_ai.toolsets import FilteredToolset

        from codling.tools.toolset import build_toolset

        def offered(ctx: Any, tool: Any) -> bool:
            options = self.options
            return (
                options.run_tools
                and ctx.run_step <= options.max_tool_passes
                and tools.offered(tool.name, options.tool_names, delegates=options.delegates, lean=self.context.lean)
            )

        async def lean(_ctx: Any, defs: list[Any]) -> list[Any]:
            return [tools.lean_definition(d) for d in defs] if self.context.lean else defs

        return FilteredToolset(build_toolset(), offered).prepared(lean)

    def _mcp_toolsets(self) -> list[Any]:
        """The MCP servers' tools, offered as codling's own are (not to a delegate, whose role names its tools)."""
        if self.deps.mcp is None:
            return []
        from pydantic_ai.toolsets import FilteredToolset

        from codling.tools.mcp.toolset import build_mcp_toolset

        def offered(ctx: Any, _tool: Any) -> bool:
            options = self.options
            return options.run_tools and ctx.run_step <= options.max_tool_passes and options.tool_names is None

        return [FilteredToolset(build_mcp_toolset(), offered)]

    def tools_spent(self, ctx: Any) -> str | None:
        """An instruction for the request after the last tool pass: tools are gone, answer now."""
        return TOOLS_SPENT_NOTE if self.options.run_tools and ctx.run_step > self.options.max_tool_passes else None

    async def notify(self, event: Event) -> None:
        """Hand an event that is not part of a turn (a persisted special turn) to every observer, in order."""
        for observer in list(self._observers):
            await observer(event)

    # -- context accounting --------------------------------------------------------------------------------

    def context_used(self) -> int:
        """Tokens the next request would start from (see ``ContextEngine.context_used``)."""
        return self.context.context_used()

    def context_overhead(self) -> int:
        """What the next request carries besides its history (see ``ContextEngine.overhead``)."""
        return self.context.overhead()

    def usage_event(self, turn_id: str) -> UsageUpdated:
        """How full the context is now, as an event of turn ``turn_id``."""
        return self.context.usage_event(turn_id)

    # -- turns ---------------------------------------------------------------------------------------------

    async def run(self, prompt: str | tuple[PromptBlock, ...]) -> TurnResult:
        """Run one turn to its end and return the result."""
        log_ = TurnLog(0, "")  # the same bookkeeping the turn loop keeps, over the delivered events
        context: UsageUpdated | None = None
        end: TurnEnded | None = None
        async for event in self.stream(prompt):
            log_.apply(event)
            if isinstance(event, UsageUpdated):
                context = event
            elif isinstance(event, TurnEnded):
                end = event
        assert end is not None, "every turn ends with TurnEnded"
        records = tuple(ToolCallRecord(s, log_.finished.get(cid)) for cid, s in log_.calls.items())
        return TurnResult(end.turn_id, log_.text, end.stop_reason, end.usage, log_.error, records, context, end.cost)

    async def stream(self, prompt: str | tuple[PromptBlock, ...]) -> AsyncIterator[Event]:
        """Run one turn, yielding its events as they happen (observers see each one first)."""
        if self.running:
            raise SessionError("a turn is already running in this session; cancel it or wait for it to end")
        blocks = (TextBlock(prompt),) if isinstance(prompt, str) else prompt
        queue: asyncio.Queue[Any] = asyncio.Queue()
        self._turn = turn = RunningTurn(uuid.uuid4().hex, queue.put_nowait, asyncio.current_task())
        turn.task = task = asyncio.create_task(self._run_turn(turn, blocks, queue.put_nowait))
        # Whatever way the task ends, the stream ends too (the turn itself emits _DONE after TurnEnded).
        task.add_done_callback(lambda _task: queue.put_nowait(_DONE))
        coalescer = TextCoalescer(queue, window=self.options.merge_window, max_chars=self.options.max_chunk_chars)
        try:
            while (item := await coalescer.next()) is not _DONE:
                if isinstance(item, Barrier):
                    if not item.future.done():
                        item.future.set_result(None)
                    continue
                for observer in list(self._observers):
                    await observer(item)
                yield item
        finally:
            if not task.done():
                turn.cancel_requested = True
                task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            turn.emit = None  # nothing consumes that queue any more: a barrier put there would never resolve
            turn.delivered.set()
            if turn.title_due is not None:
                # Once the turn's events are all delivered, so the title comes after them.
                self.start_background(self._name_session(*turn.title_due))

    def restore(self, events: Iterable[Event]) -> None:
        """Rebuild the state from a recorded event stream (see ``brain/restore.py``)."""
        restore(self.state, events)
        self._titled = self._titled or self.state.turn_count > 0

    def agent(self) -> Agent[ToolDeps, str]:
        """The session's pydantic-ai agent, built on first use (its model is the session's)."""
        if self._agent is None:
            from codling.llm.providers import agent_class

            self._agent = agent_class()(
                self._build_model(self.state.model.id),
                deps_type=ToolDeps,
                instructions=self.instructions(),
                toolsets=self.turn_toolsets(),
                # Models often fix bad tool arguments on a second or third try; the default (1) fails too soon.
                retries=TOOL_RETRIES,
            )
        return self._agent

    async def _run_turn(self, turn: RunningTurn, blocks: tuple[PromptBlock, ...], emit: Callable[[Any], None]) -> None:
        """One turn: a slash command, or the user's prompt run through the model (compacting when needed)."""
        turn_id = turn.id
        log_ = TurnLog(self.state.turn_count + 1, "")

        def send(event: Event) -> None:
            log_.apply(event)
            follow(self.state, log_, event)
            emit(event)

        capped = cap_prompt(blocks)
        blocks = capped.blocks
        thinks = self.state.thinking.thinks(self.state.model)
        send(TurnStarted(turn_id, prompt_summary(blocks), thinks, datetime.now(UTC), blocks))
        if capped.cut:
            send(ContextWarning(turn_id, f"context-{uuid.uuid4().hex[:12]}", prompt_cut_warning(capped.cut)))
        user_text = log_.user_text = self.context.fit_prompt(turn_text(blocks), turn_id, send, log_.turn_number)
        self.deps.progress.listen(TurnProgress(turn_id, send, self._delivered))
        command = command_of(blocks)
        # /init: a model turn with codling's prompt, in the history as such (unless AGENTS.md exists already).
        prompted = command is not None and command[0] in PROMPT_COMMANDS
        answered = command is not None and (not prompted or (self.state.cwd / AGENTS_FILE).exists())
        # Before the turn runs, as restore does it (a turn cancelled at once still stated its rules).
        pins = pins_after(self.state.pins, typed_text(blocks), command, log_.turn_number)
        self.state.set_pins(pins, withdrawn=command is not None and command[0] == "unpin")
        images = tuple(b for b in blocks if isinstance(b, ImageBlock))
        stop: StopReason = "end_turn"
        usage = Usage()
        ending: Ending | None = None
        turn.started = True
        try:
            if turn.cancel_requested:
                raise asyncio.CancelledError  # cancelled before the turn could start
            self.instructions()  # the system prompt's size is part of the context estimate
            await self._servers_ready(turn, send)
            if command is not None and answered:
                await run_slash_command(self, turn_id, send, *command)
            else:
                stop, usage = await ModelTurn(self, turn, send, log_).run(user_text, images)
        except asyncio.CancelledError:
            if not turn.cancel_requested:
                raise
            stop, ending = "cancelled", "cancelled"
            self._close_open_calls(turn_id, log_, "aborted: the user cancelled the turn", send, "cancelled")
            # A cancel may land after the turn caught its last exception; nothing below may be cut short.
            asyncio.current_task().uncancel()  # type: ignore[union-attr]
        except Exception as e:
            self._close_open_calls(turn_id, log_, "aborted: the turn failed", send)
            send(turn_failed(turn_id, e, turn.endpoint))
            if not is_expected_failure(e):
                log.exception("turn %s failed", turn_id)
        self.deps.progress.listen(None)
        turn.notices = None
        summary = None
        if command is None or prompted:
            log_.context = turn.block
            record_turn(self.state, log_, ending)
            fresh = turn.first_input_history == self.state.replacements
            self.context.after_turn(turn.first_input if fresh else 0, images)
            previous = self.state.turn_summaries[-1].goal if self.state.turn_summaries else ""
            summary = build_turn_summary(log_.turn_number, log_.events, previous)
            self.state.remember_turn(summary)
            if self._wants_title(log_, ending):
                # The request as the user wrote it, attachments by name: their contents never name a session.
                turn.title_due = (prompt_summary(blocks), log_.text)
        # What its delegates and special turns spent is the turn's too, each priced at its own model's price.
        aside, self._spent_aside = self._spent_aside, Spend()
        spent = Spend(usage, priced(self.state.model, usage)) + aside
        usage, cost = spent.usage, spent.cost
        self.state.add_spend(usage, cost)
        send(self.context.usage_event(turn_id, send))
        ended = TurnEnded(
            turn_id,
            stop,
            usage,
            log_.error is not None,
            summary,
            self.state.reported_input_tokens,
            cost,
            self.state.learned_window,
            log_.context,
        )
        send(ended)
        emit(_DONE)

    def sees_images(self) -> bool:
        """Whether the session's model is sent the prompt's images (not if its provider refused them)."""
        return may_see_images(self.state.model) and self.state.model.id not in self._no_images

    def images_refused(self, model_id: str) -> bool:
        """Whether ``model_id``'s provider refused this session's images; ``refuse_images`` records it."""
        return model_id in self._no_images

    def refuse_images(self, model_id: str) -> None:
        """From now on, ``model_id`` is told the images' names instead of being sent them."""
        self._no_images.add(model_id)

    @staticmethod
    def _close_open_calls(
        turn_id: str,
        log_: TurnLog,
        reason: str,
        send: Callable[[Event], None],
        ended_by: Literal["cancelled"] | None = None,
    ) -> None:
        """Finish every tool call that started but never finished, so no client shows it running forever."""
        for started in log_.open_calls():
            send(ToolCallFinished(turn_id, started.call_id, started.tool_name, "failed", reason, ended_by=ended_by))
