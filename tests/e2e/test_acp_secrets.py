"""Secret values never reach the editor (issue 29 D8, D9): a spawned `codling acp` whose environment holds a
token reads a file holding its value, and the model repeats it, split across stream deltas. Nothing codling
writes on stdout holds the value, whole or split, while the model was told the file as it is."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.raw_acp import agent_env, raw_agent
from tests.fakes.openai_server import OpenAIServer, Reply, ToolCall, running_server

TOKEN = "ghp_acpsecret0123456789abcdefABCDEF"


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with running_server() as s:
        yield s


async def test_a_token_the_model_reads_and_repeats_never_reaches_the_editor(
    home: Path, project: Path, server: OpenAIServer, tmp_path: Path
) -> None:
    (project / ".env").write_text(f"GITHUB_TOKEN={TOKEN}\n")
    server.enqueue(
        Reply(tool_calls=[ToolCall("read_file", {"path": ".env"})]),
        Reply(text=["Your token is ", TOKEN[:6], TOKEN[6:20], TOKEN[20:], ", keep it safe."]),
    )
    env = {**agent_env(home, server), "GITHUB_TOKEN": TOKEN}
    async with raw_agent(env, tmp_path / "stderr") as agent:
        await agent.request(0, "initialize", {"protocolVersion": 1}, 30)
        new = await agent.request(1, "session/new", {"cwd": str(project), "mcpServers": []}, 30)
        session_id = new["result"]["sessionId"]
        prompt = [{"type": "text", "text": f"what is in .env? is it {TOKEN}?"}]  # (the title comes from it)
        done = await agent.request(2, "session/prompt", {"sessionId": session_id, "prompt": prompt}, 60)
        assert done["result"]["stopReason"] == "end_turn"
    assert TOKEN in json.dumps(server.requests[1]["messages"])  # the model read the file as it is
    out = json.dumps(agent.messages)
    for piece in (TOKEN, TOKEN[:6], TOKEN[6:20], TOKEN[20:]):
        assert piece not in out
    chunks = [
        m["params"]["update"]["content"]["text"]
        for m in agent.messages
        if m.get("method") == "session/update" and m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
    ]
    assert "".join(chunks) == "Your token is [redacted], keep it safe."
    read = [
        m["params"]["update"]
        for m in agent.messages
        if m.get("method") == "session/update" and m["params"]["update"]["sessionUpdate"] == "tool_call_update"
    ]
    assert "GITHUB_TOKEN=[redacted]" in json.dumps(read)
    history = next((home / "sessions").glob("*/history.jsonl")).read_text()
    assert TOKEN not in history and "[redacted]" in history
