"""Notices and compaction updates through the real `codling acp` process (issue 31 Deliver 4): a client that
advertises `session.notices` and `session.compaction` sees a provider's 429 as a notice and /compact as
compaction updates, live and on session/load, never as tool-call cards; every message of the session, both
ways, is valid in the newest ACP schema."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from codling.acp.notices import RETRY_HINT
from tests.e2e.raw_acp import agent_env, raw_agent
from tests.fakes.npm_acp import schema_violations
from tests.fakes.openai_server import ErrorReply, OpenAIServer, Reply, running_server

SUMMARY = "## Goal\nThe user asked for a greeting.\n## State\nThe assistant said hello; nothing else is open."
CAPABILITIES: dict[str, Any] = {"session": {"notices": {}, "compaction": {}}}


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with running_server() as s:
        yield s


def updates(messages: list[dict[str, Any]], first: int = 0) -> list[dict[str, Any]]:
    return [m["params"]["update"] for m in messages[first:] if m.get("method") == "session/update"]


async def test_a_client_that_advertised_them_gets_notices_and_compaction_updates_from_the_process(
    home: Path, project: Path, server: OpenAIServer, tmp_path: Path
) -> None:
    server.enqueue(ErrorReply.rate_limited(retry_after=0), Reply(text=["Hello."]), Reply(text=[SUMMARY]))
    sent: list[dict[str, Any]] = []
    async with raw_agent(agent_env(home, server), tmp_path / "stderr") as agent:

        async def request(request_id: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
            sent.append({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
            return await agent.request(request_id, method, params, 60)

        await request(0, "initialize", {"protocolVersion": 1, "clientCapabilities": CAPABILITIES})
        session_id = (await request(1, "session/new", {"cwd": str(project), "mcpServers": []}))["result"]["sessionId"]
        for request_id, text in ((2, "say hello"), (3, "/compact")):
            prompt = {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
            assert (await request(request_id, "session/prompt", prompt))["result"]["stopReason"] == "end_turn"
        live = updates(agent.messages)
        replayed_from = len(agent.messages)
        await request(4, "session/load", {"sessionId": session_id, "cwd": str(project), "mcpServers": []})
        replayed = updates(agent.messages, replayed_from)

    kinds = {u["sessionUpdate"] for u in live + replayed}
    assert not kinds & {"tool_call", "tool_call_update"}  # nothing here is a tool call
    (notice,) = [u for u in live if u["sessionUpdate"] == "notice"]
    assert notice["severity"] == "warning" and notice["description"] == RETRY_HINT
    assert notice["title"].startswith("Model provider busy (HTTP 429): retrying in ")
    started, completed = [u for u in live if u["sessionUpdate"] == "compaction_update"]
    assert (started["status"], completed["status"]) == ("in_progress", "completed")
    assert started["compactionId"] == completed["compactionId"]
    assert completed["summary"] == [{"type": "text", "text": SUMMARY}]
    # Reopened: the compaction once, completed, and no notice (notices are not history).
    assert [u for u in replayed if u["sessionUpdate"] in ("compaction_update", "notice")] == [completed]
    traffic = [{"from": "client", "message": m} for m in sent] + [
        {"from": "agent", "message": m} for m in agent.messages
    ]
    assert schema_violations(traffic) == []
