"""A failed turn answers session/prompt with a JSON-RPC error an editor can show (auth_required for credentials);
the history keeps the error reply, a replay shows it, and the session goes on."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from acp import PROTOCOL_VERSION, RequestError, helpers
from pydantic_ai.exceptions import ModelHTTPError, UnexpectedModelBehavior

from codling.acp.server import CodlingAgent
from codling.brain.events import TurnFailed
from codling.config import Settings, load_settings
from codling.credentials import store
from codling.store.index import SessionStore
from tests.fakes.acp_client import RecordingClient, connected
from tests.fakes.scenarios import Fail, Say, Script

SECRET = "sk-test-0123456789abcdef"
MODEL_ID = "openai-chat:scripted"


@asynccontextmanager
async def serving(
    home: Path, script: Script | None, env: dict[str, str] | None = None
) -> AsyncIterator[tuple[Any, RecordingClient]]:
    environment = env if env is not None else {"CODLING_MODEL": MODEL_ID, "OPENAI_API_KEY": SECRET}
    environment = {"CODLING_HOME": str(home), **environment}
    agent = CodlingAgent(
        settings_loader=lambda: Settings(home=home, env=environment),
        model_factory=script.factory() if script else None,
        warm_up=False,
    )
    client = RecordingClient()
    async with connected(agent, client) as conn:
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        yield conn, client


async def prompt_error(conn: Any, session_id: str, text: str) -> RequestError:
    with pytest.raises(RequestError) as info:
        await conn.prompt(session_id=session_id, prompt=[helpers.text_block(text)])
    return info.value


async def test_a_provider_error_is_a_json_rpc_error_recorded_and_replayed(home: Path, project: Path) -> None:
    error = ModelHTTPError(400, "scripted", {"error": {"message": "slow down"}})  # a 400 is not retried
    async with serving(home, Script([[Fail(error)], [Say("fine now")]])) as (conn, client):
        sid = (await conn.new_session(cwd=str(project))).session_id
        failure = await prompt_error(conn, sid, "first")
        assert (failure.code, str(failure)) == (
            -32603,
            "The model provider returned HTTP 400 for scripted: slow down",
        )
        assert failure.data is not None
        assert list(failure.data) == ["details"]  # the only shape Zed shows cleanly
        assert "ModelHTTPError" in failure.data["details"]
        assert "HTTP 400 response body: {'error': {'message': 'slow down'}}" in failure.data["details"]
        assert client.agent_text() == ""  # the error is the response's, not a reply the editor shows as text
        # The session goes on.
        response = await conn.prompt(session_id=sid, prompt=[helpers.text_block("second")])
        assert (response.stop_reason, client.agent_text()) == ("end_turn", "fine now")
    failures = [e for e in SessionStore(home).read(sid).events if isinstance(e, TurnFailed)]
    assert [f.message for f in failures] == ["The model provider returned HTTP 400 for scripted: slow down"]
    # A replay has no response to carry the error: it shows the recorded error as the turn's reply.
    async with serving(home, Script([])) as (conn, client):
        await conn.load_session(cwd=str(project), session_id=sid)
    assert "**Error:** The model provider returned HTTP 400 for scripted: slow down" in client.agent_text()


async def test_a_refused_key_is_auth_required_without_the_key(home: Path, project: Path) -> None:
    refused = ModelHTTPError(401, "scripted", {"error": {"message": f"Incorrect API key provided: {SECRET}"}})
    async with serving(home, Script([[Fail(refused)]])) as (conn, _):
        sid = (await conn.new_session(cwd=str(project))).session_id
        failure = await prompt_error(conn, sid, "hello")
    assert failure.code == -32000
    assert str(failure) == (
        "The model provider returned HTTP 401 for scripted: Incorrect API key provided: [redacted]; the openai-chat "
        "API refused the key in OPENAI_API_KEY: check that it is valid for this server (`codling login` stores "
        "another)"
    )
    assert failure.data is not None
    assert SECRET not in repr(failure.data) and "[redacted]" in failure.data["details"]
    assert failure.data["authMethods"] == ["codling-login"]


async def test_a_missing_key_is_auth_required_at_session_new(home: Path, project: Path) -> None:
    # No model factory: the provider's credentials are needed, and the environment has none.
    async with serving(home, None, env={"CODLING_MODEL": "anthropic:claude-sonnet-4-5"}) as (conn, _):
        with pytest.raises(RequestError) as info:
            await conn.new_session(cwd=str(project))
    assert info.value.code == -32000
    assert "anthropic:claude-sonnet-4-5" in str(info.value) and "has no credentials" in str(info.value)
    # And with no model configured and no credentials at all.
    async with serving(home, None, env={}) as (conn, _):
        with pytest.raises(RequestError) as info:
            await conn.new_session(cwd=str(project))
    assert info.value.code == -32000 and "no provider has credentials" in str(info.value)


async def test_authenticate_takes_up_the_key_codling_login_stored(home: Path, project: Path) -> None:
    """The editor ran `codling login` in its terminal (here: its store), then authenticate: the key is used
    from then on, for the model chosen at login, while the environment's keys still win."""
    environment = {"CODLING_HOME": str(home)}
    agent = CodlingAgent(settings_loader=lambda: load_settings(environment), warm_up=False, environ=environment)
    async with connected(agent, RecordingClient()) as conn:
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        with pytest.raises(RequestError) as before:
            await conn.authenticate(method_id="codling-login")
        store(home, "ANTHROPIC_API_KEY", "sk-ant-stored-0123456789", "anthropic:claude-opus-5-5")
        assert await conn.authenticate(method_id="codling-login") is not None
        session = await conn.new_session(cwd=str(project))
        with pytest.raises(RequestError) as unknown:
            await conn.authenticate(method_id="ANTHROPIC_API_KEY")
    assert before.value.code == -32000 and "codling login" in str(before.value)
    assert environment["ANTHROPIC_API_KEY"] == "sk-ant-stored-0123456789"
    model = next(o for o in session.config_options or [] if o.id == "model")
    assert model.current_value == "anthropic:claude-opus-5-5"
    assert unknown.value.code == -32602


@pytest.mark.parametrize("error", [UnexpectedModelBehavior("the reply was not JSON"), RuntimeError("boom")])
async def test_other_failures_carry_only_their_details(
    home: Path, project: Path, error: Exception, caplog: pytest.LogCaptureFixture
) -> None:
    async with serving(home, Script([[Fail(error)]])) as (conn, _):
        sid = (await conn.new_session(cwd=str(project))).session_id
        failure = await prompt_error(conn, sid, "hello")
    assert failure.data is not None
    assert (failure.code, list(failure.data)) == (-32603, ["details"])  # the only shape Zed shows cleanly
    assert str(error) in str(failure) and type(error).__name__ in failure.data["details"]


def test_failures_are_told_apart() -> None:
    from codling.brain.failures import failure_reason
    from codling.errors import MissingCredentialsError, ModelError, NoModelError

    wrapped = ModelError("gave up")
    wrapped.__cause__ = ModelHTTPError(403, "m", None)
    cases: list[tuple[Exception, str]] = [
        (ModelHTTPError(401, "m", None), "auth"),
        (wrapped, "auth"),
        (MissingCredentialsError("no key", ("X_API_KEY",)), "auth"),
        (NoModelError("none"), "auth"),
        (ModelHTTPError(500, "m", None), "provider"),
        (ModelError("gave up after 3 attempts"), "provider"),
        (UnexpectedModelBehavior("bad"), "model_output"),
        (ValueError("bug"), "internal"),
    ]
    assert [failure_reason(e) for e, _ in cases] == [reason for _, reason in cases]
