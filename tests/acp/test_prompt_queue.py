"""Prompts sent while a turn runs: they wait for it, in arrival order, then run (issue 31 item 8); a cancel
ends the running turn and every prompt waiting behind it; a session closed meanwhile answers them cancelled."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from acp import RequestError

from codling.acp.rpc_errors import SESSION_BUSY
from codling.acp.server import MAX_WAITING_PROMPTS
from tests.acp.test_special_turns import Harness, harness, request_text
from tests.fakes.acp_client import Arrivals
from tests.fakes.deadlines import deadline
from tests.fakes.scenarios import Gate, Response, Say, Script, Until, user_prompt


@dataclass
class Running:
    """A session whose first turn ("first") waits at ``gate`` in the model."""

    h: Harness
    sid: str
    gate: Gate
    script: Script
    first: asyncio.Task[str]
    arrivals: Arrivals

    async def send(self, *texts: str) -> list[asyncio.Task[str]]:
        """Send prompts while the turn runs; return once the agent has received them all."""
        sent = self.arrivals.methods.count("session/prompt")
        tasks = [asyncio.create_task(self.h.say(self.sid, text)) for text in texts]
        await self.arrivals.received("session/prompt", sent + len(texts), within=10)
        return tasks

    async def stops(self, *tasks: asyncio.Task[str]) -> list[str]:
        """How the first prompt and ``tasks`` ended."""
        return list(await asyncio.wait_for(asyncio.gather(self.first, *tasks), deadline(10)))


@asynccontextmanager
async def running(home: Path, project: Path, *later: Response) -> AsyncIterator[Running]:
    """A session whose first turn is held in the model (it answers "One." once released); ``later`` answer the
    turns after it."""
    gate, arrivals = Gate(), Arrivals()
    script = Script([[Until(gate), Say("One.")], *later])
    async with harness(home, script, arrivals=arrivals) as h:
        sid = (await h.conn.new_session(cwd=str(project))).session_id
        first = asyncio.create_task(h.say(sid, "first"))
        await gate.arrival(10)
        yield Running(h, sid, gate, script, first, arrivals)


def prompts_seen(script: Script) -> list[str]:
    """What the user wrote in each model request's last message, in order."""
    return [user_prompt(str(r[-1].parts[-1].content)) for r in script.requests]  # type: ignore[union-attr]


async def test_a_prompt_sent_during_a_turn_runs_after_it_in_order(home: Path, project: Path) -> None:
    async with running(home, project, [Say("Two.")], [Say("Three.")]) as r:
        waiting = await r.send("second", "third")
        r.gate.set()
        stops = await r.stops(*waiting)
    assert stops == ["end_turn", "end_turn", "end_turn"]
    assert prompts_seen(r.script) == ["first", "second", "third"]
    assert "One." in request_text(r.script.requests[1]) and "Two." in request_text(r.script.requests[2])
    assert [u.content.text for u in r.h.client.of_kind("agent_message_chunk")] == ["One.", "Two.", "Three."]


async def test_a_cancel_ends_the_running_turn_and_every_prompt_waiting_behind_it(home: Path, project: Path) -> None:
    async with running(home, project, [Say("After the cancel.")]) as r:
        waiting = await r.send("second", "third")
        await r.h.conn.cancel(session_id=r.sid)
        assert await r.stops(*waiting) == ["cancelled", "cancelled", "cancelled"]
        assert await r.h.say(r.sid, "fourth") == "end_turn"  # a prompt sent after the cancel runs
    assert prompts_seen(r.script) == ["first", "fourth"]  # the waiting ones never reached the model


async def test_prompts_waiting_in_a_session_that_is_closed_answer_cancelled(home: Path, project: Path) -> None:
    async with running(home, project) as r:
        waiting = await r.send("second")
        await r.h.conn.close_session(session_id=r.sid)
        assert await r.stops(*waiting) == ["cancelled", "cancelled"]
    assert prompts_seen(r.script) == ["first"]


async def test_one_prompt_more_than_may_wait_is_refused_as_busy(home: Path, project: Path) -> None:
    async with running(home, project) as r:
        waiting = await r.send(*(f"p{n}" for n in range(MAX_WAITING_PROMPTS)))
        with pytest.raises(RequestError) as refused:
            await r.h.say(r.sid, "one too many")
        await r.h.conn.cancel(session_id=r.sid)
        assert set(await r.stops(*waiting)) == {"cancelled"}
    # (issue 29 D15: a busy session was -32600, which says the request itself is malformed)
    assert (refused.value.code, refused.value.data) == (
        SESSION_BUSY,
        {
            "sessionId": r.sid,
            "message": f"{MAX_WAITING_PROMPTS} prompts already wait for their turn in this session; "
            "wait for them, or cancel",
        },
    )
