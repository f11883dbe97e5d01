"""The fake OpenAI server, driven through the real pydantic-ai ``OpenAIChatModel`` path.

Retries: the ``openai`` SDK retries 408/409/429/5xx responses and connection errors twice by default, with
backoff (about 0.5 s, then 1 s, or what a ``retry-after-ms``/``retry-after`` header asks for). So a 429 or
500 reaches pydantic-ai's caller only after three attempts, seconds later. Codling must decide who owns
retries: either leave them to the SDK (and expect up to ``1 + max_retries`` requests per model call, which a
test server must then be scripted for), or turn them off -- by building the provider from an
``AsyncOpenAI(..., max_retries=N)`` client, or per request with ``ModelSettings(max_retries=N)`` -- and
retry or fall back itself on ``ModelRateLimitError``/``ModelServerError`` (both also ``ModelHTTPError``).
Tests here that script errors turn SDK retries off, so each takes one request and no backoff.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from openai import AsyncOpenAI
from pydantic_ai import (
    Agent,
    AgentRunResultEvent,
    ModelContextWindowExceededError,
    ModelHTTPError,
    ModelRateLimitError,
    ModelServerError,
    PartDeltaEvent,
    TextPartDelta,
    ThinkingPart,
    ToolCallPartDelta,
)
from pydantic_ai.messages import ModelResponse, ToolCallPart
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.settings import ModelSettings

from tests.fakes.deadlines import deadline
from tests.fakes.openai_server import (
    ErrorReply,
    OpenAIServer,
    Reply,
    ToolCall,
    Usage,
    last_user_text,
    running_server,
)

API_KEY = "test-key"
MODEL = "fake-model"


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with running_server() as server:
        yield server


def make_agent(server: OpenAIServer, *, retries: bool = True) -> Agent[None, str]:
    """An agent on ``OpenAIChatModel``; ``retries=False`` gives it a client that never retries."""
    if retries:
        provider = OpenAIProvider(base_url=server.base_url, api_key=API_KEY)
    else:
        provider = OpenAIProvider(openai_client=AsyncOpenAI(base_url=server.base_url, api_key=API_KEY, max_retries=0))
    return Agent(OpenAIChatModel(MODEL, provider=provider))


async def collect_events(agent: Agent[None, str], prompt: str) -> list[Any]:
    events: list[Any] = []
    async with agent.run_stream_events(prompt) as stream:
        async for event in stream:
            events.append(event)
    return events


def post_json(url: str, body: dict[str, Any], *, api_key: str = API_KEY) -> tuple[int, bytes]:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {api_key}"},
    )
    try:
        with urllib.request.urlopen(request, timeout=deadline(5)) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


# --- Through pydantic-ai ---------------------------------------------------------------------------------


async def test_streamed_text_arrives_as_several_deltas(server: OpenAIServer) -> None:
    server.enqueue(Reply(text=["The capital ", "of France ", "is ", "Paris."]))

    events = await collect_events(make_agent(server), "Capital of France?")

    text_deltas = [
        e.delta.content_delta for e in events if isinstance(e, PartDeltaEvent) and isinstance(e.delta, TextPartDelta)
    ]
    # The first chunk starts the part (PartStartEvent); each later chunk is a delta of its own.
    assert len(text_deltas) >= 3
    result = events[-1]
    assert isinstance(result, AgentRunResultEvent)
    assert result.result.output == "The capital of France is Paris."

    [body] = server.requests
    assert body["stream"] is True
    assert body["model"] == MODEL
    assert body["messages"][-1] == {"role": "user", "content": "Capital of France?"}


async def test_non_streamed_text(server: OpenAIServer) -> None:
    server.enqueue(Reply.chunked("Hello there, general.", size=5))

    result = await make_agent(server).run("hi")

    assert result.output == "Hello there, general."
    assert "stream" not in server.requests[0] or server.requests[0]["stream"] is False


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "non-streamed"])
async def test_tool_call_round_trip(server: OpenAIServer, stream: bool) -> None:
    server.enqueue(
        Reply(tool_calls=[ToolCall("add", {"a": 2, "b": 3}, id="call_add_1")]),
        Reply(text=["The sum is 5."]),
    )
    agent = make_agent(server)
    seen: list[tuple[int, int]] = []

    @agent.tool_plain
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        seen.append((a, b))
        return a + b

    if stream:
        events = await collect_events(agent, "What is 2 + 3?")
        tool_deltas = [e for e in events if isinstance(e, PartDeltaEvent) and isinstance(e.delta, ToolCallPartDelta)]
        assert len(tool_deltas) >= 2  # the arguments came in pieces
        output = events[-1].result.output
    else:
        output = (await agent.run("What is 2 + 3?")).output

    assert output == "The sum is 5."
    assert seen == [(2, 3)]

    first, second = server.requests
    assert [tool["function"]["name"] for tool in first["tools"]] == ["add"]
    assistant, tool_result = second["messages"][-2:]
    assert assistant["role"] == "assistant"
    assert assistant["tool_calls"][0]["id"] == "call_add_1"
    assert json.loads(assistant["tool_calls"][0]["function"]["arguments"]) == {"a": 2, "b": 3}
    assert tool_result == {"role": "tool", "tool_call_id": "call_add_1", "content": "5"}
    assert server.pending == 0


async def test_generated_tool_call_id_is_echoed_back(server: OpenAIServer) -> None:
    server.enqueue(Reply(tool_calls=[ToolCall("ping")]), Reply(text="done"))
    agent = make_agent(server)

    @agent.tool_plain
    def ping() -> str:
        return "pong"

    result = await agent.run("ping")

    [call] = [
        p for m in result.all_messages() if isinstance(m, ModelResponse) for p in m.parts if isinstance(p, ToolCallPart)
    ]
    tool_message = server.requests[1]["messages"][-1]
    assert tool_message["tool_call_id"] == call.tool_call_id
    assert call.tool_call_id.startswith("call_")


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "non-streamed"])
async def test_usage_reaches_the_result(server: OpenAIServer, stream: bool) -> None:
    server.enqueue(Reply(text=["ok"], usage=Usage(prompt_tokens=123, completion_tokens=45)))
    agent = make_agent(server)

    if stream:
        events = await collect_events(agent, "count")
        usage = events[-1].result.usage
        assert server.requests[0]["stream_options"] == {"include_usage": True}
    else:
        usage = (await agent.run("count")).usage

    assert usage.input_tokens == 123
    assert usage.output_tokens == 45
    assert usage.total_tokens == 168
    assert usage.requests == 1


async def test_no_usage_chunk_unless_asked(server: OpenAIServer) -> None:
    server.enqueue(Reply(text=["ok"], usage=Usage(1, 2)))

    status, raw = post_json(f"{server.base_url}/chat/completions", {"model": MODEL, "stream": True, "messages": []})

    assert status == 200
    assert b'"usage"' not in raw


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "non-streamed"])
async def test_reasoning_becomes_a_thinking_part(server: OpenAIServer, stream: bool, field: str) -> None:
    server.enqueue(Reply(reasoning=["Let me ", "think."], text=["42"], reasoning_field=field))
    agent = make_agent(server)

    if stream:
        events = await collect_events(agent, "meaning of life?")
        result = events[-1].result
    else:
        result = await agent.run("meaning of life?")

    assert result.output == "42"
    response = result.all_messages()[-1]
    assert isinstance(response, ModelResponse)
    [thinking] = [p for p in response.parts if isinstance(p, ThinkingPart)]
    assert thinking.content == "Let me think."


async def test_context_length_exceeded_surfaces_as_model_http_error(server: OpenAIServer) -> None:
    server.enqueue(ErrorReply.context_length_exceeded("too long: 9000 > 8192 tokens"))

    with pytest.raises(ModelHTTPError) as caught:
        await make_agent(server, retries=False).run("a very long prompt")

    error = caught.value
    assert isinstance(error, ModelContextWindowExceededError)
    assert error.status_code == 400
    assert error.model_name == MODEL
    # The openai SDK unwraps the body's "error" object.
    assert error.body == {
        "message": "too long: 9000 > 8192 tokens",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
    assert error.provider_error_code == "context_length_exceeded"
    assert error.provider_error_type == "invalid_request_error"
    assert len(server.requests) == 1


async def test_error_before_a_stream_opens(server: OpenAIServer) -> None:
    server.enqueue(ErrorReply.context_length_exceeded())

    with pytest.raises(ModelContextWindowExceededError) as caught:
        await collect_events(make_agent(server, retries=False), "long")

    assert isinstance(caught.value, ModelHTTPError)
    assert caught.value.status_code == 400
    assert caught.value.in_stream is False


async def test_client_hanging_up_mid_stream_leaves_the_server_serving(server: OpenAIServer) -> None:
    # A chunk every 20 ms for over half an hour: a client that waited for the whole reply would never be done.
    server.enqueue(Reply(text=[f"word{i} " for i in range(100_000)], delay=0.02), Reply(text="next"))
    agent = make_agent(server)

    async with asyncio.timeout(deadline(10)):  # liveness only
        async with agent.run_stream_events("long answer") as stream:
            async for event in stream:
                if isinstance(event, PartDeltaEvent):
                    break  # leaving the block cancels the run and closes the connection
    await asyncio.to_thread(server.wait_for_hangups, 1)  # the server saw the client go, mid-reply
    assert server.hangups == 1

    result = await agent.run("again")
    assert result.output == "next"


async def test_rate_limit_surfaces_without_retries(server: OpenAIServer) -> None:
    server.enqueue(ErrorReply.rate_limited("slow down"))

    with pytest.raises(ModelRateLimitError) as caught:
        await make_agent(server, retries=False).run("hi")

    error = caught.value
    assert isinstance(error, ModelHTTPError)
    assert error.status_code == 429
    assert error.provider_error_code == "rate_limit_exceeded"
    assert isinstance(error.body, dict)
    assert error.body["message"] == "slow down"
    assert len(server.requests) == 1


async def test_server_error_surfaces_with_max_retries_setting(server: OpenAIServer) -> None:
    server.enqueue(ErrorReply.server_error("boom"))
    agent = make_agent(server)  # default client: 2 SDK retries, turned off per request below

    with pytest.raises(ModelServerError) as caught:
        await agent.run("hi", model_settings=ModelSettings(max_retries=0))

    assert isinstance(caught.value, ModelHTTPError)
    assert caught.value.status_code == 500
    assert len(server.requests) == 1


async def test_sdk_retries_a_rate_limit_by_default(server: OpenAIServer) -> None:
    # retry-after-ms keeps the SDK's wait at 1 ms instead of its ~0.5 s backoff.
    server.enqueue(ErrorReply.rate_limited(retry_after_ms=1), Reply(text="finally"))

    result = await make_agent(server).run("hi")

    assert result.output == "finally"
    assert len(server.requests) == 2


async def test_unscripted_request_gets_a_clear_500(server: OpenAIServer) -> None:
    with pytest.raises(ModelServerError) as caught:
        await make_agent(server, retries=False).run("hi")

    assert isinstance(caught.value.body, dict)
    assert caught.value.body["code"] == "no_scripted_reply"
    assert "no scripted reply" in caught.value.body["message"]


async def test_a_responder_that_raises_gets_a_500_naming_its_exception(server: OpenAIServer) -> None:
    def responder(body: dict[str, Any]) -> Reply:
        raise ValueError("no script for this")

    server.responder = responder
    with pytest.raises(ModelServerError) as caught:
        await make_agent(server, retries=False).run("hi")

    assert isinstance(caught.value.body, dict)
    assert caught.value.body["code"] == "responder_error"
    assert "the responder raised ValueError('no script for this')" in caught.value.body["message"]


async def test_responder_answers_when_the_queue_is_empty(server: OpenAIServer) -> None:
    server.responder = lambda body: Reply(text=["echo: ", last_user_text(body)])
    server.enqueue(Reply(text="scripted first"))
    agent = make_agent(server)

    first = await agent.run("one")
    second = await agent.run("two")
    third = await agent.run("three")

    assert [first.output, second.output, third.output] == ["scripted first", "echo: two", "echo: three"]


async def test_authorization_header_carries_the_key(server: OpenAIServer) -> None:
    server.enqueue(Reply(text="ok"))

    await make_agent(server).run("hi")

    assert server.authorizations == [f"Bearer {API_KEY}"]


async def test_expected_api_key_rejects_others() -> None:
    with running_server(expected_api_key="right-key") as server:
        server.enqueue(Reply(text="ok"))
        with pytest.raises(ModelHTTPError) as caught:
            await make_agent(server, retries=False).run("hi")  # sends API_KEY

        assert caught.value.status_code == 401
        assert caught.value.provider_error_code == "invalid_api_key"
        assert server.pending == 1  # the scripted reply is still there for a request with the right key


# --- Raw HTTP --------------------------------------------------------------------------------------------


def test_sse_wire_format(server: OpenAIServer) -> None:
    server.enqueue(Reply(text=["a", "b"], usage=Usage(1, 2)))

    status, raw = post_json(
        f"{server.base_url}/chat/completions",
        {"model": MODEL, "stream": True, "stream_options": {"include_usage": True}, "messages": []},
    )

    assert status == 200
    events = raw.decode().split("\n\n")
    assert events[-2:] == ["data: [DONE]", ""]
    chunks = [json.loads(event.removeprefix("data: ")) for event in events[:-2]]
    assert all(chunk["object"] == "chat.completion.chunk" for chunk in chunks)
    assert [c["choices"][0]["delta"].get("content") for c in chunks if c["choices"]] == ["", "a", "b", None]
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"] == {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}


def test_models_and_unknown_paths(server: OpenAIServer) -> None:
    with urllib.request.urlopen(f"{server.base_url}/models", timeout=deadline(5)) as response:
        models = json.loads(response.read())
    assert models["object"] == "list"
    assert [m["id"] for m in models["data"]] == [MODEL]

    status, raw = post_json(f"{server.base_url}/embeddings", {"input": "x"})
    assert status == 404
    assert "error" in json.loads(raw)
    assert server.requests == []  # only chat completions count as requests
    assert [r.path for r in server.recorded] == ["/v1/models", "/v1/embeddings"]


def test_subprocess_reaches_the_server(server: OpenAIServer) -> None:
    server.enqueue(Reply(text="from a subprocess"))
    script = (
        "import json, os, urllib.request\n"
        "request = urllib.request.Request(os.environ['OPENAI_BASE_URL'] + '/chat/completions',\n"
        "    data=json.dumps({'model': 'm', 'messages': [{'role': 'user', 'content': 'hi'}]}).encode(),\n"
        "    headers={'Authorization': 'Bearer ' + os.environ['OPENAI_API_KEY'],\n"
        "             'Content-Type': 'application/json'})\n"
        "print(json.load(urllib.request.urlopen(request))['choices'][0]['message']['content'])\n"
    )

    completed = subprocess.run(
        [sys.executable, "-c", script],
        env={**os.environ, **server.env(api_key="sub-key")},
        capture_output=True,
        text=True,
        timeout=deadline(10),
        check=True,
    )

    assert completed.stdout.strip() == "from a subprocess"
    assert server.wait_for_requests(1)[0]["messages"] == [{"role": "user", "content": "hi"}]
    assert server.authorizations == ["Bearer sub-key"]


def test_stop_is_idempotent_and_frees_the_port() -> None:
    server = OpenAIServer().start()
    base_url = server.base_url
    server.stop()
    server.stop()

    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"{base_url}/models", timeout=deadline(2))


def test_a_cut_reply_ends_without_finish_reason_or_done(server: OpenAIServer) -> None:
    server.enqueue(Reply(text=["a", "b"], usage=Usage(1, 2), cut=True))

    status, raw = post_json(
        f"{server.base_url}/chat/completions",
        {"model": MODEL, "stream": True, "stream_options": {"include_usage": True}, "messages": []},
    )

    assert status == 200
    events = [e for e in raw.decode().split("\n\n") if e]
    chunks = [json.loads(event.removeprefix("data: ")) for event in events]
    assert [c["choices"][0]["delta"].get("content") for c in chunks] == ["", "a", "b"]
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks)


def test_rate_limited_can_carry_a_retry_after_in_seconds(server: OpenAIServer) -> None:
    server.enqueue(ErrorReply.rate_limited(retry_after=120))

    request = urllib.request.Request(
        f"{server.base_url}/chat/completions",
        data=json.dumps({"model": MODEL, "messages": []}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=deadline(5))

    assert caught.value.code == 429
    assert caught.value.headers["retry-after"] == "120"


async def test_a_stalled_reply_sends_its_first_chunks_then_nothing(server: OpenAIServer) -> None:
    server.enqueue(Reply(text=["first ", "never"], stall_after=2))
    client = AsyncOpenAI(base_url=server.base_url, api_key=API_KEY, max_retries=0, timeout=0.5)

    received: list[str | None] = []
    stream = await client.chat.completions.create(model=MODEL, messages=[], stream=True)
    with pytest.raises(Exception) as caught:  # the read timeout, in whatever form the SDK raises it
        async for chunk in stream:
            received.append(chunk.choices[0].delta.content)

    assert received == ["", "first "]
    assert "timed out" in str(caught.value).lower() or "timeout" in type(caught.value).__name__.lower()
