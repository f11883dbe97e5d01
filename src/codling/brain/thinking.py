"""A session's thinking choice: whether a model that can think does, and how hard.

The choice belongs to the session, not to a model: it is kept across model switches and applies to whichever
model the session uses next, as long as that model's catalog entry says it thinks (``ModelInfo.thinking``).
It is recorded in the history like a model change (a ``settings`` record), so load, resume and fork keep it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from codling.llm.catalog import ModelInfo

ThoughtLevel = Literal["default", "low", "medium", "high"]
"""How hard a thinking model thinks: the model's own default, or one of pydantic-ai's effort levels."""

THOUGHT_LEVELS: tuple[ThoughtLevel, ...] = ("default", "low", "medium", "high")

THOUGHT_LEVEL_NAMES: dict[ThoughtLevel, str] = {
    "default": "Model default",
    "low": "Low",
    "medium": "Medium",
    "high": "High",
}

RequestThinking = bool | Literal["low", "medium", "high"]
"""What a model request's ``thinking`` setting gets (pydantic-ai's ``ThinkingLevel``, narrowed to codling's)."""


@dataclass(frozen=True)
class Thinking:
    """Whether a model that can think does (``on``), and at what effort (``level``)."""

    on: bool = True
    level: ThoughtLevel = "default"

    def setting(self, model: ModelInfo) -> RequestThinking | None:
        """The ``thinking`` request setting for ``model`` (None: leave it unset, the model cannot think)."""
        if not model.thinking:
            return None
        if not self.on:
            return False
        return True if self.level == "default" else self.level

    def thinks(self, model: ModelInfo) -> bool:
        """Whether ``model``'s requests ask it to think."""
        return self.setting(model) not in (None, False)
