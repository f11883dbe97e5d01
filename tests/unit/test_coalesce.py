"""Text coalescing: merged while text streams fast, the first delta of a run never held.

The coalescer's time is a ``ManualClock`` the tests move by hand: which deltas merge is decided by where the
clock stands when each one arrives, never by how fast the machine runs the test.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from codling.brain.coalesce import TextCoalescer
from codling.brain.events import Event, TextDelta, ThoughtDelta, ToolCallFinished
from codling.brain.factory import open_session
from codling.brain.options import SessionOptions
from codling.config import Settings
from codling.llm.catalog import ModelInfo
from tests.fakes.scenarios import Say, Script, Until

T = "t"
LIVENESS = 5.0
"""Seconds a test waits for what must happen before it fails instead of hanging (real time)."""
NEVER = 3600.0
"""A merge window no test outlasts: the session tests' deltas merge whatever the machine's speed."""

R = TypeVar("R")


class ManualClock:
    """Time that moves only when the test says so, for ``TextCoalescer(clock=..., sleep=...)``.

    Calling it tells the time; ``sleep(seconds)`` records the wait in ``sleeps`` and returns once ``advance``
    has moved the time that far past the moment it was called (or when the sleeper is cancelled).
    """

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []
        self._sleepers: list[tuple[float, asyncio.Future[None]]] = []
        self._slept = asyncio.Event()

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        sleeper = (self.now + seconds, future)
        self._sleepers.append(sleeper)
        self.sleeps.append(seconds)
        self._slept.set()
        try:
            await future
        finally:
            self._sleepers.remove(sleeper)

    def advance(self, seconds: float) -> None:
        """Move the time on; the sleeps that are over now return."""
        self.now += seconds
        for until, future in self._sleepers:
            if until <= self.now and not future.done():
                future.set_result(None)

    @property
    def sleeping(self) -> int:
        """How many sleeps are in progress."""
        return len(self._sleepers)

    async def slept(self, count: int) -> None:
        """Wait until ``count`` sleeps have started in all (a liveness deadline: a test fails, not hangs)."""
        async with asyncio.timeout(LIVENESS):
            while len(self.sleeps) < count:
                self._slept.clear()
                await self._slept.wait()


def coalescer(queue: asyncio.Queue[Any], clock: ManualClock, *, window: float, max_chars: int) -> TextCoalescer:
    return TextCoalescer(queue, window=window, max_chars=max_chars, clock=clock, sleep=clock.sleep)


async def soon(awaitable: Awaitable[R]) -> R:
    """``awaitable``'s result; with the clock standing still, it must come without any time passing."""
    async with asyncio.timeout(LIVENESS):
        return await awaitable


async def test_queued_deltas_merge_and_other_events_keep_their_place() -> None:
    queue: asyncio.Queue[object] = asyncio.Queue()
    finished = ToolCallFinished(T, "c1", "read_file", "completed", "ok")
    for item in (TextDelta(T, "a"), TextDelta(T, "b"), finished, TextDelta(T, "c")):
        queue.put_nowait(item)
    coalescer = TextCoalescer(queue, window=0, max_chars=100)
    assert [await coalescer.next() for _ in range(3)] == [TextDelta(T, "ab"), finished, TextDelta(T, "c")]


async def test_merged_size_is_bounded() -> None:
    queue: asyncio.Queue[object] = asyncio.Queue()
    for _ in range(10):
        queue.put_nowait(TextDelta(T, "xxxx"))
    coalescer = TextCoalescer(queue, window=0, max_chars=8)
    sizes = [len((await coalescer.next()).text) for _ in range(5)]
    assert sizes == [8, 8, 8, 8, 8]


async def test_merging_never_passes_the_bound() -> None:
    queue: asyncio.Queue[object] = asyncio.Queue()
    for _ in range(6):
        queue.put_nowait(TextDelta(T, "abc"))
    queue.put_nowait(TextDelta(T, "a long single delta"))
    coalescer = TextCoalescer(queue, window=0, max_chars=8)
    texts = [(await coalescer.next()).text for _ in range(4)]
    assert texts == ["abcabc", "abcabc", "abcabc", "a long single delta"]  # 9 would pass 8; one delta is kept whole


async def test_the_first_delta_goes_at_once_and_later_ones_merge_until_the_window_is_over() -> None:
    queue: asyncio.Queue[object] = asyncio.Queue()
    clock = ManualClock()  # times in steps a float holds exactly, so every sum below is exact
    merger = coalescer(queue, clock, window=1.0, max_chars=10_000)
    queue.put_nowait(TextDelta(T, "0,"))
    assert await soon(merger.next()) == TextDelta(T, "0,")  # delivered at 0.0
    assert clock.sleeps == []  # the first delta of a run is never held

    queue.put_nowait(TextDelta(T, "1,"))
    delivery = asyncio.create_task(merger.next())
    await clock.slept(1)
    assert clock.sleeps == [1.0]  # held until the window after the last delivery is over
    queue.put_nowait(TextDelta(T, "2,"))
    await clock.slept(2)  # taken, and waiting again for the rest of the same window
    clock.advance(0.25)
    queue.put_nowait(TextDelta(T, "3,"))
    await clock.slept(3)
    assert clock.sleeps == [1.0, 1.0, 0.75]
    assert not delivery.done()
    clock.advance(0.75)
    assert await soon(delivery) == TextDelta(T, "1,2,3,")  # delivered at 1.0

    queue.put_nowait(TextDelta(T, "4,"))
    queue.put_nowait(TextDelta(T, "5,"))
    delivery = asyncio.create_task(merger.next())
    await clock.slept(4)
    assert clock.sleeps[3] == 1.0  # the next window starts at that delivery
    assert not delivery.done()
    clock.advance(1.0)
    assert await soon(delivery) == TextDelta(T, "4,5,")
    assert clock.sleeping == 0


@pytest.mark.parametrize("first", ["delta", "window's end"])
async def test_a_delta_arriving_as_the_window_ends_is_delivered_once(first: str) -> None:
    queue: asyncio.Queue[object] = asyncio.Queue()
    clock = ManualClock()
    merger = coalescer(queue, clock, window=1.0, max_chars=100)
    queue.put_nowait(TextDelta(T, "a"))
    assert await soon(merger.next()) == TextDelta(T, "a")
    queue.put_nowait(TextDelta(T, "b"))
    delivery = asyncio.create_task(merger.next())
    await clock.slept(1)
    # Both in one step of the event loop: the wait on the queue and the one on the clock end together.
    if first == "delta":
        queue.put_nowait(TextDelta(T, "c"))
        clock.advance(1.0)
    else:
        clock.advance(1.0)
        queue.put_nowait(TextDelta(T, "c"))
    texts = [(await soon(delivery)).text]
    queue.put_nowait(ToolCallFinished(T, "c1", "x", "completed", ""))
    while isinstance(item := await soon(merger.next()), TextDelta):
        texts.append(item.text)
    assert "".join(texts) == "bc"  # "c" was neither lost with the wait nor delivered twice
    assert clock.sleeping == 0


async def test_another_event_ends_the_wait_at_once_and_starts_a_new_run() -> None:
    queue: asyncio.Queue[object] = asyncio.Queue()
    clock = ManualClock()
    merger = coalescer(queue, clock, window=1.0, max_chars=100)
    finished = ToolCallFinished(T, "c", "x", "completed", "")
    queue.put_nowait(TextDelta(T, "a"))
    assert await soon(merger.next()) == TextDelta(T, "a")
    queue.put_nowait(TextDelta(T, "b"))
    delivery = asyncio.create_task(merger.next())
    await clock.slept(1)
    queue.put_nowait(finished)
    assert await soon(delivery) == TextDelta(T, "b")  # the clock never moved: the event cut the wait short
    assert await soon(merger.next()) == finished
    queue.put_nowait(TextDelta(T, "c"))
    assert await soon(merger.next()) == TextDelta(T, "c")  # text after another event is a new run
    assert clock.sleeps == [1.0] and clock.sleeping == 0


async def test_a_delta_arriving_after_the_window_is_not_delayed() -> None:
    queue: asyncio.Queue[object] = asyncio.Queue()
    clock = ManualClock()
    merger = coalescer(queue, clock, window=0.01, max_chars=100)
    queue.put_nowait(TextDelta(T, "a"))
    assert await soon(merger.next()) == TextDelta(T, "a")
    clock.advance(0.03)  # longer than the window
    queue.put_nowait(TextDelta(T, "b"))
    assert await soon(merger.next()) == TextDelta(T, "b")
    assert clock.sleeps == []


async def test_a_full_delta_goes_at_once_and_the_rest_of_the_run_still_waits_for_the_window() -> None:
    queue: asyncio.Queue[object] = asyncio.Queue()
    clock = ManualClock()
    merger = coalescer(queue, clock, window=1.0, max_chars=4)
    queue.put_nowait(TextDelta(T, "ab"))
    assert await soon(merger.next()) == TextDelta(T, "ab")
    for piece in ("cd", "ef", "gh"):
        queue.put_nowait(TextDelta(T, piece))
    assert await soon(merger.next()) == TextDelta(T, "cdef")  # as long as it may be: no reason to wait
    assert clock.sleeps == []
    delivery = asyncio.create_task(merger.next())  # "gh" continues the same run: it waits for the window
    await clock.slept(1)
    assert clock.sleeps == [1.0] and not delivery.done()
    clock.advance(1.0)
    assert await soon(delivery) == TextDelta(T, "gh")


async def test_thoughts_merge_too_and_text_after_thoughts_is_not_held() -> None:
    queue: asyncio.Queue[object] = asyncio.Queue()
    clock = ManualClock()
    merger = coalescer(queue, clock, window=0.2, max_chars=100)
    for piece in ("let ", "me ", "see"):
        queue.put_nowait(ThoughtDelta(T, piece))
    queue.put_nowait(TextDelta(T, "Answer"))
    assert await soon(merger.next()) == ThoughtDelta(T, "let me see")
    assert await soon(merger.next()) == TextDelta(T, "Answer")  # a new run of text: not held for the window
    queue.put_nowait(ThoughtDelta(T, "hmm"))
    assert await soon(merger.next()) == ThoughtDelta(T, "hmm")  # and thoughts after text start one again
    assert clock.sleeps == []


async def test_by_default_the_window_is_real_time() -> None:
    queue: asyncio.Queue[object] = asyncio.Queue()
    merger = TextCoalescer(queue, window=0.001, max_chars=100)
    queue.put_nowait(TextDelta(T, "a"))
    assert await soon(merger.next()) == TextDelta(T, "a")
    queue.put_nowait(TextDelta(T, "b"))
    assert await soon(merger.next()) == TextDelta(T, "b")  # the window ends by itself; nothing else came


async def test_session_delivers_fewer_larger_deltas_without_losing_text(project: Path, settings: Settings) -> None:
    gate = asyncio.Event()
    chunks = [f"w{i} " for i in range(500)]
    script = Script([[Say(*chunks[:1]), Until(gate), Say(*chunks[1:])]])
    session = open_session(
        settings, ModelInfo("t:x"), project, approver=None, mode="yolo", model_factory=script.factory()
    )
    session.options = SessionOptions(merge_window=NEVER)
    seen: list[Event] = []

    async def observer(event: Event) -> None:
        seen.append(event)
        gate.set()

    session.subscribe(observer)
    await session.run("go")
    texts = [e.text for e in seen if isinstance(e, TextDelta)]
    # The first delta went out before the rest was produced; the rest, one chunk at a time, is one delta: the
    # window never ended, and the turn's next event ended the wait.
    assert texts == ["w0 ", "".join(chunks[1:])]
