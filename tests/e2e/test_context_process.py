"""The real provider path: a spawned `codling acp` recovers when the loopback server says the context overflowed."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from acp import PROTOCOL_VERSION, helpers, spawn_agent_process

from codling.brain.context.compaction import EARLIER_REQUEST
from codling.brain.state import SUMMARY_PREFIX
from tests.e2e.test_acp_process import agent_env
from tests.fakes import warm
from tests.fakes.acp_client import RecordingClient
from tests.fakes.openai_server import ErrorReply, OpenAIServer, Reply, Usage, running_server
from tests.fakes.scenarios import user_prompt
from tests.fakes.summarizer import is_summary_body, transcript_of_body

SUMMARY = "## Goal\nShip the parser.\n## User constraints and preferences\nThe user's lucky number is 42."


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with running_server() as s:
        yield s


LLAMA_CPP_OVERFLOW = ErrorReply(
    500,
    "the request exceeds the available context size. try increasing the context size or enable context shift",
    type="exceed_context_size_error",
)


@pytest.mark.parametrize(
    "overflow", [ErrorReply.context_length_exceeded(), LLAMA_CPP_OVERFLOW], ids=["openai", "llama.cpp-500"]
)
async def test_context_length_exceeded_compacts_retries_and_recovers(
    home: Path, project: Path, server: OpenAIServer, overflow: ErrorReply
) -> None:
    (home / "models.json").write_text(
        json.dumps({"models": {"openai-chat:fake-model": {"context_limit": 64000, "max_output_tokens": 2000}}})
    )
    (home / "config.toml").write_text('mode = "yolo"\n')
    server.enqueue(
        Reply(text=["Noted."], usage=Usage(900, 5)),
        overflow,
        Reply(text=[SUMMARY]),
        Reply(text=["Your lucky number is 42."], usage=Usage(300, 8)),
    )
    client = RecordingClient()
    async with spawn_agent_process(client, *warm.codling(), "acp", env=agent_env(home, server)) as (
        conn,
        process,
    ):
        await asyncio.wait_for(conn.initialize(protocol_version=PROTOCOL_VERSION), 30)
        session = await asyncio.wait_for(conn.new_session(cwd=str(project)), 30)
        sid = session.session_id
        first = await asyncio.wait_for(
            conn.prompt(session_id=sid, prompt=[helpers.text_block("My lucky number is 42.")]), 30
        )
        assert first.stop_reason == "end_turn"
        second = await asyncio.wait_for(
            conn.prompt(session_id=sid, prompt=[helpers.text_block("What is my lucky number?")]), 30
        )
        assert second.stop_reason == "end_turn"
        process.terminate()
    assert client.agent_text().endswith("Your lucky number is 42.")
    assert "Error" not in client.agent_text()
    titles = [u.title for u in client.of_kind("tool_call_update") if u.title]
    assert len(titles) == 1 and titles[0].startswith("Compacted context:")
    usage = client.of_kind("usage_update")
    # A window the provider's error states (OpenAI's wording: 8,192) is learned for the rest of the session.
    assert usage[-1].size == (8192 if "8192 tokens" in overflow.message else 64000)

    # What the provider received: the overflowing request, the summary request, then the retry built from the
    # kept user message and the summary.
    bodies = server.requests
    assert len(bodies) == 4
    assert is_summary_body(bodies[2]) and bodies[2]["tool_choice"] == "none"
    assert "My lucky number is 42." in transcript_of_body(bodies[2])
    # One user message (roles alternate): the kept user message, the summary, then the turn's context and prompt.
    (retry,) = [m["content"] for m in bodies[3]["messages"] if m["role"] == "user"]
    assert retry.startswith(EARLIER_REQUEST + "My lucky number is 42.\n\n" + SUMMARY_PREFIX)
    assert user_prompt(retry) == "What is my lucky number?"
