"""A `codling acp` process listing a tree whose .gitignore makes the walk slow (thousands of wildcard rules that
every name passes the quick checks of) exits when its client closes stdin mid-walk: the walk, in a thread, is
stopped with the cancelled turn instead of holding the process (issue 29 D7)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from acp import PROTOCOL_VERSION

from tests.e2e.raw_acp import RawAgent
from tests.e2e.test_signals import agent_env, last_record
from tests.fakes import warm
from tests.fakes.deadlines import deadline
from tests.fakes.openai_server import OpenAIServer, Reply, ToolCall, running_server

SECONDS = 60.0  # a liveness deadline; the fakes' helpers scale it themselves
DEADLINE = deadline(SECONDS)


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with running_server() as s:
        s.enqueue(Reply(tool_calls=[ToolCall("list_files", {}, id="call_1")]), Reply(text=["never reached"]))
        yield s


def slow_tree(root: Path) -> None:
    """Rules that each hold "abcd" and a "**/" with more wildcards (the slow, general matcher), and names that
    all hold "abcd": no rule can be skipped, so each name costs every rule."""
    rules = "".join(f"**/abcd*[0-9]*[!{chr(0x4E00 + i)}]\n" for i in range(4000))
    (root / ".gitignore").write_text(rules)
    for i in range(1000):
        (root / f"abcd_{i}_x.txt").write_text("")


async def test_stdin_closed_during_a_slow_walk_ends_the_turn_and_the_process(
    home: Path, project: Path, server: OpenAIServer
) -> None:
    slow_tree(project)
    process = await asyncio.create_subprocess_exec(
        *warm.codling(),
        "acp",
        cwd=project,
        env=agent_env(home, server),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    assert process.stdin is not None
    agent = RawAgent(process)

    def walking() -> bool:
        """The call is in progress once the tool has started: the walk is running."""
        return any(
            m.get("method") == "session/update"
            and m["params"]["update"].get("toolCallId") == "call_1"
            and m["params"]["update"].get("status") == "in_progress"
            for m in agent.messages
        )

    try:
        await agent.request(1, "initialize", {"protocolVersion": PROTOCOL_VERSION}, SECONDS)
        session_id = (await agent.request(2, "session/new", {"cwd": str(project), "mcpServers": []}, SECONDS))[
            "result"
        ]["sessionId"]
        prompt = {"sessionId": session_id, "prompt": [{"type": "text", "text": "list"}]}
        await agent.send({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": prompt})
        await agent.wait_until(walking, SECONDS)
        process.stdin.close()
        prompted = await agent.answer(3, SECONDS)
        assert prompted["result"] == {"stopReason": "cancelled"}
        assert await asyncio.wait_for(process.wait(), DEADLINE) == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        await agent.finished(SECONDS)
    record = last_record(home)
    assert (record["kind"], record["stop_reason"]) == ("turn_end", "cancelled")
