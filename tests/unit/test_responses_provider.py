"""OpenAI's Responses API end to end in process: a codling session on ``openai:`` drives pydantic-ai's
Responses model, over HTTP through the client ``llm/providers.py`` builds, against the loopback Responses server
(tests/fakes/responses_server.py). Caching is asserted from the fake's side: what it billed as cached input."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from pydantic_ai.messages import CachePoint, ModelRequest, ModelResponse, TextPart, ThinkingPart

from codling.brain.events import (
    CompactionStarted,
    ProviderRetrying,
    ThoughtDelta,
)
from codling.brain.factory import open_session
from codling.brain.prompt import ImageBlock, TextBlock
from codling.brain.session import ConversationSession
from codling.config import Settings
from codling.llm.catalog import ModelInfo
from codling.llm.providers import build_model, history_breakpoint, prompt_cache_settings
from tests.fakes.deadlines import deadline
from tests.fakes.http_fake import MIN_CACHED_TOKENS
from tests.fakes.openai_server import running_server
from tests.fakes.provider_session import failures, provider_session, text_of, turn
from tests.fakes.responses_server import ErrorReply, Reply, ResponsesServer, ToolCall, running_responses_server

# (a gpt-5 name: pydantic-ai sends reasoning items back, with their encrypted content, to reasoning models only)
MODEL = ModelInfo("openai:gpt-5-mini", context_limit=200_000, thinking=True, images=True)


@pytest.fixture
def server() -> Iterator[ResponsesServer]:
    with running_responses_server() as server:
        yield server


def session_on(
    server: ResponsesServer, project: Path, settings: Settings, *, api_key: str = "test-key"
) -> ConversationSession:
    return provider_session(server.env(api_key), MODEL, project, settings)


async def test_streamed_reasoning_and_text_reach_the_session(
    server: ResponsesServer, project: Path, settings: Settings
) -> None:
    server.enqueue(Reply(reasoning=["Weighing ", "the options."], text=["Hello ", "from ", "Responses."]))
    session = session_on(server, project, settings)

    events = await turn(session, "Say hello")

    assert text_of(events) == "Hello from Responses."
    assert "".join(e.text for e in events if isinstance(e, ThoughtDelta)) == "Weighing the options."
    assert not failures(events)
    (request,) = server.requests
    assert request["stream"] is True and request["model"] == "gpt-5-mini"
    assert request["include"] == ["reasoning.encrypted_content"]  # so its reasoning can go back
    assert server.headers[0]["authorization"] == "Bearer test-key"
    assert session.state.entries[-1].text == "Hello from Responses."


async def test_multi_step_tool_use_sends_back_the_reasoning_and_the_call_results(
    server: ResponsesServer, project: Path, settings: Settings
) -> None:
    server.enqueue(
        Reply(reasoning="I should read it.", tool_calls=[ToolCall("read_file", {"path": "src/app.py"}, id="call_a")]),
        Reply(tool_calls=[ToolCall("read_file", {"path": "README.md"}, id="call_b")]),
        Reply(text="greet() returns 'hello'; the README is a title."),
    )
    session = session_on(server, project, settings)

    events = await turn(session, "What does greet return?")

    assert text_of(events) == "greet() returns 'hello'; the README is a title."
    first, second, third = server.requests
    items = second["input"]
    # The reasoning item goes back with its signature (encrypted content) before the call it led to.
    reasoning = next(i for i in items if i.get("type") == "reasoning")
    assert reasoning["id"] == "rs_0" and reasoning["encrypted_content"] == "enc-reasoning-0"
    call = next(i for i in items if i.get("type") == "function_call")
    assert (call["call_id"], call["name"], json.loads(call["arguments"])) == (
        "call_a",
        "read_file",
        {"path": "src/app.py"},
    )
    output = next(i for i in items if i.get("type") == "function_call_output")
    assert output["call_id"] == "call_a" and "return 'hello'" in output["output"]
    assert {i.get("call_id") for i in third["input"] if i.get("type") == "function_call_output"} == {
        "call_a",
        "call_b",
    }
    assert first["input"] == second["input"][: len(first["input"])]  # the conversation only grows


async def test_an_image_is_sent_as_an_input_image(server: ResponsesServer, project: Path, settings: Settings) -> None:
    server.enqueue(Reply(text="A red square."))
    session = session_on(server, project, settings)
    png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="

    events = await turn(session, (TextBlock("What is this?"), ImageBlock(png, "image/png", "file:///p/shot.png")))

    assert text_of(events) == "A red square."
    parts = [p for i in server.requests[0]["input"] if isinstance(i.get("content"), list) for p in i["content"]]
    (image,) = [p for p in parts if p.get("type") == "input_image"]
    assert image["image_url"] == f"data:image/png;base64,{png}"


async def test_a_rate_limit_is_retried_visibly_after_its_retry_after(
    server: ResponsesServer, project: Path, settings: Settings
) -> None:
    server.enqueue(ErrorReply.rate_limited(retry_after=7), ErrorReply.server_error(status=503), Reply(text="Done."))
    session = session_on(server, project, settings)

    events = await turn(session)

    waits = [e for e in events if isinstance(e, ProviderRetrying) and e.status == "waiting"]
    assert [w.attempt for w in waits] == [2, 3]
    assert waits[0].delay == 7  # the provider's Retry-After, not a guess
    assert text_of(events) == "Done." and not failures(events)
    assert len(server.requests) == 3


async def test_a_refused_request_fails_the_turn_with_the_providers_reason(
    server: ResponsesServer, project: Path, settings: Settings
) -> None:
    server.enqueue(ErrorReply(400, "Invalid value for 'input[0].content': unsupported.", code="invalid_value"))
    session = session_on(server, project, settings)

    events = await turn(session)

    (failed,) = failures(events)
    assert "unsupported" in failed.message
    assert len(server.requests) == 1  # a 400 is not retried


async def test_a_wrong_key_fails_the_turn_naming_openai_api_key(project: Path, settings: Settings) -> None:
    with running_responses_server(expected_api_key="sk-right") as server:
        session = session_on(server, project, settings, api_key="sk-wrong")
        events = await turn(session)

    (failed,) = failures(events)
    assert "OPENAI_API_KEY" in failed.message and "refused" in failed.message
    assert len(server.requests) == 1  # an auth error is not retried


async def test_context_length_exceeded_compacts_and_the_turn_goes_on(
    server: ResponsesServer, project: Path, settings: Settings
) -> None:
    server.enqueue(
        Reply(text="Noted."),
        ErrorReply.context_length_exceeded(),
        Reply(text="## Goal\nShip the parser.\n## User constraints and preferences\nThe codeword is heron."),
        Reply(text="The codeword is heron."),
    )
    session = session_on(server, project, settings)

    await turn(session, "The codeword is heron.")
    events = await turn(session, "What is the codeword?")

    assert [e.reason for e in events if isinstance(e, CompactionStarted)] == ["overflow"]
    assert not failures(events) and text_of(events) == "The codeword is heron."
    overflowing, retried = server.requests[1], server.requests[3]
    assert overflowing["input"] != retried["input"]


# -- prompt caching: prompt_cache_key and what the fake bills --------------------------------------------------


def cache_keys(server: ResponsesServer) -> list[str | None]:
    return [body.get("prompt_cache_key") for body in server.requests]


async def test_a_session_sends_one_prompt_cache_key_and_its_repeated_prefix_is_billed_as_cached(
    server: ResponsesServer, project: Path, settings: Settings
) -> None:
    long_prompt = "Remember these notes. " + "lorem ipsum dolor sit amet " * 400  # well past 1,024 tokens
    summary = "## Goal\nRemember these notes: lorem ipsum dolor sit amet, and answer what comes next."
    server.enqueue(Reply(text="Noted."), Reply(text="Still noted."), Reply(text=summary), Reply(text="Other session."))
    first = session_on(server, project, settings)
    await turn(first, long_prompt)
    await turn(first, "And now?")
    await turn(first, "/compact")  # the summarizer's request, a special turn's, is the session's too
    other = session_on(server, project, settings)
    await turn(other, "Hello")

    one, two, summarized, three = cache_keys(server)
    assert one == two == summarized == f"codling-{first.state.session_id}"
    assert three == f"codling-{other.state.session_id}" and three != one
    bills = server.bills
    assert bills[0].cached_tokens == 0  # nothing to read yet
    # The second turn repeats the whole first request: most of it comes from the cache.
    assert bills[1].cached_tokens >= MIN_CACHED_TOKENS
    assert bills[1].cached_tokens >= 0.9 * bills[0].input_tokens


def test_chat_completions_get_a_prompt_cache_key_only_from_openai_itself() -> None:
    assert prompt_cache_settings("openai-chat:gpt-4o", None, "s1") == {"openai_prompt_cache_key": "codling-s1"}
    assert prompt_cache_settings("openai-chat:gpt-4o", "https://api.openai.com/v1/", "s1") == {
        "openai_prompt_cache_key": "codling-s1"
    }
    # Other OpenAI-compatible servers may refuse a field they do not know.
    assert prompt_cache_settings("openai-chat:qwen", "http://localhost:11434/v1", "s1") == {}
    assert prompt_cache_settings("openai-responses:gpt-5", "http://localhost:8000/v1", "s1") != {}
    assert prompt_cache_settings("anthropic:claude-sonnet-4-5", None, "s1") == {}


def test_only_anthropic_gets_a_breakpoint_on_the_history() -> None:
    history = [ModelRequest.user_text_prompt("hi"), ModelResponse([TextPart("hello")])]
    (mark,) = history_breakpoint("anthropic:claude-sonnet-5-5", "1h", history)
    assert mark == CachePoint(ttl="1h")
    # Other providers may refuse a field they do not know; OpenAI caches by prefix without breakpoints.
    assert history_breakpoint("openai:gpt-5", "5m", history) == []
    assert history_breakpoint("openai-chat:qwen", "5m", history) == []
    assert history_breakpoint("anthropic:claude-sonnet-5-5", "off", history) == []
    # Nothing to mark before the first prompt, nor when the prompt joins a user message (it would split its text).
    assert history_breakpoint("anthropic:claude-sonnet-5-5", "5m", []) == []
    assert history_breakpoint("anthropic:claude-sonnet-5-5", "5m", history[:1]) == []
    # Nor on a reply without words: Anthropic refuses a breakpoint on blank text or a thinking block.
    for reply in (ModelResponse([TextPart("")]), ModelResponse([TextPart("  ")]), ModelResponse([ThinkingPart("x")])):
        assert history_breakpoint("anthropic:claude-sonnet-5-5", "5m", [*history[:1], reply]) == []


async def test_a_local_chat_completions_server_gets_no_prompt_cache_key(project: Path, settings: Settings) -> None:
    from tests.fakes.openai_server import Reply as ChatReply

    with running_server() as chat:
        chat.enqueue(ChatReply(text=["ok"]))
        session = open_session(
            replace(settings, titles=False),
            ModelInfo("openai-chat:fake-model"),
            project,
            approver=None,
            mode="read-only",
            model_factory=lambda model_id: build_model(model_id, env=chat.env()),
        )
        async with asyncio.timeout(deadline(120)):
            await session.run("hi")
        (body,) = chat.requests
    assert "prompt_cache_key" not in body
