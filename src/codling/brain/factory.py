"""Assembling a ConversationSession from settings: workspace, local ports, permissions and model."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from codling.brain.host import ModelFactory
from codling.brain.options import SessionOptions
from codling.brain.session import ConversationSession
from codling.brain.state import SessionState
from codling.config import Settings
from codling.llm.catalog import Catalog, ModelInfo
from codling.llm.providers import ModelMenu
from codling.mcp_servers import McpServerSpec, merged
from codling.paths import user_home
from codling.permission_rules import project_rules
from codling.tools.approval import Permissions
from codling.tools.deps import ToolDeps
from codling.tools.local import LocalFileSystem, LocalTerminal
from codling.tools.mcp.servers import McpServers
from codling.tools.ports import Approver, FileSystem, Terminal
from codling.tools.protected import Protection
from codling.tools.sandbox.policy import build_sandbox
from codling.tools.workspace import Workspace
from codling.vocabulary import PermissionMode

if TYPE_CHECKING:
    from codling.tools.checkpoints.keeper import CheckpointKeeper


def open_session(
    settings: Settings,
    model: ModelInfo,
    cwd: Path,
    *,
    approver: Approver | None,
    mode: PermissionMode | None = None,
    additional_dirs: tuple[Path, ...] = (),
    model_factory: ModelFactory | None = None,
    session_id: str | None = None,
    fs: FileSystem | None = None,
    terminal: Terminal | None = None,
    mcp_servers: tuple[McpServerSpec, ...] = (),
    catalog: Catalog | None = None,
    prompts_dir: Path | None = None,
    checkpoints_dir: Path | None = None,
) -> ConversationSession:
    """A new session working in ``cwd``: on the local disk and in local subprocesses, unless ``fs`` and
    ``terminal`` say otherwise (an editor's, over ACP). Its MCP servers are ``mcp_servers`` (the editor's)
    and config.toml's, the editor's winning on a name clash; they start once the session's loop runs them
    (``ConversationSession.start_servers``). ``/model`` may switch to ``catalog``'s models (None: to none).
    A prompt too long for the window is saved whole in ``prompts_dir`` (None: nowhere), which the tools may
    read. The workspace's checkpoints are kept in ``checkpoints_dir`` (None, or ``checkpoints = false``: none
    are taken)."""
    mode = mode or settings.mode
    state = SessionState(
        session_id=session_id or uuid.uuid4().hex,
        cwd=cwd,
        model=model,
        mode=mode,
        additional_dirs=additional_dirs,
        prompts_dir=prompts_dir,
    )
    sandbox = build_sandbox(
        (cwd, *additional_dirs),
        home=user_home(settings.env),
        codling_home=settings.home,
        extra_writable=settings.sandbox_writable,
        setting=settings.sandbox,
        env=dict(settings.env) if settings.env else None,
    )
    servers = merged(mcp_servers, settings.mcp_servers)
    mcp = None
    if servers:
        mcp = McpServers(
            servers,
            cwd,
            startup_timeout=settings.mcp_startup_timeout,
            tool_timeout=settings.mcp_tool_timeout,
            sandbox=sandbox,
        )
    deps = ToolDeps(
        workspace=Workspace(cwd, (*additional_dirs, *((prompts_dir,) if prompts_dir else ()))),
        fs=fs or LocalFileSystem(),
        terminal=terminal or LocalTerminal(allow=settings.command_env_allow),
        permissions=Permissions(
            mode,
            approver,
            Protection(
                home=user_home(settings.env),
                codling_home=settings.home,
                git=shutil.which("git"),
                roots=(cwd, *additional_dirs),
            ),
            settings.permissions + project_rules(cwd),
            settings.home,
        ),
        command_timeout=settings.command_timeout,
        mcp=mcp,
        checkpoints=_keeper(checkpoints_dir, cwd, settings) if checkpoints_dir and settings.checkpoints else None,
        sandbox=sandbox,
    )
    options = SessionOptions(
        max_requests_per_turn=settings.max_requests_per_turn,
        compact_threshold=settings.compact_threshold,
        max_tool_passes=settings.max_tool_passes,
        auto_title=settings.titles,
        title_model=settings.title_model,
        delegates=settings.delegates,
        stream_idle_timeout=settings.stream_idle_timeout,
        prompt_cache=settings.cache,
        models=ModelMenu(catalog, settings.env) if catalog is not None else None,
    )
    return ConversationSession(state, deps, model_factory=model_factory, options=options)


def _keeper(directory: Path, cwd: Path, settings: Settings) -> CheckpointKeeper:
    """The session's checkpoint keeper (imported here, when a session takes checkpoints at all)."""
    from codling.tools.checkpoints.keeper import CheckpointKeeper

    return CheckpointKeeper(directory, cwd, git=shutil.which("git"), excluded=(settings.home,))
