"""What a special turn asks and how it ended (see ``special_turns.py``, which runs them)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from codling.brain.interactions import DEFAULT, KINDS, Interaction, InteractionFilter
from codling.errors import SpecialTurnError
from codling.tools.specs import NO_TOOLS, ToolFilter

Persistence = Literal["persist-result", "persist-all", "ephemeral", "replace-above"]


@dataclass(frozen=True)
class SpecialTurnConfig:
    """What a special turn asks, and what becomes of its answer."""

    prompt: str
    """The request (the last user message of the special turn)."""
    turn_type: str = "special"
    messages: Sequence[Interaction] | None = None
    """Messages to send instead of a copy of the session's history (None: the history). As the history does,
    they reach the model as text: ``system`` as a system prompt, ``context`` and ``user`` as user messages,
    ``assistant`` and ``tool_result`` as replies, ``summary`` behind the summary prefix; ``thought`` and
    ``tool_call`` (a call's title, which its result repeats) are not sent."""
    instructions: str | None = None
    """System instructions instead of the session's (None: the session's)."""
    model: str | None = None
    """A model id instead of the session's."""
    tool_filter: ToolFilter = NO_TOOLS
    """Which tools the model may call (with ``run_tools``)."""
    run_tools: bool = False
    share_prefix: bool = False
    """Lay the request out as a user turn's (the session's system prompt, the tool definitions a user turn
    offers, the history, then ``prompt``) with the tools switched off (``tool_choice`` none; a call the
    provider sends anyway is refused), so a provider's prefix cache serves all of it but the prompt. Needs
    ``messages`` and ``instructions`` None."""
    force_non_streaming: bool = True
    timeout: float = 120.0
    idle_timeout: float | None = None
    """Seconds without a byte from the provider before the turn fails (its requests' read timeout, and between
    streamed events); None: the client's own (``stream_idle_timeout``)."""
    max_tokens: int | None = None
    """A cap on the answer's length (None: the model's default)."""
    persistence: Persistence = "ephemeral"
    persistence_filter: InteractionFilter = DEFAULT
    keep: Sequence[Interaction] = ()
    """replace-above: interactions that stay in front of the result (e.g. the recent user messages a
    compaction keeps); they pass through the persistence filter like the result. The result replaces the
    history the special turn read: what entered it since (a user turn that ended meanwhile) stays after the
    result; if the history was replaced meanwhile (another summary), the result no longer applies and is an
    error result."""
    accept: Callable[[str], bool] | None = None
    """A check on the output: a rejected output is an error result (e.g. an empty or refused summary)."""
    fallback: Callable[[], str] | None = None
    """An output built without the model, persisted when the turn fails, times out or is rejected."""
    shrink: Callable[[SpecialTurnConfig], SpecialTurnConfig | None] | None = None
    """A smaller request when the provider said the request was too long (None: give up); asked again, with
    the config last sent, after each such answer."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """Carried to the result and, when it persists, into history.jsonl: it must be JSON."""

    def __post_init__(self) -> None:
        try:
            if json.loads(json.dumps(self.metadata, allow_nan=False)) != self.metadata:
                raise ValueError("it would read back differently (tuples, non-string keys)")
        except (TypeError, ValueError) as e:
            raise SpecialTurnError(
                f"a special turn's metadata is recorded in history.jsonl, so it must be JSON: {e}"
            ) from e
        if self.share_prefix and (self.messages is not None or self.instructions is not None):
            raise SpecialTurnError("a special turn that shares the user turns' prefix sends the session's own")
        unknown = sorted({i.kind for i in self.messages or ()} - set(KINDS))
        if unknown:
            raise SpecialTurnError(
                f"a special turn cannot send interactions of kind {', '.join(unknown)}; known: {', '.join(KINDS)}"
            )


@dataclass(frozen=True)
class SpecialTurnResult:
    """How a special turn ended: its output, or the error that stopped it."""

    turn_type: str
    status: Literal["ok", "error", "timeout"]
    output: str = ""
    error: str | None = None
    persisted: tuple[Interaction, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)
    fallback: bool = False
    """The output is the config's fallback; ``error`` says why the model's answer was not used."""
    interactions: tuple[Interaction, ...] = ()
    """What the model did, in order: its thoughts, tool calls, tool results and text (persist-all persists
    these after the prompt, filtered)."""

    @property
    def ok(self) -> bool:
        """Whether the special turn produced an output (the model's or its fallback)."""
        return self.status == "ok"


Announce = Callable[[SpecialTurnResult], Awaitable[None]]
"""Tells the world that a special turn's result was persisted (by default: ``SpecialTurnPersisted`` to every
observer of the session)."""
