"""Interactions and the filter that decides which of them a special turn may persist.

An interaction is one piece of a conversation, tagged with its kind: ``system``, ``context``, ``user``,
``assistant``, ``tool_call``, ``tool_result``, ``thought`` or ``summary``. Kinds are plain strings, so a new
kind needs no change here: a filter only compares names.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

KINDS: tuple[str, ...] = ("system", "context", "user", "assistant", "tool_call", "tool_result", "thought", "summary")
"""The interaction kinds codling produces today."""


@dataclass(frozen=True)
class Interaction:
    """One piece of a conversation: its kind and its text."""

    kind: str
    text: str


@dataclass(frozen=True)
class InteractionFilter:
    """Allow and block lists over interaction kinds: a kind passes when it is not blocked and the allow list is
    empty or names it (block wins)."""

    allow: frozenset[str] = frozenset()
    block: frozenset[str] = frozenset()

    @classmethod
    def of(cls, allow: Iterable[str] = (), block: Iterable[str] = ()) -> InteractionFilter:
        """A filter from any iterables of kind names."""
        return cls(frozenset(allow), frozenset(block))

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

PRESETS: dict[str, InteractionFilter] = {
    "default": DEFAULT,
    "preserve-system-context": PRESERVE_SYSTEM_CONTEXT,
    "allow-all": ALLOW_ALL,
}
