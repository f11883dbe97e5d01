"""A catalog that overstates a model's window costs at most one rejected request: the window the server states
(or gives away by cutting a request silently) is used for the rest of the session, said once, recorded with
each turn's end, restored on load, resume and fork, and forgotten when the model is switched."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from codling.brain.context.budget import Budget
from codling.brain.context.window import LearnedWindow, may_cut_silently, truncated_window
from codling.brain.events import CompactionStarted, ContextWarning, Event, TurnEnded, Usage
from codling.brain.factory import open_session
from codling.brain.session import ConversationSession
from codling.brain.state import SessionState
from codling.config import Settings
from codling.llm.catalog import ModelInfo
from codling.llm.providers import build_model
from codling.store.header import SessionHeader
from codling.store.ids import new_session_id
from codling.store.index import SessionStore
from codling.store.records import RECORD, TurnEndRecord, dump_record, event_record
from tests.fakes.deadlines import deadline
from tests.fakes.fidelity import run_session
from tests.fakes.openai_server import ErrorReply, OpenAIServer, Reply, running_server

CATALOG = ModelInfo("openai-chat:fake-model", context_limit=32_768, max_output_tokens=16_000)
LEARNED = replace(CATALOG, context_limit=8_192)
SAID = (
    "The server says openai-chat:fake-model's window is 8,192 tokens, not the catalog's 32,768: codling will use "
    "8,192 for the rest of this session."
)
# vLLM's wording: the request asked for 16,000 tokens of answer, more than the server's window leaves.
VLLM_OVERFLOW = ErrorReply(
    400,
    "This model's maximum context length is 8192 tokens. However, you requested 19000 tokens (3000 in the "
    "messages, 16000 in the completion). Please reduce the length of the messages or completion.",
    type="BadRequestError",
)


# --- the rules -------------------------------------------------------------------------------------------------

TRUNCATIONS = [
    ("ollama-default", 4_096, 14_900, 32_768, 4_096),
    ("cut-to-exactly-num_ctx", 4_096, 4_529, 32_768, 4_096),  # just over: an exact power of two gives it away
    ("older-runner-cuts-to-half-or-more", 2_500, 9_000, 32_768, 4_096),
    ("close-to-codlings-count", 7_000, 9_000, 32_768, None),  # tokenizers differ, servers do not cut by 20%
    ("exact-power-of-two-within-the-margin", 4_096, 4_200, 32_768, None),
    ("small-request", 1_100, 2_000, 32_768, None),
    ("not-below-the-window-in-use", 8_000, 20_000, 8_192, None),
    ("too-small-to-be-a-window", 600, 9_000, 32_768, None),  # a cached prefix left out of the count, say
    ("the-request-would-have-fitted", 2_100, 4_000, 32_768, None),
]


@pytest.mark.parametrize(
    ("reported", "estimate", "window", "learned"), [t[1:] for t in TRUNCATIONS], ids=[t[0] for t in TRUNCATIONS]
)
def test_a_report_far_below_codlings_count_gives_the_window_away(
    reported: int, estimate: int, window: int, learned: int | None
) -> None:
    assert truncated_window(reported, estimate, window) == learned


@pytest.mark.parametrize(
    ("model_id", "base_url", "expected"),
    [
        ("ollama:qwen3", "http://localhost:11434/v1", True),
        ("openai-chat:qwen3", "http://127.0.0.1:8080/v1", True),  # llama.cpp, LM Studio, vLLM, a proxy
        ("openai-chat:gpt-5", "https://api.openai.com/v1/", False),
        ("anthropic:claude-sonnet-4-5", "https://api.anthropic.com", False),
        ("openai-chat:qwen3", None, False),
    ],
)
def test_only_servers_that_may_cut_are_read_for_a_cut(model_id: str, base_url: str | None, expected: bool) -> None:
    assert may_cut_silently(model_id, base_url) is expected


def test_the_state_uses_a_learned_window_until_the_model_is_switched(tmp_path: Path) -> None:
    state = SessionState("s", tmp_path, CATALOG)
    assert not state.learn_window(40_000)  # only ever smaller
    assert state.learn_window(8_192)
    assert (state.model, state.catalog_model, state.learned_window) == (
        LEARNED,
        CATALOG,
        LearnedWindow(CATALOG.id, 8_192),
    )
    assert Budget.of(state.model, 0.7) == Budget(8_192, 16_000, 0.7)  # every budget follows
    assert state.learn_window(4_096)
    assert (state.model.context_limit, state.catalog_model) == (4_096, CATALOG)
    state.use_model(CATALOG)  # /model, even to the same model: the catalog's window again
    assert (state.model, state.catalog_model, state.learned_window) == (CATALOG, None, None)


def test_a_recorded_window_is_used_only_for_its_own_model(tmp_path: Path) -> None:
    state = SessionState("s", tmp_path, CATALOG)
    state.use_window(LearnedWindow(CATALOG.id, 8_192))
    assert state.model == LEARNED
    state.use_window(None)
    assert (state.model, state.learned_window) == (CATALOG, None)
    other = ModelInfo("openai-chat:other", context_limit=32_768)
    state.use_model(other)
    state.use_window(LearnedWindow(CATALOG.id, 8_192))  # learned before a switch no turn followed
    assert (state.model, state.learned_window) == (other, None)


def test_a_turn_end_records_the_learned_window_and_reads_it_back() -> None:
    ended = TurnEnded("t1", "end_turn", Usage(10, 5, 1), window=LearnedWindow(CATALOG.id, 8_192))
    record = event_record(ended, "20261122-0b9f2c1d3e4f")
    assert isinstance(record, TurnEndRecord)
    line = json.dumps(dump_record(record))
    assert json.loads(line)["window"] == {"model": CATALOG.id, "tokens": 8_192}
    assert RECORD.validate_json(line).events() == [ended]
    plain = event_record(TurnEnded("t1", "end_turn"), "20261122-0b9f2c1d3e4f")
    assert plain is not None and "window" not in dump_record(plain)  # absent unless learned


# --- a session -------------------------------------------------------------------------------------------------


@pytest.fixture
def server() -> Any:
    with running_server() as s:
        yield s


def session_on(server: OpenAIServer, project: Path, settings: Settings, model: ModelInfo = CATALOG) -> Any:
    return open_session(
        replace(settings, titles=False),
        model,
        project,
        approver=None,
        mode="read-only",
        model_factory=lambda model_id: build_model(model_id, env=server.env()),
    )


async def turn(session: ConversationSession, prompt: str) -> list[Event]:
    async with asyncio.timeout(deadline(20)):  # liveness only
        return [event async for event in session.stream(prompt)]


def windows_said(events: list[Event]) -> list[str]:
    """What the user was told of the window (not the warning that a window of 8k is small for codling)."""
    return [e.message for e in events if isinstance(e, ContextWarning) and e.message.startswith("The server")]


async def test_a_stated_window_is_said_once_and_the_request_made_again_within_it(
    server: OpenAIServer, project: Path, settings: Settings
) -> None:
    session = session_on(server, project, settings)
    server.enqueue(VLLM_OVERFLOW, Reply(text=["Hello."]), Reply(text=["Hello again."]))
    first = await turn(session, "Say hello.")
    second = await turn(session, "Once more.")

    assert windows_said(first) == [SAID]
    assert windows_said(second) == []  # said once
    assert [e for e in first + second if isinstance(e, CompactionStarted)] == []  # nothing needed compacting
    rejected, retried, later = server.requests
    assert rejected["max_completion_tokens"] == 16_000  # the catalog's window left room for all of it
    # The same request, asking for no more than the server's window leaves.
    assert retried["messages"] == rejected["messages"]
    assert 0 < retried["max_completion_tokens"] < 8_192 - 3_000
    assert later["max_completion_tokens"] < 8_192
    ended = [e for e in first + second if isinstance(e, TurnEnded)]
    assert [e.window for e in ended] == [LearnedWindow(CATALOG.id, 8_192)] * 2
    assert [e.error for e in ended] == [False, False]
    assert session.state.model == LEARNED


async def test_the_learned_window_is_restored_on_load_and_fork_and_dropped_by_a_model_switch(
    server: OpenAIServer, project: Path, settings: Settings
) -> None:
    store = SessionStore(settings.home)
    header = SessionHeader(new_session_id(), project, CATALOG.id, "read-only")
    live = session_on(server, project, settings)
    file = store.create(header)
    unsubscribe = live.subscribe(store.recorder(header, file))
    server.enqueue(VLLM_OVERFLOW, Reply(text=["Hello."]))
    await turn(live, "Say hello.")
    await live.stop()
    unsubscribe()
    file.close()

    for stored in (store.read(header.session_id), store.fork(header.session_id, new_session_id())):
        restored = session_on(server, project, settings)  # a new process: the catalog's entry
        restored.restore(stored.events)
        assert (restored.state.model, restored.state.learned_window) == (LEARNED, live.state.learned_window)
        assert restored.context.budget == live.context.budget

    file = store.open(header.session_id)
    live.subscribe(store.recorder(header, file))
    live.set_model(CATALOG)  # the user raised the server's context and picks the model again
    server.enqueue(Reply(text=["Hi."]))
    events = await turn(live, "Say hi.")
    await live.stop()
    file.close()
    assert [e.window for e in events if isinstance(e, TurnEnded)] == [None]
    assert server.requests[-1]["max_completion_tokens"] == 16_000
    restored = session_on(server, project, settings)
    restored.restore(store.read(header.session_id).events)
    assert (restored.state.model, restored.state.learned_window) == (CATALOG, None)


# --- the scripted coding session against a server with a smaller window than the catalog's ------------------------

TURNS = 6


@pytest.mark.parametrize(
    ("window", "catalog"), [(8_192, 32_768), (6_144, 200_000)], ids=["32k-catalog-8k-server", "200k-catalog-6k-server"]
)
async def test_an_overstated_catalog_costs_one_rejected_request(tmp_path: Path, window: int, catalog: int) -> None:
    root = tmp_path / "run"  # the same for both runs: paths are part of every request
    live = await run_session(window, True, restarts=False, turn_count=TURNS, root=root, catalog=catalog)
    restarted = await run_session(window, True, restarts=True, turn_count=TURNS, root=root, catalog=catalog)
    assert (live.rejected, live.truncated) == (1, 0)
    assert live.requests >= TURNS  # every turn was answered
    assert restarted.turn_bodies == live.turn_bodies  # a restored session decides alike


async def test_a_server_that_cuts_silently_is_noticed_once(tmp_path: Path) -> None:
    root = tmp_path / "run"
    live = await run_session(8_192, True, restarts=False, turn_count=TURNS, root=root, catalog=32_768, truncates=True)
    restarted = await run_session(
        8_192, True, restarts=True, turn_count=TURNS, root=root, catalog=32_768, truncates=True
    )
    assert (live.rejected, live.truncated) == (0, 1)
    assert restarted.turn_bodies == live.turn_bodies
