"""What the parts around the turns need of a session, as a protocol they type against.

The turn kinds (``turn_kinds/``), special turns (``special_turns.py``), compaction (``context/compactor.py``),
delegates (``delegates.py``) and slash commands (``commands.py``) work on the session that runs them;
``ConversationSession`` (``session.py``) is that session and imports them. Typing them against this protocol
instead of the class keeps the import graph free of circles: none of them imports ``session.py``, not even for
type checking. What a running turn knows besides is its ``TurnContext`` (``turn_context.py``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from codling.brain.events import Event
from codling.brain.model_stack import ModelStack
from codling.brain.options import SessionOptions
from codling.brain.prompt import PromptBlock
from codling.brain.spend import SpentAside
from codling.brain.state import SessionState
from codling.llm.catalog import ModelInfo
from codling.tools.deps import ToolDeps
from codling.vocabulary import PermissionMode

if TYPE_CHECKING:
    from pydantic_ai.models import Model

    from codling.brain.context.engine import ContextEngine
    from codling.brain.special_config import Announce, SpecialTurnConfig, SpecialTurnResult

Recorded = Callable[[], Awaitable[list[Event]]]
"""Reads a session's events back from where they are recorded (history.jsonl)."""

ModelFactory = Callable[[str], "Model"]
"""Builds a pydantic-ai model from a model id (tests inject a scripted one)."""


class TurnStream(Protocol):
    """A session as its delegates' caller sees it: something that runs a prompt as a stream of events."""

    def stream(self, prompt: str | tuple[PromptBlock, ...]) -> AsyncIterator[Event]:
        """Run one turn, yielding its events."""
        ...


class SessionHost(Protocol):
    """The session a turn, a special turn, a compaction or a delegate works for."""

    state: SessionState
    deps: ToolDeps
    options: SessionOptions
    models: ModelStack
    """Its agent, models, system prompt and toolsets."""
    context: ContextEngine
    aside: SpentAside
    """What was spent beside the turns' own requests (delegates, special turns), for the next turn to end."""

    def notify(self, event: Event) -> Awaitable[None]:
        """Hand an event that is not part of a turn to every observer."""
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

    def spawn(self, state: SessionState, deps: ToolDeps, options: SessionOptions) -> TurnStream:
        """A new session of the same kind, with the same model factory (a delegate)."""
        ...

    @property
    def recorded(self) -> Recorded | None:
        """Reads the session's recorded events back (None: it is not recorded)."""
        ...

    def rebuild(self, events: Sequence[Event]) -> None:
        """Rebuild the conversation from ``events`` (after a rewind), as a restore would."""
        ...
