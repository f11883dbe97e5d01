"""logout (the newest schema's, sent as the wire carries it): advertised; removes what `codling login` stored and
takes it out of the agent's environment, while a key the environment set stays and keeps working; afterwards a
new session, and the next prompt of a session already open on the signed-out key, answer auth_required."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Iterator, MutableMapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from acp import PROTOCOL_VERSION, RequestError, helpers
from acp.client.connection import ClientSideConnection
from acp.schema import AgentAuthCapabilities, LogoutCapabilities

from codling.acp.server import CodlingAgent
from codling.config import load_settings
from codling.credentials import credentials_file, read, store
from codling.llm.providers import build_model
from tests.fakes.acp_client import WIRE, RecordingClient, connected
from tests.fakes.deadlines import deadline
from tests.fakes.responses_server import Reply, ResponsesServer, running_responses_server

STORED = "sk-stored-0123456789abcdef"
LOGIN_MODEL = "anthropic:claude-opus-5-5"


@asynccontextmanager
async def signed_in(
    environment: MutableMapping[str, str], client: RecordingClient | None = None, *, real_models: bool = False
) -> AsyncIterator[ClientSideConnection]:
    """An agent on ``environment`` (its settings read from it, as from the process's), initialized and
    authenticated as an editor does once `codling login` ran in its terminal. ``real_models``: sessions' models
    are the providers' own, built from ``environment`` (not checked for credentials when a session is made)."""
    agent = CodlingAgent(
        settings_loader=lambda: load_settings(environment),
        model_factory=(lambda model_id: build_model(model_id, env=environment)) if real_models else None,
        warm_up=False,
        environ=environment,
    )
    async with connected(agent, client or RecordingClient()) as conn:
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        await conn.authenticate(method_id="codling-login")
        yield conn


async def logout(conn: ClientSideConnection) -> dict[str, Any]:
    """A ``logout`` request as the wire carries it."""
    return await conn.ext_method(f"{WIRE}logout", {})


async def refused(call: Any) -> RequestError:
    with pytest.raises(RequestError) as info:
        await call
    return info.value


async def test_logout_is_advertised(home: Path) -> None:
    agent = CodlingAgent(settings_loader=lambda: load_settings({"CODLING_HOME": str(home)}), warm_up=False)
    async with connected(agent, RecordingClient()) as conn:
        init = await conn.initialize(protocol_version=PROTOCOL_VERSION)
    assert init.agent_capabilities is not None
    assert init.agent_capabilities.auth == AgentAuthCapabilities(logout=LogoutCapabilities())


async def test_logout_from_an_empty_environment_asks_to_sign_in_again(home: Path, project: Path) -> None:
    environment = {"CODLING_HOME": str(home)}
    store(home, "ANTHROPIC_API_KEY", STORED, LOGIN_MODEL)
    async with signed_in(environment) as conn:
        signed = dict(environment)
        await conn.new_session(cwd=str(project))
        assert await logout(conn) == {}
        after = dict(environment)
        new = await refused(conn.new_session(cwd=str(project)))
        again = await refused(conn.authenticate(method_id="codling-login"))
        assert await logout(conn) == {}  # nothing stored: nothing to do
    assert signed == {"CODLING_HOME": str(home), "ANTHROPIC_API_KEY": STORED}
    assert after == {"CODLING_HOME": str(home)}
    assert not credentials_file(home).exists()
    assert (new.code, new.data) == (-32000, {"details": str(new), "authMethods": ["codling-login"]})
    assert str(new).startswith("no model is configured and no provider has credentials. Run `codling login`")
    assert again.code == -32000 and "codling login" in str(again)


async def test_a_key_the_environment_set_stays_and_keeps_working(home: Path, project: Path) -> None:
    environment = {"CODLING_HOME": str(home), "GEMINI_API_KEY": "user-gemini-key"}
    store(home, "GEMINI_API_KEY", "stored-gemini-key", None)  # not applied: the environment's wins
    store(home, "ANTHROPIC_API_KEY", STORED, LOGIN_MODEL)
    async with signed_in(environment) as conn:
        assert await logout(conn) == {}
        after = dict(environment)
        session = await conn.new_session(cwd=str(project))
    assert after == {"CODLING_HOME": str(home), "GEMINI_API_KEY": "user-gemini-key"}
    model = next(o for o in session.config_options or [] if o.id == "model")
    assert str(model.current_value).startswith("google")  # the login's model went with its key


@pytest.fixture
def server() -> Iterator[ResponsesServer]:
    """The OpenAI Responses API on loopback, accepting only the stored key."""
    with running_responses_server(expected_api_key=STORED) as s:
        yield s


@pytest.mark.parametrize("when", ["between turns", "during a turn"])
async def test_a_session_open_on_the_removed_key_asks_to_sign_in_at_its_next_prompt(
    home: Path, project: Path, server: ResponsesServer, when: str
) -> None:
    environment = {"CODLING_HOME": str(home), "OPENAI_BASE_URL": server.base_url}
    store(home, "OPENAI_API_KEY", STORED, "openai:gpt-5-mini")
    answer = threading.Event()

    def held_reply(_body: dict[str, Any]) -> Reply:
        answer.wait(deadline(120))
        return Reply(text=["done"])

    server.responder = held_reply
    client = RecordingClient()
    async with signed_in(environment, client, real_models=True) as conn:
        sid = (await conn.new_session(cwd=str(project))).session_id
        first = asyncio.create_task(conn.prompt(session_id=sid, prompt=[helpers.text_block("first")]))
        if when == "between turns":
            answer.set()
            assert (await asyncio.wait_for(first, deadline(120))).stop_reason == "end_turn"
            assert await logout(conn) == {}
        else:
            await asyncio.to_thread(server.wait_for_requests, 1, 120)
            assert await logout(conn) == {}
            answer.set()  # the turn that started signed in ends as it began
            assert (await asyncio.wait_for(first, deadline(120))).stop_reason == "end_turn"
        next_prompt = await refused(conn.prompt(session_id=sid, prompt=[helpers.text_block("second")]))
        other = await refused(conn.set_config_option(config_id="model", session_id=sid, value="openai:gpt-5"))
    # The picker was sent again without the models whose key went (whatever its shape).
    pickers = [json.dumps(u.model_dump(mode="json")) for u in client.of_kind("config_option_update")]
    assert ["openai:gpt-5-codex" in p for p in pickers] == [False]
    assert other.code == -32602
    assert [h["authorization"] for h in server.headers] == [f"Bearer {STORED}"]  # nothing sent with it afterwards
    said = (
        "model 'openai:gpt-5-mini' needs OPENAI_API_KEY: run `codling login` to store a key, set it in the "
        'environment codling starts in (in Zed: the agent server\'s "env" setting), or choose another model'
    )
    assert (next_prompt.code, str(next_prompt), next_prompt.data) == (
        -32000,
        said,
        {"details": f"MissingCredentialsError: {said}", "authMethods": ["codling-login"]},
    )
    assert read(home).keys == {}
