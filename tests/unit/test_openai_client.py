"""codling's OpenAI client (llm/openai_client.py) skips the SDK's request transform: the requests it sends
must be exactly those of the stock ``AsyncOpenAI``, for the conversations pydantic-ai builds, streamed or not."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from openai import AsyncOpenAI
from pydantic import BaseModel
from pydantic_ai import (
    BinaryContent,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.direct import model_request, model_request_stream
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.settings import ModelSettings
from pydantic_ai.tools import ToolDefinition

from codling.llm.openai_client import FastOpenAI
from codling.llm.providers import build_model
from tests.fakes.openai_server import OpenAIServer, RecordedRequest, Reply, ToolCall, running_server

PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000")

CONVERSATION: list[ModelMessage] = [
    ModelRequest(
        parts=[
            SystemPromptPart("You are codling."),
            UserPromptPart(['Look at this — ünïcode & "quotes"', BinaryContent(PNG, media_type="image/png")]),
        ]
    ),
    ModelResponse(
        parts=[
            TextPart("Reading it."),
            ToolCallPart("read_file", {"path": "src/a.py", "offset": 1}, tool_call_id="call_1"),
        ]
    ),
    ModelRequest(
        parts=[
            ToolReturnPart("read_file", "1\tprint('hi')\n", tool_call_id="call_1"),
            ToolReturnPart("read_file", "offset must be positive", tool_call_id="call_2", outcome="retried"),
        ]
    ),
    ModelResponse(parts=[TextPart("Done.")]),
    ModelRequest(parts=[UserPromptPart("next")]),
]

PARAMETERS = ModelRequestParameters(
    function_tools=[
        ToolDefinition(
            name="read_file",
            description="Read a file.",
            parameters_json_schema={
                "type": "object",
                "properties": {"path": {"type": "string"}, "offset": {"type": "integer", "minimum": 1}},
                "required": ["path"],
                "additionalProperties": False,
            },
        )
    ],
    allow_text_output=True,
)

SETTINGS = ModelSettings(
    max_tokens=1_000,
    temperature=0.2,
    extra_body={"reasoning": {"effort": "low"}},
    extra_headers={"X-Codling": "1"},
)


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with running_server() as server:
        yield server


def chat_model(client: AsyncOpenAI) -> OpenAIChatModel:
    return OpenAIChatModel("fake-model", provider=OpenAIProvider(openai_client=client))


def clients(server: OpenAIServer) -> tuple[AsyncOpenAI, AsyncOpenAI]:
    stock = AsyncOpenAI(api_key="test-key", base_url=server.base_url, max_retries=0)
    fast = FastOpenAI(api_key="test-key", base_url=server.base_url, max_retries=0)
    return stock, fast


def sent(request: RecordedRequest) -> tuple[str, str, dict[str, Any] | None, dict[str, str]]:
    """What a request carried, without the headers that differ between any two requests."""
    headers = {
        name: value
        for name, value in request.headers.items()
        if name not in {"x-stainless-retry-count", "x-stainless-read-timeout", "content-length"}
    }
    return request.method, request.path, request.body, headers


async def test_a_streamed_conversation_is_sent_as_the_stock_client_sends_it(server: OpenAIServer) -> None:
    for client in clients(server):
        server.enqueue(Reply(text=["Hi"]))
        async with model_request_stream(
            chat_model(client), CONVERSATION, model_settings=SETTINGS, model_request_parameters=PARAMETERS
        ) as stream:
            async for _ in stream:
                pass
        assert stream.get().parts == [TextPart("Hi")]
    stock, fast = server.recorded
    assert stock.body is not None and stock.body["stream"] is True and len(stock.body["messages"]) == 7
    assert sent(fast) == sent(stock)


async def test_an_unstreamed_request_with_a_tool_call_reply_matches_too(server: OpenAIServer) -> None:
    replies = []
    for client in clients(server):
        server.enqueue(Reply(tool_calls=[ToolCall("read_file", {"path": "b.py"}, id="call_9")]))
        replies.append(await model_request(chat_model(client), CONVERSATION, model_request_parameters=PARAMETERS))
    stock, fast = server.recorded
    assert sent(fast) == sent(stock)
    assert [r.parts for r in replies] == [replies[0].parts] * 2
    assert isinstance(replies[1].parts[0], ToolCallPart) and replies[1].parts[0].args_as_dict() == {"path": "b.py"}


async def test_codling_builds_openai_models_on_the_fast_client(server: OpenAIServer) -> None:
    model = build_model("openai-chat:fake-model", env=server.env())
    assert isinstance(model, OpenAIChatModel) and isinstance(model.client, FastOpenAI)
    assert isinstance(model.client.with_options(max_retries=2), FastOpenAI)  # a per-request copy stays fast


async def test_a_pydantic_class_as_response_format_is_refused_as_by_the_stock_client(server: OpenAIServer) -> None:
    class Answer(BaseModel):
        text: str

    for client in clients(server):
        with pytest.raises(TypeError, match=r"chat\.completions\.parse"):
            # A wrong response_format on purpose: the call must refuse it.
            await client.chat.completions.create(model="m", messages=[], response_format=Answer)
    assert server.recorded == []


async def test_a_local_server_without_a_key_gets_a_placeholder_key(server: OpenAIServer) -> None:
    # OPENAI_BASE_URL alone is enough for openai-chat: local servers often need no key, but the SDK wants one.
    model = build_model("openai-chat:fake-model", env={"OPENAI_BASE_URL": server.base_url})
    server.enqueue(Reply(text=["hello"]))
    reply = await model_request(model, [ModelRequest(parts=[UserPromptPart("hi")])])
    assert reply.parts == [TextPart("hello")]
    assert server.authorizations == ["Bearer api-key-not-set"]
