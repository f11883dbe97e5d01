"""Live sessions: a brain session wired to its history file, new or restored from disk.

Both front ends (ACP and the terminal) open sessions through here, so a session is recorded and restored the
same way whichever one started it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from codling.brain.builtin_turns import greeting_turn
from codling.brain.factory import open_session
from codling.brain.host import ModelFactory
from codling.brain.session import ConversationSession
from codling.brain.thinking import Thinking
from codling.config import Settings, parse_mode
from codling.llm.catalog import Catalog, ModelInfo
from codling.mcp_servers import McpServerSpec
from codling.store.header import SessionHeader
from codling.store.history import HistoryRecorder, SessionLog
from codling.store.index import SessionStore
from codling.tools.ports import Approver, FileSystem, Terminal
from codling.vocabulary import PermissionMode


@dataclass
class LiveSession:
    """An open session: the brain running its turns and the recorder writing them to history.jsonl."""

    header: SessionHeader
    brain: ConversationSession
    recorder: HistoryRecorder
    preparing_prompt: bool = False
    """A prompt was accepted and is being prepared (attachments read) before its turn starts."""
    cancel_pending: bool = False
    """A cancel arrived while the prompt was being prepared: the turn must not start."""
    greeting: asyncio.Task[None] | None = None
    """The greeting special turn, while it runs (see ``greet``)."""
    known_to_client: asyncio.Event = field(default_factory=asyncio.Event)
    """Set once the client has named the session in a request, so it surely knows it (an editor drops
    notifications for a session it has not registered yet)."""
    introduction: asyncio.Task[None] | None = None
    """What the client is told of the session once it knows it (its commands, its usage), while pending."""
    _greeting_wait: asyncio.Future[Any] | None = None
    _turn_line: asyncio.Lock = field(default_factory=asyncio.Lock)
    """Held by the prompt whose turn runs (or is being prepared); the others wait in arrival order (asyncio's
    lock wakes its waiters first come, first served)."""
    _cancels: int = 0
    """How many cancels have arrived: a prompt that waited through one does not run."""
    waiting: int = 0
    """How many prompts wait for their turn behind the running one."""
    stale_model: bool = False
    """The model's key was removed (a logout) while a turn ran: the model is built again before the next one."""

    @asynccontextmanager
    async def turn_slot(self) -> AsyncIterator[bool]:
        """Wait until every prompt that came before this one has ended, and hold the session's one turn slot;
        yields False (run nothing) if a cancel arrived while this prompt waited."""
        asked = self._cancels
        self.waiting += 1
        try:
            await self._turn_line.acquire()
        finally:
            self.waiting -= 1
        try:
            yield self._cancels == asked
        finally:
            self._turn_line.release()

    def greet(self) -> None:
        """Start the greeting special turn in the background: its reply (only that) enters the history and
        reaches observers as ``SpecialTurnPersisted``; a failed greeting leaves the session as it was."""

        async def greeting() -> None:
            await self.brain.execute_special_turn(greeting_turn())

        self.greeting = self.brain.start_background(greeting())

    async def greeted(self) -> None:
        """Wait until the greeting, if one was started, is over (shown, failed or cancelled), or until ``cancel``
        cancels the prompt waiting for it (the greeting goes on). A prompt cancelled before it got here does not
        wait at all."""
        if self.greeting is None or self.cancel_pending:
            return
        # asyncio.wait never raises for the greeting's own failure, and cancelling it leaves the greeting alone.
        self._greeting_wait = waiter = asyncio.ensure_future(asyncio.wait([self.greeting]))
        try:
            await waiter
        except asyncio.CancelledError:
            if not self.cancel_pending:
                raise
        finally:
            self._greeting_wait = None
        if self.greeting.done():
            self.greeting = None

    def cancel(self) -> None:
        """Cancel the running turn, or the prompt being prepared for one, and every prompt waiting for its turn."""
        self._cancels += 1
        if self.brain.running:
            self.brain.cancel()
        elif self.preparing_prompt:
            self.cancel_pending = True
            if self._greeting_wait is not None:
                self._greeting_wait.cancel()

    @property
    def id(self) -> str:
        """The session id."""
        return self.header.session_id

    def set_mode(self, mode: PermissionMode) -> None:
        """Change the permission mode and record the change."""
        self.brain.set_mode(mode)
        self.recorder.settings(mode=mode)

    def set_model(self, model: ModelInfo) -> None:
        """Switch models and record the change."""
        self.brain.set_model(model)
        self.recorder.settings(model=model.id)

    def set_thinking(self, thinking: Thinking) -> None:
        """Change the thinking choice and record what changed."""
        before = self.brain.state.thinking
        self.brain.set_thinking(thinking)
        changes: dict[str, str | bool] = {}
        if thinking.on != before.on:
            changes["thinking"] = thinking.on
        if thinking.level != before.level:
            changes["thought_level"] = thinking.level
        if changes:
            self.recorder.settings(**changes)

    async def close(self) -> None:
        """Stop any running turn and the session's MCP servers, and release the history file."""
        if self.introduction is not None:
            self.introduction.cancel()
        await self.brain.close()
        self.recorder.file.close()


def start_session(
    store: SessionStore,
    settings: Settings,
    model: ModelInfo,
    header: SessionHeader,
    stored: SessionLog | None = None,
    *,
    approver: Approver | None,
    model_factory: ModelFactory | None = None,
    on_title: Callable[[str], Awaitable[None]] | None = None,
    fs: FileSystem | None = None,
    terminal: Terminal | None = None,
    mcp_servers: tuple[McpServerSpec, ...] = (),
    catalog: Catalog | None = None,
) -> LiveSession:
    """Open ``header``'s session: a new one (its history file is created) or, given ``stored``, the stored one
    with its brain restored from the recorded events and its mode as last recorded."""
    file = store.open(header.session_id) if stored is not None else store.create(header)
    mode = parse_mode(stored.mode if stored is not None else header.mode)
    brain = open_session(
        settings,
        model,
        header.cwd,
        approver=approver,
        mode=mode,
        additional_dirs=header.additional_dirs,
        model_factory=model_factory,
        session_id=header.session_id,
        fs=fs,
        terminal=terminal,
        mcp_servers=mcp_servers,
        catalog=catalog,
        prompts_dir=store.prompts_dir(header.session_id),
    )
    if stored is not None:
        brain.set_thinking(stored.thinking)
        brain.restore(stored.events)
    recorder = store.recorder(header, file, title=stored.title if stored else None, on_title=on_title)
    brain.subscribe(recorder)
    return LiveSession(header, brain, recorder)
