"""Prompts sent while a turn runs: they wait for it, in arrival order, then run (issue 31 item 8); a cancel
ends the running turn and every prompt waiting behind it; a session closed meanwhile answers them cancelled."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from acp import RequestError

from codling.acp.errors import SESSION_BUSY
from codling.acp.server import MAX_WAITING_PROMPTS
from tests.acp.test_special_turns import harness, request_text
from tests.fakes.acp_client import Arrivals
from tests.fakes.deadlines import deadline
from tests.fakes.scenarios import Gate, Say, Script, Until, user_prompt


def prompts_seen(script: Script) -> list[str]:
    """What the user wrote in each model request's last message, in order."""
    return [user_prompt(str(r[-1].parts[-1].content)) for r in script.requests]  # type: ignore[union-attr]


async def test_a_prompt_sent_during_a_turn_runs_after_it_in_order(home: Path, project: Path) -> None:
    gate = Gate()
    script = Script([[Until(gate), Say("One.")], [Say("Two.")], [Say("Three.")]])
    arrivals = Arrivals()
    async with harness(home, script, arrivals=arrivals) as h:
        sid = (await h.conn.new_session(cwd=str(project))).session_id
        first = asyncio.create_task(h.say(sid, "first"))
        await gate.arrival(deadline(10))
        second = asyncio.create_task(h.say(sid, "second"))
        third = asyncio.create_task(h.say(sid, "third"))
        await arrivals.received("session/prompt", 3, within=deadline(10))
        gate.set()
        stops = await asyncio.wait_for(asyncio.gather(first, second, third), deadline(10))
    assert stops == ["end_turn", "end_turn", "end_turn"]
    assert prompts_seen(script) == ["first", "second", "third"]
    assert "One." in request_text(script.requests[1]) and "Two." in request_text(script.requests[2])
    assert [u.content.text for u in h.client.of_kind("agent_message_chunk")] == ["One.", "Two.", "Three."]


async def test_a_cancel_ends_the_running_turn_and_every_prompt_waiting_behind_it(home: Path, project: Path) -> None:
    gate = Gate()
    script = Script([[Until(gate), Say("never")], [Say("After the cancel.")]])
    arrivals = Arrivals()
    async with harness(home, script, arrivals=arrivals) as h:
        sid = (await h.conn.new_session(cwd=str(project))).session_id
        running = asyncio.create_task(h.say(sid, "first"))
        await gate.arrival(deadline(10))
        waiting = [asyncio.create_task(h.say(sid, text)) for text in ("second", "third")]
        await arrivals.received("session/prompt", 3, within=deadline(10))
        await h.conn.cancel(session_id=sid)
        stops = await asyncio.wait_for(asyncio.gather(running, *waiting), deadline(10))
        assert stops == ["cancelled", "cancelled", "cancelled"]
        assert await h.say(sid, "fourth") == "end_turn"  # a prompt sent after the cancel runs
    assert prompts_seen(script) == ["first", "fourth"]  # the waiting ones never reached the model


async def test_prompts_waiting_in_a_session_that_is_closed_answer_cancelled(home: Path, project: Path) -> None:
    gate = Gate()
    script = Script([[Until(gate), Say("never")]])
    arrivals = Arrivals()
    async with harness(home, script, arrivals=arrivals) as h:
        sid = (await h.conn.new_session(cwd=str(project))).session_id
        running = asyncio.create_task(h.say(sid, "first"))
        await gate.arrival(deadline(10))
        waiting = asyncio.create_task(h.say(sid, "second"))
        await arrivals.received("session/prompt", 2, within=deadline(10))
        await h.conn.close_session(session_id=sid)
        stops = await asyncio.wait_for(asyncio.gather(running, waiting), deadline(10))
    assert stops == ["cancelled", "cancelled"]
    assert prompts_seen(script) == ["first"]


async def test_one_prompt_more_than_may_wait_is_refused_as_busy(home: Path, project: Path) -> None:
    gate = Gate()
    script = Script([[Until(gate), Say("never")]])
    arrivals = Arrivals()
    async with harness(home, script, arrivals=arrivals) as h:
        sid = (await h.conn.new_session(cwd=str(project))).session_id
        running = asyncio.create_task(h.say(sid, "first"))
        await gate.arrival(deadline(10))
        waiting = [asyncio.create_task(h.say(sid, f"p{n}")) for n in range(MAX_WAITING_PROMPTS)]
        await arrivals.received("session/prompt", 1 + MAX_WAITING_PROMPTS, within=deadline(10))
        with pytest.raises(RequestError) as refused:
            await h.say(sid, "one too many")
        await h.conn.cancel(session_id=sid)
        stops = await asyncio.wait_for(asyncio.gather(running, *waiting), deadline(10))
    # (issue 29 D15: a busy session was -32600, which says the request itself is malformed)
    assert (refused.value.code, refused.value.data) == (
        SESSION_BUSY,
        {
            "sessionId": sid,
            "message": f"{MAX_WAITING_PROMPTS} prompts already wait for their turn in this session; "
            "wait for them, or cancel",
        },
    )
    assert set(stops) == {"cancelled"}
