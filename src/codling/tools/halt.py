"""Per-file work run off the event loop that stops when its call is cancelled or its time is up.

A thread cannot be killed, and ``asyncio.to_thread`` work keeps running after its caller is cancelled (and keeps
the interpreter from exiting, since the default executor's threads are joined at exit). So the work gets a
:class:`Halt` it checks between files: :func:`off_loop` sets it when the caller is cancelled and the work's
deadline passes, runs the work in a daemon thread, and waits for it to have stopped before it returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

_STOP_WAIT = 5.0
"""How long a cancelled call waits for its work to notice (it checks between files: microseconds)."""


class Halt:
    """Whether off-loop work must stop: its caller gave up, or ``time_limit`` seconds have passed."""

    def __init__(self, time_limit: float) -> None:
        self.time_limit = time_limit
        self._deadline = time.monotonic() + time_limit
        self._event = threading.Event()
        self.timed_out = False
        """Set once the work stopped because its time was up (not because its caller gave up)."""

    def stop(self) -> None:
        """Ask the work to stop."""
        self._event.set()

    def reached(self) -> bool:
        """Whether the work must stop now; cheap enough to ask for every file."""
        if self._event.is_set():
            return True
        if time.monotonic() >= self._deadline:
            self.timed_out = True
            self._event.set()
            return True
        return False


async def off_loop(work: Callable[[Halt], T], time_limit: float, name: str = "codling-walk") -> T:
    """``work(halt)`` in a daemon thread; the halt is set when the caller is cancelled (then the call waits until
    the work has stopped) and when ``time_limit`` seconds have passed, which the work reports in its result."""
    halt = Halt(time_limit)
    loop = asyncio.get_running_loop()
    done: asyncio.Future[T] = loop.create_future()

    def deliver(value: T | None, error: BaseException | None) -> None:
        if done.done():
            return
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(value)  # type: ignore[arg-type]

    def run() -> None:
        value: T | None = None
        error: BaseException | None = None
        try:
            value = work(halt)
        except BaseException as e:  # handed to the caller, whatever it is
            error = e
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
            loop.call_soon_threadsafe(deliver, value, error)

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    try:
        return await asyncio.shield(done)
    finally:
        if not done.done():  # cancelled: stop the work and see it stop
            halt.stop()
            with contextlib.suppress(TimeoutError, asyncio.CancelledError, Exception):
                await asyncio.wait_for(asyncio.shield(done), _STOP_WAIT)
            if done.done():
                thread.join(_STOP_WAIT)  # it has delivered: only its return is left
        if done.done() and not done.cancelled():
            done.exception()  # retrieved, so an error nobody awaits is not logged as lost
