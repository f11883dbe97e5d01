"""The session config options over ACP: the model picker grouped by provider, the thinking toggle (a boolean only
for a client that takes booleans, else an On/Off select) and the thought level for a model that thinks; what
they change in the requests a provider receives, that the choice outlives load, resume and fork, and readable
refusals."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from acp import PROTOCOL_VERSION, RequestError, helpers
from acp.schema import (
    BooleanConfigOptionCapabilities,
    ClientCapabilities,
    ClientSessionCapabilities,
    SessionConfigOptionBoolean,
    SessionConfigOptionsCapabilities,
    SessionConfigOptionSelect,
    SessionConfigSelectGroup,
    SessionConfigSelectOption,
)

from codling.acp.server import CodlingAgent
from codling.config import MODE_DESCRIPTIONS, PERMISSION_MODES, Settings
from codling.llm.providers import build_model, warm_up_provider
from tests.fakes.acp_client import RecordingClient, connected
from tests.fakes.anthropic_server import AnthropicServer, Reply, Thinking, running_server
from tests.fakes.scenarios import Script

THINKER = "xai:grok-thinker"
PLAIN = "xai:grok-plain"
OTHER_THINKER = "cerebras:qwen-thinker"
CATALOG = {
    "models": {
        THINKER: {"context_limit": 100_000, "max_output_tokens": 8_000, "thinking": True},
        PLAIN: {"context_limit": 100_000, "max_output_tokens": 8_000},
        OTHER_THINKER: {"context_limit": 100_000, "max_output_tokens": 8_000, "thinking": True},
    }
}
"""Models of providers the bundled catalog has none of, so the picker holds exactly these."""

BOOLEANS = ClientCapabilities(
    session=ClientSessionCapabilities(
        config_options=SessionConfigOptionsCapabilities(boolean=BooleanConfigOptionCapabilities())
    )
)


@asynccontextmanager
async def serving(
    home: Path, caps: ClientCapabilities | None = None, env: dict[str, str] | None = None
) -> AsyncIterator[tuple[Any, RecordingClient]]:
    (home / "models.json").write_text(json.dumps(CATALOG))
    environment = env or {"CODLING_MODEL": THINKER, "XAI_API_KEY": "xai-test", "CEREBRAS_API_KEY": "csk-test"}
    settings = Settings(home=home, titles=False, env={"CODLING_HOME": str(home), **environment})
    # The real provider model for a given environment (the process's would lack its variables), else a script.
    factory = partial(build_model, env=settings.env) if env else Script([]).factory()
    agent = CodlingAgent(settings_loader=lambda: settings, model_factory=factory, warm_up=False)
    client = RecordingClient()
    async with connected(agent, client) as conn:
        await conn.initialize(protocol_version=PROTOCOL_VERSION, client_capabilities=caps)
        yield conn, client


def model_picker(current: str) -> SessionConfigOptionSelect:
    return SessionConfigOptionSelect(
        type="select",
        id="model",
        name="Model",
        category="model",
        current_value=current,
        options=[
            SessionConfigSelectGroup(
                group="xai",
                name="xAI",
                options=[
                    SessionConfigSelectOption(value=THINKER, name="grok-thinker", description=THINKER),
                    SessionConfigSelectOption(value=PLAIN, name="grok-plain", description=PLAIN),
                ],
            ),
            SessionConfigSelectGroup(
                group="cerebras",
                name="Cerebras",
                options=[
                    SessionConfigSelectOption(value=OTHER_THINKER, name="qwen-thinker", description=OTHER_THINKER)
                ],
            ),
        ],
    )


def thought_level(current: str) -> SessionConfigOptionSelect:
    return SessionConfigOptionSelect(
        type="select",
        id="thought_level",
        name="Thought level",
        description="How hard the model thinks when thinking is on",
        category="thought_level",
        current_value=current,
        options=[
            SessionConfigSelectOption(value="default", name="Model default"),
            SessionConfigSelectOption(value="low", name="Low"),
            SessionConfigSelectOption(value="medium", name="Medium"),
            SessionConfigSelectOption(value="high", name="High"),
        ],
    )


MODE_PICKER = SessionConfigOptionSelect(
    type="select",
    id="mode",
    name="Mode",
    category="mode",
    current_value="ask",
    options=[
        SessionConfigSelectOption(value=m, name=MODE_DESCRIPTIONS[m][0], description=MODE_DESCRIPTIONS[m][1])
        for m in PERMISSION_MODES
    ],
)


async def test_a_client_without_boolean_options_gets_the_toggle_as_an_on_off_select(home: Path, project: Path) -> None:
    async with serving(home) as (conn, _):
        session = await conn.new_session(cwd=str(project))
        response = await conn.set_config_option(config_id="thinking", session_id=session.session_id, value="off")
    toggle = SessionConfigOptionSelect(
        type="select",
        id="thinking",
        name="Thinking",
        description="Whether the model thinks before it answers",
        category="model_config",
        current_value="on",
        options=[SessionConfigSelectOption(value="on", name="On"), SessionConfigSelectOption(value="off", name="Off")],
    )
    assert session.config_options == [model_picker(THINKER), toggle, thought_level("default"), MODE_PICKER]
    assert response.config_options == [
        model_picker(THINKER),
        toggle.model_copy(update={"current_value": "off"}),
        thought_level("default"),
        MODE_PICKER,
    ]


async def test_a_client_with_boolean_options_gets_a_boolean_that_goes_and_comes_with_the_model(
    home: Path, project: Path
) -> None:
    toggle = SessionConfigOptionBoolean(
        type="boolean",
        id="thinking",
        name="Thinking",
        description="Whether the model thinks before it answers",
        category="model_config",
        current_value=True,
    )
    async with serving(home, BOOLEANS) as (conn, client):
        session = await conn.new_session(cwd=str(project))
        sid = session.session_id
        assert session.config_options == [model_picker(THINKER), toggle, thought_level("default"), MODE_PICKER]
        off = await conn.set_config_option(config_id="thinking", session_id=sid, value=False)
        level = await conn.set_config_option(config_id="thought_level", session_id=sid, value="high")
        plain = await conn.set_config_option(config_id="model", session_id=sid, value=PLAIN)
        # The choice is the session's: a model that thinks gets it back.
        back = await conn.set_config_option(config_id="model", session_id=sid, value=OTHER_THINKER)
        # /model too: the pickers follow through config_option_update.
        await conn.prompt(session_id=sid, prompt=[helpers.text_block(f"/model {PLAIN}")])
        await conn.prompt(session_id=sid, prompt=[helpers.text_block(f"/model {THINKER}")])
    toggled_off = toggle.model_copy(update={"current_value": False})
    assert off.config_options == [model_picker(THINKER), toggled_off, thought_level("default"), MODE_PICKER]
    assert level.config_options == [model_picker(THINKER), toggled_off, thought_level("high"), MODE_PICKER]
    assert plain.config_options == [model_picker(PLAIN), MODE_PICKER]
    assert back.config_options == [model_picker(OTHER_THINKER), toggled_off, thought_level("high"), MODE_PICKER]
    assert [u.config_options for u in client.of_kind("config_option_update")] == [
        [model_picker(PLAIN), MODE_PICKER],
        [model_picker(THINKER), toggled_off, thought_level("high"), MODE_PICKER],
    ]


async def test_the_thinking_choice_outlives_load_resume_and_fork(home: Path, project: Path) -> None:
    async with serving(home, BOOLEANS) as (conn, _):
        sid = (await conn.new_session(cwd=str(project))).session_id
        await conn.set_config_option(config_id="thinking", session_id=sid, value=False)
        await conn.set_config_option(config_id="thought_level", session_id=sid, value="low")
        await conn.set_config_option(config_id="model", session_id=sid, value=OTHER_THINKER)

    def chosen(options: list[Any] | None) -> dict[str, Any]:
        return {o.id: o.current_value for o in options or []}

    expected = {"model": OTHER_THINKER, "thinking": False, "thought_level": "low", "mode": "ask"}
    async with serving(home, BOOLEANS) as (conn, _):
        loaded = await conn.load_session(cwd=str(project), session_id=sid)
        assert chosen(loaded.config_options) == expected
    async with serving(home, BOOLEANS) as (conn, _):
        resumed = await conn.resume_session(cwd=str(project), session_id=sid)
        forked = await conn.fork_session(cwd=str(project), session_id=sid)
        await conn.set_config_option(config_id="thinking", session_id=forked.session_id, value=True)
    assert chosen(resumed.config_options) == expected
    assert chosen(forked.config_options) == expected
    async with serving(home, BOOLEANS) as (conn, _):
        parent = await conn.load_session(cwd=str(project), session_id=sid)
        fork = await conn.load_session(cwd=str(project), session_id=forked.session_id)
    assert chosen(parent.config_options) == expected  # the fork's change is the fork's
    assert chosen(fork.config_options) == {**expected, "thinking": True}
    settings = [
        {k: v for k, v in record.items() if k in ("thinking", "thought_level")}
        for record in map(json.loads, (home / "sessions" / sid / "history.jsonl").read_text().splitlines())
        if record["kind"] == "settings" and ("thinking" in record or "thought_level" in record)
    ]
    assert settings == [{"thinking": False}, {"thought_level": "low"}]


@pytest.mark.parametrize(
    ("config_id", "value", "message"),
    [
        ("thinking", "maybe", 'thinking is true or false (or, as a select, "on" or "off")'),
        ("thought_level", True, "the thought level is one of default, low, medium, high"),
        ("thought_level", "extreme", "the thought level is one of default, low, medium, high"),
        ("mode", True, "the mode is one of read-only, ask, accept-edits, auto, yolo (a value id, not a boolean)"),
        ("model", True, "not an available model: choose a value of the model picker"),
        ("model", "xai:grok-unknown", "not an available model: choose a value of the model picker"),
        ("colour", "red", "unknown config option: codling's are model, thinking, thought_level, mode"),
    ],
)
async def test_a_value_an_option_does_not_take_is_refused_saying_what_it_takes(
    home: Path, project: Path, config_id: str, value: str | bool, message: str
) -> None:
    async with serving(home, BOOLEANS) as (conn, _):
        session = await conn.new_session(cwd=str(project))
        with pytest.raises(RequestError) as refused:
            await conn.set_config_option(config_id=config_id, session_id=session.session_id, value=value)
        after = await conn.load_session(cwd=str(project), session_id=session.session_id)
    assert refused.value.code == -32602
    assert refused.value.data is not None and refused.value.data["message"].startswith(message)
    assert after.config_options == session.config_options  # nothing changed


async def test_thinking_is_refused_for_a_model_that_does_not_think(home: Path, project: Path) -> None:
    async with serving(home, BOOLEANS) as (conn, _):
        sid = (await conn.new_session(cwd=str(project))).session_id
        await conn.set_config_option(config_id="model", session_id=sid, value=PLAIN)
        with pytest.raises(RequestError) as refused:
            await conn.set_config_option(config_id="thinking", session_id=sid, value=True)
    assert refused.value.code == -32602 and refused.value.data is not None
    assert refused.value.data["message"] == (
        f"{PLAIN} is not a thinking model in codling's catalog: switch to one that is, or, if it can think, give it "
        '"thinking": true in $CODLING_HOME/models.json'
    )


# -- what the provider receives -------------------------------------------------------------------------------

HAIKU = "anthropic:claude-haiku-4-5"


@pytest.fixture
def anthropic() -> Iterator[AnthropicServer]:
    warm_up_provider(HAIKU)  # the SDK's import takes seconds on a busy machine
    with running_server(expected_api_key="test-key") as server:
        yield server


async def test_switching_thinking_off_takes_it_out_of_the_provider_request(
    home: Path, project: Path, anthropic: AnthropicServer
) -> None:
    for text in ("thought about it", "no thinking", "thought hard"):
        anthropic.enqueue(Reply(text=[text], thinking=Thinking("hmm", signature="sig") if "thought" in text else None))
    async with serving(home, BOOLEANS, env={"CODLING_MODEL": HAIKU, **anthropic.env()}) as (conn, _):
        sid = (await conn.new_session(cwd=str(project))).session_id
        await conn.prompt(session_id=sid, prompt=[helpers.text_block("one")])
        await conn.set_config_option(config_id="thinking", session_id=sid, value=False)
        await conn.prompt(session_id=sid, prompt=[helpers.text_block("two")])
        await conn.set_config_option(config_id="thinking", session_id=sid, value=True)
        await conn.set_config_option(config_id="thought_level", session_id=sid, value="high")
        await conn.prompt(session_id=sid, prompt=[helpers.text_block("three")])
    first, second, third = anthropic.requests
    assert first["thinking"]["type"] == "enabled"  # on, at the model's default budget
    assert "thinking" not in second  # off: this model does not think unless asked
    assert third["thinking"]["type"] == "enabled"
    assert third["thinking"]["budget_tokens"] > first["thinking"]["budget_tokens"]  # high
