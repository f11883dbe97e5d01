"""Coalescing of streamed text and thoughts: fewer, larger deltas when the model is fast, never a later first
delta."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from codling.brain.events import TextDelta, ThoughtDelta

_NOTHING = object()
"""What ``_get_within`` returns when its time ran out before an item came."""


class TextCoalescer:
    """Takes items off a turn's event queue, merging consecutive text deltas (and consecutive thought deltas).

    The first delta of a run (at the start of a turn or after any other event) is delivered at once.
    While text keeps coming, later deltas are held until ``window`` seconds have passed since the previous
    delivery, and everything that arrived meanwhile goes out as one delta (at most ``max_chars`` long, unless
    a single delta already is). A model streaming a token at a time therefore produces at most one notification
    per window, and a slow model (deltas further apart than the window) sees no delay at all. Deltas already
    waiting are always merged; any other item ends the wait at once.

    The window is measured by ``clock`` (the time in seconds) and waited out with ``sleep(seconds)``, which
    must follow that clock: by default ``time.monotonic`` and ``asyncio.sleep`` (the event loop's own clock);
    a test passes a clock it moves by hand.
    """

    def __init__(
        self,
        queue: asyncio.Queue[Any],
        *,
        window: float,
        max_chars: int,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    ) -> None:
        self._queue = queue
        self._window = window
        self._max_chars = max_chars
        self._clock = clock
        self._sleep = sleep
        self._pending: Any = None
        self._has_pending = False
        self._last_text: float | None = None
        self._last_kind: type | None = None

    async def next(self) -> Any:
        """The next item to deliver: a (possibly merged) text or thought delta, or any other item as it was."""
        item = self._take_pending() if self._has_pending else await self._queue.get()
        if not isinstance(item, TextDelta | ThoughtDelta):
            self._last_text = None
            return item
        kind = type(item)
        parts = [item.text]
        size = len(item.text)
        if self._last_text is not None and self._window > 0 and kind is self._last_kind:
            deadline = self._last_text + self._window
            while size < self._max_chars and (remaining := deadline - self._clock()) > 0:
                following = await self._get_within(remaining)
                if following is _NOTHING:
                    break
                if not self._fits(following, kind, size):
                    self._hold(following)
                    break
                parts.append(following.text)
                size += len(following.text)
        while size < self._max_chars and not self._has_pending and not self._queue.empty():
            following = self._queue.get_nowait()
            if not self._fits(following, kind, size):
                self._hold(following)
                break
            parts.append(following.text)
            size += len(following.text)
        # Held back for its kind, the next item starts a new run (delivered at once); held back for size only,
        # it continues this run, merged within the window like the rest.
        new_run = self._has_pending and type(self._pending) is not kind
        self._last_text = None if new_run else self._clock()
        self._last_kind = kind
        return item if len(parts) == 1 else kind(item.turn_id, "".join(parts))

    async def _get_within(self, seconds: float) -> Any:
        """The next item off the queue, or ``_NOTHING`` once ``sleep(seconds)`` is over and none came."""
        if not self._queue.empty():
            return self._queue.get_nowait()
        getter = asyncio.ensure_future(self._queue.get())
        timer = asyncio.ensure_future(self._sleep(seconds))
        try:
            await asyncio.wait((getter, timer), return_when=asyncio.FIRST_COMPLETED)
        finally:
            timer.cancel()
            if not getter.done():
                getter.cancel()  # a get cancelled before it took its item leaves the item queued
        return getter.result() if getter.done() and not getter.cancelled() else _NOTHING

    def _fits(self, item: Any, kind: type, size: int) -> bool:
        """Whether ``item`` can join a merged delta of ``kind`` that is ``size`` characters long so far."""
        fits: bool = isinstance(item, TextDelta | ThoughtDelta) and size + len(item.text) <= self._max_chars
        return fits and type(item) is kind

    def _hold(self, item: Any) -> None:
        self._pending = item
        self._has_pending = True

    def _take_pending(self) -> Any:
        item, self._pending, self._has_pending = self._pending, None, False
        return item
