"""Per-session state the brain keeps between turns."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from codling.config import PermissionMode
from codling.llm.catalog import ModelInfo

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelMessage


@dataclass
class SessionState:
    """What one session knows: where it works, with which model and mode, and its text history.

    ``history`` holds only user and assistant text (tool calls appear as plain-text summaries inside the
    assistant text), so no provider rejects a truncated tool-call history across turns.
    """

    session_id: str
    cwd: Path
    model: ModelInfo
    mode: PermissionMode = "ask"
    additional_dirs: tuple[Path, ...] = ()
    history: list[ModelMessage] = field(default_factory=list)
    turn_count: int = 0
