"""session/delete (the newest schema's, sent as the wire carries it): advertised, a stored session removed for
good, an open one closed first (its running turn cancelled), one another codling process holds refused, an
unknown id not found; forks stay."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from acp import PROTOCOL_VERSION, RequestError, helpers
from acp.client.connection import ClientSideConnection
from acp.schema import (
    SessionAdditionalDirectoriesCapabilities,
    SessionCapabilities,
    SessionCloseCapabilities,
    SessionDeleteCapabilities,
    SessionForkCapabilities,
    SessionListCapabilities,
    SessionResumeCapabilities,
)

from codling.acp.server import CodlingAgent
from codling.config import Settings
from codling.store.index import SessionStore
from tests.fakes.acp_client import WIRE, RecordingClient, connected
from tests.fakes.deadlines import deadline
from tests.fakes.processes import other_writer
from tests.fakes.scenarios import Say, Script, Until

UNKNOWN = "20261126-0123456789ab"


def not_on_disk(home: Path, session_id: str) -> dict[str, str]:
    """The -32002 data for a session not on disk."""
    return {
        "sessionId": session_id,
        "message": f"no session {session_id} in {home / 'sessions'}; see `codling sessions list`",
    }


@asynccontextmanager
async def agent(home: Path, script: Script) -> AsyncIterator[tuple[ClientSideConnection, RecordingClient]]:
    settings = Settings(home=home, mode="yolo", env={"CODLING_HOME": str(home), "CODLING_MODEL": "openai-chat:m"})
    client = RecordingClient()
    codling = CodlingAgent(settings_loader=lambda: settings, model_factory=script.factory(), warm_up=False)
    async with connected(codling, client) as conn:
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        yield conn, client


async def delete(conn: ClientSideConnection, params: Any) -> dict[str, Any]:
    """A ``session/delete`` request as the wire carries it."""
    return await conn.ext_method(f"{WIRE}session/delete", params)


async def refusal(conn: ClientSideConnection, params: Any) -> tuple[int, str, Any]:
    with pytest.raises(RequestError) as info:
        await delete(conn, params)
    return info.value.code, str(info.value), info.value.data


async def test_delete_is_advertised_beside_the_other_session_capabilities(home: Path) -> None:
    settings = Settings(home=home, env={"CODLING_HOME": str(home)})
    async with connected(CodlingAgent(settings_loader=lambda: settings, warm_up=False), RecordingClient()) as conn:
        init = await conn.initialize(protocol_version=PROTOCOL_VERSION)
    assert init.agent_capabilities is not None
    assert init.agent_capabilities.session_capabilities == SessionCapabilities(
        list=SessionListCapabilities(),
        resume=SessionResumeCapabilities(),
        fork=SessionForkCapabilities(),
        close=SessionCloseCapabilities(),
        delete=SessionDeleteCapabilities(),
        additional_directories=SessionAdditionalDirectoriesCapabilities(),
    )


async def test_a_stored_session_is_gone_for_good_and_its_fork_stays(home: Path, project: Path) -> None:
    async with agent(home, Script([[Say("first")], [Say("in the fork")]])) as (conn, _):
        original = (await conn.new_session(cwd=str(project))).session_id
        await conn.prompt(session_id=original, prompt=[helpers.text_block("hello")])
        fork = (await conn.fork_session(session_id=original, cwd=str(project))).session_id
        await conn.close_session(session_id=fork)
        await conn.close_session(session_id=original)
        assert await delete(conn, {"sessionId": original}) == {}
        listed = [s.session_id for s in (await conn.list_sessions()).sessions]
        with pytest.raises(RequestError) as load:
            await conn.load_session(cwd=str(project), session_id=original)
        # The fork is a copy: it loads and goes on, still naming its parent.
        await conn.load_session(cwd=str(project), session_id=fork)
        assert (await conn.prompt(session_id=fork, prompt=[helpers.text_block("on")])).stop_reason == "end_turn"
    assert listed == [fork]
    assert (load.value.code, load.value.data) == (-32002, not_on_disk(home, original))
    store = SessionStore(home)
    assert not store.history_path(original).parent.exists()
    assert store.read(fork).header.parent == original


async def test_an_open_session_is_closed_first_and_its_running_turn_cancelled(home: Path, project: Path) -> None:
    async with agent(home, Script([[Say("working"), Until(asyncio.Event())]])) as (conn, client):  # never ends
        sid = (await conn.new_session(cwd=str(project))).session_id
        prompt = asyncio.create_task(conn.prompt(session_id=sid, prompt=[helpers.text_block("take your time")]))
        await client.wait_for("agent_message_chunk", timeout=deadline(30))
        assert await asyncio.wait_for(delete(conn, {"sessionId": sid}), deadline(30)) == {}
        assert (await asyncio.wait_for(prompt, deadline(30))).stop_reason == "cancelled"
        with pytest.raises(RequestError) as again:
            await conn.prompt(session_id=sid, prompt=[helpers.text_block("still there?")])
        listed = (await conn.list_sessions()).sessions
    assert (again.value.code, listed) == (-32002, [])
    # Nothing the closed session did afterwards wrote it back.
    assert not SessionStore(home).history_path(sid).parent.exists()


async def test_a_session_another_process_holds_is_refused_and_stays(home: Path, project: Path) -> None:
    async with agent(home, Script([[Say("hi")]])) as (conn, _):
        sid = (await conn.new_session(cwd=str(project))).session_id
        await conn.prompt(session_id=sid, prompt=[helpers.text_block("hello")])
        await conn.close_session(session_id=sid)
        holder = other_writer(SessionStore(home), sid)
        try:
            refused = await refusal(conn, {"sessionId": sid})
        finally:
            holder.communicate("close\n", timeout=deadline(30))
        listed = [s.session_id for s in (await conn.list_sessions()).sessions]
        # Once the other process has let go, it can be deleted.
        assert await delete(conn, {"sessionId": sid}) == {}
    assert refused == (
        -32003,
        "Session held by another process",
        {"sessionId": sid, "message": f"session {sid} is open in another codling process; close it there first"},
    )
    assert listed == [sid]


async def test_unknown_malformed_and_missing_ids_are_the_clients_errors(home: Path) -> None:
    async with agent(home, Script([])) as (conn, _):
        unknown = await refusal(conn, {"sessionId": UNKNOWN})
        malformed = await refusal(conn, {"sessionId": "../../elsewhere"})
        missing = await refusal(conn, {})
        wrong = await refusal(conn, {"sessionId": 7})
    assert unknown == (-32002, "Resource not found", not_on_disk(home, UNKNOWN))
    assert malformed[0] == -32602 and malformed[2]["sessionId"] == "../../elsewhere"
    assert (missing[0], missing[2]) == (-32602, {"message": "session/delete: sessionId: Field required"})
    assert (wrong[0], wrong[2]) == (-32602, {"message": "session/delete: sessionId: Input should be a valid string"})
