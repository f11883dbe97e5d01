"""Notices and compaction updates (the newer protocol) instead of tool-call cards, for a client that advertised
them: provider retries, context warnings, MCP server failures and compaction, live and on session/load, each
against a client that did not advertise it (the cards as before), every raw update valid in the newest schema."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from acp import PROTOCOL_VERSION, helpers
from acp.schema import McpServerStdio
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.messages import ModelMessage

from codling.acp.newer import ClientExtras, CompactionUpdate, Notice, wire
from codling.acp.notices import RETRY_HINT, compaction_update, headline
from codling.acp.server import CodlingAgent
from codling.acp.translate import ToolCards
from codling.brain.events import CompactionStarted, ContextCompacted, TurnEnded, TurnFailed
from codling.config import Settings
from tests.fakes.acp_client import RecordingClient, connected
from tests.fakes.deadlines import deadline
from tests.fakes.npm_acp import schema_violations
from tests.fakes.scenarios import Fail, Gate, Say, Script, Until
from tests.fakes.summarizer import is_summary_request

pytestmark = pytest.mark.timeout(deadline(120))

NEWER: dict[str, Any] = {"notices": {}, "compaction": {}}
COMPACTION_ONLY: dict[str, Any] = {"compaction": {}}
SMALL_MODEL = "openai-chat:small-scripted"
SECRET = "sk-notice-0123456789abcdef"
SUMMARY = "## Goal\nA parser.\n## User constraints and preferences\nThe user's lucky number is 42."
SMALL_WINDOW = "openai-chat:small-scripted's window (4,000 tokens) is small for codling"


def settings_for(home: Path, model: str = "openai-chat:scripted") -> Settings:
    (home / "models.json").write_text(
        json.dumps({"models": {SMALL_MODEL: {"context_limit": 4000, "max_output_tokens": 1000}}})
    )
    return Settings(home=home, mode="yolo", env={"CODLING_HOME": str(home), "CODLING_MODEL": model})


def agent_for(settings: Settings, script: Script) -> CodlingAgent:
    return CodlingAgent(settings_loader=lambda: settings, model_factory=script.factory(), warm_up=False)


def summarizing(messages: list[ModelMessage]) -> list[Any]:
    return [Say(SUMMARY)] if is_summary_request(messages) else [Say("ok")]


def cards(client: RecordingClient) -> list[Any]:
    return [u for _, u in client.updates if u.session_update in ("tool_call", "tool_call_update")]


def raw_violations(client: RecordingClient) -> list[str]:
    """What the newest ACP schema finds wrong in the raw updates the client received, as they came."""
    traffic = [
        {
            "from": "agent",
            "message": {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": s, "update": u}},
        }
        for s, u in client.newer_updates
    ]
    return schema_violations(traffic)


# -- provider retries --------------------------------------------------------------------------------------


async def test_a_retry_is_a_notice_for_a_client_that_presents_notices(home: Path, project: Path) -> None:
    busy = ModelHTTPError(429, "scripted", {"message": "slow down"}, retry_after=0.01)
    title = "Model provider busy (HTTP 429): retrying in 0.01 s (attempt 2 of 3)"
    shown, sids = [], []
    for capabilities in (NEWER, COMPACTION_ONLY):
        client = RecordingClient()
        agent = agent_for(settings_for(home), Script([[Fail(busy)], [Say("fine now")]]))
        async with connected(agent, client, session_capabilities=capabilities) as conn:
            await conn.initialize(protocol_version=PROTOCOL_VERSION)
            sid = (await conn.new_session(cwd=str(project))).session_id
            response = await conn.prompt(session_id=sid, prompt=[helpers.text_block("first")])
        assert response.stop_reason == "end_turn" and client.agent_text() == "fine now"
        shown.append(client)
        sids.append(sid)
    notices, plain = shown
    notice = {"sessionUpdate": "notice", "severity": "warning", "title": title, "description": RETRY_HINT}
    assert notices.newer_updates == [(sids[0], notice)] and cards(notices) == []
    assert raw_violations(notices) == []
    # A client that did not advertise notices: the card, as before (its wait's start, then its end).
    start, end = cards(plain)
    call_id = start.tool_call_id
    assert start == helpers.start_tool_call(call_id, title, kind="other", status="in_progress")
    assert end == helpers.update_tool_call(call_id, status="completed")
    assert plain.newer_updates == []


# -- MCP server failures -----------------------------------------------------------------------------------


async def test_an_mcp_server_that_does_not_start_is_a_notice_with_secrets_redacted(
    home: Path, project: Path, tmp_path: Path
) -> None:
    # The failure names the server's command, here a path holding the provider's key: redacted as a card is.
    settings = settings_for(home)
    settings = replace(settings, env={**settings.env, "OPENAI_API_KEY": SECRET})
    broken = McpServerStdio(name="broken", command=str(tmp_path / SECRET / "server"), args=[], env=[])
    shown = []
    for capabilities in (NEWER, COMPACTION_ONLY):
        client = RecordingClient()
        async with connected(agent_for(settings, Script([])), client, session_capabilities=capabilities) as conn:
            await conn.initialize(protocol_version=PROTOCOL_VERSION)
            await conn.new_session(cwd=str(project), mcp_servers=[broken])
            # Between turns: the failure reaches the client as soon as the server gives up.
            await client.wait_for("notice" if capabilities is NEWER else "tool_call", timeout=deadline(30))
        shown.append(client)
    notices, plain = shown
    ((_, notice),) = notices.newer_updates
    assert notice["sessionUpdate"] == "notice" and notice["severity"] == "warning"
    assert notice["title"].startswith("MCP server broken (") and "did not start" in notice["title"]
    assert notice["description"]  # the error's own words
    assert SECRET not in json.dumps(notice) and "[redacted]" in notice["title"]
    assert cards(notices) == [] and raw_violations(notices) == []
    (card,) = cards(plain)
    detail = [helpers.tool_content(helpers.text_block(notice["description"]))]
    assert card == helpers.start_tool_call(
        card.tool_call_id, notice["title"], kind="other", status="failed", content=detail
    )


# -- context warnings and compaction ---------------------------------------------------------------------


async def run_and_compact(settings: Settings, project: Path, client: RecordingClient, capabilities: Any) -> str:
    """A session on a model whose window is small for codling (a context warning), compacted by /compact."""
    async with connected(
        agent_for(settings, Script([], fallback=summarizing)), client, session_capabilities=capabilities
    ) as conn:
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        sid = (await conn.new_session(cwd=str(project))).session_id
        await conn.prompt(session_id=sid, prompt=[helpers.text_block("My lucky number is 42.")])
        await conn.prompt(session_id=sid, prompt=[helpers.text_block("/compact")])
    return sid


async def load(settings: Settings, project: Path, sid: str, capabilities: Any) -> RecordingClient:
    client = RecordingClient()
    async with connected(agent_for(settings, Script([])), client, session_capabilities=capabilities) as conn:
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        await conn.load_session(cwd=str(project), session_id=sid)
    return client


async def test_a_client_that_advertised_them_gets_a_compaction_update_and_a_warning_notice(
    home: Path, project: Path
) -> None:
    settings = settings_for(home, SMALL_MODEL)
    client = RecordingClient()
    sid = await run_and_compact(settings, project, client, NEWER)
    assert cards(client) == []  # the turns only talked; nothing else is a tool call
    (warning,) = client.of_kind("notice")
    assert warning["severity"] == "warning" and warning["title"] == SMALL_WINDOW
    assert warning["description"].startswith("the system prompt, tool definitions and session notes alone take")
    started, completed = client.of_kind("compaction_update")
    compaction_id = started["compactionId"]
    assert started == {"sessionUpdate": "compaction_update", "compactionId": compaction_id, "status": "in_progress"}
    counts = completed["_meta"]["codling"]
    assert completed == {
        "sessionUpdate": "compaction_update",
        "compactionId": compaction_id,
        "status": "completed",
        "summary": [{"type": "text", "text": SUMMARY}],
        "_meta": {
            "codling": {"tokensBefore": counts["tokensBefore"], "tokensAfter": counts["tokensAfter"], "fallback": False}
        },
    }
    assert counts["tokensBefore"] > 0 and counts["tokensAfter"] > 0  # (a summary of one exchange is no shorter)
    assert all(SUMMARY not in u.content.text for u in client.of_kind("agent_message_chunk"))  # not a message
    assert raw_violations(client) == []

    # Reopened by a client that advertised them: the compaction once, completed, where it happened; no notice
    # (notices are not history).
    again = await load(settings, project, sid, NEWER)
    assert [u for _, u in again.newer_updates] == [completed] and cards(again) == []
    assert raw_violations(again) == []
    kinds = [u.session_update for u in again.conversation()]
    assert kinds == ["user_message_chunk", "agent_message_chunk", "user_message_chunk"]
    assert [s for s, _ in again.newer_updates] == [sid]
    # ... and by one that did not: the compaction's card, as before.
    plain = await load(settings, project, sid, {})
    title = f"Compacted context: {counts['tokensBefore']:,} → {counts['tokensAfter']:,} tokens"
    assert cards(plain) == [
        helpers.start_tool_call(
            compaction_id, f"Compacting context ({counts['tokensBefore']:,} tokens)", kind="think", status="in_progress"
        ),
        helpers.update_tool_call(
            compaction_id,
            title=title,
            status="completed",
            content=[helpers.tool_content(helpers.text_block(SUMMARY))],
        ),
    ]
    assert plain.newer_updates == []


async def test_a_client_that_did_not_advertise_them_gets_the_cards(home: Path, project: Path) -> None:
    client = RecordingClient()
    await run_and_compact(settings_for(home, SMALL_MODEL), project, client, {})
    warning, compacting, compacted = cards(client)
    assert warning.title.startswith(SMALL_WINDOW + ": the system prompt")
    assert warning == helpers.start_tool_call(warning.tool_call_id, warning.title, kind="other", status="completed")
    call_id = compacting.tool_call_id
    assert compacting == helpers.start_tool_call(call_id, compacting.title, kind="think", status="in_progress")
    assert compacted == helpers.update_tool_call(
        call_id,
        title=compacted.title,
        status="completed",
        content=[helpers.tool_content(helpers.text_block(SUMMARY))],
    )
    assert compacting.title.startswith("Compacting context (") and compacted.title.startswith("Compacted context: ")
    assert client.newer_updates == []


async def test_each_capability_stands_alone(home: Path, project: Path) -> None:
    client = RecordingClient()
    await run_and_compact(settings_for(home, SMALL_MODEL), project, client, {"notices": {}})
    assert [u["title"] for u in client.of_kind("notice")] == [SMALL_WINDOW]
    compacting, compacted = cards(client)  # no compaction updates without ``session.compaction``: the cards
    assert (compacting.status, compacted.status) == ("in_progress", "completed")
    assert compacted.tool_call_id == compacting.tool_call_id and client.of_kind("compaction_update") == []


async def test_a_cancelled_compaction_ends_cancelled(home: Path, project: Path) -> None:
    gate = Gate()

    def respond(messages: list[ModelMessage]) -> list[Any]:
        return [Until(gate), Say(SUMMARY)] if is_summary_request(messages) else [Say("ok")]

    client = RecordingClient()
    agent = agent_for(settings_for(home), Script([], fallback=respond))
    async with connected(agent, client, session_capabilities={"compaction": {}}) as conn:
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        sid = (await conn.new_session(cwd=str(project))).session_id
        await conn.prompt(session_id=sid, prompt=[helpers.text_block("hello")])
        compacting = asyncio.create_task(conn.prompt(session_id=sid, prompt=[helpers.text_block("/compact")]))
        await gate.arrival(10)
        await conn.cancel(session_id=sid)
        assert (await compacting).stop_reason == "cancelled"
    started, ended = client.of_kind("compaction_update")
    assert ended == {
        "sessionUpdate": "compaction_update",
        "compactionId": started["compactionId"],
        "status": "cancelled",
        "error": "cancelled: the history was not compacted",
    }
    assert cards(client) == [] and raw_violations(client) == []


# -- the pieces --------------------------------------------------------------------------------------------


def test_a_notice_title_is_the_message_s_first_clause() -> None:
    assert headline("Context is full; cut it. More.") == ("Context is full", "cut it. More.")
    assert headline("openai-chat:x's window is small: it takes 2.5 s") == (
        "openai-chat:x's window is small",
        "it takes 2.5 s",
    )
    assert headline("One line.") == ("One line.", None)
    assert headline(": nothing first") == (": nothing first", None)  # never an empty title (the schema forbids one)


def test_absent_fields_are_left_out_of_the_json() -> None:
    assert wire(Notice("warning", "MCP server x stopped")) == {
        "sessionUpdate": "notice",
        "severity": "warning",
        "title": "MCP server x stopped",
    }
    assert wire(CompactionUpdate("c", "cancelled", error="stopped")) == {
        "sessionUpdate": "compaction_update",
        "compactionId": "c",
        "status": "cancelled",
        "error": "stopped",
    }


def test_the_breaker_s_note_comes_before_the_summary() -> None:
    def compacted(**how: Any) -> ContextCompacted:
        return ContextCompacted("t", "c", "the summary", (), 900, 300, **how)

    assert compaction_update(compacted(fallback=False), replaying=False) == CompactionUpdate(
        "c", "completed", summary=("the summary",), tokens_before=900, tokens_after=300, fallback=False
    )

    def summary_of(event: ContextCompacted) -> tuple[str, ...] | None:
        update = compaction_update(event, replaying=True)
        return update.summary if update is not None else None

    assert summary_of(compacted(fallback=True)) == ("the summary",)  # (a fallback summary says what it is)
    skipped = compacted(fallback=True, skipped=True, note="The summarizer failed 2 times in a row")
    assert summary_of(skipped) == ("The summarizer failed 2 times in a row.", "the summary")
    assert compaction_update(CompactionStarted("t", "c", 900, "command"), replaying=True) is None


def test_a_compaction_the_turn_left_open_is_ended_with_the_turn() -> None:
    cards = ToolCards(extras=ClientExtras(compaction=True))
    assert cards.translate(CompactionStarted("t", "c1", 900, "threshold")) == [CompactionUpdate("c1", "in_progress")]
    assert cards.translate(TurnFailed("t", "the provider is down")) == [
        CompactionUpdate("c1", "failed", error="The turn failed before the compaction finished: the provider is down")
    ]
    assert cards.translate(TurnEnded("t", "end_turn", error=True)) == []  # ended once
    cards.translate(CompactionStarted("t2", "c2", 900, "threshold"))
    assert cards.translate(TurnEnded("t2", "cancelled")) == [
        CompactionUpdate("c2", "cancelled", error="The turn was cancelled: the history was not compacted.")
    ]
    # Without the capability: the card, left to the turn as before.
    plain = ToolCards()
    assert [u.session_update for u in plain.translate(CompactionStarted("t", "c3", 900, "threshold"))] == ["tool_call"]
    assert plain.translate(TurnFailed("t", "down")) == []
