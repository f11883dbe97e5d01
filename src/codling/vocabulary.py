"""The words every layer shares: why a turn stopped, what a tool call does, a plan's steps, a file's change and
place, the permission modes. One home for each, below every layer (foundation), so that no module re-exports
another's names.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

PermissionMode = Literal["read-only", "ask", "accept-edits", "auto", "yolo"]
"""How much a session may do without asking (see ``tools/approval.py``)."""

StopReason = Literal["end_turn", "max_tokens", "max_turn_requests", "max_cost", "refusal", "cancelled"]
"""Why a turn (or a delegate's run) ended; ACP's set plus ``max_cost`` (the turn's spend passed its cap, which
ACP calls ``max_turn_requests``: a limit the agent set). A failed turn ends with ``end_turn`` and an error."""

ToolKind = Literal["read", "edit", "delete", "move", "search", "execute", "think", "fetch", "other"]
"""What a tool call does; the same set ACP clients use to pick an icon."""

PlanStatus = Literal["pending", "in_progress", "completed"]
PlanPriority = Literal["high", "medium", "low"]

STATUS_MARKS: dict[PlanStatus, str] = {"completed": "[x]", "in_progress": "[>]", "pending": "[ ]"}
"""How each step's status is written in a plan's text (its summary, the terminal's checklist)."""


@dataclass(frozen=True)
class PlanStep:
    """One step of the model's plan (ACP's plan entry)."""

    step: str
    """What to do, in a short imperative sentence."""
    status: PlanStatus = "pending"
    priority: PlanPriority = "medium"


@dataclass(frozen=True)
class FileDiff:
    """A change to one file: the whole old text (``None`` for a new file) and the whole new text."""

    path: Path
    old_text: str | None
    new_text: str


@dataclass(frozen=True)
class Location:
    """A file (absolute path) and optionally a 1-based line a tool call touches."""

    path: Path
    line: int | None = None


SandboxSetting = Literal["on", "always", "off"]
"""config.toml's ``sandbox``: commands confined in every mode but yolo (default), in yolo too, or never."""
SANDBOX_SETTINGS: tuple[SandboxSetting, ...] = ("on", "always", "off")
