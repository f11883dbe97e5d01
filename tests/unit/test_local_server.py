"""A local OpenAI-compatible server reached with nothing but its URL (issue 30 item 4): the model is the first one
the server lists, on the chat-completions API, with no key; failures name the API and the URL tried."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from acp import PROTOCOL_VERSION, helpers
from pydantic_ai import Agent

from codling.acp.server import CodlingAgent
from codling.config import Settings
from codling.errors import ConfigError
from codling.llm.catalog import load_catalog
from codling.llm.providers import Endpoint, ModelChoice, build_model, select_model
from tests.fakes.acp_client import RecordingClient, connected
from tests.fakes.openai_server import OpenAIServer, Reply, running_server


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with running_server() as s:
        yield s


def models_requests(server: OpenAIServer) -> list[str | None]:
    """The Authorization header of each model-list request the server received."""
    return [r.authorization for r in server.recorded if r.method == "GET" and r.path == "/v1/models"]


def test_a_base_url_alone_picks_the_first_served_model(tmp_path: Path, server: OpenAIServer) -> None:
    server.listed_models = ["qwen2.5-coder:7b", "llama3.2:3b"]
    settings = Settings(home=tmp_path, env={"OPENAI_BASE_URL": server.base_url + "/"})
    choice = select_model(None, settings, load_catalog())
    assert (choice.info.id, choice.source) == ("openai-chat:qwen2.5-coder:7b", "server")
    assert choice.note is not None
    assert "openai-chat:qwen2.5-coder:7b" in choice.note and server.base_url in choice.note
    assert models_requests(server) == [None]  # no key was set, so none was sent

    # The model is built without a key and a turn goes through the chat-completions API.
    server.enqueue(Reply("hello from the local server"))
    model = build_model(choice.info.id, env=settings.env)
    result = Agent(model).run_sync("hi")
    assert result.output == "hello from the local server"
    [request] = [r for r in server.recorded if r.method == "POST"]
    assert request.path == "/v1/chat/completions"
    assert request.body is not None and request.body["model"] == "qwen2.5-coder:7b"


def test_a_key_is_sent_to_the_model_list_when_set(tmp_path: Path, server: OpenAIServer) -> None:
    settings = Settings(home=tmp_path, env={"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "sk-local"})
    assert select_model(None, settings, load_catalog()).info.id == "openai-chat:fake-model"
    assert models_requests(server) == ["Bearer sk-local"]


def test_a_configured_model_asks_the_server_nothing(tmp_path: Path, server: OpenAIServer) -> None:
    catalog = load_catalog()
    env = {"OPENAI_BASE_URL": server.base_url, "CODLING_MODEL": "openai-chat:mine"}
    choice = select_model(None, Settings(home=tmp_path, env=env), catalog)
    assert choice == ModelChoice(catalog.get("openai-chat:mine"), "CODLING_MODEL")
    assert models_requests(server) == []


def test_openai_s_own_url_keeps_the_catalog_choice(tmp_path: Path) -> None:
    catalog = load_catalog()
    env = {"OPENAI_BASE_URL": "https://api.openai.com/v1", "OPENAI_API_KEY": "k"}
    choice = select_model(None, Settings(home=tmp_path, env=env), catalog)
    assert choice == ModelChoice(catalog.get("openai:gpt-5"), "credentials")


def test_a_server_listing_no_models_says_so(tmp_path: Path, server: OpenAIServer) -> None:
    server.listed_models = []
    with pytest.raises(ConfigError) as info:
        select_model(None, Settings(home=tmp_path, env={"OPENAI_BASE_URL": server.base_url}), load_catalog())
    message = str(info.value)
    assert f"GET {server.base_url}/models" in message and "chat-completions" in message
    assert "listed no models" in message and "--model openai-chat:<name>" in message


def test_an_unreachable_server_names_the_url_and_the_defaults(tmp_path: Path) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    with pytest.raises(ConfigError) as info:
        select_model(None, Settings(home=tmp_path, env={"OPENAI_BASE_URL": url}), load_catalog())
    message = str(info.value)
    assert f"GET {url}/models" in message and "could not reach it" in message
    for default in ("http://localhost:11434/v1", "http://localhost:1234/v1", "http://localhost:8080/v1"):
        assert default in message


def test_a_server_refusing_the_list_gives_its_status(tmp_path: Path) -> None:
    with running_server(expected_api_key="sk-right") as server:
        env = {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "sk-wrong"}
        with pytest.raises(ConfigError) as info:
            select_model(None, Settings(home=tmp_path, env=env), load_catalog())
    assert "answered HTTP 401" in str(info.value)


def test_a_failed_request_names_the_api_tried_and_its_url() -> None:
    url = "http://localhost:1234/v1"
    chat = Endpoint("openai-chat:qwen", url).advice(404)
    assert chat.startswith(f"the chat-completions API at {url} may not serve a model named 'qwen'")
    responses = Endpoint("openai:gpt-5", url).advice(404)
    assert responses.startswith(f"the OpenAI Responses API at {url} may not exist")
    assert "'openai-chat:gpt-5'" in responses
    assert Endpoint("openai-chat:qwen", url).advice(None).startswith(f"check that the chat-completions API at {url}")


async def test_an_editor_session_on_a_local_server_url_alone(home: Path, project: Path, server: OpenAIServer) -> None:
    # In process, through the ACP agent and the real provider: the server is asked for its models when the
    # session is made, not at initialize, and the turn uses the model it listed, with no key.
    server.listed_models = ["llama3.2:3b"]
    server.enqueue(Reply("local hello"))
    settings = Settings(home=home, env={"CODLING_HOME": str(home), "OPENAI_BASE_URL": server.base_url})
    # (the factory reads the settings' environment: in a real process both are the process environment)
    agent = CodlingAgent(
        settings_loader=lambda: settings,
        model_factory=lambda model_id: build_model(model_id, env=settings.env),
        warm_up=False,
    )
    client = RecordingClient()
    async with connected(agent, client) as conn:
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        assert models_requests(server) == []
        session = await conn.new_session(cwd=str(project))
        assert models_requests(server) == [None]
        response = await conn.prompt(session_id=session.session_id, prompt=[helpers.text_block("hi")])
    assert response.stop_reason == "end_turn"
    assert client.agent_text() == "local hello"
    [turn] = server.requests
    assert turn["model"] == "llama3.2:3b"
    assert [r.authorization for r in server.recorded if r.method == "POST"][-1] == "Bearer api-key-not-set"
