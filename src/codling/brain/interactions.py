"""Interactions and the filter that decides which of them a special turn may persist.

An interaction is one piece of a conversation, tagged with its kind: ``system``, ``context``, ``user``,
``assistant``, ``tool_call``, ``tool_result``, ``thought`` or ``summary``. A filter naming any other kind is
refused when it is built: a typo would silently block everything.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal, cast, get_args

from codling.errors import ConfigError

InteractionKind = Literal["system", "context", "user", "assistant", "tool_call", "tool_result", "thought", "summary"]
"""What one piece of a conversation is."""

KINDS: tuple[InteractionKind, ...] = get_args(InteractionKind)
"""Every interaction kind."""


@dataclass(frozen=True)
class Interaction:
    """One piece of a conversation: its kind and its text."""

    kind: InteractionKind
    text: str


@dataclass(frozen=True)
class InteractionFilter:
    """Allow and block lists over interaction kinds: a kind passes when it is not blocked and the allow list is
    empty or names it (block wins)."""

    allow: frozenset[InteractionKind] = frozenset()
    block: frozenset[InteractionKind] = frozenset()

    def __post_init__(self) -> None:
        if unknown := sorted((self.allow | self.block) - set(KINDS)):
            raise ConfigError(
                f"an interaction filter names unknown kinds: {', '.join(unknown)}; known: {', '.join(KINDS)}"
            )

    @classmethod
    def of(cls, allow: Iterable[str] = (), block: Iterable[str] = ()) -> InteractionFilter:
        """A filter from any iterables of kind names (checked: an unknown name is a ``ConfigError``)."""
        return cls(
            cast(frozenset[InteractionKind], frozenset(allow)), cast(frozenset[InteractionKind], frozenset(block))
        )

    def allows(self, kind: str) -> bool:
        """Whether interactions of ``kind`` pass."""
        return kind not in self.block and (not self.allow or kind in self.allow)

    def apply(self, interactions: Iterable[Interaction]) -> list[Interaction]:
        """The interactions that pass, in order."""
        return [i for i in interactions if self.allows(i.kind)]


DEFAULT = InteractionFilter.of(allow=("user", "assistant"))
"""The conversation only: what the user said and what the assistant answered."""

PRESERVE_SYSTEM_CONTEXT = InteractionFilter.of(allow=("system", "context", "user", "assistant", "summary"))
"""The conversation plus the system prompt, the project context and summaries (what a compaction keeps)."""

ALLOW_ALL = InteractionFilter()
"""Everything, tool calls and thoughts included."""
