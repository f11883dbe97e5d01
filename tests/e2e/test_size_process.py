"""Size attacks through a real `codling acp` (issue 29 D1 and the prompt cap): a 10 MB reply without whitespace
is stopped at the response cap, leaves the other sessions answered and comes back to the model cut; a 50 MB
prompt is kept capped."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from acp import PROTOCOL_VERSION, RequestError, helpers

from codling.brain.drive import RESPONSE_MAX_CHARS, TOO_LONG
from codling.brain.prompt import PROMPT_MAX_CHARS
from codling.brain.turns import REPLY_MAX_CHARS
from tests.e2e.test_acp_process import spawned
from tests.fakes.acp_client import RecordingClient
from tests.fakes.deadlines import deadline
from tests.fakes.openai_server import OpenAIServer, Reply, running_server, text_of

MB = 1_000_000


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with running_server() as s:
        yield s


def assistant_texts(body: dict[str, object]) -> list[str]:
    messages = body["messages"]
    assert isinstance(messages, list)
    return [text_of(m.get("content")) for m in messages if m.get("role") == "assistant"]


async def test_a_10_mb_reply_is_stopped_leaves_other_sessions_answered_and_returns_to_the_model_cut(
    home: Path, project: Path, server: OpenAIServer
) -> None:
    # A window the kept reply fits in, so the next turn sends it rather than compacting first.
    (home / "models.json").write_text(
        json.dumps({"models": {"openai-chat:fake-model": {"context_limit": 400_000, "max_output_tokens": 4_000}}})
    )
    # One run of 10 MB without whitespace, streamed in 100 KB deltas: what tiktoken chewed superlinearly.
    server.enqueue(Reply(text=["x" * 100_000] * 100), Reply(text=["Done."]))
    client = RecordingClient()
    async with spawned(client, home, server) as conn:
        await asyncio.wait_for(conn.initialize(protocol_version=PROTOCOL_VERSION), deadline(30))
        big = (await asyncio.wait_for(conn.new_session(cwd=str(project)), deadline(30))).session_id
        other = (await asyncio.wait_for(conn.new_session(cwd=str(project)), deadline(30))).session_id
        turns = asyncio.create_task(turns_in(conn, big))
        listed = 0
        # While the big session takes the reply in, counts it, records it and sends the next request, the
        # other session's requests are answered (a liveness deadline: frozen, they waited minutes).
        while not turns.done():
            sessions = await asyncio.wait_for(conn.list_sessions(cwd=str(project)), deadline(10))
            assert {s.session_id for s in sessions.sessions} >= {big}
            await asyncio.wait_for(conn.set_session_mode(session_id=other, mode_id="ask"), deadline(10))
            listed += 1
        assert await turns == ("failed", "end_turn") and listed >= 1
    streamed = "".join(u.content.text for u in client.of_kind("agent_message_chunk"))
    assert len(streamed) <= RESPONSE_MAX_CHARS  # stopped at the cap: 10 deltas of the 100
    second = server.requests[-1]
    replies = assistant_texts(second)
    assert len(replies) == 1
    kept = replies[0]
    assert len(kept) < REPLY_MAX_CHARS + 1_000
    assert f"[cut: {1 * MB - REPLY_MAX_CHARS:,} characters more of this reply were here" in kept
    assert kept.startswith("x" * 1000) and TOO_LONG in kept
    history = home / "sessions" / big / "history.jsonl"
    assert history.stat().st_size < 3 * MB


async def turns_in(conn: object, sid: str) -> tuple[str, str]:
    try:
        await asyncio.wait_for(
            conn.prompt(session_id=sid, prompt=[helpers.text_block("Print a lot.")]),  # type: ignore[attr-defined]
            deadline(120),
        )
        first = "end_turn"
    except RequestError as e:
        assert TOO_LONG in str(e.data)
        first = "failed"
    second = await asyncio.wait_for(
        conn.prompt(session_id=sid, prompt=[helpers.text_block("Thanks.")]),  # type: ignore[attr-defined]
        deadline(120),
    )
    return first, second.stop_reason


async def test_a_50_mb_prompt_is_kept_capped_with_a_note_and_reloads_at_once(
    home: Path, project: Path, server: OpenAIServer
) -> None:
    server.enqueue(Reply(text=["Too long to read."]))
    paste = "".join(f"log line {i:08d} " for i in range(50 * MB // 22))
    client = RecordingClient()
    async with spawned(client, home, server) as conn:
        await asyncio.wait_for(conn.initialize(protocol_version=PROTOCOL_VERSION), deadline(30))
        sid = (await asyncio.wait_for(conn.new_session(cwd=str(project)), deadline(30))).session_id
        answer = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=[helpers.text_block(paste)]), deadline(120))
        assert answer.stop_reason == "end_turn"
    history = home / "sessions" / sid / "history.jsonl"
    assert history.stat().st_size < 3 * MB
    head = PROMPT_MAX_CHARS * 3 // 4
    note = (
        f"[… {len(paste) - PROMPT_MAX_CHARS:,} characters were cut after the first {head:,} of this text (before "
        f"its last {PROMPT_MAX_CHARS - head:,}): codling keeps at most {PROMPT_MAX_CHARS:,} characters of a "
        "message. To share more, save it in a file and attach the file or name its path.]"
    )
    sent = text_of(server.requests[0]["messages"][-1]["content"])
    assert "\nlog line 00000000 log line 00000001 " in sent and sent.endswith(note)
    assert [u for u in client.of_kind("tool_call") if "codling keeps of one message" in str(u)]
    reloaded = RecordingClient()
    async with spawned(reloaded, home, server) as conn:
        await asyncio.wait_for(conn.initialize(protocol_version=PROTOCOL_VERSION), deadline(30))
        await asyncio.wait_for(conn.load_session(session_id=sid, cwd=str(project)), deadline(30))
    replayed = "".join(u.content.text for u in reloaded.of_kind("user_message_chunk"))
    assert replayed.startswith("log line 00000000 ") and replayed.endswith(note)
