"""The one lifecycle every kind of turn has (``TurnTask``: start, run, abort, finish) and the one driver that
runs it (``perform``); the idea is codex's ``SessionTask``.

The kinds: a user turn (``turn_kinds/user.py``: the prompt through the model), a slash command answered by
codling (``turn_kinds/command.py``), a compaction (``turn_kinds/compaction.py``: ``/compact``'s, and the
threshold's, mid-turn's and overflow's inside a user turn) and a special turn (``special_turns.SpecialTask``:
greeting, summary, title). Each is one class; what a running user turn knows is its ``TurnContext``.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from typing import ClassVar, Generic, Literal, TypeVar

TurnKind = Literal["user", "command", "compaction", "special"]
"""The kinds of turn (see the module's docstring)."""

R = TypeVar("R")


class TurnTask(ABC, Generic[R]):
    """One turn of some kind, run by ``perform``: ``start`` (its first events, what it reads), ``run`` (its
    work, which may be cancelled or fail), ``abort`` (when ``run`` was cancelled or failed) and ``finish``
    (its last events and its result, however ``run`` ended, unless ``abort`` let the error through)."""

    kind: ClassVar[TurnKind]

    def start(self) -> None:
        """Begin: whatever must happen before the work, even if the turn is cancelled at once."""

    @abstractmethod
    async def run(self) -> None:
        """The turn's work."""

    @abstractmethod
    def abort(self, error: Exception | asyncio.CancelledError) -> bool:
        """``run`` was cancelled (``asyncio.CancelledError``) or failed: say so; True when the turn still ends
        normally (``finish`` runs), False to let ``error`` through."""

    @abstractmethod
    async def finish(self) -> R:
        """End the turn and return its result."""


async def perform(task: TurnTask[R]) -> R:
    """Run ``task`` through its lifecycle; a cancel its ``abort`` absorbs is taken back from the current task,
    so nothing in ``finish`` is cut short by it."""
    task.start()
    try:
        await task.run()
    except asyncio.CancelledError as e:
        if not task.abort(e):
            raise
        # A cancel may land after the turn caught its last exception; nothing below may be cut short.
        asyncio.current_task().uncancel()  # type: ignore[union-attr]
    except Exception as e:
        if not task.abort(e):
            raise
    return await task.finish()
