"""What the tools of a session work with (``ToolDeps``).

Light on purpose: no pydantic-ai here, so a session can be built (and ``session/new`` answered) before the model
stack is imported. What each tool is (its descriptor) is in ``tools/specs.py``; the toolset the model sees is in
``tools/toolset.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from codling.tools.approval import Permissions
from codling.tools.ports import Delegator, FileSystem, Terminal, ToolProgress
from codling.tools.workspace import Workspace

if TYPE_CHECKING:
    from codling.tools.checkpoints.keeper import CheckpointKeeper
    from codling.tools.mcp.servers import McpServers
    from codling.tools.sandbox.policy import Sandbox


@dataclass(frozen=True)
class ToolDeps:
    """What the tools of one session work with; pydantic-ai hands it to each tool as ``ctx.deps``."""

    workspace: Workspace
    fs: FileSystem
    terminal: Terminal
    permissions: Permissions
    command_timeout: float = 120.0
    """Default seconds a command may run (the model may ask for another, within limits)."""
    output_limit: int = 30_000
    """Most characters of command output kept for the model."""
    output_tokens: int = 8_000
    """Most tokens one tool result keeps for the model (the session sets it from the model's window: about a
    quarter of it); a longer result is cut in the middle, with a note saying so and how to see the rest."""
    progress: ToolProgress = field(default_factory=ToolProgress)
    """Where tools report what the user can watch while they run (the session connects it to its turns)."""
    delegator: Delegator | None = None
    """Runs delegates (sub-agents); None where delegating is not allowed (inside a delegate: depth is bounded)."""
    sees_images: bool = False
    """Whether the model is sent the images a tool returns (an MCP tool's); else they are only named."""
    mcp: McpServers | None = None
    """The session's MCP servers (None: it has none); their tools come with ``tools/mcp/mcp_toolset.py``."""
    checkpoints: CheckpointKeeper | None = None
    """Checkpoints the workspace before each call that may change files, and around each turn (None: none
    are taken: ``checkpoints = false`` in config.toml, a delegate's calls, a session with no folder)."""
    sandbox: Sandbox | None = None
    """Where commands may write, what they may not read, whether they reach the network (``tools/sandbox/``);
    None: commands run unconfined (no workspace to confine them to, as in some tests)."""
