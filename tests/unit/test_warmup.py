"""The warm-up thread (acp/warmup.py) loads the session path at once and the model stack only once released."""

from __future__ import annotations

import asyncio
import sys
import threading

import pytest

import codling.acp.client_ports

# The first stage's modules, loaded here so that stage has nothing left to do when a test starts the thread.
import codling.acp.mcp_specs
import codling.store.index
import codling.store.live  # noqa: F401
from codling.acp.warmup import WarmUp
from tests.fakes.deadlines import deadline


async def test_the_model_stack_waits_until_released() -> None:
    asked = threading.Event()

    def likely_model() -> str | None:
        asked.set()  # the second stage has begun: it asks which model to load first
        return None

    warm = WarmUp(likely_model)
    warm.start()
    # An observation window, not a synchronisation: unreleased, the thread never gets this far.
    assert not await asyncio.to_thread(asked.wait, 0.5)
    async with asyncio.timeout(deadline(30)):  # liveness only
        await warm.wait()
    assert asked.is_set()


async def test_waiting_releases_and_survives_a_failing_stage() -> None:
    def likely_model() -> str | None:
        raise RuntimeError("settings unreadable")

    warm = WarmUp(likely_model)
    warm.start()
    async with asyncio.timeout(deadline(30)):  # liveness only: an error in the thread still ends the warm-up
        await warm.wait()


async def test_the_second_stage_loads_what_opening_a_session_defers(monkeypatch: pytest.MonkeyPatch) -> None:
    # session/new leaves the pin patterns (and the records' validators, beside them) to the warm-up, so the first
    # turn does not compile them (issue 33 D7).
    monkeypatch.delitem(sys.modules, "codling.brain.context.pin_capture", raising=False)
    warm = WarmUp(lambda: None)
    warm.start()
    async with asyncio.timeout(deadline(30)):  # liveness only
        await warm.wait()
    assert "codling.brain.context.pin_capture" in sys.modules
