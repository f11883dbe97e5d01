"""Slash commands over ACP: the list reaches an editor that drops notifications for sessions it has not
registered yet (as Zed does), is re-sent on load; each command does its work and the pickers follow."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from acp import PROTOCOL_VERSION, helpers
from pydantic_ai.messages import ModelRequest, UserPromptPart

from codling.acp.server import CodlingAgent
from codling.brain.builtin_turns import prompt_text
from codling.brain.slash import COMMANDS
from codling.config import Settings
from tests.fakes.acp_client import RecordingClient, connected
from tests.fakes.deadlines import deadline
from tests.fakes.scenarios import Call, Say, Script, user_prompt

MODEL = "openai-chat:scripted"
OTHER = "anthropic:claude-haiku-4-5"


@dataclass
class ZedLikeClient(RecordingClient):
    """Drops every notification for a session it has not registered; a session is registered once the call
    that named it (session/new) has returned to the editor, as in Zed's agent_servers crate."""

    known: set[str] = field(default_factory=set)
    dropped: list[Any] = field(default_factory=list)
    dropping: asyncio.Event = field(default_factory=asyncio.Event)

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        if session_id not in self.known:
            self.dropped.append(update)
            self.dropping.set()
            return
        await super().session_update(session_id, update, **kwargs)


def agent(home: Path, script: Script, **settings: Any) -> CodlingAgent:
    env = {"CODLING_HOME": str(home), "CODLING_MODEL": MODEL, "ANTHROPIC_API_KEY": "sk-ant-test-0123456789"}
    loaded = Settings(home=home, titles=False, env=env, **settings)
    return CodlingAgent(settings_loader=lambda: loaded, model_factory=script.factory(), warm_up=False)


async def say(conn: Any, sid: str, text: str) -> str:
    response = await conn.prompt(session_id=sid, prompt=[helpers.text_block(text)])
    return str(response.stop_reason)


def user_prompts(script: Script) -> list[str]:
    """The user prompt of each model request's last message."""
    return [
        user_prompt(str(part.content))
        for request in script.requests
        if isinstance(request[-1], ModelRequest)
        for part in request[-1].parts
        if isinstance(part, UserPromptPart)
    ]


async def test_the_command_list_reaches_an_editor_that_registers_late(home: Path, project: Path) -> None:
    client = ZedLikeClient()
    async with connected(agent(home, Script([[Say("hi")]])), client) as conn:
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        sid = (await conn.new_session(cwd=str(project))).session_id
        # The editor is slow to register the session: the agent's first introduction is lost.
        await asyncio.wait_for(client.dropping.wait(), 10)
        client.known.add(sid)
        assert await say(conn, sid, "hello") == "end_turn"
    assert "available_commands_update" in [u.session_update for u in client.dropped]
    [commands] = client.of_kind("available_commands_update")
    assert [c.name for c in commands.available_commands] == list(COMMANDS)
    # Whatever was dropped, the commands came before the turn's first update.
    kinds = [u.session_update for _, u in client.updates]
    assert kinds.index("available_commands_update") < kinds.index("agent_message_chunk")
    # And on load, the list is sent again.
    again = RecordingClient()
    async with connected(agent(home, Script([])), again) as conn:
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        await conn.load_session(cwd=str(project), session_id=sid)
        await again.wait_for("available_commands_update")


async def test_closing_a_session_stops_its_introduction(home: Path, project: Path) -> None:
    # Closed before the client named it, a session must not be introduced (or re-introduced) afterwards: its
    # introduction would otherwise wake on the close's own naming of it and send the commands of a closed session.
    codling = agent(home, Script([]))
    async with connected(codling, RecordingClient()) as conn:
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        sid = (await conn.new_session(cwd=str(project))).session_id
        introduction = codling._sessions[sid].introduction
        assert introduction is not None and not introduction.done()
        await conn.close_session(session_id=sid)
        await asyncio.wait([introduction], timeout=deadline(5))
        assert introduction.cancelled()


async def test_help_mode_and_usage(home: Path, project: Path) -> None:
    client = RecordingClient()
    async with connected(agent(home, Script([[Say("hi")]])), client) as conn:
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        sid = (await conn.new_session(cwd=str(project))).session_id
        await say(conn, sid, "/help")
        assert all(f"/{name}" in client.agent_text() for name in COMMANDS)
        await say(conn, sid, "hello")
        before = len(client.updates)
        await say(conn, sid, "/mode")
        listing = "".join(
            u.content.text for _, u in client.updates[before:] if u.session_update == "agent_message_chunk"
        )
        assert "`ask` (current)" in listing and "`yolo`" in listing
        await say(conn, sid, "/mode sloppy")
        assert "Mode not changed: unknown mode 'sloppy'" in client.agent_text()
        await say(conn, sid, "/mode yolo")
        [mode] = client.of_kind("current_mode_update")
        assert mode.current_mode_id == "yolo"
        [options] = client.of_kind("config_option_update")
        assert {o.id: o.current_value for o in options.config_options} == {"model": MODEL, "mode": "yolo"}
        before = len(client.updates)
        await say(conn, sid, "/usage")
        usage = "".join(u.content.text for _, u in client.updates[before:] if u.session_update == "agent_message_chunk")
        assert "- Context: " in usage and "of 32,000 tokens" in usage
        assert "- This session: " in usage and "in 1 model requests" in usage
    # The mode a command set is the session's mode when it is loaded again.
    async with connected(agent(home, Script([])), RecordingClient()) as conn:
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        loaded = await conn.load_session(cwd=str(project), session_id=sid)
    assert loaded.modes is not None and loaded.modes.current_mode_id == "yolo"


async def test_model_switches_to_a_model_with_credentials(home: Path, project: Path) -> None:
    client = RecordingClient()
    async with connected(agent(home, Script([])), client) as conn:
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        sid = (await conn.new_session(cwd=str(project))).session_id
        await say(conn, sid, "/model")
        assert f"`{MODEL}` (current)" in client.agent_text() and f"`{OTHER}`" in client.agent_text()
        assert "`openai:gpt-5`" not in client.agent_text()  # no OPENAI_API_KEY
        await say(conn, sid, "/model openai:gpt-5")
        assert "Model not changed: openai:gpt-5 needs OPENAI_API_KEY" in client.agent_text()
        await say(conn, sid, "/model nonsense")
        assert "Model not changed: 'nonsense' is not a model id" in client.agent_text()
        assert client.of_kind("config_option_update") == []
        await say(conn, sid, f"/model {OTHER}")
        [options] = client.of_kind("config_option_update")
        # OTHER thinks: its toggle (a select: this client takes no booleans) and thought level appear.
        assert {o.id: o.current_value for o in options.config_options} == {
            "model": OTHER,
            "thinking": "on",
            "thought_level": "default",
            "mode": "ask",
        }
    lines = [json.loads(line) for line in (home / "sessions" / sid / "history.jsonl").read_text().splitlines()]
    assert {"kind": "settings", "model": OTHER} in [{k: r[k] for k in ("kind", "model") if k in r} for r in lines]


async def test_init_writes_agents_md_once(home: Path, project: Path) -> None:
    guide = "# AGENTS.md\n\nRun the tests with pytest.\n"
    script = Script([[Call("write_file", {"path": "AGENTS.md", "content": guide}, "w1")], [Say("Wrote AGENTS.md.")]])
    client = RecordingClient()
    async with connected(agent(home, script, mode="yolo"), client) as conn:
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        sid = (await conn.new_session(cwd=str(project))).session_id
        assert await say(conn, sid, "/init") == "end_turn"
        assert (project / "AGENTS.md").read_text() == guide
        assert user_prompts(script)[0] == prompt_text("init")
        requests = len(script.requests)
        await say(conn, sid, "/init")
        assert len(script.requests) == requests  # answered by codling: the file is there
        assert "AGENTS.md already exists" in client.agent_text()
    assert (project / "AGENTS.md").read_text() == guide


async def test_the_model_picker_switches_the_session_s_model(home: Path, project: Path) -> None:
    client = RecordingClient()
    async with connected(agent(home, Script([[Say("hi")]])), client) as conn:
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        sid = (await conn.new_session(cwd=str(project))).session_id
        response = await conn.set_config_option(config_id="model", session_id=sid, value=OTHER)
        assert [(o.id, o.current_value) for o in response.config_options] == [
            ("model", OTHER),
            ("thinking", "on"),
            ("thought_level", "default"),
            ("mode", "ask"),
        ]
        await say(conn, sid, "/usage")
        assert f"with {OTHER}" in client.agent_text()
    async with connected(agent(home, Script([])), RecordingClient()) as conn:
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        loaded = await conn.load_session(cwd=str(project), session_id=sid)
    assert {o.id: o.current_value for o in loaded.config_options or []}["model"] == OTHER


async def test_pins_can_be_listed_and_dropped_by_number(home: Path, project: Path) -> None:
    client = RecordingClient()

    async def answer(text: str) -> str:
        before = len(client.updates)
        await say(conn, sid, text)
        return "".join(u.content.text for _, u in client.updates[before:] if u.session_update == "agent_message_chunk")

    async with connected(agent(home, Script([])), client) as conn:
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        sid = (await conn.new_session(cwd=str(project))).session_id
        assert await answer("/pin use tabs") == "Pinned: use tabs"
        assert await answer("/unpin") == "Say which pin to drop by its number: /unpin N (/pins lists them)."
        assert await answer("/unpin first") == "Say which pin to drop by its number: /unpin N (/pins lists them)."
        listed = await answer("/pins")
        assert "use tabs" in listed
        dropped = await answer("/unpin 1")
        assert "use tabs" not in dropped and dropped == await answer("/pins")


async def test_usage_tells_the_cost_of_a_model_with_a_known_price(home: Path, project: Path) -> None:
    (home / "models.json").write_text(
        '{"models": {"openai-chat:priced": {"context_limit": 32000, "max_output_tokens": 4000, "price": [3, 15]}}}'
    )
    settings = Settings(home=home, titles=False, env={"CODLING_HOME": str(home), "CODLING_MODEL": "openai-chat:priced"})
    script = Script([[Say("hello")]])
    codling = CodlingAgent(settings_loader=lambda: settings, model_factory=script.factory(), warm_up=False)
    client = RecordingClient()
    async with connected(codling, client) as conn:
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        sid = (await conn.new_session(cwd=str(project))).session_id
        spent = (await conn.prompt(session_id=sid, prompt=[helpers.text_block("hi")])).usage
        before = len(client.updates)
        await say(conn, sid, "/usage")
    assert spent is not None and spent.input_tokens > 0
    cost = (spent.input_tokens * 3 + spent.output_tokens * 15) / 1_000_000
    usage = "".join(u.content.text for _, u in client.updates[before:] if u.session_update == "agent_message_chunk")
    lines = usage.splitlines()
    assert lines[-2] == f"- Cost: about ${cost:,.4f} at list prices"
    assert lines[-1] == "- openai-chat:priced costs $3 per million input tokens and $15 per million output"
