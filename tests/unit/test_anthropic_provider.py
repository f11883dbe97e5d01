"""The Anthropic Messages API end to end in process: codling's session on the real ``AnthropicModel`` (built by
``llm/providers.py``) over HTTP against the loopback fake (tests/fakes/anthropic_server.py): streaming, thinking
signatures across tool calls, images, retries, overflow, auth, and prompt caching as Anthropic would bill it."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from codling.brain.events import (
    ProviderRetrying,
    TextDelta,
    ThoughtDelta,
    ToolCallFinished,
    TurnEnded,
)
from codling.brain.prompt import ImageBlock, TextBlock
from codling.brain.session import ConversationSession
from codling.config import PromptCache, Settings, load_settings
from codling.errors import ConfigError
from codling.llm.catalog import ModelInfo
from codling.llm.providers import warm_up_provider
from tests.fakes.anthropic_server import AnthropicServer, ErrorReply, Reply, Thinking, ToolUse, api_key, running_server
from tests.fakes.provider_session import FakeSleep, failures, provider_session, text_of, turn

MODEL = ModelInfo("anthropic:claude-sonnet-5-5", context_limit=200_000, thinking=True, images=True)
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)


@pytest.fixture
def server() -> Iterator[AnthropicServer]:
    warm_up_provider(MODEL.id)  # the SDK's import takes seconds on a busy machine: not the turn's liveness
    with running_server(expected_api_key="test-key") as server:
        yield server


def session_on(
    server: AnthropicServer,
    project: Path,
    settings: Settings,
    *,
    cache: PromptCache = "5m",
    api_key: str = "test-key",
    model: ModelInfo = MODEL,
    sleep: FakeSleep | None = None,
) -> ConversationSession:
    return provider_session(server.env(api_key), model, project, settings, cache=cache, sleep=sleep)


def blocks_of(body: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [
        block
        for message in body["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == kind
    ]


# -- the wire protocol ---------------------------------------------------------------------------------------


async def test_streamed_text_arrives_in_pieces_with_the_api_headers(
    server: AnthropicServer, project: Path, settings: Settings
) -> None:
    server.enqueue(Reply(text=["Hello ", "from ", "Claude"]))
    session = session_on(server, project, settings)

    events = await turn(session)

    assert [e.text for e in events if isinstance(e, TextDelta)] and text_of(events) == "Hello from Claude"
    assert not failures(events)
    (body,) = server.requests
    assert body["stream"] is True and body["model"] == "claude-sonnet-5-5"
    (headers,) = server.headers
    assert api_key(headers) == "test-key" and headers["anthropic-version"]


async def test_thinking_and_its_signature_go_back_with_the_tool_result(
    server: AnthropicServer, project: Path, settings: Settings
) -> None:
    server.enqueue(
        Reply(
            thinking=Thinking(["Read ", "the app"], signature="sig-123"),
            tool_uses=[ToolUse("read_file", {"path": "src/app.py"}, id="toolu_1")],
        ),
        Reply(
            thinking=Thinking("Now list", signature="sig-456"),
            tool_uses=[ToolUse("list_files", {"path": "."}, id="toolu_2")],
        ),
        Reply(text="greet returns hello"),
    )
    session = session_on(server, project, settings)

    events = await turn(session, "what does greet return?")

    assert not failures(events)
    assert "".join(e.text for e in events if isinstance(e, ThoughtDelta)) == "Read the appNow list"
    assert [e.call_id for e in events if isinstance(e, ToolCallFinished)] == ["toolu_1", "toolu_2"]
    first, second, third = server.requests
    assert first["thinking"]["type"] in ("enabled", "adaptive")
    assert blocks_of(second, "thinking") == [{"type": "thinking", "thinking": "Read the app", "signature": "sig-123"}]
    (result,) = blocks_of(second, "tool_result")
    assert result["tool_use_id"] == "toolu_1" and "return 'hello'" in str(result["content"])
    assert [b["signature"] for b in blocks_of(third, "thinking")] == ["sig-123", "sig-456"]
    assert text_of(events) == "greet returns hello"


async def test_an_image_is_sent_as_an_image_block(server: AnthropicServer, project: Path, settings: Settings) -> None:
    server.enqueue(Reply(text="a pixel"))
    session = session_on(server, project, settings)

    events = await turn(session, (TextBlock("what is this?"), ImageBlock(base64.b64encode(PNG).decode(), "image/png")))

    assert text_of(events) == "a pixel"
    (image,) = blocks_of(server.requests[0], "image")
    assert image["source"]["type"] == "base64" and image["source"]["media_type"] == "image/png"


# -- errors --------------------------------------------------------------------------------------------------


async def test_overloaded_is_retried_visibly_then_answers(
    server: AnthropicServer, project: Path, settings: Settings
) -> None:
    server.enqueue(ErrorReply.overloaded(), Reply(text="back"))
    session = session_on(server, project, settings)

    events = await turn(session)

    retries = [e for e in events if isinstance(e, ProviderRetrying)]
    assert retries and "529" in retries[0].reason
    assert text_of(events) == "back" and not failures(events)
    assert len(server.requests) == 2


async def test_a_stream_cut_before_message_stop_fails_the_turn_keeping_the_text(
    server: AnthropicServer, project: Path, settings: Settings
) -> None:
    server.enqueue(Reply(text=["The answer is ", "forty"], cut=True))
    session = session_on(server, project, settings)

    events = await turn(session)

    assert text_of(events) == "The answer is forty"
    (failed,) = failures(events)
    assert "cut off" in failed.message and "incomplete" in failed.message
    assert len(server.requests) == 1  # not retried: the user saw part of the reply


async def test_an_overload_after_the_reply_began_fails_the_turn_saying_so(
    server: AnthropicServer, project: Path, settings: Settings
) -> None:
    server.enqueue(Reply(text=["The answer is ", "forty"], stream_error="overloaded_error"))
    session = session_on(server, project, settings)

    events = await turn(session)

    assert text_of(events) == "The answer is forty"
    (failed,) = failures(events)
    assert failed.message == (
        "The model provider returned HTTP 529 for claude-sonnet-5-5: Overloaded, partway through the reply: what "
        "arrived is kept above, incomplete. Ask again to continue."
    )
    assert len(server.requests) == 1 and not [e for e in events if isinstance(e, ProviderRetrying)]


async def test_a_rate_limit_waits_as_long_as_retry_after_says(
    server: AnthropicServer, project: Path, settings: Settings
) -> None:
    sleep = FakeSleep()
    server.enqueue(ErrorReply.rate_limited(retry_after=7), Reply(text="ok"))
    session = session_on(server, project, settings, sleep=sleep)

    events = await turn(session)

    assert text_of(events) == "ok"
    assert sleep.waits == [7.0]
    assert [e.delay for e in events if isinstance(e, ProviderRetrying)][:1] == [7.0]


async def test_a_prompt_too_long_compacts_and_answers(
    server: AnthropicServer, project: Path, settings: Settings
) -> None:
    session = session_on(server, project, settings)
    for i in range(3):
        server.enqueue(Reply(text=f"answer {i}"))
        await turn(session, f"question {i} " + "words " * 200)
    server.enqueue(ErrorReply.prompt_too_long(), Reply(text="SUMMARY of the work so far"), Reply(text="fits now"))

    events = await turn(session, "one more")

    assert text_of(events).endswith("fits now") and not failures(events)
    overflowed, _summarising, retried = server.requests[-3:]
    assert len(retried["messages"]) < len(overflowed["messages"])  # the turns before are summarised away
    assert "prompt is too long" not in text_of(events)
    assert "kept by compaction" in json.dumps(retried) and "kept by compaction" not in json.dumps(overflowed)


async def test_a_wrong_key_fails_the_turn_naming_anthropic_api_key(
    server: AnthropicServer, project: Path, settings: Settings
) -> None:
    session = session_on(server, project, settings, api_key="wrong-key")

    events = await turn(session)

    (failed,) = failures(events)
    assert failed.reason == "auth"
    assert "ANTHROPIC_API_KEY" in failed.message
    assert isinstance(events[-1], TurnEnded)


# -- prompt caching ------------------------------------------------------------------------------------------


def blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message["content"]
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


def has_text(message: dict[str, Any]) -> bool:
    return any(b["type"] == "text" for b in blocks(message))


async def ten_turns(session: ConversationSession, server: AnthropicServer) -> None:
    """A scripted 10-turn session; every third turn reads a file first (two requests)."""
    for i in range(10):
        if i % 3 == 1:
            server.enqueue(Reply(tool_uses=[ToolUse("read_file", {"path": "src/app.py"})]))
        server.enqueue(Reply(text=f"answer {i}: " + "detail " * 40))
        events = await turn(session, f"question {i}: " + "context " * 60)
        assert not failures(events)


async def test_caching_puts_breakpoints_on_tools_system_and_conversation_and_most_input_is_read(
    server: AnthropicServer, project: Path, settings: Settings
) -> None:
    session = session_on(server, project, settings)

    await ten_turns(session, server)

    requests, bill = server.requests, server.bill
    assert len(requests) == len(bill) == 13
    for body in requests:
        assert body["tools"][-1]["cache_control"] == {"type": "ephemeral", "ttl": "5m"}
        assert body["system"][-1]["cache_control"] == {"type": "ephemeral", "ttl": "5m"}
        assert body["cache_control"] == {"type": "ephemeral", "ttl": "5m"}  # automatic: the last block
    # From the second turn on, one more on the history's last block, before the turn's prompt, so a request that
    # shares the history but not what follows (the summarizer's, the next after a compaction) reads it too.
    for body in requests[1:]:
        messages = body["messages"]
        prompt = max(i for i, m in enumerate(messages) if m["role"] == "user" and has_text(m))
        marks = [i for i, m in enumerate(messages) for b in blocks(m) if "cache_control" in b]
        assert marks == [prompt - 1] and messages[prompt - 1]["role"] == "assistant", marks
        assert blocks(messages[prompt - 1])[-1]["cache_control"] == {"type": "ephemeral", "ttl": "5m"}
    assert not any("cache_control" in b for m in requests[0]["messages"] for b in blocks(m))
    assert bill[0].cache_read_input_tokens == 0 and bill[0].cache_creation_input_tokens > 0
    # From turn 3 on (request 3: turn 2 made two), each request reads all but its newest part from the cache.
    for billed in bill[3:]:
        assert billed.cache_read_input_tokens >= 0.8 * billed.total_input_tokens, billed
    assert sum(b.billed_input() for b in bill) < 0.5 * sum(b.total_input_tokens for b in bill)


async def test_a_one_hour_cache_asks_for_one_hour_breakpoints(
    server: AnthropicServer, project: Path, settings: Settings
) -> None:
    server.enqueue(Reply(text="one"), Reply(text="two"))
    session = session_on(server, project, settings, cache="1h")

    await turn(session, "first")
    await turn(session, "second")

    assert all(body["cache_control"] == {"type": "ephemeral", "ttl": "1h"} for body in server.requests)
    assert server.bill[0].ephemeral_1h_input_tokens > 0 and server.bill[0].ephemeral_5m_input_tokens == 0
    assert server.bill[1].cache_read_input_tokens > 0


async def test_with_cache_off_no_request_carries_cache_control(
    server: AnthropicServer, project: Path, settings: Settings
) -> None:
    session = session_on(server, project, settings, cache="off")

    await ten_turns(session, server)

    assert len(server.requests) == 13
    assert "cache_control" not in json.dumps(server.requests)
    assert all(b.cache_read_input_tokens == b.cache_creation_input_tokens == 0 for b in server.bill)


def test_config_cache_is_read_and_checked(home: Path) -> None:
    (home / "config.toml").write_text('cache = "1h"\n')
    assert load_settings({"CODLING_HOME": str(home)}).cache == "1h"
    (home / "config.toml").write_text("")
    assert load_settings({"CODLING_HOME": str(home)}).cache == "5m"
    (home / "config.toml").write_text('cache = "forever"\n')
    with pytest.raises(ConfigError, match="cache must be one of '5m', '1h', 'off'"):
        load_settings({"CODLING_HOME": str(home)})
