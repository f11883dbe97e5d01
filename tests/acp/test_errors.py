"""The agent's JSON-RPC errors in-process: malformed ids and paths are -32602, unknown sessions -32002, and
protocol versions are negotiated as the ACP spec says."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from acp import PROTOCOL_VERSION, RequestError, helpers
from acp.client.connection import ClientSideConnection

from codling.acp.rpc_errors import SESSION_HELD, client_error
from codling.acp.server import CodlingAgent
from codling.config import Settings
from codling.store.header import SessionHeader
from codling.store.index import SessionStore
from tests.fakes.acp_client import RecordingClient, connected
from tests.fakes.scenarios import Say, Script

MODEL_ID = "openai-chat:scripted"
WELL_FORMED_UNKNOWN = "20240101-0123456789ab"

Call = Callable[[ClientSideConnection, str, Path], Awaitable[Any]]

SESSION_METHODS: dict[str, Call] = {
    "load": lambda c, sid, cwd: c.load_session(cwd=str(cwd), session_id=sid),
    "resume": lambda c, sid, cwd: c.resume_session(cwd=str(cwd), session_id=sid),
    "fork": lambda c, sid, cwd: c.fork_session(cwd=str(cwd), session_id=sid),
    "close": lambda c, sid, cwd: c.close_session(session_id=sid),
    "prompt": lambda c, sid, cwd: c.prompt(session_id=sid, prompt=[helpers.text_block("hi")]),
    "set_mode": lambda c, sid, cwd: c.set_session_mode(session_id=sid, mode_id="ask"),
    "set_config_option": lambda c, sid, cwd: c.set_config_option(config_id="mode", session_id=sid, value="ask"),
}

MALFORMED_IDS = ["../../etc", "no-such-session", "", "20240101-0123456789AB", "a\0b", "2" * 5000, "\ufffd"]


@asynccontextmanager
async def agent(home: Path, script: Script | None = None) -> AsyncIterator[ClientSideConnection]:
    settings = Settings(home=home, mode="yolo", env={"CODLING_HOME": str(home), "CODLING_MODEL": MODEL_ID})
    codling = CodlingAgent(
        settings_loader=lambda: settings, model_factory=(script or Script([])).factory(), warm_up=False
    )
    async with connected(codling, RecordingClient()) as conn:
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        yield conn


async def error_of(call: Awaitable[Any]) -> RequestError:
    with pytest.raises(RequestError) as caught:
        await call
    return caught.value


@pytest.mark.parametrize("method", sorted(SESSION_METHODS))
async def test_a_malformed_session_id_is_invalid_params_naming_the_field(
    home: Path, project: Path, method: str
) -> None:
    async with agent(home) as conn:
        for session_id in MALFORMED_IDS:
            error = await error_of(SESSION_METHODS[method](conn, session_id, project))
            assert error.code == -32602, (session_id, error.to_error_obj())
            assert error.data is not None
            assert "sessionId" in error.data and "not a session id" in error.data["message"]
            assert len(str(error.data["sessionId"])) <= 201
    assert not (home / "sessions").exists() or list((home / "sessions").iterdir()) == []


@pytest.mark.parametrize("method", sorted(SESSION_METHODS))
async def test_an_unknown_session_is_resource_not_found(home: Path, project: Path, method: str) -> None:
    async with agent(home) as conn:
        error = await error_of(SESSION_METHODS[method](conn, WELL_FORMED_UNKNOWN, project))
    assert error.data is not None
    assert (error.code, str(error), error.data["sessionId"]) == (-32002, "Resource not found", WELL_FORMED_UNKNOWN)


async def test_closing_twice_and_using_a_closed_session_is_resource_not_found(home: Path, project: Path) -> None:
    async with agent(home) as conn:
        session = await conn.new_session(cwd=str(project))
        await conn.close_session(session_id=session.session_id)
        again = await error_of(conn.close_session(session_id=session.session_id))
        prompt = await error_of(conn.prompt(session_id=session.session_id, prompt=[helpers.text_block("hi")]))
        assert (again.code, prompt.code) == (-32002, -32002)
        # The stored session is still there: it can be loaded again.
        await conn.load_session(cwd=str(project), session_id=session.session_id)


async def test_cancel_with_a_bad_or_unknown_id_is_ignored(home: Path, project: Path) -> None:
    async with agent(home, Script([[Say("still here")]])) as conn:
        for session_id in [*MALFORMED_IDS, WELL_FORMED_UNKNOWN]:
            await conn.cancel(session_id=session_id)
        session = await conn.new_session(cwd=str(project))
        response = await conn.prompt(session_id=session.session_id, prompt=[helpers.text_block("hi")])
        assert response.stop_reason == "end_turn"


async def test_load_by_traversal_is_refused_and_the_decoy_is_untouched(
    home: Path, project: Path, tmp_path: Path
) -> None:
    # A real history, outside $CODLING_HOME/sessions, that `sessions/<id>/history.jsonl` would reach.
    other = SessionStore(tmp_path / "elsewhere")
    other.create(SessionHeader(WELL_FORMED_UNKNOWN, project, MODEL_ID, "yolo"))
    decoy = other.history_path(WELL_FORMED_UNKNOWN)
    before = decoy.read_bytes()
    sneaky = os.path.relpath(decoy.parent, home / "sessions")
    assert sneaky.startswith("..") and (home / "sessions" / sneaky / "history.jsonl").resolve() == decoy.resolve()
    async with agent(home) as conn:
        for call in ("load", "resume", "fork"):
            error = await error_of(SESSION_METHODS[call](conn, sneaky, project))
            assert error.data is not None
            assert (error.code, error.data["sessionId"]) == (-32602, sneaky)
    assert decoy.read_bytes() == before


BAD_PATHS = {
    "NUL": lambda project: f"{project}\0/x",
    "relative": lambda project: "project",
    "overlong": lambda project: "/" + "a/" * 3000,
    "long component": lambda project: f"{project}/{'n' * 300}",
    "missing": lambda project: f"{project}/missing",
    "a file": lambda project: f"{project}/README.md",
}


@pytest.mark.parametrize("kind", sorted(BAD_PATHS))
async def test_bad_directories_are_invalid_params_never_internal_errors(home: Path, project: Path, kind: str) -> None:
    bad = BAD_PATHS[kind](project)
    async with agent(home) as conn:
        session = await conn.new_session(cwd=str(project))
        await conn.close_session(session_id=session.session_id)
        calls: list[tuple[str, Awaitable[Any]]] = [
            ("cwd", conn.new_session(cwd=bad)),
            ("additionalDirectories", conn.new_session(cwd=str(project), additional_directories=[bad])),
            ("cwd", conn.load_session(cwd=bad, session_id=session.session_id)),
            (
                "additionalDirectories",
                conn.resume_session(cwd=str(project), session_id=session.session_id, additional_directories=[bad]),
            ),
            ("cwd", conn.fork_session(cwd=bad, session_id=session.session_id)),
        ]
        for field, call in calls:
            error = await error_of(call)
            assert error.data is not None, error.to_error_obj()
            assert (error.code, field in error.data) == (-32602, True), error.to_error_obj()
        if kind in ("NUL", "relative", "overlong"):
            error = await error_of(conn.list_sessions(cwd=bad))
            assert error.data is not None
            assert (error.code, "cwd" in error.data) == (-32602, True)


async def test_list_refuses_a_cursor_it_did_not_give_out(home: Path) -> None:
    async with agent(home) as conn:
        for cursor in ("abc", "-5", "9" * 5000, "1.5", "0", "2026-11-26T03:40:00.123Z@../../etc", "x@20261126-0a"):
            error = await error_of(conn.list_sessions(cursor=cursor))
            assert error.data is not None
            assert (error.code, "cursor" in error.data) == (-32602, True)
        # A cursor past every session lists none.
        assert (await conn.list_sessions(cursor="2000-01-01T00:00:00.000Z@20000101-000000000000")).sessions == []


@pytest.mark.parametrize(
    ("asked", "answered"),
    [
        (PROTOCOL_VERSION, PROTOCOL_VERSION),
        (0, PROTOCOL_VERSION),
        (PROTOCOL_VERSION + 1, PROTOCOL_VERSION),
        (65535, PROTOCOL_VERSION),
    ],
)
async def test_protocol_version_is_the_client_s_if_supported_else_the_agent_s_latest(
    home: Path, asked: int, answered: int
) -> None:
    async with agent(home) as conn:
        response = await conn.initialize(protocol_version=asked)
    assert response.protocol_version == answered


async def test_a_broken_configuration_is_an_internal_error_that_says_what_is_wrong(home: Path, project: Path) -> None:
    (home / "models.json").write_text("{not json")
    async with agent(home) as conn:
        new = await error_of(conn.new_session(cwd=str(project)))
        listed = await error_of(conn.list_sessions())
    message = (
        f"configuration error: {home / 'models.json'}: not valid JSON (Expecting property name enclosed in double "
        "quotes: line 1 column 2 (char 1))"
    )
    assert (new.code, new.data) == (-32603, {"details": message})
    assert (listed.code, listed.data) == (-32603, {"details": message})


async def test_a_model_id_that_is_no_model_id_is_an_internal_error_naming_it(home: Path, project: Path) -> None:
    settings = Settings(home=home, env={"CODLING_HOME": str(home), "CODLING_MODEL": "gpt4"})
    codling = CodlingAgent(settings_loader=lambda: settings, model_factory=Script([]).factory(), warm_up=False)
    async with connected(codling, RecordingClient()) as conn:
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        error = await error_of(conn.new_session(cwd=str(project)))
    assert (error.code, error.data) == (
        -32603,
        {"details": "model 'gpt4' (from CODLING_MODEL) must look like 'provider:model'"},
    )


async def test_a_stored_session_that_cannot_be_loaded_is_invalid_params_saying_why(home: Path, project: Path) -> None:
    history = SessionStore(home).history_path(WELL_FORMED_UNKNOWN)
    history.parent.mkdir(parents=True)
    history.write_text('{"kind": "not a session record"}\n')
    async with agent(home) as conn:
        errors = [await error_of(SESSION_METHODS[m](conn, WELL_FORMED_UNKNOWN, project)) for m in ("load", "fork")]
    for error in errors:
        assert (error.code, error.data) == (
            -32602,
            {
                "sessionId": WELL_FORMED_UNKNOWN,
                "message": f"{history} does not start with a valid session record; it cannot be loaded",
            },
        )


async def test_a_session_another_agent_has_open_cannot_be_loaded_here(home: Path, project: Path) -> None:
    async with agent(home, Script([[Say("mine")]])) as first:
        session = await first.new_session(cwd=str(project))
        await first.prompt(session_id=session.session_id, prompt=[helpers.text_block("hi")])
        async with agent(home) as second:
            error = await error_of(second.load_session(cwd=str(project), session_id=session.session_id))
        # (issue 29 D15: it was -32603, an internal error, for what is the client's to resolve)
        assert (error.code, str(error)) == (SESSION_HELD, "Session held by another process")
        assert error.data == {
            "sessionId": session.session_id,
            "message": f"session {session.session_id} is open in another codling process (this process); "
            "close it there first",
        }
        # The first agent keeps the session, and can go on with it.
        assert (await first.list_sessions()).sessions[0].session_id == session.session_id


async def test_a_cwd_that_cannot_be_resolved_is_invalid_params(home: Path, tmp_path: Path) -> None:
    loop = tmp_path / "loop"
    loop.symlink_to(tmp_path / "back")
    (tmp_path / "back").symlink_to(loop)
    async with agent(home) as conn:
        error = await error_of(conn.list_sessions(cwd=str(loop)))
    assert error.code == -32602 and error.data is not None
    assert error.data["cwd"] == str(loop)
    assert error.data["message"].startswith("cwd cannot be resolved: ")


@pytest.mark.parametrize(
    ("error", "said"),
    [
        (RequestError(-32603, "Internal error", "the disk\n  is full"), "Internal error: the disk is full"),
        (RequestError.internal_error({"reason": "locked"}), "Internal error: locked"),
        (RequestError.internal_error({"path": "/a", "code": 5}), 'Internal error: {"path": "/a", "code": 5}'),
        (RequestError.internal_error(), "Internal error"),
        (RequestError(-32602, "Invalid params", "Invalid params"), "Invalid params"),  # data that says no more
    ],
)
def test_a_client_error_is_one_readable_line_with_what_its_data_says(error: RequestError, said: str) -> None:
    assert client_error(error) == said
