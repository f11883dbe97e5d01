"""What the parts around the turn loop need of a session, as a protocol they type against.

Special turns (``special_turns.py``), compaction (``context/compactor.py``), delegates (``delegates.py``) and
slash commands (``commands.py``)
work on the session that runs them; ``ConversationSession`` (``session.py``) is that session and imports them.
Typing them against this protocol instead of the class keeps the import graph free of circles: none of them
imports ``session.py``, not even for type checking.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from codling.brain.events import Event, UsageUpdated
from codling.brain.options import SessionOptions
from codling.brain.prompt import PromptBlock
from codling.brain.spend import Spend
from codling.brain.state import SessionState
from codling.llm.catalog import ModelInfo
from codling.tools.deps import ToolDeps
from codling.tools.specs import ToolFilter
from codling.vocabulary import PermissionMode

if TYPE_CHECKING:
    from pydantic_ai.models import Model

    from codling.brain.special_config import Announce, SpecialTurnConfig, SpecialTurnResult

ModelFactory = Callable[[str], "Model"]
"""Builds a pydantic-ai model from a model id (tests inject a scripted one)."""


class TurnStream(Protocol):
    """A session as its delegates' caller sees it: something that runs a prompt as a stream of events."""

    def stream(self, prompt: str | tuple[PromptBlock, ...]) -> AsyncIterator[Event]:
        """Run one turn, yielding its events."""
        ...


class SessionHost(Protocol):
    """The session a special turn, a compaction or a delegate works for."""

    state: SessionState
    deps: ToolDeps
    options: SessionOptions

    @property
    def model_factory(self) -> ModelFactory | None:
        """How the session builds models (None: from the providers)."""
        ...

    def model_for(self, model_id: str | None) -> Model:
        """The session's model, or the one ``model_id`` names."""
        ...

    def instructions(self) -> str:
        """The session's system prompt."""
        ...

    def toolset(self, tool_filter: ToolFilter) -> Any:
        """The session's tools, limited by ``tool_filter``."""
        ...

    def turn_toolsets(self) -> list[Any]:
        """The toolsets a user turn offers, in the order its requests list them."""
        ...

    def inside_turn(self) -> bool:
        """Whether the calling task is part of the user turn in progress."""
        ...

    def turn_over(self) -> Awaitable[None]:
        """Wait until no user turn is in progress."""
        ...

    def notify(self, event: Event) -> Awaitable[None]:
        """Hand an event that is not part of a turn to every observer."""
        ...

    def context_used(self) -> int:
        """Tokens the next request would start from."""
        ...

    def context_overhead(self) -> int:
        """What the next request carries besides its history: system prompt, tools, the turn's context block."""
        ...

    def usage_event(self, turn_id: str) -> UsageUpdated:
        """How full the context is now."""
        ...

    def execute_special_turn(
        self, config: SpecialTurnConfig, announce: Announce | None = None
    ) -> Awaitable[SpecialTurnResult]:
        """Run a special turn and persist its result as configured."""
        ...

    def set_mode(self, mode: PermissionMode) -> None:
        """Change the permission mode."""
        ...

    def set_model(self, model: ModelInfo) -> None:
        """Switch models."""
        ...

    def spent_aside(self) -> Spend:
        """What was spent beside the running turn's own requests so far (counted in it when it ends)."""
        ...

    def spend_aside(self, spend: Spend) -> None:
        """Count what a delegate or a special turn spent in the next turn to end."""
        ...

    def model_info(self, model_id: str | None) -> ModelInfo:
        """The catalog's entry for ``model_id`` (None: the session's model)."""
        ...

    def spawn(self, state: SessionState, deps: ToolDeps, options: SessionOptions) -> TurnStream:
        """A new session of the same kind, with the same model factory (a delegate)."""
        ...
