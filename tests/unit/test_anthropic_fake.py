"""The Anthropic fake's cache rules (tests/fakes/anthropic_cache.py) and its non-streamed answer: what a test or
the bench prices must follow Anthropic's documented rules, so they are pinned here."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest

from codling.brain.builtin_turns import prompt_text
from tests.fakes.anthropic_cache import LOOKBACK_BLOCKS, CacheRejected, PromptCache
from tests.fakes.anthropic_server import ErrorReply, Reply, ToolUse, running_server
from tests.fakes.deadlines import deadline

EPHEMERAL = {"type": "ephemeral"}
BIG = "x" * 8000  # 2,000 tokens at 4 characters a token: past Sonnet's minimum of 1,024


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def request(*texts: str, marks: tuple[int, ...] = (), automatic: dict[str, Any] | None = None) -> dict[str, Any]:
    """A request with one user text block per text; ``marks`` are the blocks with a breakpoint."""
    content = [
        {"type": "text", "text": t, **({"cache_control": EPHEMERAL} if i in marks else {})} for i, t in enumerate(texts)
    ]
    body: dict[str, Any] = {
        "model": "claude-sonnet-5-5",
        "system": BIG,
        "messages": [{"role": "user", "content": content}],
    }
    if automatic is not None:
        body["cache_control"] = automatic
    return body


def test_the_second_request_reads_the_prefix_the_first_wrote_until_it_expires() -> None:
    clock = Clock()
    cache = PromptCache(clock)
    first = cache.bill(request("a", automatic=EPHEMERAL))
    assert first.cache_read_input_tokens == 0 and first.cache_creation_input_tokens > 2000 and first.input_tokens == 0

    clock.now = 299
    second = cache.bill(request("a", "b", automatic=EPHEMERAL))
    assert second.cache_read_input_tokens == first.cache_creation_input_tokens
    assert second.cache_creation_input_tokens > 0  # the new block, written up to the new last block

    clock.now = 299 + 301  # 5 minutes after the last read: gone
    third = cache.bill(request("a", "b", automatic=EPHEMERAL))
    assert third.cache_read_input_tokens == 0


def test_a_hit_refreshes_the_entry() -> None:
    clock = Clock()
    cache = PromptCache(clock)
    cache.bill(request("a", marks=(0,)))
    for minute in (4, 8, 12):
        clock.now = minute * 60
        assert cache.bill(request("a", marks=(0,))).cache_read_input_tokens > 0


def test_a_prefix_below_the_minimum_is_never_cached() -> None:
    cache = PromptCache(Clock())
    small: dict[str, Any] = {
        "model": "claude-haiku-4-5",
        "system": "x" * 6000,
        "messages": [{"role": "user", "content": "hi"}],
    }
    small["cache_control"] = EPHEMERAL  # 1,500 tokens: above Sonnet's minimum, below Haiku's 2,048
    assert cache.bill(small).cache_creation_input_tokens == 0
    assert cache.bill(small).cache_read_input_tokens == 0


def test_lookback_finds_an_entry_up_to_20_blocks_before_a_breakpoint() -> None:
    cache = PromptCache(Clock())
    texts = [f"block {i}" for i in range(30)]
    cache.bill(request(*texts[:5], marks=(4,)))
    near = cache.bill(request(*texts[: 5 + LOOKBACK_BLOCKS - 1], marks=(5 + LOOKBACK_BLOCKS - 2,)))
    assert near.cache_read_input_tokens > 0
    cache.clear()
    cache.bill(request(*texts[:5], marks=(4,)))
    far = cache.bill(request(*texts[: 5 + LOOKBACK_BLOCKS + 1], marks=(5 + LOOKBACK_BLOCKS,)))
    assert far.cache_read_input_tokens == 0


def test_a_changed_block_early_in_the_prefix_misses() -> None:
    cache = PromptCache(Clock())
    cache.bill(request("a", "b", marks=(1,)))
    assert cache.bill(request("A", "b", marks=(1,))).cache_read_input_tokens == 0


def test_breakpoints_the_api_refuses_are_refused() -> None:
    cache = PromptCache(Clock())
    with pytest.raises(CacheRejected, match="maximum of 4 blocks"):
        cache.bill(request("a", "b", "c", "d", "e", marks=(0, 1, 2, 3, 4)))
    with pytest.raises(CacheRejected, match="maximum of 4 blocks"):
        cache.bill(request("a", "b", "c", "d", "e", marks=(0, 1, 2, 3), automatic=EPHEMERAL))
    thinking = request("a")
    thinking["messages"].append(
        {
            "role": "assistant",
            "content": [{"type": "thinking", "thinking": "t", "signature": "s", "cache_control": EPHEMERAL}],
        }
    )
    with pytest.raises(CacheRejected, match="cache_control cannot be set"):
        cache.bill(thinking)
    with pytest.raises(CacheRejected):
        cache.bill(request("", marks=(0,)))


def test_one_hour_writes_are_billed_apart_and_priced_at_twice_the_input() -> None:
    cache = PromptCache(Clock())
    billed = cache.bill(request("a", automatic={"type": "ephemeral", "ttl": "1h"}))
    assert billed.ephemeral_1h_input_tokens == billed.cache_creation_input_tokens > 0
    assert billed.billed_input() == 2 * billed.cache_creation_input_tokens


def post(url: str, body: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, str]]:
    data = json.dumps(body).encode()
    req = urllib.request.Request(f"{url}/v1/messages", data, {"content-type": "application/json", "x-api-key": "k"})
    try:
        with urllib.request.urlopen(req, timeout=deadline(10)) as response:
            return response.status, json.loads(response.read()), dict(response.headers)
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read()), dict(e.headers)


def test_a_non_streamed_message_and_anthropic_error_bodies() -> None:
    with running_server(expected_api_key="k") as server:
        server.enqueue(
            Reply(text="hi", tool_uses=[ToolUse("read_file", {"path": "a"}, id="toolu_1")]), ErrorReply.rate_limited(3)
        )
        status, message, _ = post(
            server.url, {"model": "claude-sonnet-5-5", "messages": [{"role": "user", "content": "q"}]}
        )
        assert status == 200 and message["stop_reason"] == "tool_use"
        assert message["content"] == [
            {"type": "text", "text": "hi"},
            {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "a"}},
        ]
        assert set(message["usage"]) >= {
            "input_tokens",
            "output_tokens",
            "cache_read_input_tokens",
            "cache_creation_input_tokens",
        }
        status, error, headers = post(server.url, {"model": "m", "messages": []})
        assert status == 429 and error == {
            "type": "error",
            "error": {"type": "rate_limit_error", "message": error["error"]["message"]},
        }
        assert headers["retry-after"] == "3"
        assert server.headers[0]["x-api-key"] == "k"


def test_refused_breakpoints_titles_a_failing_responder_and_unknown_paths_over_http() -> None:
    """What the server adds to the cache rules on the wire: a refused breakpoint is Anthropic's 400, a title is
    answered apart from the script and billed apart, and its own failures come back in Anthropic's shape."""

    def responder(body: dict[str, Any]) -> Reply:
        raise ValueError("no script for this")

    title_system = [{"type": "text", "text": prompt_text("title")}]
    with running_server(responder=responder) as server:
        server.enqueue(Reply("refused"), Reply("answered"))
        status, error, headers = post(server.url, request("a", "b", "c", "d", "e", marks=(0, 1, 2, 3, 4)))
        assert status == 400 and error["error"]["type"] == "invalid_request_error"
        assert "maximum of 4 blocks" in error["error"]["message"] and headers["request-id"] == "req_fake"

        status, message, _ = post(server.url, {**request("name this"), "system": title_system})
        assert status == 200 and message["content"] == [{"type": "text", "text": "Loopback session title"}]
        assert len(server.title_bill) == 1 and server.bill == []

        status, message, _ = post(server.url, request("a"))
        assert status == 200 and message["content"][0]["type"] == "text"
        status, error, _ = post(server.url, request("b"))
        assert status == 500 and error["error"]["type"] == "api_error"
        assert "the responder raised ValueError('no script for this')" in error["error"]["message"]
        assert [len(r["messages"][0]["content"]) for r in server.requests] == [5, 1, 1]
        assert len(server.bill) == 1

        req = urllib.request.Request(f"{server.url}/v1/models")
        with pytest.raises(urllib.error.HTTPError) as raised:
            urllib.request.urlopen(req, timeout=deadline(10))
        assert raised.value.code == 404
        assert json.loads(raised.value.read())["error"]["type"] == "not_found_error"
