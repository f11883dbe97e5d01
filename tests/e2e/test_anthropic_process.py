"""End to end over the Anthropic Messages API: the real ``codling acp`` and ``codling run`` processes against the
loopback Anthropic fake (tests/fakes/anthropic_server.py), each over several turns with thinking, a tool call
and prompt caching. Everything else about the provider is tested in process (tests/unit/test_anthropic_provider.py).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from acp import PROTOCOL_VERSION, helpers, spawn_agent_process

from tests.fakes import warm
from tests.fakes.acp_client import RecordingClient
from tests.fakes.anthropic_server import AnthropicServer, Reply, Thinking, ToolUse, api_key, running_server
from tests.fakes.deadlines import deadline
from tests.fakes.processes import measured

API_KEY = "sk-ant-test-secret-123456"
MODEL = "anthropic:claude-sonnet-5-5"


@pytest.fixture
def server() -> Iterator[AnthropicServer]:
    with running_server(expected_api_key=API_KEY) as s:
        yield s


def env_for(home: Path, server: AnthropicServer) -> dict[str, str]:
    return measured(
        {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(home),
            "CODLING_HOME": str(home),
            "CODLING_MODEL": MODEL,
            **server.env(API_KEY),
        }
    )


def script(server: AnthropicServer) -> None:
    """Turn 1: thinking and a read, then the answer; turn 2: a plain answer."""
    server.enqueue(
        Reply(
            thinking=Thinking(["Read ", "it first"], signature="sig-one"),
            tool_uses=[ToolUse("read_file", {"path": "src/app.py"}, id="toolu_a")],
        ),
        Reply(text=["greet returns ", "'hello'"]),
        Reply(text="Second answer"),
    )


def check_provider_side(server: AnthropicServer) -> None:
    first, after_tool, second_turn = server.requests
    assert all(api_key(h) == API_KEY for h in server.headers)
    thinking = [
        b
        for m in after_tool["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
        if b["type"] == "thinking"
    ]
    assert thinking == [{"type": "thinking", "thinking": "Read it first", "signature": "sig-one"}]
    assert all(body["cache_control"]["type"] == "ephemeral" for body in (first, after_tool, second_turn))
    bill = server.bill
    assert bill[0].cache_read_input_tokens == 0 and bill[0].cache_creation_input_tokens > 0
    # Each later request reads the previous one's prefix from the cache (the simulated bill says so).
    assert all(b.cache_read_input_tokens >= 0.8 * b.total_input_tokens for b in bill[1:]), bill


async def test_codling_acp_over_anthropic_streams_thinking_runs_a_tool_and_caches(
    home: Path, project: Path, server: AnthropicServer
) -> None:
    script(server)
    client = RecordingClient()
    async with spawn_agent_process(client, *warm.codling(), "acp", env=env_for(home, server)) as (
        conn,
        process,
    ):
        await asyncio.wait_for(conn.initialize(protocol_version=PROTOCOL_VERSION), deadline(30))
        session = await asyncio.wait_for(conn.new_session(cwd=str(project)), deadline(30))
        first = await asyncio.wait_for(
            conn.prompt(session_id=session.session_id, prompt=[helpers.text_block("what does greet return?")]),
            deadline(30),
        )
        assert first.stop_reason == "end_turn"
        assert client.agent_text() == "greet returns 'hello'"
        thoughts = "".join(u.content.text for u in client.of_kind("agent_thought_chunk"))
        assert thoughts == "Read it first"
        (call,) = client.of_kind("tool_call")
        assert call.tool_call_id == "toolu_a"
        assert client.of_kind("tool_call_update")[-1].status == "completed"

        second = await asyncio.wait_for(
            conn.prompt(session_id=session.session_id, prompt=[helpers.text_block("and now?")]), deadline(30)
        )
        assert second.stop_reason == "end_turn"
        assert client.agent_text().endswith("Second answer")
        # The prompt cache's reads and writes reach the editor in each turn's usage, as the fake billed them.
        bill = server.bill
        assert first.usage is not None and second.usage is not None
        assert first.usage.cached_write_tokens == sum(b.cache_creation_input_tokens for b in bill[:2])
        assert second.usage.cached_read_tokens == bill[2].cache_read_input_tokens > 0
        process.kill()
        await asyncio.wait_for(process.wait(), deadline(10))

    check_provider_side(server)


def test_codling_run_over_anthropic_then_continue(home: Path, project: Path, server: AnthropicServer) -> None:
    script(server)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*warm.codling(), "run", *args],
            env=env_for(home, server),
            cwd=project,
            input="",
            capture_output=True,
            text=True,
            timeout=deadline(60),
            check=False,
        )

    first = run("what does greet return?")
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == "greet returns 'hello'"
    second = run("--continue", "and now?")
    assert second.returncode == 0, second.stderr
    assert second.stdout.strip() == "Second answer"

    check_provider_side(server)
    assert "and now?" in json.dumps(server.requests[2]["messages"][-1])


def test_a_key_stored_by_codling_login_signs_in_from_an_empty_environment(
    home: Path, project: Path, server: AnthropicServer
) -> None:
    """Nothing set but where the API is: `codling login` stores the key (from stdin, as no terminal is there)
    and the model, and `codling run` then works with them, the key never written anywhere else."""
    env = measured(
        {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(home),
            "CODLING_HOME": str(home),
            "ANTHROPIC_BASE_URL": server.url,
        }
    )

    def codling(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*warm.codling(), *args],
            env=env,
            cwd=project,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=deadline(60),  # liveness only
            check=False,
        )

    before = codling("run", "hi")
    assert before.returncode != 0 and "codling login" in before.stderr
    logged_in = codling("login", "--provider", "anthropic", stdin=API_KEY + "\n")
    assert logged_in.returncode == 0, logged_in.stderr
    server.enqueue(Reply(text="Signed in."))
    after = codling("run", "hi")

    assert after.returncode == 0, after.stderr
    assert after.stdout.strip() == "Signed in."
    (request,) = server.requests
    assert request["model"] == "claude-sonnet-5-5" and api_key(server.headers[0]) == API_KEY
    written = [p for p in home.rglob("*") if p.is_file() and API_KEY in p.read_text(errors="replace")]
    assert written == [home / "credentials.json"]
