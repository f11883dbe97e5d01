"""What every turn a user's prompt starts does around its work (``PromptTurn``): its first events (the turn,
a cut prompt's warning), the pins it states, the MCP servers it waits for; closing the tool calls a cancel or a
failure left open; and its end (the turn into the history when the history keeps it, usage, what was spent
aside, ``TurnEnded``)."""

from __future__ import annotations

import asyncio
import logging
import uuid
from abc import abstractmethod
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Literal

from codling.brain.context.ledger import build_turn_recap
from codling.brain.context.pins import pins_after
from codling.brain.delivery import TurnProgress
from codling.brain.events import (
    ContextWarning,
    McpServersStarting,
    McpStartStatus,
    ToolCallFinished,
    TurnEnded,
    TurnStarted,
    Usage,
)
from codling.brain.failures import is_expected_failure, turn_failed
from codling.brain.prompt import ImageBlock, PromptBlock, describe_prompt, prompt_cut_warning
from codling.brain.restore import record_turn
from codling.brain.slash import PROMPT_COMMANDS
from codling.brain.spend import Spend, priced
from codling.brain.turn_context import DONE, TurnContext
from codling.brain.turn_task import TurnTask
from codling.brain.turns import Ending, turn_text, typed_text
from codling.vocabulary import StopReason

if TYPE_CHECKING:
    from codling.brain.context.ledger_entries import TurnRecap

log = logging.getLogger(__name__)


class PromptTurn(TurnTask[None]):
    """A turn the user's prompt started, of whatever kind: the lifecycle they share (the kinds say ``work``
    and, for a turn the history keeps, ``record``)."""

    def __init__(self, turn: TurnContext, blocks: tuple[PromptBlock, ...], cut: int, command: tuple[str, str] | None):
        self.turn = turn
        self.blocks = blocks
        self.cut = cut
        """How much of the prompt ``cap_prompt`` cut (0: nothing)."""
        self.command = command
        self.user_text = ""
        """The prompt as the model gets it (fitted to the window)."""
        self.stop: StopReason = "end_turn"
        self.usage = Usage()
        self.ending: Ending | None = None

    def start(self) -> None:
        """``TurnStarted``, the prompt fitted to the window, the tools' progress and the pins the prompt states
        (before the work, as restore does it: a turn cancelled at once still stated its rules)."""
        turn, state, blocks, command = self.turn, self.turn.state, self.blocks, self.command
        thinks = state.thinking.thinks(state.model)
        turn.send(TurnStarted(turn.id, describe_prompt(blocks), thinks, datetime.now(UTC), blocks, turn.checkpoint))
        if self.cut:
            turn.send(ContextWarning(turn.id, f"context-{uuid.uuid4().hex[:12]}", prompt_cut_warning(self.cut)))
        text = turn.context.fit_prompt(turn_text(blocks), turn.id, turn.send, turn.log.turn_number)
        self.user_text = turn.log.user_text = text
        turn.session.deps.progress.listen(TurnProgress(turn.id, turn.send, turn.delivered_so_far))
        pins = pins_after(state.pins, typed_text(blocks), command, turn.log.turn_number)
        state.set_pins(pins, withdrawn=command is not None and command[0] == "unpin")
        turn.started = True

    async def run(self) -> None:
        """The kind's ``work``, once the MCP servers still starting are ready."""
        if self.turn.cancel_requested:
            raise asyncio.CancelledError  # cancelled before the turn could start
        self.turn.session.models.instructions()  # the system prompt's size is part of the context estimate
        await self._servers_ready()
        await self.work()

    @abstractmethod
    async def work(self) -> None:
        """What this kind of turn does."""

    def abort(self, error: Exception | asyncio.CancelledError) -> bool:
        """Close the tool calls left open; a failure becomes ``TurnFailed``. A cancel nobody asked for (the
        task itself is being torn down) goes through."""
        turn = self.turn
        if isinstance(error, asyncio.CancelledError):
            if not turn.cancel_requested:
                return False
            self.stop, self.ending = "cancelled", "cancelled"
            self._close_open_calls("aborted: the user cancelled the turn", "cancelled")
            return True
        self._close_open_calls("aborted: the turn failed")
        turn.send(turn_failed(turn.id, error, turn.endpoint))
        if not is_expected_failure(error):
            log.exception("turn %s failed", turn.id)
        return True

    @property
    def kept(self) -> bool:
        """Whether the history keeps the turn: a user turn, or a prompt command's (``/init``) even when codling
        answered it; not a command that only reports or changes settings."""
        return self.command is None or self.command[0] in PROMPT_COMMANDS

    @property
    def images(self) -> tuple[ImageBlock, ...]:
        """The prompt's images."""
        return tuple(b for b in self.blocks if isinstance(b, ImageBlock))

    def record(self) -> TurnRecap | None:
        """The prompt and reply into the history, the provider's count carried past the turn, the turn's
        summary into the ledger (returned; None for a turn the history does not keep); a turn with a reply
        may name the session (``title_due``)."""
        if not self.kept:
            return None
        turn, state, log_ = self.turn, self.turn.state, self.turn.log
        log_.context = turn.block
        record_turn(state, log_, self.ending)
        fresh = turn.first_input_history == state.replacements
        turn.context.after_turn(turn.first_input if fresh else 0, self.images)
        previous = state.turn_recaps[-1].goal if state.turn_recaps else ""
        summary = build_turn_recap(log_.turn_number, log_.events, previous)
        state.remember_turn(summary)
        if self.ending is None and (log_.error is None or bool(log_.text)):
            # The request as the user wrote it, attachments by name: their contents never name a session.
            turn.title_due = (describe_prompt(self.blocks), log_.text)
        return summary

    async def finish(self) -> None:
        """The turn's usage, with what its delegates and special turns spent, and ``TurnEnded``."""
        turn, session, state = self.turn, self.turn.session, self.turn.state
        session.deps.progress.listen(None)
        turn.notices = None
        checkpoint = await self._checkpoint()
        summary = self.record()
        # What its delegates and special turns spent is the turn's too, each priced at its own model's price.
        spent = Spend(self.usage, priced(state.model, self.usage)) + session.aside.take()
        state.add_spend(spent.usage, spent.cost)
        turn.send(session.context.usage_event(turn.id, turn.send))
        ended = TurnEnded(
            turn.id,
            self.stop,
            spent.usage,
            turn.log.error is not None,
            summary,
            state.reported_input_tokens,
            spent.cost,
            state.learned_window,
            turn.log.context,
            checkpoint,
        )
        turn.send(ended)
        turn.put(DONE)

    async def _checkpoint(self) -> int | None:
        """A user turn's closing checkpoint of the workspace. A second cancel while it is taken does not cut
        the turn's end short (it ends anyway, and says so): the checkpoint is finished regardless."""
        keeper = self.turn.session.deps.checkpoints
        if keeper is None or self.kind != "user":
            return None
        try:
            return await keeper.mark()
        except asyncio.CancelledError:
            asyncio.current_task().uncancel()  # type: ignore[union-attr]
            return None

    def _close_open_calls(self, reason: str, ended_by: Literal["cancelled"] | None = None) -> None:
        """Finish every tool call that started but never finished, so no client shows it running forever."""
        turn = self.turn
        for started in turn.log.open_calls():
            finished = ToolCallFinished(
                turn.id, started.call_id, started.tool_name, "failed", reason, ended_by=ended_by
            )
            turn.send(finished)

    async def _servers_ready(self) -> None:
        """Wait for the MCP servers still starting; from now on their notices go into this turn."""
        turn = self.turn
        mcp = turn.session.deps.mcp
        if mcp is None:
            return
        turn.notices = send = turn.send
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
