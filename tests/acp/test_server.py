"""codling's ACP agent in-process: the real SDK connections, a recording client, scripted models."""

from __future__ import annotations

import asyncio
import base64
import json
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Protocol

import pytest
from acp import PROTOCOL_VERSION, RequestError, helpers
from acp.client.connection import ClientSideConnection
from acp.schema import (
    AuthCapabilities,
    AuthMethodAgent,
    ClientCapabilities,
    ContentToolCallContent,
    FileEditToolCallContent,
    ImageContentBlock,
    TerminalAuthMethod,
    TextContentBlock,
)
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.messages import BinaryContent, ModelMessage, UserPromptPart

from codling.acp.content import IMAGE_MAX_BASE64
from codling.acp.server import CodlingAgent
from codling.config import Settings
from tests.fakes.acp_client import RecordingClient, connected
from tests.fakes.deadlines import deadline
from tests.fakes.scenarios import Call, Fail, Say, Script, Think, Wait, user_prompt

MODEL_ID = "openai-chat:scripted"


@pytest.fixture
def make_settings(home: Path) -> Callable[..., Settings]:
    def make(**overrides: object) -> Settings:
        env = {"CODLING_HOME": str(home), "CODLING_MODEL": MODEL_ID}
        return Settings(home=home, env=env, **overrides)  # type: ignore[arg-type]

    return make


def last_prompt(messages: list[ModelMessage]) -> UserPromptPart:
    """The last part of a request's messages: the user prompt that ends it."""
    part = messages[-1].parts[-1]
    assert isinstance(part, UserPromptPart), part
    return part


class Harness:
    def __init__(self, conn: ClientSideConnection, client: RecordingClient, project: Path) -> None:
        self.conn = conn
        self.client = client
        self.project = project

    async def new(self, mode: str | None = None) -> str:
        await self.conn.initialize(protocol_version=PROTOCOL_VERSION)
        response = await self.conn.new_session(cwd=str(self.project))
        if mode:
            await self.conn.set_session_mode(session_id=response.session_id, mode_id=mode)
        return response.session_id

    async def say(self, session_id: str, text: str) -> str:
        response = await self.conn.prompt(session_id=session_id, prompt=[helpers.text_block(text)])
        return response.stop_reason


class Start(Protocol):
    """The ``start`` fixture: an agent for a script, with settings overridden, and a client (a new
    RecordingClient if None), joined in a Harness."""

    def __call__(
        self, script: Script, client: RecordingClient | None = None, **settings: object
    ) -> AbstractAsyncContextManager[Harness]: ...


@pytest.fixture
def start(project: Path, make_settings: Callable[..., Settings]) -> Start:
    def start(
        script: Script, client: RecordingClient | None = None, **settings: object
    ) -> AbstractAsyncContextManager[Harness]:
        agent = CodlingAgent(
            settings_loader=lambda: make_settings(**settings), model_factory=script.factory(), warm_up=False
        )
        recording = client or RecordingClient()

        async def run() -> AsyncIterator[Harness]:
            async with connected(agent, recording) as conn:
                yield Harness(conn, recording, project)

        from contextlib import asynccontextmanager

        return asynccontextmanager(run)()

    return start


async def test_initialize_advertises_only_what_is_implemented(start: Start) -> None:
    async with start(Script([])) as h:
        response = await h.conn.initialize(protocol_version=PROTOCOL_VERSION)
    assert response.protocol_version == PROTOCOL_VERSION
    assert response.agent_info is not None and response.agent_info.name == "codling"
    caps = response.agent_capabilities
    assert caps is not None
    assert caps.load_session is True
    assert caps.prompt_capabilities is not None
    assert (caps.prompt_capabilities.embedded_context, caps.prompt_capabilities.image) == (True, True)
    assert caps.prompt_capabilities.audio is False
    sessions = caps.session_capabilities
    assert sessions is not None
    advertised = {
        name
        for name in ("list", "fork", "resume", "close", "additional_directories", "delete")
        if getattr(sessions, name) is not None
    }
    assert advertised == {"list", "fork", "resume", "close", "additional_directories", "delete"}
    # One sign-in method: `codling login` in a terminal, in the `_meta` form Zed reads without asking (this
    # client did not say it runs terminal methods).
    (method,) = response.auth_methods or []
    assert isinstance(method, AuthMethodAgent) and method.id == "codling-login"
    assert method.field_meta is not None
    login = method.field_meta["terminal-auth"]
    assert (login["command"], login["args"], login["label"]) == (
        sys.executable,
        ["-m", "codling", "login"],
        "codling login",
    )
    assert list(login["env"]) == ["CODLING_HOME"]


async def test_a_client_that_runs_terminal_sign_ins_gets_the_terminal_method(start: Start) -> None:
    async with start(Script([])) as h:
        response = await h.conn.initialize(
            protocol_version=PROTOCOL_VERSION,
            client_capabilities=ClientCapabilities(auth=AuthCapabilities(terminal=True)),
        )
    (method,) = response.auth_methods or []
    assert isinstance(method, TerminalAuthMethod)
    assert (method.type, method.id, method.args) == ("terminal", "codling-login", ["login"])
    assert method.env is not None and list(method.env) == ["CODLING_HOME"]
    assert method.field_meta is not None and "terminal-auth" in method.field_meta  # Zed reads this form


async def test_new_session_offers_modes_and_model_config(start: Start, project: Path) -> None:
    async with start(Script([])) as h:
        await h.conn.initialize(protocol_version=PROTOCOL_VERSION)
        response = await h.conn.new_session(cwd=str(project))
    assert response.modes is not None
    assert response.modes.current_mode_id == "ask"
    assert [m.id for m in response.modes.available_modes] == ["read-only", "ask", "accept-edits", "auto", "yolo"]
    options = {o.id: o for o in response.config_options or []}
    assert options["model"].category == "model"
    assert options["model"].current_value == MODEL_ID
    assert options["mode"].category == "mode"


@pytest.mark.parametrize("cwd", ["relative/dir", "/definitely/not/here"])
async def test_new_session_rejects_bad_cwd(start: Start, cwd: str) -> None:
    async with start(Script([])) as h:
        await h.conn.initialize(protocol_version=PROTOCOL_VERSION)
        with pytest.raises(RequestError) as info:
            await h.conn.new_session(cwd=cwd)
    assert info.value.code == -32602


async def test_prompt_streams_text_and_thoughts(start: Start) -> None:
    async with start(Script([[Think("let me see"), Say("Hello ", "there")]])) as h:
        sid = await h.new()
        stop = await h.say(sid, "hi")
    assert stop == "end_turn"
    assert h.client.agent_text() == "Hello there"
    thoughts = h.client.of_kind("agent_thought_chunk")
    assert [t.content.text for t in thoughts] == ["let me see"]
    assert {s for s, _ in h.client.updates} == {sid}


async def test_tool_call_shows_title_kind_locations_input_and_diff(start: Start, project: Path) -> None:
    script = Script(
        [
            [Call("edit_file", {"path": "src/app.py", "old_text": "'hello'", "new_text": "'bye'"}, "e1")],
            [Say("Changed.")],
        ]
    )
    async with start(script) as h:
        sid = await h.new(mode="accept-edits")
        assert await h.say(sid, "edit") == "end_turn"
    target = project / "src" / "app.py"
    assert target.read_text() == "def greet():\n    return 'bye'\n"
    (call,) = h.client.of_kind("tool_call")
    assert (call.tool_call_id, call.kind, call.status) == ("e1", "edit", "pending")
    assert "src/app.py" in call.title
    assert call.raw_input == {"path": "src/app.py", "old_text": "'hello'", "new_text": "'bye'"}
    assert [loc.path for loc in call.locations] == [str(target)]
    running, update = h.client.of_kind("tool_call_update")
    assert (running.status, update.status) == ("in_progress", "completed")
    [diff] = update.content  # the diff alone: the model's text (a unified diff) is not shown as well
    assert (diff.type, diff.path) == ("diff", str(target))
    assert (diff.old_text, diff.new_text) == (
        "def greet():\n    return 'hello'\n",
        "def greet():\n    return 'bye'\n",
    )


async def test_ask_mode_requests_permission_with_the_diff_and_remembers_always(start: Start, project: Path) -> None:
    script = Script(
        [
            [Call("edit_file", {"path": "src/app.py", "old_text": "'hello'", "new_text": "'one'"}, "e1")],
            [Call("edit_file", {"path": "src/app.py", "old_text": "'one'", "new_text": "'two'"}, "e2")],
            [Say("Both done.")],
        ]
    )
    async with start(script, RecordingClient(answers=["allow_always"])) as h:
        sid = await h.new()
        assert await h.say(sid, "edit twice") == "end_turn"
    assert (project / "src" / "app.py").read_text() == "def greet():\n    return 'two'\n"
    (request,) = h.client.permissions
    assert request.session_id == sid
    assert request.tool_call.tool_call_id == "e1"
    assert [(o.kind, o.name) for o in request.options] == [
        ("allow_once", "Allow"),
        ("allow_always", "Always allow (every edit, for this session)"),
        ("reject_once", "Reject"),
    ]
    assert request.tool_call.content is not None
    diff = request.tool_call.content[0]
    assert isinstance(diff, FileEditToolCallContent)
    assert diff.type == "diff" and diff.new_text.endswith("'one'\n")


async def test_ask_mode_command_request_shows_the_command_and_rejection_reaches_model(start: Start) -> None:
    script = Script([[Call("run_command", {"command": "make deploy"}, "r1")], [Say("OK, I won't.")]])
    async with start(script, RecordingClient(answers=["reject"])) as h:
        sid = await h.new()
        assert await h.say(sid, "deploy") == "end_turn"
    (request,) = h.client.permissions
    assert request.tool_call.kind == "execute"
    shown = request.tool_call.content
    assert shown is not None and isinstance(shown[0], ContentToolCallContent)
    assert isinstance(shown[0].content, TextContentBlock)
    assert shown[0].content.text == "make deploy"
    running, update = h.client.of_kind("tool_call_update")
    assert running.status == "in_progress"
    # The editor marked the call rejected: the last update leaves its status alone, with a note for the user.
    assert update.status is None
    assert [c.content.text for c in update.content] == ["Rejected."]
    assert h.client.agent_text() == "OK, I won't."
    tool_results = [p for m in script.requests[1] for p in m.parts if p.part_kind == "tool-return"]
    assert "rejected" in str(tool_results[0].content)


async def test_cancel_answers_cancelled_promptly(start: Start) -> None:
    script = Script([[Say("working"), Wait(30)], [Say("still here")]])
    async with start(script) as h:
        sid = await h.new()
        prompt = asyncio.create_task(h.say(sid, "slow"))
        await h.client.wait_for("agent_message_chunk")
        await h.conn.cancel(session_id=sid)
        assert await asyncio.wait_for(prompt, deadline(5)) == "cancelled"
        # The session keeps working after a cancel.
        assert await h.say(sid, "more") == "end_turn"
    assert h.client.agent_text() == "workingstill here"


async def test_cancel_while_waiting_for_permission(start: Start, project: Path) -> None:
    script = Script([[Call("run_command", {"command": "touch ran.txt"}, "r1")], [Say("never")]])
    client = RecordingClient(answers=[None])  # the question stays open until the test releases it
    async with start(script, client) as h:
        sid = await h.new()
        prompt = asyncio.create_task(h.say(sid, "run"))
        await asyncio.wait_for(client.asked.wait(), 10)
        (asked,) = client.permissions
        assert (asked.session_id, asked.tool_call.tool_call_id) == (sid, "r1")
        assert not prompt.done()  # the turn is waiting for the answer
        await h.conn.cancel(session_id=sid)
        assert await asyncio.wait_for(prompt, deadline(5)) == "cancelled"
        client.release.set()
    card = [u for _, u in client.updates if getattr(u, "tool_call_id", None) == "r1"]
    # The call's card ends saying it was cancelled (its status left as the editor marks it), never completed.
    assert (card[-1].status, [c.content.text for c in card[-1].content or ()]) == (None, ["Cancelled."])
    assert "completed" not in [u.status for u in card]
    assert not (project / "ran.txt").exists()  # the command never ran
    assert len(script.requests) == 1  # and the model was not asked to go on


async def test_unknown_session_and_bad_params_are_errors(start: Start) -> None:
    async with start(Script([])) as h:
        await h.new()
        with pytest.raises(RequestError) as unknown:
            await h.say("no-such-session", "hi")
        assert unknown.value.code == -32602
        with pytest.raises(RequestError) as bad_mode:
            await h.conn.set_session_mode(session_id="no-such-session", mode_id="ask")
        assert bad_mode.value.code == -32602


async def test_set_mode_and_config_options(start: Start) -> None:
    async with start(Script([])) as h:
        sid = await h.new()
        with pytest.raises(RequestError):
            await h.conn.set_session_mode(session_id=sid, mode_id="chaos")
        await h.conn.set_session_mode(session_id=sid, mode_id="read-only")
        (synced,) = h.client.of_kind("config_option_update")
        assert {o.id: o.current_value for o in synced.config_options}["mode"] == "read-only"
        response = await h.conn.set_config_option(config_id="mode", session_id=sid, value="yolo")
        modes = {o.id: o.current_value for o in response.config_options}
        assert modes["mode"] == "yolo"
        assert [u.current_mode_id for u in h.client.of_kind("current_mode_update")] == ["yolo"]
        with pytest.raises(RequestError):
            await h.conn.set_config_option(config_id="model", session_id=sid, value="nope:unknown")
        with pytest.raises(RequestError):
            await h.conn.set_config_option(config_id="colour", session_id=sid, value="red")


async def test_resources_reach_the_model_and_images_a_blind_model_cannot_see_get_a_note(
    start: Start, project: Path, home: Path
) -> None:
    # The catalog says this model cannot see images (a model it does not know is sent them).
    (home / "models.json").write_text(json.dumps({"models": {MODEL_ID: {"images": False}}}))
    script = Script([[Say("seen")]])
    async with start(script) as h:
        sid = await h.new()
        blocks: list[helpers.ContentBlock] = [
            helpers.text_block("look at these"),
            helpers.resource_link_block("app.py", (project / "src" / "app.py").as_uri()),
            helpers.resource_block(helpers.embedded_text_resource("file:///tmp/notes.txt", "remember the milk")),
            ImageContentBlock(type="image", data="iVBORw0KGgo=", mime_type="image/png"),
        ]
        response = await h.conn.prompt(session_id=sid, prompt=blocks)
    assert response.stop_reason == "end_turn"
    sent = str(last_prompt(script.requests[0]).content)
    assert "look at these" in sent
    assert "return 'hello'" in sent and str(project / "src" / "app.py") in sent
    assert "remember the milk" in sent
    assert "[image attached: image (image/png)]" in sent and "You cannot see images" in sent
    assert "openai-chat:scripted cannot see images; it was only told that you attached image" in h.client.agent_text()


async def test_a_provider_retry_is_shown_as_a_card_and_the_turn_goes_on(start: Start) -> None:
    busy = ModelHTTPError(429, "scripted", {"message": "slow down"}, retry_after=0.01)
    async with start(Script([[Fail(busy)], [Say("fine now")]])) as h:
        sid = await h.new()
        assert await h.say(sid, "first") == "end_turn"
    cards = [u for _, u in h.client.updates if u.session_update in ("tool_call", "tool_call_update")]
    assert [(c.session_update, c.title, c.kind, c.status) for c in cards] == [
        ("tool_call", "Model provider busy (HTTP 429): retrying in 0.01 s (attempt 2 of 3)", "other", "in_progress"),
        ("tool_call_update", None, None, "completed"),
    ]
    assert cards[0].tool_call_id == cards[1].tool_call_id
    assert h.client.agent_text() == "fine now"


async def test_max_turn_requests_stop_reason(start: Start) -> None:
    script = Script([], fallback=lambda _m: [Call("list_files", {}, f"l{len(script.requests)}")])
    async with start(script, max_requests_per_turn=2) as h:
        sid = await h.new(mode="yolo")
        assert await h.say(sid, "loop") == "max_turn_requests"
    assert len(script.requests) == 2


async def test_additional_directories_are_part_of_the_workspace(start: Start, project: Path, tmp_path: Path) -> None:
    extra = tmp_path / "shared-lib"
    extra.mkdir()
    (extra / "util.py").write_text("VALUE = 42\n")
    script = Script([[Call("read_file", {"path": str(extra / "util.py")}, "r1")], [Say("42")]])
    async with start(script) as h:
        await h.conn.initialize(protocol_version=PROTOCOL_VERSION)
        session = await h.conn.new_session(cwd=str(project), additional_directories=[str(extra)])
        await h.conn.prompt(session_id=session.session_id, prompt=[helpers.text_block("read it")])
    running, update = h.client.of_kind("tool_call_update")
    assert (running.status, update.status) == ("in_progress", "completed")
    assert "VALUE = 42" in update.content[0].content.text


async def test_cancel_sent_right_after_the_prompt_is_answered(start: Start) -> None:
    script = Script([], fallback=lambda _messages: [Say("later")])
    async with start(script) as h:
        sid = await h.new()
        prompt = asyncio.create_task(h.say(sid, "go"))
        await asyncio.sleep(0)  # the prompt request is on its way; cancel before the turn can start
        await h.conn.cancel(session_id=sid)
        assert await asyncio.wait_for(prompt, deadline(5)) == "cancelled"
        assert await asyncio.wait_for(h.say(sid, "again"), 5) == "end_turn"
    assert len(script.requests) == 1  # the cancelled turn never reached the model


async def test_the_client_hears_of_a_tool_call_before_it_is_asked_to_allow_it(start: Start, project: Path) -> None:
    script = Script(
        [[Say("Let me fix it."), Call("write_file", {"path": "new.txt", "content": "x"}, "w1")], [Say("ok")]]
    )
    async with start(script, RecordingClient(answers=["allow_once"])) as h:
        sid = await h.new()
        await h.say(sid, "write")
    (request,) = h.client.permissions
    before = [u for _, u in h.client.updates[: request.updates_before]]
    assert any(u.session_update == "tool_call" and u.tool_call_id == "w1" for u in before)
    assert any(u.session_update == "agent_message_chunk" for u in before)


PIXEL = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="


async def test_a_model_that_sees_images_gets_them_and_the_history_keeps_a_mention(home: Path, project: Path) -> None:
    (home / "models.json").write_text(
        '{"models": {"openai-chat:seeing": {"context_limit": 100000, "max_output_tokens": 4000, "images": true}}}'
    )
    settings = Settings(home=home, titles=False, env={"CODLING_HOME": str(home), "CODLING_MODEL": "openai-chat:seeing"})
    script = Script([[Say("a red pixel")], [Say("still red")]])
    image = helpers.image_block(PIXEL, "image/png", uri="file:///tmp/shot.png")
    client = RecordingClient()
    agent = CodlingAgent(settings_loader=lambda: settings, model_factory=script.factory(), warm_up=False)
    async with connected(agent, client) as conn:
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        sid = (await conn.new_session(cwd=str(project))).session_id
        await conn.prompt(session_id=sid, prompt=[helpers.text_block("what is this?"), image])
        await conn.prompt(session_id=sid, prompt=[helpers.text_block("and now?")])
    content = last_prompt(script.requests[0]).content
    assert isinstance(content, list) and isinstance(content[0], str)
    assert user_prompt(content[0]) == "what is this?\n\n[image attached: shot.png (image/png)]"
    assert isinstance(content[1], BinaryContent) and content[1].data == base64.b64decode(PIXEL)
    assert content[1].media_type == "image/png" and "cannot see" not in client.agent_text()
    # The next request carries the mention, not the image.
    later = [str(p.content) for m in script.requests[1] for p in m.parts if isinstance(p, UserPromptPart)]
    assert user_prompt(later[0]) == "what is this?\n\n[image attached: shot.png (image/png)]"
    # The record keeps the image, so a reloaded session shows it again.
    live = RecordingClient()
    agent = CodlingAgent(settings_loader=lambda: settings, model_factory=script.factory(), warm_up=False)
    async with connected(agent, live) as conn:
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        await conn.load_session(session_id=sid, cwd=str(project))
    shown = [u.content for u in live.of_kind("user_message_chunk")]
    assert shown[:2] == [helpers.text_block("what is this?"), image]


async def test_image_data_is_cleaned_or_refused_with_a_note(home: Path, project: Path) -> None:
    (home / "models.json").write_text(
        '{"models": {"openai-chat:seeing": {"context_limit": 100000, "max_output_tokens": 4000, "images": true}}}'
    )
    settings = Settings(home=home, titles=False, env={"CODLING_HOME": str(home), "CODLING_MODEL": "openai-chat:seeing"})
    script = Script([[Say("ok")]])
    wrapped = "data:image/png;base64," + PIXEL[:40] + "\n" + PIXEL[40:]
    blocks: list[helpers.ContentBlock] = [
        helpers.text_block("two images"),
        helpers.image_block(wrapped, "image/png"),
        helpers.image_block("not base64!", "image/png", uri="file:///tmp/broken.png"),
        helpers.image_block("A" * (IMAGE_MAX_BASE64 + 2**20 * 4), "image/png", uri="file:///tmp/huge.png"),
    ]
    client = RecordingClient()
    agent = CodlingAgent(settings_loader=lambda: settings, model_factory=script.factory(), warm_up=False)
    async with connected(agent, client) as conn:
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        sid = (await conn.new_session(cwd=str(project))).session_id
        await conn.prompt(session_id=sid, prompt=blocks)
    content = last_prompt(script.requests[0]).content
    assert isinstance(content, list) and len(content) == 2
    assert isinstance(content[1], BinaryContent) and content[1].data == base64.b64decode(PIXEL)
    assert "[The user attached an image, broken.png, that could not be decoded.]" in content[0]
    assert "the image broken.png could not be decoded, so it was not sent to the model" in client.agent_text()
    assert "[The user attached an image, huge.png, too large to pass on (23.0 MB).]" in content[0]
    assert "huge.png is about 23.0 MB, over the 20 MB codling passes on (and stores)" in client.agent_text()
    history = next((home / "sessions").glob("*/history.jsonl")).read_text()
    assert len(history) < 100_000  # the huge image is not stored


async def test_a_delegate_works_under_its_call_in_the_editor(start: Start) -> None:
    steps = [{"step": "Read app.py", "status": "pending"}]
    script = Script(
        [
            [Call("delegate", {"agent": "planner", "task": "Plan the change"}, "d1")],
            [Call("read_file", {"path": "src/app.py"}, "r1"), Call("update_plan", {"steps": steps}, "p1")],
            [Say("Step 1: read app.py")],
            [Say("Planned.")],
        ]
    )
    async with start(script) as h:
        sid = await h.new(mode="yolo")
        assert await h.say(sid, "plan it") == "end_turn"
    calls = h.client.of_kind("tool_call")
    assert [c.tool_call_id for c in calls] == ["d1"]  # the delegate's own calls are not cards of their own
    assert calls[0].title == "Delegate to the planner: Plan the change"
    updates = [u for u in h.client.of_kind("tool_call_update") if u.tool_call_id == "d1"]
    notes = [u.content[0].content.text for u in updates if u.status == "in_progress" and u.content]
    assert notes[-1] == "→ Read src/app.py\n→ Update the plan"
    assert updates[-1].status == "completed"
    # It ends with every step it took and its answer.
    assert updates[-1].content == [
        helpers.tool_content(helpers.text_block("→ Read src/app.py\n→ Update the plan")),
        helpers.tool_content(helpers.text_block("Step 1: read app.py")),
    ]
    (plan,) = h.client.of_kind("plan")
    assert [e.content for e in plan.entries] == ["Read app.py"]


def test_always_is_not_offered_to_the_editor_where_it_would_not_be_remembered() -> None:
    from codling.acp.client_ports import options_for
    from codling.tools.ports import PermissionRequest

    protected = PermissionRequest("e1", "edit_file", "edit", "Edit .git/config", "/p/.git/config", always=None)
    assert [o.option_id for o in options_for(protected)] == ["allow_once", "reject"]
    program = PermissionRequest(
        "c1", "run_command", "execute", "Run pytest", "pytest", always="every `pytest` command", everywhere="rule"
    )
    assert [(o.option_id, o.kind, o.name) for o in options_for(program)] == [
        ("allow_once", "allow_once", "Allow"),
        ("allow_always", "allow_always", "Always allow (every `pytest` command, for this session)"),
        ("allow_everywhere", "allow_always", "Always allow, everywhere (rule)"),
        ("reject", "reject_once", "Reject"),
    ]


async def test_attachments_that_cannot_pass_as_they_are_are_named_with_the_reason(
    start: Start, project: Path, make_settings: Callable[..., Settings]
) -> None:
    script = Script([[Say("noted")]])
    missing = project / "missing.py"
    page = helpers.resource_link_block("page", "https://example.com/page")
    blocks: list[helpers.ContentBlock] = [
        helpers.text_block("see these"),
        page,
        helpers.resource_link_block("missing.py", missing.as_uri()),
        helpers.resource_link_block("README.md", "README.md"),  # a plain path, relative to the cwd
        helpers.resource_block(helpers.embedded_blob_resource("file:///tmp/logo.bin", "AAEC")),
        helpers.audio_block("AAAA", "audio/wav"),
    ]
    async with start(script) as h:
        sid = await h.new()
        response = await h.conn.prompt(session_id=sid, prompt=blocks)
    assert response.stop_reason == "end_turn"
    assert user_prompt(str(last_prompt(script.requests[0]).content)) == (
        "see these\n\n"
        "https://example.com/page (not a file; only its address was passed on)\n\n"
        f"{missing.as_uri()} (could not be read: file {missing} does not exist; use list_files to find the right "
        "path)\n\n"
        "README.md\n```\n# demo\n```\n\n"
        "file:///tmp/logo.bin (binary content is not supported; only its name was passed on)\n\n"
        "[The user attached audio content that could not be passed on.]"
    )
    told = h.client.agent_text()
    assert told.startswith(
        "Note: file:///tmp/logo.bin: binary content is not supported; only its name was passed on.\n\n"
    )
    assert "Note: an audio attachment was not sent to the model: codling does not accept audio input yet.\n\n" in told
    # Reloaded, the prompt shows each attachment again: a link with the reason it was not read, or the text read.
    live = RecordingClient()
    agent = CodlingAgent(settings_loader=make_settings, model_factory=script.factory(), warm_up=False)
    async with connected(agent, live) as conn:
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        await conn.load_session(session_id=sid, cwd=str(project))
    shown = [u.content for u in live.of_kind("user_message_chunk")]
    assert shown[:4] == [
        helpers.text_block("see these"),
        helpers.resource_link_block(
            "page", "https://example.com/page", description="not a file; only its address was passed on"
        ),
        helpers.resource_link_block(
            "missing.py",
            missing.as_uri(),
            description=f"could not be read: file {missing} does not exist; use list_files to find the right path",
        ),
        helpers.resource_block(helpers.embedded_text_resource("README.md", "# demo\n")),
    ]
