"""Live sessions: a brain session wired to its history file, new or restored from disk.

Both front ends (ACP and the terminal) open sessions through here, so a session is recorded and restored the
same way whichever one started it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from codling.brain.events import Event
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


@dataclass(frozen=True)
class LiveSession:
    """An open session: the brain running its turns and the recorder writing them to history.jsonl. What only
    one front end needs around it is that front end's (ACP's: ``acp/served.py``)."""

    header: SessionHeader
    brain: ConversationSession
    recorder: HistoryRecorder

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
        checkpoints_dir=store.checkpoints_dir(header.session_id),
    )
    if stored is not None:
        brain.set_thinking(stored.thinking)
        brain.restore(stored.events)
        brain.deps.permissions.remember(stored.approvals)
    recorder = store.recorder(header, file, title=stored.title if stored else None, on_title=on_title)
    brain.subscribe(recorder)
    brain.deps.permissions.listen(lambda key: recorder.settings(always=key))

    async def recorded() -> list[Event]:
        return (await asyncio.to_thread(store.read, header.session_id)).events

    brain.recorded = recorded
    return LiveSession(header, brain, recorder)
