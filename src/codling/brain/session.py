"""ConversationSession: one conversation, its state, observers, settings and background work; it starts and
stops the current turn.

``stream(prompt)`` yields a turn's events as they happen; ``run(prompt)`` drives the same loop and returns a
``TurnResult``. Every event also goes, in order, to the session's observers. The turn itself runs in its own
task so that ``cancel()`` can stop it (and the tools it is running) at any await point. Which kind of turn a
prompt starts and what each kind does is ``brain/turn_kinds/`` (their lifecycle: ``brain/turn_task.py``);
what a running turn knows is its ``TurnContext`` (``brain/turn_context.py``); the session's agent, models,
system prompt and toolsets are its ``ModelStack`` (``brain/model_stack.py``).

With ``SessionOptions.auto_title``, the first turn of a new session is followed by the title special turn (in
the background; ``settle()`` waits for it), which ends with one ``SessionTitled`` event.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any

from codling.brain.builtin_turns import clean_title, fallback_title, title_turn
from codling.brain.coalesce import TextCoalescer
from codling.brain.context.engine import ContextEngine
from codling.brain.delegates import SessionDelegator
from codling.brain.delivery import Barrier, DeliveredFirst
from codling.brain.events import (
    Event,
    McpServerNotice,
    SessionTitled,
    ToolCallFinished,
    ToolCallStarted,
    TurnEnded,
    Usage,
    UsageUpdated,
)
from codling.brain.host import ModelFactory, Recorded
from codling.brain.model_stack import ModelStack
from codling.brain.options import SessionOptions
from codling.brain.prompt import PromptBlock, TextBlock
from codling.brain.restore import follow, restore
from codling.brain.special_config import Announce, SpecialTurnConfig, SpecialTurnResult
from codling.brain.special_turns import SpecialTurns
from codling.brain.spend import SpentAside
from codling.brain.state import SessionState
from codling.brain.thinking import Thinking
from codling.brain.turn_context import DONE, TurnContext, TurnSlot
from codling.brain.turn_kinds.choice import turn_for
from codling.brain.turn_kinds.streamed import PromptTurn
from codling.brain.turn_task import perform
from codling.brain.turns import TurnLog
from codling.errors import SessionError
from codling.llm.catalog import ModelInfo
from codling.tools.deps import ToolDeps
from codling.vocabulary import PermissionMode, StopReason

if TYPE_CHECKING:
    from codling.tools.checkpoints.keeper import CheckpointKeeper
    from codling.tools.mcp.servers import McpNotice

Observer = Callable[[Event], Awaitable[None]]
"""Receives every event of every turn, in order."""


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


class ConversationSession:
    """One conversation: its state, its tools, its observers, its background work and its current turn."""

    def __init__(
        self,
        state: SessionState,
        deps: ToolDeps,
        *,
        model_factory: ModelFactory | None = None,
        options: SessionOptions | None = None,
    ) -> None:
        self.state = state
        self.options = options or SessionOptions()
        self._observers: list[Observer] = []
        self.turns = TurnSlot()
        """The current turn (kept once it ended: ``TurnSlot.over`` asks whether its events were delivered)."""
        self.models = ModelStack(self, model_factory)
        self.context = ContextEngine(self)
        self.aside = SpentAside()
        self.special_turns = SpecialTurns(self, self.turns)
        """Runs this session's special turns (see ``brain/special_turns.py``)."""
        self._titled = False
        """The title special turn was started, or the session was restored (it has its title)."""
        self._background: set[asyncio.Task[None]] = set()
        self.recorded: Recorded | None = None
        """Reads the session's recorded events back (the store sets it; None: the session is not recorded)."""
        approver = deps.permissions.approver
        # The session's own view of the permissions it was given (same mode, same remembered answers): its
        # approver lets every event so far reach the observers before it asks.
        permissions = deps.permissions.view(DeliveredFirst(approver, self.turns.delivered) if approver else None)
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
        self.models.forget_agent()

    def spawn(self, state: SessionState, deps: ToolDeps, options: SessionOptions) -> ConversationSession:
        """A new session with this one's model factory (a delegate runs in one)."""
        return ConversationSession(state, deps, model_factory=self.models.factory, options=options)

    def restore(self, events: Iterable[Event]) -> None:
        """Rebuild the state from a recorded event stream (see ``brain/restore.py``)."""
        restore(self.state, events)
        self._titled = self._titled or self.state.turn_count > 0

    def rebuild(self, events: Sequence[Event]) -> None:
        """Rebuild the conversation from ``events`` (the recorded ones and a rewind), in place and exactly as a
        restore from the history file would: what the model is sent next is what a reloaded session sends.
        The settings (model, mode, thinking) stay as they are now."""
        state = self.state
        fresh = SessionState(
            state.session_id,
            state.cwd,
            state.catalog_model or state.model,
            state.mode,
            state.thinking,
            state.additional_dirs,
            state.prompts_dir,
        )
        restore(fresh, events)
        for each in fields(SessionState):
            setattr(state, each.name, getattr(fresh, each.name))

    # -- the current turn ----------------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        """Whether a turn is in progress."""
        return self.turns.running

    def cancel(self) -> None:
        """Stop the running turn (and its tools); it ends with stop reason ``cancelled``."""
        self.turns.cancel()

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
        log_ = TurnLog(self.state.turn_count + 1, "")
        turn = TurnContext(uuid.uuid4().hex, self, log_, queue.put_nowait, follow, asyncio.current_task())
        self.turns.current = turn
        turn.task = task = asyncio.create_task(self._perform(turn, turn_for(turn, blocks)))
        # Whatever way the task ends, the stream ends too (the turn itself puts DONE after TurnEnded).
        task.add_done_callback(lambda _task: queue.put_nowait(DONE))
        coalescer = TextCoalescer(queue, window=self.options.merge_window, max_chars=self.options.max_chunk_chars)
        try:
            while (item := await coalescer.next()) is not DONE:
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
            if turn.title_due is not None and self._wants_title():
                # Once the turn's events are all delivered, so the title comes after them.
                self.start_background(self._name_session(*turn.title_due))

    async def _perform(self, turn: TurnContext, task: PromptTurn) -> None:
        """Run a turn: a user turn after a checkpoint of the workspace (which its ``TurnStarted`` names; a
        cancel meanwhile is seen as the turn starts)."""
        keeper = self.deps.checkpoints
        if keeper is not None and task.kind == "user":
            turn.checkpoint = await keeper.mark()
        await perform(task)

    # -- background work -----------------------------------------------------------------------------------

    async def notify(self, event: Event) -> None:
        """Hand an event that is not part of a turn (a persisted special turn) to every observer, in order."""
        for observer in list(self._observers):
            await observer(event)

    async def execute_special_turn(
        self, config: SpecialTurnConfig, announce: Announce | None = None
    ) -> SpecialTurnResult:
        """Run a model request that is not the user's turn, isolated from the session; persist its result as
        ``config.persistence`` says (``announce`` replaces the default ``SpecialTurnPersisted`` notification)."""
        return await self.special_turns.execute(config, announce)

    def start_background(self, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """Run ``work`` (e.g. a special turn) beside the turns: ``settle()`` waits for it, ``stop()`` cancels it."""
        task = asyncio.get_running_loop().create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

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
        await self.turns.stop()
        # Last: the end of a first turn may just have started the title.
        self.cancel_background()
        await self.settle()

    async def close(self) -> None:
        """End the session: :meth:`stop`, then stop a checkpoint being taken and its MCP servers (their processes
        end)."""
        await self.stop()
        if self.deps.checkpoints is not None:
            await self.deps.checkpoints.close()
        if self.deps.mcp is not None:
            await self.deps.mcp.stop()

    def start_servers(self) -> None:
        """Start the session's MCP servers in the background (a turn waits for those still starting)."""
        if self.deps.mcp is not None:
            self.deps.mcp.start()

    def start_checkpoints(self) -> None:
        """Take the workspace's first checkpoint in the background: a large workspace's first scan reads every
        file (seconds), which the first turn would otherwise wait for; it then looks only at what changed."""
        if (keeper := self.deps.checkpoints) is not None:
            self.start_background(_marked(keeper))

    def _mcp_notice(self, notice: McpNotice) -> None:
        """Show an MCP server's notice: within the running turn, or to the observers between turns."""
        turn = self.turns.current
        send = turn.notices if turn is not None else None
        turn_id = turn.id if turn is not None and send is not None else ""
        event = McpServerNotice(turn_id, f"mcp-{uuid.uuid4().hex[:12]}", notice.server, notice.message, notice.detail)
        if send is not None:
            send(event)
        else:
            self.start_background(self.notify(event))

    def _wants_title(self) -> bool:
        """Whether the turn that just ended with a reply should be followed by the title special turn: the
        first such turn of a new session (a cancelled or failed one without a reply leaves it to the next)."""
        if not self.options.auto_title or self._titled:
            return False
        self._titled = True
        return True

    async def _name_session(self, request: str, reply: str) -> None:
        """The title special turn; its fallback (the first request) stands in when the model cannot help, or
        is not to be asked."""
        if not self.options.model_titles:
            await self.notify(SessionTitled(fallback_title(request), "fallback"))
            return
        result = await self.execute_special_turn(title_turn(request, reply, model=self.options.title_model))
        title = result.output if result.fallback else clean_title(result.output)
        await self.notify(SessionTitled(title, "fallback" if result.fallback else "model"))


async def _marked(keeper: CheckpointKeeper) -> None:
    await keeper.mark()
