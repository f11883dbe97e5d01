"""Images reach models the catalog does not know (issue 30 item 6): sent as they are; when the provider refuses
them the user is told, the request goes again with their names, and the session sends that model no more images.
Through the session, against the loopback OpenAI server, with the real OpenAI client built by llm/providers.py."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.exceptions import ModelHTTPError

from codling.brain.events import ContextWarning, Event, TextDelta, TurnEnded, TurnFailed
from codling.brain.factory import open_session
from codling.brain.images import may_see_images, refuses_images
from codling.brain.prompt import ImageBlock, PromptBlock, TextBlock
from codling.brain.session import ConversationSession
from codling.config import Settings
from codling.llm.catalog import ModelInfo
from codling.llm.providers import build_model
from tests.fakes.deadlines import deadline
from tests.fakes.openai_server import ErrorReply, OpenAIServer, Reply, running_server

UNKNOWN = ModelInfo("openai-chat:llava", context_limit=100_000, known=False)
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 32).decode()
PROMPT: tuple[PromptBlock, ...] = (
    TextBlock("what is in this picture?"),
    ImageBlock(PNG, "image/png", "file:///p/cat.png"),
)
OLLAMA_REFUSAL = ErrorReply(400, "this model does not support image input", type="api_error")


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with running_server() as server:
        yield server


def session_on(server: OpenAIServer, project: Path, settings: Settings, model: ModelInfo) -> ConversationSession:
    return open_session(
        replace(settings, titles=False),
        model,
        project,
        approver=None,
        mode="read-only",
        model_factory=lambda model_id: build_model(model_id, env=server.env()),
    )


async def turn(session: ConversationSession, prompt: str | tuple[PromptBlock, ...]) -> list[Event]:
    async with asyncio.timeout(deadline(60)):  # liveness only
        return [event async for event in session.stream(prompt)]


def image_parts(body: dict[str, Any]) -> list[Any]:
    """The image parts of a chat-completions request's last user message."""
    last = [m for m in body["messages"] if m["role"] == "user"][-1]
    content = last["content"]
    return [] if isinstance(content, str) else [p for p in content if p.get("type") == "image_url"]


def last_user_text(body: dict[str, Any]) -> str:
    content = [m for m in body["messages"] if m["role"] == "user"][-1]["content"]
    return content if isinstance(content, str) else "".join(p.get("text", "") for p in content)


async def test_an_unknown_model_is_sent_the_image(server: OpenAIServer, project: Path, settings: Settings) -> None:
    server.enqueue(Reply("a cat"))
    events = await turn(session_on(server, project, settings, UNKNOWN), PROMPT)
    [body] = server.requests
    [part] = image_parts(body)
    assert part["image_url"]["url"] == f"data:image/png;base64,{PNG}"
    assert not [e for e in events if isinstance(e, ContextWarning | TurnFailed)]


async def test_a_refused_image_is_said_and_the_request_goes_again_without_it(
    server: OpenAIServer, project: Path, settings: Settings
) -> None:
    session = session_on(server, project, settings, UNKNOWN)
    server.enqueue(OLLAMA_REFUSAL, Reply("I only see the name cat.png"))
    events = await turn(session, PROMPT)
    first, again = server.requests
    assert len(image_parts(first)) == 1 and image_parts(again) == []
    assert "[image attached: cat.png (image/png)]" in last_user_text(again)
    assert "You cannot see images" in last_user_text(again)
    [warning] = [e for e in events if isinstance(e, ContextWarning)]
    assert "openai-chat:llava refused the attached images" in warning.message
    assert "this model does not support image input" in warning.message
    assert "went again without them" in warning.message
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "I only see the name cat.png"
    assert not [e for e in events if isinstance(e, TurnFailed)]
    assert isinstance(events[-1], TurnEnded) and not events[-1].error

    # Remembered for the session: the next image is not sent, and nothing is said again.
    server.enqueue(Reply("still just a name"))
    later = await turn(session, PROMPT)
    assert len(server.requests) == 3 and image_parts(server.requests[2]) == []
    assert not [e for e in later if isinstance(e, ContextWarning | TurnFailed)]


async def test_a_refusal_from_a_model_the_catalog_says_sees_images_is_a_failed_turn(
    server: OpenAIServer, project: Path, settings: Settings
) -> None:
    known = replace(UNKNOWN, known=True, images=True)
    server.enqueue(OLLAMA_REFUSAL)
    events = await turn(session_on(server, project, settings, known), PROMPT)
    assert len(server.requests) == 1
    [failed] = [e for e in events if isinstance(e, TurnFailed)]
    assert "does not support image input" in failed.message


async def test_another_400_is_not_taken_for_a_refusal(server: OpenAIServer, project: Path, settings: Settings) -> None:
    server.enqueue(ErrorReply(400, "Invalid value for 'temperature': must be between 0 and 2"))
    events = await turn(session_on(server, project, settings, UNKNOWN), PROMPT)
    assert len(server.requests) == 1
    assert [e for e in events if isinstance(e, TurnFailed)]
    assert not [e for e in events if isinstance(e, ContextWarning)]


async def test_a_model_the_catalog_says_is_blind_gets_names_only(
    server: OpenAIServer, project: Path, settings: Settings
) -> None:
    server.enqueue(Reply("a name"))
    await turn(session_on(server, project, settings, replace(UNKNOWN, known=True, images=False)), PROMPT)
    [body] = server.requests
    assert image_parts(body) == [] and "You cannot see images" in last_user_text(body)


@pytest.mark.parametrize(
    ("status", "message"),
    [
        (400, "Invalid content type. image_url is only supported by certain models."),  # OpenAI
        (400, "this model does not support image input"),  # Ollama
        (400, "llama3.2 is not a multimodal model"),  # Ollama, older
        (500, 'Failed to parse messages: Unsupported content part type: "image_url"'),  # llama.cpp
        (500, "image input is not supported - hint: if this is unexpected, you may need to provide the mmproj"),
        (400, "Model does not support images. Please use a model that does."),  # LM Studio
        (400, "Qwen2.5-Coder is not a multimodal model"),  # vLLM
    ],
)
def test_servers_refusals_of_images_are_recognised(status: int, message: str) -> None:
    error = ModelHTTPError(status, "m", {"error": {"message": message}})
    assert refuses_images(error)


@pytest.mark.parametrize(
    ("status", "message"),
    [
        (400, "This model's maximum context length is 8192 tokens. However, you requested 9000 tokens."),
        (400, "Invalid value for 'temperature': must be between 0 and 2"),
        (401, "this model does not support image input"),
        (429, "Rate limit reached for images"),
    ],
)
def test_other_errors_are_not_refusals_of_images(status: int, message: str) -> None:
    assert not refuses_images(ModelHTTPError(status, "m", {"error": {"message": message}}))


def test_which_models_are_sent_images() -> None:
    assert may_see_images(ModelInfo("openai-chat:x", known=False))
    assert may_see_images(ModelInfo("anthropic:x", images=True))
    assert not may_see_images(ModelInfo("deepseek:x", images=False))
