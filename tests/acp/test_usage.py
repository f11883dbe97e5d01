"""Usage over ACP: a usage_update when a session is introduced (new, loaded, resumed) and after each turn, with
the session's cost when the catalog prices the model; session/prompt's own ``usage`` for the turn."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from acp import PROTOCOL_VERSION, helpers
from acp.schema import Cost, UsageUpdate
from acp.schema import Usage as PromptUsage

from codling.acp.server import CodlingAgent
from codling.acp.translate import prompt_usage
from codling.brain.events import Usage
from codling.config import Settings
from codling.llm.catalog import load_catalog
from tests.fakes.acp_client import RecordingClient, connected
from tests.fakes.scenarios import Say, Script

PRICED = "openai-chat:priced"
PRICE = (2.0, 10.0)
WINDOW = 50_000


def agent_for(home: Path, script: Script, model: str = PRICED) -> CodlingAgent:
    (home / "models.json").write_text(
        json.dumps({"models": {PRICED: {"context_limit": WINDOW, "max_output_tokens": 4000, "price": list(PRICE)}}})
    )
    settings = Settings(home=home, titles=False, env={"CODLING_HOME": str(home), "CODLING_MODEL": model})
    return CodlingAgent(settings_loader=lambda: settings, model_factory=script.factory(), warm_up=False)


def cost(input_tokens: int, output_tokens: int) -> float:
    return round((input_tokens * PRICE[0] + output_tokens * PRICE[1]) / 1_000_000, 6)


async def test_usage_at_new_after_each_turn_and_after_load(home: Path, project: Path) -> None:
    client = RecordingClient()
    async with connected(agent_for(home, Script([[Say("one")], [Say("two")]])), client) as conn:
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        sid = (await conn.new_session(cwd=str(project))).session_id
        await client.wait_for("usage_update")
        [introduced] = client.of_kind("usage_update")
        assert (introduced.size, introduced.cost) == (WINDOW, None)  # nothing spent yet
        assert 0 < introduced.used < WINDOW  # the system prompt and tools already take room
        first = await conn.prompt(session_id=sid, prompt=[helpers.text_block("hello")])
        second = await conn.prompt(session_id=sid, prompt=[helpers.text_block("again")])
    assert first.usage is not None and second.usage is not None
    assert first.usage.input_tokens > 0 and first.usage.output_tokens > 0
    assert first.usage.total_tokens == first.usage.input_tokens + first.usage.output_tokens
    spent_in = first.usage.input_tokens + second.usage.input_tokens
    spent_out = first.usage.output_tokens + second.usage.output_tokens
    # The introduction was sent again once the client named the session (in case it had dropped it).
    assert client.of_kind("usage_update")[1] == introduced
    after_turns = client.of_kind("usage_update")[2:]
    assert [u.cost for u in after_turns] == [
        Cost(amount=cost(first.usage.input_tokens, first.usage.output_tokens), currency="USD"),
        Cost(amount=cost(spent_in, spent_out), currency="USD"),
    ]
    assert after_turns[0].used < after_turns[1].used <= WINDOW
    # A loaded session (a new process) starts from what the history recorded.
    for reopen in ("load", "resume"):
        again = RecordingClient()
        async with connected(agent_for(home, Script([])), again) as conn:
            await conn.initialize(protocol_version=PROTOCOL_VERSION)
            if reopen == "load":
                await conn.load_session(cwd=str(project), session_id=sid)
            else:
                await conn.resume_session(cwd=str(project), session_id=sid)
            await again.wait_for("usage_update")
        [restored] = again.of_kind("usage_update")
        assert restored == UsageUpdate(
            session_update="usage_update",
            used=after_turns[1].used,
            size=WINDOW,
            cost=Cost(amount=cost(spent_in, spent_out), currency="USD"),
        )


async def test_no_cost_without_a_price(home: Path, project: Path) -> None:
    client = RecordingClient()
    async with connected(agent_for(home, Script([[Say("one")]]), model="openai-chat:unpriced"), client) as conn:
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        sid = (await conn.new_session(cwd=str(project))).session_id
        response = await conn.prompt(session_id=sid, prompt=[helpers.text_block("hello")])
    assert response.usage is not None and response.usage.output_tokens > 0
    assert [u.cost for u in client.of_kind("usage_update")] == [None, None]


@pytest.mark.parametrize("model", [m.id for m in load_catalog()])
def test_every_bundled_model_has_a_price(model: str) -> None:
    info = load_catalog().get(model)
    assert info.price is not None and info.cost(1_000_000, 0) == info.price.input


def test_a_turn_whose_provider_reported_no_tokens_has_no_prompt_usage() -> None:
    assert prompt_usage(Usage(requests=2)) is None  # unknown, not zero
    assert prompt_usage(None) is None
    assert prompt_usage(Usage(10, 3, 1)) == PromptUsage(total_tokens=13, input_tokens=10, output_tokens=3)


def test_prompt_usage_carries_the_prompt_cache_s_reads_and_writes() -> None:
    assert prompt_usage(Usage(100, 5, 1, cache_read_tokens=80, cache_write_tokens=10)) == PromptUsage(
        total_tokens=105, input_tokens=100, output_tokens=5, cached_read_tokens=80, cached_write_tokens=10
    )
    plain = prompt_usage(Usage(100, 5, 1))
    assert plain is not None and (plain.cached_read_tokens, plain.cached_write_tokens) == (None, None)
