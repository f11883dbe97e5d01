"""The bounds of a session's turn loop."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from codling.brain.context import compaction
from codling.brain.retries import RetryPolicy
from codling.config import PromptCache
from codling.tools.specs import ToolName, known_tools

if TYPE_CHECKING:
    from codling.llm.providers import ModelMenu

TOOLS_SPENT_NOTE = (
    "You have used every tool pass this turn allows, so no tools are available now. Answer the user with what "
    "you have: what you did, what you found, and what is left to do."
)


@dataclass(frozen=True)
class SessionOptions:
    """Bounds and behaviour of the turn loop."""

    max_requests_per_turn: int = 50
    """Model requests one turn may make; reaching it ends the turn with ``max_turn_requests``."""
    max_cost: float | None = None
    """US dollars a turn may spend (``codling run --max-cost``); once its spend passes this, the turn ends with
    ``max_cost`` before its next model request (see ``brain/spend_cap.py``). None: no cap."""
    max_tool_passes: int = 40
    """Rounds of tool calls one turn may make; after that the model is asked once more, without tools, to
    answer with what it has."""
    run_tools: bool = True
    """Whether the model is offered tools at all."""
    merge_window: float = 0.005
    """Coalescing: while text streams, deltas are merged and delivered at most once per this many seconds;
    the first delta of a run of text is never held (see ``brain/coalesce.py``). 0 merges only what is queued."""
    max_chunk_chars: int = 8192
    """Coalescing: the largest merged text delta."""
    compact_threshold: float = compaction.DEFAULT_THRESHOLD
    """Compact before a turn once the context passes this share of the model's context limit."""
    auto_title: bool = False
    """After the first turn of a new session, name it with the title special turn (``SessionTitled``)."""
    title_model: str | None = None
    """The model id the title special turn uses (None: the session's model)."""
    model_titles: bool = True
    """With ``auto_title``: ask a model for the title; False names the session after its first request at
    once, with no request (``codling run`` does, so the title never delays its exit)."""
    delegates: bool = True
    """Whether the model may hand tasks to delegates (sub-agents); off inside a delegate, so depth is bounded."""
    tool_names: frozenset[ToolName] | None = None
    """The tools the model is offered (None: all); a delegate's role limits them. An unknown name is refused."""
    role_instructions: str | None = None
    """Instructions added to the system prompt (a delegate's role)."""
    stream_idle_timeout: float = 120.0
    """Seconds a model request may go without data from the provider (between streamed chunks, or before
    the answer) before the turn fails; ``stream_idle_timeout`` in config.toml."""
    prompt_cache: PromptCache = "5m"
    """Prompt caching for the models this session builds (``cache`` in config.toml; "off": none)."""
    models: ModelMenu | None = None
    """The models ``/model`` may switch to (None: it only names the current one)."""
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    """How a model request the provider refused for a passing reason (429, 5xx, no connection) is retried."""

    def __post_init__(self) -> None:
        known_tools(self.tool_names or (), "the session's options")
