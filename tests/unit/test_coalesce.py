"""Text coalescing: merged while text streams fast, the first delta of a run never held."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from codling.brain.coalesce import TextCoalescer
from codling.brain.events import Event, TextDelta, ThoughtDelta, ToolCallFinished
from codling.brain.factory import open_session
from codling.brain.options import SessionOptions
from codling.config import Settings
from codling.llm.catalog import ModelInfo
from tests.fakes.scenarios import Say, Script, Until

T = "t"


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


async def test_first_delta_goes_at_once_and_a_fast_stream_is_merged_per_window() -> None:
    queue: asyncio.Queue[object] = asyncio.Queue()
    coalescer = TextCoalescer(queue, window=0.05, max_chars=10_000)

    async def produce() -> None:
        for i in range(20):
            queue.put_nowait(TextDelta(T, f"{i},"))
            await asyncio.sleep(0.005)
        queue.put_nowait(ToolCallFinished(T, "c", "x", "completed", ""))

    producer = asyncio.create_task(produce())
    started = time.monotonic()
    first = await coalescer.next()
    assert first == TextDelta(T, "0,")
    assert time.monotonic() - started < 0.02  # not held for the window
    merged: list[str] = []
    while isinstance(item := await coalescer.next(), TextDelta):
        merged.append(item.text)
    await producer
    assert "".join(merged) == "".join(f"{i}," for i in range(1, 20))
    assert 1 <= len(merged) <= 4  # ~100 ms of deltas in 50 ms windows, not 19 notifications


async def test_slow_deltas_are_not_delayed() -> None:
    queue: asyncio.Queue[object] = asyncio.Queue()
    coalescer = TextCoalescer(queue, window=0.01, max_chars=100)
    queue.put_nowait(TextDelta(T, "a"))
    assert await coalescer.next() == TextDelta(T, "a")
    await asyncio.sleep(0.03)  # longer than the window
    queue.put_nowait(TextDelta(T, "b"))
    started = time.monotonic()
    assert await coalescer.next() == TextDelta(T, "b")
    assert time.monotonic() - started < 0.005


async def test_session_delivers_fewer_larger_deltas_without_losing_text(project: Path, settings: Settings) -> None:
    gate = asyncio.Event()
    chunks = [f"w{i} " for i in range(500)]
    script = Script([[Say(*chunks[:1]), Until(gate), Say(*chunks[1:])]])
    session = open_session(
        settings, ModelInfo("t:x"), project, approver=None, mode="yolo", model_factory=script.factory()
    )
    session.options = SessionOptions(merge_window=0.005)
    seen: list[Event] = []

    async def observer(event: Event) -> None:
        seen.append(event)
        gate.set()

    session.subscribe(observer)
    await session.run("go")
    texts = [e.text for e in seen if isinstance(e, TextDelta)]
    assert texts[0] == "w0 "  # delivered before the rest was produced
    assert "".join(texts) == "".join(chunks)
    assert len(texts) < len(chunks) / 5


async def test_thoughts_merge_too_and_text_after_thoughts_is_not_held() -> None:
    queue: asyncio.Queue[object] = asyncio.Queue()
    coalescer = TextCoalescer(queue, window=0.2, max_chars=100)
    for piece in ("let ", "me ", "see"):
        queue.put_nowait(ThoughtDelta(T, piece))
    assert await coalescer.next() == ThoughtDelta(T, "let me see")
    queue.put_nowait(TextDelta(T, "Answer"))
    started = time.monotonic()
    assert await coalescer.next() == TextDelta(T, "Answer")
    assert time.monotonic() - started < 0.05  # a new run of text: not held for the 200 ms window
