"""Special turns seen through an ACP client: the model-made title, the greeting, and what stays out of sight."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from acp import PROTOCOL_VERSION, helpers
from acp.client.connection import ClientSideConnection
from acp.schema import (
    ClientCapabilities,
    ContentToolCallContent,
    FileSystemCapabilities,
    ResourceContentBlock,
    ToolCallStart,
)
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart

from codling.acp.server import CodlingAgent
from codling.acp.translate import translate
from codling.brain.events import SpecialTurnPersisted
from codling.brain.interactions import Interaction
from codling.brain.sanitize import SESSION_OPENED
from codling.config import Settings
from tests.fakes.acp_client import Arrivals, RecordingClient, connected
from tests.fakes.deadlines import deadline
from tests.fakes.editor import FakeEditor
from tests.fakes.scenarios import Fail, Say, Script, Until

MODEL_ID = "openai-chat:scripted"
DOWN = ModelHTTPError(500, "scripted", {"message": "down"})


@dataclass
class Harness:
    conn: ClientSideConnection
    client: RecordingClient
    agent: CodlingAgent

    async def say(self, session_id: str, text: str) -> str:
        response = await self.conn.prompt(session_id=session_id, prompt=[helpers.text_block(text)])
        return response.stop_reason

    async def settle(self, session_id: str) -> None:
        """Wait until the session's background special turns (its title) are over."""
        await self.agent._sessions[session_id].brain.settle()


@asynccontextmanager
async def harness(
    home: Path,
    script: Script,
    *,
    greeting: bool = False,
    arrivals: Arrivals | None = None,
    editor: FakeEditor | None = None,
) -> AsyncIterator[Harness]:
    env = {"CODLING_HOME": str(home), "CODLING_MODEL": MODEL_ID}
    settings = Settings(home=home, mode="yolo", greeting=greeting, env=env)
    agent = CodlingAgent(settings_loader=lambda: settings, model_factory=script.factory(), warm_up=False)
    client = RecordingClient(editor=editor)
    files = FileSystemCapabilities(read_text_file=True, write_text_file=True)
    editing = ClientCapabilities(fs=files) if editor is not None else None
    async with connected(agent, client, arrivals) as conn:
        await conn.initialize(protocol_version=PROTOCOL_VERSION, client_capabilities=editing)
        yield Harness(conn, client, agent)


def request_text(messages: list[ModelMessage]) -> str:
    pieces: list[str] = []
    for m in messages:
        if isinstance(m, ModelRequest):
            pieces += [m.instructions or ""] + [str(p.content) for p in m.parts if isinstance(p, UserPromptPart)]
        elif isinstance(m, ModelResponse):
            pieces += [p.content for p in m.parts if isinstance(p, TextPart)]
    return "\n".join(pieces)


def records(home: Path, session_id: str) -> list[dict[str, object]]:
    lines = (home / "sessions" / session_id / "history.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


async def test_client_gets_the_model_title_outside_the_transcript(home: Path, project: Path) -> None:
    script = Script([[Say("Looking at the login code.")], [Say("Added a test.")]], title=[Say("Fix login bug")])
    async with harness(home, script) as h:
        sid = (await h.conn.new_session(cwd=str(project))).session_id
        assert await h.say(sid, "the login fails for long passwords") == "end_turn"
        await h.settle(sid)
        assert [u.title for u in h.client.of_kind("session_info_update")] == [
            "the login fails for long passwords",
            "Fix login bug",
        ]
        assert all("Fix login bug" not in str(u.model_dump()) for u in h.client.conversation())
        assert await h.say(sid, "add a test") == "end_turn"
        listed = await h.conn.list_sessions(cwd=str(project))
        assert listed.sessions[0].title == "Fix login bug"
    assert "Fix login bug" not in request_text(script.requests[1])  # never in a later model request
    settings_records = [r for r in records(home, sid) if r["kind"] == "settings"]
    assert [r.get("title") for r in settings_records] == ["the login fails for long passwords", "Fix login bug"]

    reloaded = Script([[Say("again")]])
    async with harness(home, reloaded) as h:
        await h.conn.load_session(cwd=str(project), session_id=sid)
        assert all("Fix login bug" not in str(u.model_dump()) for u in h.client.conversation())


async def test_a_failing_title_keeps_the_first_request_title(home: Path, project: Path) -> None:
    script = Script([[Say("ok")]], title=[Fail(DOWN)])
    async with harness(home, script) as h:
        sid = (await h.conn.new_session(cwd=str(project))).session_id
        await h.say(sid, "rename greet to welcome")
        await h.settle(sid)
        assert [u.title for u in h.client.of_kind("session_info_update")] == ["rename greet to welcome"]
    assert [r["kind"] for r in records(home, sid)].count("settings") == 1


async def test_greeting_is_shown_first_and_only_it_enters_the_history(home: Path, project: Path) -> None:
    script = Script([[Say("Hello! Ready when you are.")], [Say("Sure, looking.")]])
    async with harness(home, script, greeting=True) as h:
        sid = (await h.conn.new_session(cwd=str(project))).session_id
        assert await h.say(sid, "look at app.py") == "end_turn"
        conversation = [(u.session_update, u.content.text) for u in h.client.conversation()]
        assert conversation == [
            ("agent_message_chunk", "Hello! Ready when you are."),
            ("agent_message_chunk", "Sure, looking."),
        ]
    greeting_request, turn_request = script.requests
    assert len(greeting_request) == 1 and script.tools[0] == []
    turn_text = request_text(turn_request)
    assert "Hello! Ready when you are." in turn_text  # the greeting is part of the conversation
    assert "Greet them" not in turn_text  # the request that asked for it is not
    (special,) = [r for r in records(home, sid) if r["kind"] == "special"]
    assert special["turn_type"] == "greeting"
    assert special["interactions"] == [{"kind": "assistant", "text": "Hello! Ready when you are."}]

    async with harness(home, Script([])) as h:
        await h.conn.load_session(cwd=str(project), session_id=sid)
        replayed = [(u.session_update, getattr(u.content, "text", None)) for u in h.client.conversation()]
        assert replayed[0] == ("agent_message_chunk", "Hello! Ready when you are.")
        assert replayed[1] == ("user_message_chunk", "look at app.py")


async def test_a_failing_greeting_changes_nothing(home: Path, project: Path) -> None:
    script = Script([[Fail(DOWN)], [Say("Here.")]])
    async with harness(home, script, greeting=True) as h:
        sid = (await h.conn.new_session(cwd=str(project))).session_id
        assert await h.say(sid, "hi") == "end_turn"
        assert [u.content.text for u in h.client.conversation() if u.session_update == "agent_message_chunk"] == [
            "Here."
        ]
    assert not [r for r in records(home, sid) if r["kind"] == "special"]
    assert len(script.requests[1]) == 1  # the user's request alone: no greeting in the history


async def test_no_greeting_unless_asked(home: Path, project: Path) -> None:
    script = Script([[Say("Hi there.")]])
    async with harness(home, script) as h:
        sid = (await h.conn.new_session(cwd=str(project))).session_id
        await h.say(sid, "hi")
    assert len(script.requests) == 1 and "hi" in request_text(script.requests[0])


async def test_prompts_waiting_for_the_greeting_are_queued_and_can_be_cancelled(home: Path, project: Path) -> None:
    release = asyncio.Event()
    script = Script([[Until(release), Say("Hello!")], [Say("Here.")]])
    arrivals = Arrivals()
    async with harness(home, script, greeting=True, arrivals=arrivals) as h:
        sid = (await h.conn.new_session(cwd=str(project))).session_id
        waiting = asyncio.create_task(h.say(sid, "first"))
        await arrivals.received("session/prompt")  # the first prompt is taken before the second arrives
        queued = asyncio.create_task(h.say(sid, "second"))  # waits behind the first
        await arrivals.received("session/prompt", 2)
        await h.conn.cancel(session_id=sid)
        assert await asyncio.wait_for(asyncio.gather(waiting, queued), 5) == ["cancelled", "cancelled"]
        release.set()
        await h.client.wait_for("agent_message_chunk")
        assert await h.say(sid, "third") == "end_turn"
        texts = [u.content.text for u in h.client.conversation() if u.session_update == "agent_message_chunk"]
        assert texts == ["Hello!", "Here."]
    assert SESSION_OPENED in request_text(script.requests[1])  # the greeting is not the first message sent
    assert "first" not in request_text(script.requests[1])  # the cancelled prompts never ran
    assert "second" not in request_text(script.requests[1])


async def test_a_prompt_cancelled_while_its_attachment_is_read_does_not_wait_for_the_greeting(
    home: Path, project: Path
) -> None:
    (project / "notes.md").write_text("# Notes\n")
    release = asyncio.Event()
    script = Script([[Until(release), Say("Hello!")], [Say("Here.")]])
    answer_read = asyncio.Event()
    editor = FakeEditor(read_gate=answer_read)
    async with harness(home, script, greeting=True, editor=editor) as h:
        sid = (await h.conn.new_session(cwd=str(project))).session_id
        link = ResourceContentBlock(type="resource_link", uri=(project / "notes.md").as_uri(), name="notes.md")
        waiting = asyncio.create_task(h.conn.prompt(session_id=sid, prompt=[helpers.text_block("read"), link]))
        await editor.called("fs/read_text_file")  # the prompt is being prepared: its attachment is read
        await h.conn.cancel(session_id=sid)
        answer_read.set()
        # Answered at once, while the greeting still runs: the cancel is not held until the greeting ends.
        assert (await asyncio.wait_for(waiting, deadline(5))).stop_reason == "cancelled"
        release.set()
        await h.client.wait_for("agent_message_chunk")
        assert await h.say(sid, "again") == "end_turn"
        texts = [u.content.text for u in h.client.conversation() if u.session_update == "agent_message_chunk"]
        assert texts == ["Hello!", "Here."]
    assert "# Notes" not in request_text(script.requests[1])  # the cancelled prompt never ran


def test_a_persisted_special_turn_is_shown_as_a_turn_shows_it() -> None:
    read = Interaction("tool_result", "- Read a.txt (done):\n    Read a.txt: line 1 of 1")
    listed = Interaction("tool_result", "- List files (done)")
    worked = SpecialTurnPersisted(
        "probe",
        "persist-all",
        (
            Interaction("user", "check a.txt"),
            Interaction("thought", "read it"),
            Interaction("tool_call", "Read a.txt"),
            read,
            Interaction("tool_call", "List files"),
            listed,
            Interaction("assistant", "It says alpha."),
        ),
    )
    updates = translate(worked)
    ids = [u.tool_call_id for u in updates if isinstance(u, ToolCallStart)]
    assert len(set(ids)) == 2 and translate(worked) == updates  # distinct, and the same at every replay
    assert updates == [
        helpers.update_user_message_text("check a.txt"),
        helpers.update_agent_thought_text("read it"),
        helpers.start_tool_call(ids[0], "Read a.txt", status="completed", content=[content(read.text)]),
        helpers.start_tool_call(ids[1], "List files", status="completed", content=[content(listed.text)]),
        helpers.update_agent_message_text("It says alpha."),
    ]
    # A filter that kept only the calls, or only the results, still shows one finished call each.
    calls_only = SpecialTurnPersisted("probe", "persist-all", (Interaction("tool_call", "Read a.txt"),))
    (only_call,) = translate(calls_only)
    assert only_call == helpers.start_tool_call(only_call.tool_call_id, "Read a.txt", status="completed")
    (only_result,) = translate(SpecialTurnPersisted("probe", "persist-all", (read,)))
    expected = helpers.start_tool_call(
        only_result.tool_call_id, "Read a.txt (done)", status="completed", content=[content(read.text)]
    )
    assert only_result == expected
    assert translate(SpecialTurnPersisted("summarize", "replace-above", (Interaction("summary", "gist"),))) == []
    # Another special turn that did the same gets ids of its own.
    again = SpecialTurnPersisted("probe", "persist-all", worked.interactions, special_id="other")
    assert not {u.tool_call_id for u in translate(again) if isinstance(u, ToolCallStart)} & set(ids)


def content(text: str) -> ContentToolCallContent:
    return helpers.tool_content(helpers.text_block(text))
