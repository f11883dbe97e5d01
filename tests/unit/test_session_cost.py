"""What a session costs: codling's reported cost against what the Anthropic fake bills under Anthropic's cache
rules (issue 30 item 5), the summarizer's, the title's and the delegates' requests included."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest

from codling.brain.events import Event, TurnEnded, TurnFailed
from codling.brain.factory import open_session
from codling.brain.session import ConversationSession
from codling.config import PromptCache, Settings
from codling.llm.catalog import load_catalog
from codling.llm.providers import build_model, warm_up_provider
from tests.fakes.anthropic_server import running_server
from tests.fakes.anthropic_session import MODEL_ID, SessionModel, bill_price, model, run_session
from tests.fakes.deadlines import deadline

HAIKU = "anthropic:claude-haiku-4-5"


@pytest.fixture(autouse=True)
def _warm() -> None:
    warm_up_provider(MODEL_ID)  # the SDK's import takes seconds on a busy machine: not the turns' liveness


@pytest.mark.parametrize("cache", ["5m", "1h"])
async def test_a_compacting_sessions_reported_cost_is_what_the_provider_bills(cache: PromptCache) -> None:
    async with asyncio.timeout(deadline(120)):  # liveness only
        session = await run_session(14, cache, window=10_000)

    assert session.compactions >= 1  # the summarizer's requests are part of the bill
    assert session.usage.requests == len(session.bill)
    assert session.usage.input_tokens == session.input_tokens
    assert session.usage.cache_read_tokens == sum(b.cache_read_input_tokens for b in session.bill) > 0
    assert session.usage.cache_write_1h_tokens == sum(b.ephemeral_1h_input_tokens for b in session.bill)
    assert (session.usage.cache_write_1h_tokens > 0) == (cache == "1h")
    billed = session.priced(model(10_000))
    assert abs(session.cost - billed) <= 0.01 * billed


async def turn(session: ConversationSession, prompt: str) -> TurnEnded:
    async with asyncio.timeout(deadline(30)):  # liveness only
        events: list[Event] = [e async for e in session.stream(prompt)]
    assert not [e for e in events if isinstance(e, TurnFailed)]
    return next(e for e in events if isinstance(e, TurnEnded))


async def test_a_title_named_by_a_cheaper_model_is_priced_at_its_price_in_the_next_turn(
    project: Path, settings: Settings
) -> None:
    sonnet, catalog = model(200_000), load_catalog(None)
    with running_server(responder=SessionModel()) as server:
        session = open_session(
            replace(settings, titles=True, title_model=HAIKU, cache="5m"),
            sonnet,
            project,
            approver=None,
            mode="read-only",
            catalog=catalog,
            model_factory=lambda model_id: build_model(model_id, env=server.env(), cache="5m"),
        )
        first = await turn(session, "Step 0: explain the project")
        async with asyncio.timeout(deadline(30)):
            await session.settle()  # the title, named after the first turn
        second = await turn(session, "Step 2: and now the tests")

    (title,) = server.title_bill
    assert server.recorded[1].body is not None and server.recorded[1].body["model"] == "claude-haiku-4-5"
    assert (first.usage.requests, second.usage.requests) == (1, 2)
    assert first.cost == pytest.approx(bill_price(server.bill[0], sonnet))
    assert second.cost == pytest.approx(bill_price(server.bill[1], sonnet) + bill_price(title, catalog.get(HAIKU)))
    assert second.usage.input_tokens == server.bill[1].total_input_tokens + title.total_input_tokens


async def test_a_realistic_session_reads_every_prefix_it_repeats_from_the_cache() -> None:
    """The context-fidelity session (large tool output, edits, a delegate, facts), on Anthropic's cache rules: what
    a request sends the same as an earlier one comes from the cache, so only new input is billed in full."""
    async with asyncio.timeout(deadline(120)):  # liveness only
        session = await run_session(8, "5m", 200_000, "fidelity")

    assert session.missed_share < 0.01, [(i, b.missed_tokens) for i, b in enumerate(session.bill) if b.missed_tokens]
    assert session.cache_share > 0.5  # over its first 8 turns, a 138 KB read and new tool output are much of it
    assert abs(session.cost - session.priced(model(200_000))) <= 0.01 * session.cost
