"""The session store in real processes: open sessions three times the descriptor limit, and `codling acp` killed
at points spread through a turn. Hostile ids on the command line and invalid records are tested in process, in
`tests/unit/test_cli_sessions.py`."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from acp import PROTOCOL_VERSION, helpers, spawn_agent_process
from acp.client.connection import ClientSideConnection

from codling.brain.events import TextDelta, TurnEnded
from codling.store.history import read_history
from codling.store.records import RECORD
from tests.e2e.test_acp_process import agent_env
from tests.fakes import warm
from tests.fakes.acp_client import RecordingClient
from tests.fakes.openai_server import OpenAIServer, Reply, ScriptedReply, ToolCall, last_user_text, running_server
from tests.fakes.scenarios import user_prompt


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with running_server() as s:
        yield s


# -- many sessions, few descriptors -----------------------------------------------------------------------------

FD_LIMIT = 64
SESSIONS = 3 * FD_LIMIT
LIMITED = """
import os, resource, sys
resource.setrlimit(resource.RLIMIT_NOFILE, ({limit}, {limit}))
os.execv(sys.executable, {command!r})
"""


async def test_open_sessions_hold_no_descriptors_three_times_the_limit_stay_open(
    home: Path, project: Path, server: OpenAIServer
) -> None:
    server.responder = lambda body: Reply(text=[f"echo: {user_prompt(last_user_text(body))}"])
    client = RecordingClient()
    wrapper = LIMITED.format(limit=FD_LIMIT, command=[*warm.codling(), "acp"])
    async with spawn_agent_process(client, sys.executable, "-c", wrapper, env=agent_env(home, server)) as (conn, proc):
        try:
            await asyncio.wait_for(conn.initialize(protocol_version=PROTOCOL_VERSION), 30)
            ids = []
            for _ in range(SESSIONS):
                session = await asyncio.wait_for(conn.new_session(cwd=str(project)), 30)
                ids.append(session.session_id)
            for sid in (ids[0], ids[-1]):
                response = await asyncio.wait_for(
                    conn.prompt(session_id=sid, prompt=[helpers.text_block(f"hello {sid}")]), 30
                )
                assert response.stop_reason == "end_turn"
            limit = Path(f"/proc/{warm.behind(proc.pid)}/limits").read_text()
            assert f"Max open files            {FD_LIMIT}" in limit
        finally:
            proc.kill()
            await asyncio.wait_for(proc.wait(), 10)
    assert len(set(ids)) == SESSIONS
    for sid in (ids[0], ids[-1]):
        assert read_history(home / "sessions" / sid / "history.jsonl").turns == 1
    texts = [u.content.text for _, u in client.updates if u.session_update == "agent_message_chunk"]
    assert texts == [f"echo: hello {ids[0]}", f"echo: hello {ids[-1]}"]


# -- killed through a turn ------------------------------------------------------------------------------------

KILL_POINTS = (1, 5, 9)
"""The session/update after which the client kills the agent, one trial each (a turn sends more than nine): early,
mid-stream and late in the turn; each trial is a process start (most of this test's CPU)."""


def scripted_turn(body: dict[str, Any]) -> ScriptedReply:
    """Text and a tool call, then (once the call's result is in) more text; a resumed turn gets one reply."""
    if user_prompt(last_user_text(body)).startswith("resume"):
        return Reply(text=["resumed ", "fine."])
    if (body.get("messages") or [{}])[-1].get("role") == "tool":
        return Reply(text=["The readme ", "says ", "demo", "."], delay=0.005)
    return Reply(text=["Let me ", "look."], tool_calls=[ToolCall("read_file", {"path": "README.md"})], delay=0.005)


class KillingClient(RecordingClient):
    """Kills the agent (SIGKILL) right after the ``kill_at``-th session/update of its turn arrives."""

    def __init__(self) -> None:
        super().__init__()
        self.kill_at: int | None = None
        self.process: asyncio.subprocess.Process | None = None
        self.seen = 0

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        await super().session_update(session_id, update, **kwargs)
        if self.kill_at is None:
            return
        self.seen += 1
        if self.seen == self.kill_at and self.process is not None:
            os.kill(warm.behind(self.process.pid), signal.SIGKILL)  # the codling itself, not its launcher


def check_history(path: Path) -> int:
    """Every complete line is a valid record, at most the last is torn, and the file loads; its turn count."""
    *complete, tail = path.read_bytes().split(b"\n")
    for line in complete:
        RECORD.validate_json(line)
    if tail:
        with pytest.raises(ValueError):
            RECORD.validate_json(tail)
    session = read_history(path)
    assert session.skipped_lines == 0
    return session.turns


async def prompt_quietly(conn: ClientSideConnection, sid: str, text: str) -> None:
    with contextlib.suppress(Exception):  # the agent was killed under it: the connection is gone
        await asyncio.wait_for(conn.prompt(session_id=sid, prompt=[helpers.text_block(text)]), 30)


async def test_history_survives_sigkill_at_points_through_a_turn(
    home: Path, project: Path, server: OpenAIServer
) -> None:
    server.responder = scripted_turn
    previous: str | None = None
    landed: list[str] = []
    """The kind of the last complete record each killed agent left."""
    for trial in range(len(KILL_POINTS) + 1):
        client = KillingClient()
        async with spawn_agent_process(client, *warm.codling(), "acp", env=agent_env(home, server)) as (
            conn,
            process,
        ):
            client.process = process
            try:
                await asyncio.wait_for(conn.initialize(protocol_version=PROTOCOL_VERSION), 30)
                if previous is not None:
                    # The killed session loads and takes a new turn cleanly after whatever was written.
                    path = home / "sessions" / previous / "history.jsonl"
                    turns = check_history(path)
                    landed.append(json.loads(path.read_bytes().split(b"\n")[-2])["kind"])
                    await asyncio.wait_for(conn.load_session(cwd=str(project), session_id=previous), 30)
                    response = await asyncio.wait_for(
                        conn.prompt(session_id=previous, prompt=[helpers.text_block("resume please")]), 30
                    )
                    assert response.stop_reason == "end_turn"
                    assert check_history(path) == turns + 1
                    events = read_history(path).events
                    assert [type(e).__name__ for e in events[-3:]] == ["TurnStarted", "TextDelta", "TurnEnded"]
                    assert isinstance(events[-1], TurnEnded)
                    assert events[-2] == TextDelta(events[-1].turn_id, "resumed fine.")
                if trial == len(KILL_POINTS):
                    break
                session = await asyncio.wait_for(conn.new_session(cwd=str(project)), 30)
                client.seen = 0
                client.kill_at = KILL_POINTS[trial]
                await prompt_quietly(conn, session.session_id, "what does the readme say?")
                previous = session.session_id
            finally:
                if process.returncode is None:
                    process.kill()
                await asyncio.wait_for(process.wait(), 10)
    # Kill points are the client's count of updates, so where the agent's writing stood varies with timing;
    # with the kill at update 9 or earlier of a turn that sends more, it stands inside a turn.
    assert any(kind != "turn_end" for kind in landed), landed
