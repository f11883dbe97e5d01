"""Sessions across real processes: a process killed mid-stream, then a fresh one loads, lists and continues."""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from acp import PROTOCOL_VERSION, helpers, spawn_agent_process

from tests.e2e.test_acp_process import agent_env
from tests.fakes import warm
from tests.fakes.acp_client import RecordingClient
from tests.fakes.openai_server import OpenAIServer, Reply, ToolCall, running_server


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with running_server() as s:
        yield s


async def test_sigkill_mid_stream_then_fresh_process_loads_and_continues(
    home: Path, project: Path, server: OpenAIServer
) -> None:
    (home / "config.toml").write_text('mode = "yolo"\n')
    server.enqueue(
        Reply(tool_calls=[ToolCall("read_file", {"path": "src/app.py"}, id="call_r")]),
        Reply(text=["greet returns ", "hello"]),
        Reply(text=["partial "] * 400, delay=0.02),
    )
    first = RecordingClient()
    env = agent_env(home, server)
    async with spawn_agent_process(first, *warm.codling(), "acp", env=env) as (conn, process):
        await asyncio.wait_for(conn.initialize(protocol_version=PROTOCOL_VERSION), 30)
        session = await asyncio.wait_for(conn.new_session(cwd=str(project)), 30)
        sid = session.session_id
        done = await asyncio.wait_for(
            conn.prompt(session_id=sid, prompt=[helpers.text_block("what does greet do?")]), 30
        )
        assert done.stop_reason == "end_turn"
        chunks = len(first.of_kind("agent_message_chunk"))
        streaming = asyncio.create_task(conn.prompt(session_id=sid, prompt=[helpers.text_block("tell me more")]))
        await first.wait_for("agent_message_chunk", chunks + 5)
        process.send_signal(signal.SIGKILL)
        await asyncio.wait_for(process.wait(), 10)
        streaming.cancel()

    history = (home / "sessions" / sid / "history.jsonl").read_text()
    assert all(json.loads(line) for line in history.splitlines())  # every completed record is readable

    server.enqueue(Reply(text=["It still says hello."]))
    second = RecordingClient()
    async with spawn_agent_process(second, *warm.codling(), "acp", env=env) as (conn, process):
        await asyncio.wait_for(conn.initialize(protocol_version=PROTOCOL_VERSION), 30)
        listed = await asyncio.wait_for(conn.list_sessions(cwd=str(project)), 30)
        assert [s.session_id for s in listed.sessions] == [sid]
        assert listed.sessions[0].title == "Loopback session title"  # the model-made title of the first turn
        await asyncio.wait_for(conn.load_session(cwd=str(project), session_id=sid), 30)
        kinds = [u.session_update for u in second.conversation()]
        # The completed first turn replays whole; the killed turn shows its prompt.
        assert kinds[:4] == ["user_message_chunk", "tool_call", "tool_call_update", "agent_message_chunk"]
        users = [u.content.text for u in second.of_kind("user_message_chunk")]
        assert users == ["what does greet do?", "tell me more"]
        assert second.of_kind("agent_message_chunk")[0].content.text == "greet returns hello"
        third = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=[helpers.text_block("again?")]), 30)
        assert third.stop_reason == "end_turn"
        assert second.agent_text().endswith("It still says hello.")
        process.terminate()

    request = server.requests[-1]["messages"]
    contents = " ".join(str(m.get("content")) for m in request)
    assert "what does greet do?" in contents and "greet returns hello" in contents
    assert "interrupted" in contents  # the killed turn is in the history, marked as interrupted
