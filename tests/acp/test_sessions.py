"""Sessions that survive: load (with replay), list, resume, fork and close, across fresh agents."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Protocol

import pytest
from acp import PROTOCOL_VERSION, RequestError, helpers
from acp.client.connection import ClientSideConnection
from pydantic_ai.messages import TextPart, UserPromptPart

from codling.acp.server import LIST_PAGE_SIZE, CodlingAgent
from codling.config import Settings
from codling.store.header import SessionHeader
from codling.store.ids import new_session_id
from codling.store.index import SessionStore
from tests.fakes.acp_client import RecordingClient, connected
from tests.fakes.deadlines import deadline
from tests.fakes.scenarios import Call, Say, Script, Until

MODEL_ID = "openai-chat:scripted"

Connected = AbstractAsyncContextManager[tuple[ClientSideConnection, RecordingClient]]


class Agent(Protocol):
    """The ``agent`` fixture: an agent for a script, connected to a client (a new RecordingClient if None)."""

    def __call__(self, script: Script, client: RecordingClient | None = None) -> Connected: ...


@pytest.fixture
def agent(home: Path) -> Agent:
    """A fresh CodlingAgent (as a fresh process would be) on the same CODLING_HOME, connected and initialized."""

    @asynccontextmanager
    async def make(
        script: Script, client: RecordingClient | None = None
    ) -> AsyncIterator[tuple[ClientSideConnection, RecordingClient]]:
        settings = Settings(home=home, mode="yolo", env={"CODLING_HOME": str(home), "CODLING_MODEL": MODEL_ID})
        codling = CodlingAgent(settings_loader=lambda: settings, model_factory=script.factory(), warm_up=False)
        recording = client or RecordingClient()
        async with connected(codling, recording) as conn:
            await conn.initialize(protocol_version=PROTOCOL_VERSION)
            yield conn, recording

    return make


async def say(conn: ClientSideConnection, session_id: str, text: str) -> str:
    response = await conn.prompt(session_id=session_id, prompt=[helpers.text_block(text)])
    return response.stop_reason


async def test_load_replays_everything_and_continues_with_full_context(agent: Agent, project: Path) -> None:
    first = Script(
        [
            [Call("read_file", {"path": "src/app.py"}, "r1")],
            [Say("It returns hello.")],
        ]
    )
    async with agent(first) as (conn, client):
        session = await conn.new_session(cwd=str(project))
        assert await say(conn, session.session_id, "what does greet return?") == "end_turn"
        live = client.conversation()
        # Named after the first request at once, then by the title special turn once the turn is over.
        await client.wait_for("session_info_update", 2)
        assert [u.title for u in client.of_kind("session_info_update")] == [
            "what does greet return?",
            "Scripted session title",
        ]

    second = Script([[Say("Still hello.")]])
    async with agent(second) as (conn, client):
        response = await conn.load_session(cwd=str(project), session_id=session.session_id)
        assert response.modes is not None and response.modes.current_mode_id == "yolo"
        replayed = client.conversation()
        kinds = [u.session_update for u in replayed]
        assert kinds == ["user_message_chunk", "tool_call", "tool_call_update", "agent_message_chunk"]
        assert replayed[0].content.text == "what does greet return?"
        # Tool calls and text replay exactly as the client first saw them (the live "running" step aside).
        seen = [u for u in live if not (u.session_update == "tool_call_update" and u.status == "in_progress")]
        assert [u.model_dump() for u in replayed[1:]] == [u.model_dump() for u in seen]
        assert await say(conn, session.session_id, "and now?") == "end_turn"
    history = second.requests[0]
    texts = [str(p.content) for m in history for p in m.parts if isinstance(p, UserPromptPart | TextPart)]
    assert any("what does greet return?" in t for t in texts)
    assert any("It returns hello." in t and "Read src/app.py" in t for t in texts)


async def test_resume_restores_without_replay(agent: Agent, project: Path) -> None:
    async with agent(Script([[Say("noted: blue")]])) as (conn, _):
        session = await conn.new_session(cwd=str(project))
        await say(conn, session.session_id, "my favourite colour is blue")
    script = Script([[Say("blue")]])
    async with agent(script) as (conn, client):
        await conn.resume_session(session_id=session.session_id, cwd=str(project))
        assert client.conversation() == []
        await say(conn, session.session_id, "what is my favourite colour?")
    first = script.requests[0][0].parts[0]
    assert isinstance(first, UserPromptPart)
    assert "my favourite colour is blue" in str(first.content)


async def test_list_reads_disk_filters_by_cwd_and_pages(
    agent: Agent, project: Path, home: Path, tmp_path: Path
) -> None:
    store = SessionStore(home)
    elsewhere = tmp_path / "elsewhere"
    for _ in range(LIST_PAGE_SIZE + 5):
        store.create(SessionHeader(new_session_id(), project, MODEL_ID, "ask")).close()
    other_dir = new_session_id()
    store.create(SessionHeader(other_dir, elsewhere, MODEL_ID, "ask")).close()
    async with agent(Script([[Say("ok")]])) as (conn, client):
        session = await conn.new_session(cwd=str(project))
        await say(conn, session.session_id, "  name   this\nsession  ")
        await client.wait_for("session_info_update", 2)  # the model-made title
        first = await conn.list_sessions(cwd=str(project))
        assert len(first.sessions) == LIST_PAGE_SIZE and first.next_cursor is not None
        assert first.sessions[0].session_id == session.session_id  # newest first
        assert first.sessions[0].title == "Scripted session title"
        assert first.sessions[0].updated_at is not None
        second = await conn.list_sessions(cwd=str(project), cursor=first.next_cursor)
        assert second.next_cursor is None
        listed = {s.session_id for s in first.sessions + second.sessions}
        assert len(listed) == LIST_PAGE_SIZE + 6 and other_dir not in listed
        everything = await conn.list_sessions()
        assert everything.next_cursor is not None
        with pytest.raises(RequestError):
            await conn.list_sessions(cursor="bogus")


async def test_paging_lists_every_session_once_even_when_one_is_made_meanwhile(
    agent: Agent, project: Path, home: Path
) -> None:
    # (issue 29) Pages start after the last session of the page before, not at an offset: a session made while
    # a client pages (it sorts first) moves none of the others onto the next page a second time.
    store = SessionStore(home)
    made = [new_session_id() for _ in range(2 * LIST_PAGE_SIZE + 7)]
    for number, session_id in enumerate(made):
        store.create(SessionHeader(session_id, project, MODEL_ID, "ask")).close()
        # Half of them updated in the same millisecond: the id orders those, across a page's end too.
        when = 1_700_000_000 if number % 2 else 1_700_000_000 + number
        os.utime(store.history_path(session_id), (when, when))
    async with agent(Script([])) as (conn, _):
        pages = [await conn.list_sessions()]
        store.create(SessionHeader(late := new_session_id(), project, MODEL_ID, "ask")).close()
        while pages[-1].next_cursor is not None:
            pages.append(await conn.list_sessions(cursor=pages[-1].next_cursor))
        again = await conn.list_sessions()
    listed = [s.session_id for page in pages for s in page.sessions]
    assert len(pages) == 3 and [len(page.sessions) for page in pages] == [LIST_PAGE_SIZE, LIST_PAGE_SIZE, 7]
    assert sorted(listed) == sorted(made) and late not in listed  # each once; the late one sorts before them
    keys = [(s.updated_at, s.session_id) for page in pages for s in page.sessions]
    assert keys == sorted(keys, reverse=True)  # newest first, as store.list() orders them
    assert listed == [s.session_id for s in store.list() if s.session_id != late]
    assert again.sessions[0].session_id == late


async def test_fork_copies_history_and_leaves_the_original(agent: Agent, project: Path, home: Path) -> None:
    script = Script([[Say("first answer")], [Say("fork answer")]], title=[Say("First question asked")])
    async with agent(script) as (conn, client):
        original = await conn.new_session(cwd=str(project))
        await say(conn, original.session_id, "first question")
        await client.wait_for("session_info_update", 2)  # the model-made title
        fork = await conn.fork_session(session_id=original.session_id, cwd=str(project))
        assert fork.session_id != original.session_id
        await say(conn, fork.session_id, "fork question")
    first = script.requests[1][0].parts[0]
    assert isinstance(first, UserPromptPart)
    assert "first question" in str(first.content)
    store = SessionStore(home)
    forked, parent = store.read(fork.session_id), store.read(original.session_id)
    assert forked.header.parent == original.session_id
    assert forked.turns == 2 and parent.turns == 1
    assert forked.title == "First question asked (fork)" and parent.title == "First question asked"


async def test_close_cancels_the_running_turn_and_frees_the_session(agent: Agent, project: Path) -> None:
    async with agent(Script([[Say("slow"), Until(asyncio.Event())]])) as (conn, client):  # a reply that never ends
        session = await conn.new_session(cwd=str(project))
        prompt = asyncio.create_task(say(conn, session.session_id, "take your time"))
        await client.wait_for("agent_message_chunk")
        await asyncio.wait_for(conn.close_session(session_id=session.session_id), 5)
        assert await asyncio.wait_for(prompt, deadline(5)) == "cancelled"
        with pytest.raises(RequestError):
            await say(conn, session.session_id, "still there?")
        # Closed, not deleted: it can be loaded again.
        await conn.load_session(cwd=str(project), session_id=session.session_id)


async def test_load_of_unknown_session_is_an_error(agent: Agent, project: Path) -> None:
    async with agent(Script([])) as (conn, _):
        with pytest.raises(RequestError) as info:
            await conn.load_session(cwd=str(project), session_id="no-such-session")
    assert info.value.code == -32602


async def test_mode_changes_are_recorded_and_restored(agent: Agent, project: Path, home: Path) -> None:
    async with agent(Script([])) as (conn, _):
        session = await conn.new_session(cwd=str(project))
        await conn.set_session_mode(session_id=session.session_id, mode_id="read-only")
    records = [
        json.loads(line) for line in SessionStore(home).history_path(session.session_id).read_text().splitlines()
    ]
    assert records[-1]["kind"] == "settings" and records[-1]["mode"] == "read-only"
    async with agent(Script([])) as (conn, _):
        loaded = await conn.load_session(cwd=str(project), session_id=session.session_id)
    assert loaded.modes is not None and loaded.modes.current_mode_id == "read-only"


async def test_list_matches_a_cwd_given_through_a_symlink(agent: Agent, project: Path, tmp_path: Path) -> None:
    link = tmp_path / "link-to-project"
    link.symlink_to(project)
    async with agent(Script([])) as (conn, _):
        session = await conn.new_session(cwd=str(link))
        listed = await conn.list_sessions(cwd=str(link))
    assert [s.session_id for s in listed.sessions] == [session.session_id]


async def test_a_new_session_is_answered_before_it_is_made_and_one_that_cannot_be_made_says_why(
    home: Path, project: Path
) -> None:
    settings = Settings(home=home, mode="yolo", env={"CODLING_HOME": str(home), "CODLING_MODEL": MODEL_ID})
    codling = CodlingAgent(settings_loader=lambda: settings, model_factory=Script([]).factory(), warm_up=False)
    codling.on_connect(RecordingClient())
    await codling.initialize(protocol_version=PROTOCOL_VERSION)
    made = await codling.new_session(cwd=str(project))
    unmade = await codling.new_session(cwd=str(project))
    # Both answered, neither made yet: a file where the second's directory goes keeps it from being made.
    assert not (home / "sessions" / made.session_id).exists()
    in_the_way = home / "sessions" / unmade.session_id
    in_the_way.write_text("not a session directory")

    await codling.set_session_mode(session_id=made.session_id, mode_id="ask")  # waits until it is made
    assert (home / "sessions" / made.session_id / "history.jsonl").is_file()
    why = {"details": f"cannot open the session history: [Errno 17] File exists: '{in_the_way}'"}
    for request in (
        codling.prompt(session_id=unmade.session_id, prompt=[helpers.text_block("hello")]),
        codling.set_session_mode(session_id=unmade.session_id, mode_id="ask"),
        codling.set_config_option(config_id="mode", session_id=unmade.session_id, value="ask"),
    ):
        with pytest.raises(RequestError) as info:
            await request
        assert (info.value.code, info.value.data) == (-32603, why)
    await codling.close_session(session_id=unmade.session_id)  # it can be closed, and is gone then
    with pytest.raises(RequestError) as info:
        await codling.set_session_mode(session_id=unmade.session_id, mode_id="ask")
    assert info.value.code == -32002
    await codling.shutdown()


async def test_a_session_just_answered_can_be_loaded_resumed_and_forked_at_once(home: Path, project: Path) -> None:
    settings = Settings(home=home, mode="yolo", env={"CODLING_HOME": str(home), "CODLING_MODEL": MODEL_ID})
    codling = CodlingAgent(settings_loader=lambda: settings, model_factory=Script([]).factory(), warm_up=False)
    codling.on_connect(RecordingClient())
    await codling.initialize(protocol_version=PROTOCOL_VERSION)
    for reopen in ("load", "resume", "fork"):
        new = await codling.new_session(cwd=str(project))
        assert not (home / "sessions" / new.session_id).exists()  # answered, not made yet
        match reopen:
            case "load":
                await codling.load_session(cwd=str(project), session_id=new.session_id)
            case "resume":
                await codling.resume_session(cwd=str(project), session_id=new.session_id)
            case "fork":
                forked = await codling.fork_session(cwd=str(project), session_id=new.session_id)
                assert (home / "sessions" / forked.session_id / "history.jsonl").is_file()
        assert (home / "sessions" / new.session_id / "history.jsonl").is_file()
    await codling.shutdown()


@pytest.mark.parametrize("model", [MODEL_ID, "anthropic:claude-sonnet-4-5"])  # a model that cannot think, one that can
async def test_a_new_session_s_answer_gives_the_options_the_live_session_then_has(
    home: Path, project: Path, model: str
) -> None:
    settings = Settings(home=home, mode="accept-edits", env={"CODLING_HOME": str(home), "CODLING_MODEL": model})
    codling = CodlingAgent(settings_loader=lambda: settings, model_factory=Script([]).factory(), warm_up=False)
    codling.on_connect(RecordingClient())
    await codling.initialize(protocol_version=PROTOCOL_VERSION)
    new = await codling.new_session(cwd=str(project))  # answered before the session is made
    live = await codling.set_config_option(config_id="mode", session_id=new.session_id, value="accept-edits")
    assert live.config_options == new.config_options
    assert new.modes is not None and new.modes.current_mode_id == "accept-edits"
    if model != MODEL_ID:
        assert "thinking" in [option.id for option in new.config_options or []]
    await codling.shutdown()
