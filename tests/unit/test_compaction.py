"""Compaction: the pure pieces, and long scripted sessions on a small-context model."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, UserPromptPart

from codling.brain.context import compaction
from codling.brain.context.budget import Budget
from codling.brain.events import (
    CompactionStarted,
    ContextCompacted,
    Event,
    TextDelta,
    TurnEnded,
    TurnFailed,
    UsageUpdated,
)
from codling.brain.factory import open_session
from codling.brain.sanitize import orphans
from codling.brain.session import ConversationSession
from codling.brain.state import SUMMARY_END, SUMMARY_PREFIX, HistoryEntry
from codling.config import Settings
from codling.llm.catalog import ModelInfo
from codling.llm.tokens import count_tokens
from tests.fakes.scenarios import Call, Fail, Response, Say, Script
from tests.fakes.summarizer import is_summary_request

SMALL = ModelInfo("test:small", context_limit=8_000, max_output_tokens=1_000)
SUMMARY = "## Goal\nThe user is building a parser.\n## Progress and decisions\nThe user's lucky number is 42."


def entry(role: str, text: str) -> HistoryEntry:
    return HistoryEntry.of(role, text)  # type: ignore[arg-type]


def rebuild(entries: list[HistoryEntry], summary: str, user_budget: int) -> list[HistoryEntry]:
    """What a compaction leaves of ``entries``: the kept user messages, then ``summary`` (as compactor.py does)."""
    kept = compaction.kept_user_messages(entries, user_budget)
    return compaction.rebuilt_history([e.text for e in kept], summary)


# -- pure pieces -------------------------------------------------------------------------------------------------


def test_rebuild_keeps_the_first_and_the_recent_user_messages_in_order_then_the_summary() -> None:
    entries = [
        entry("summary", SUMMARY_PREFIX + "an older summary"),
        entry("user", "first request"),
        entry("assistant", "reply one"),
        entry("user", "second " * 50),
        entry("assistant", "reply two"),
        entry("user", "third"),
        entry("assistant", "reply three"),
    ]
    budget = 4 * entries[1].tokens + entries[5].tokens  # room for the first, "third" and a cut "second" would not fit
    rebuilt = rebuild(entries, "new summary", budget)
    assert [(e.role, e.text) for e in rebuilt] == [
        ("user", compaction.EARLIER_REQUEST + "first request"),
        ("user", compaction.EARLIER_REQUEST + "third"),
        ("summary", SUMMARY_PREFIX + "new summary" + SUMMARY_END),
    ]
    # Compacted again, a kept request is labelled once.
    assert rebuild(rebuilt, "newer", 10_000)[0].text == compaction.EARLIER_REQUEST + "first request"


def test_a_pasted_log_is_skipped_and_older_short_messages_are_still_kept() -> None:
    entries = [
        entry("user", "Port the lexer to Rust."),
        entry("user", "Never touch migrations/."),
        entry("user", "the codeword is PELICAN"),
        entry("user", "CI log:\n" + "line of output\n" * 2_000),
        entry("user", "now fix the failing test"),
    ]
    kept = compaction.kept_user_messages(entries, 800)
    assert [e.text for e in kept] == [
        "Port the lexer to Rust.",
        "Never touch migrations/.",
        "the codeword is PELICAN",
        "now fix the failing test",
    ]


def test_the_message_at_the_budgets_edge_is_cut_and_the_first_request_always_stays() -> None:
    first = entry("user", "Build the importer: " + "requirement " * 400)
    middle = entry("user", "more context " * 75)
    last = entry("user", "next step " * 100)
    kept = compaction.kept_user_messages([first, middle, last], 400)
    assert kept[2] == last
    assert kept[0].text.startswith("Build the importer:") and compaction.CUT_NOTE in kept[0].text
    assert kept[1].text.startswith("more context") and compaction.CUT_NOTE in kept[1].text
    assert kept[1].text.endswith("more context ")  # head and tail around the note
    assert sum(e.tokens for e in kept) <= 400


def test_a_message_crossing_the_edge_with_too_little_room_is_skipped_and_older_short_ones_still_come() -> None:
    first = entry("user", "Port the lexer.")
    short = entry("user", "use tabs")
    crossing = entry("user", "explain " * 70)  # under half the budget, but more than is left
    recent = entry("user", "recent " * 150)
    budget = first.tokens + recent.tokens + compaction.MIN_CUT_TOKENS - 1  # "use tabs" fits, "explain" is not cut
    assert compaction.kept_user_messages([first, short, crossing, recent], budget) == [first, short, recent]


def test_a_huge_first_request_is_cut_to_fit_and_kept_when_it_is_the_only_one() -> None:
    first = entry("user", "Requirements:\n" + "the importer must handle CSV and JSON\n" * 1_500)  # ~50 KB
    (kept,) = compaction.kept_user_messages([first, entry("assistant", "ok")], 300)
    assert kept.tokens <= 300 and kept.text.startswith("Requirements:") and compaction.CUT_NOTE in kept.text
    assert compaction.kept_user_messages([entry("assistant", "hi")], 300) == []


def test_kept_user_messages_hold_their_rules_on_random_histories() -> None:
    rng = random.Random(12)
    words = ["fix", "the", "parser", "never", "touch", "CI", "log:", "é", "日本", "{", '"x"', "\n", "\t", "->"]
    for _ in range(60):
        entries = [
            entry(rng.choice(["user", "user", "assistant"]), f"m{i}: " + " ".join(rng.choices(words, k=size)))
            for i, size in enumerate(rng.choices([3, 30, 300, 3_000, 15_000], weights=[4, 4, 3, 1, 1], k=25))
        ]
        budget = rng.choice([256, 400, 800, 2_000, 5_000])
        kept = compaction.kept_user_messages(entries, budget)
        users = [e for e in entries if e.role == "user"]
        assert sum(e.tokens for e in kept) <= budget
        assert not users or kept[0].text.startswith(users[0].text[:20])  # the first request, whole or cut
        order = [int(e.text.split(":")[0][1:]) for e in kept]
        assert order == sorted(set(order))  # chronological, each once
        whole = [e for e in kept if e in users]
        assert len(kept) - len(whole) <= 2  # only the first request and the message at the edge are ever cut


def test_earlier_summaries_are_never_kept_as_user_messages() -> None:
    entries = [entry("summary", SUMMARY_PREFIX + "old"), entry("assistant", "a")]
    assert [e.role for e in rebuild(entries, "s", 10_000)] == ["summary"]
    assert rebuild(entries, "s", 10_000)[0].text == SUMMARY_PREFIX + "s" + SUMMARY_END


def test_kept_user_budget_scales_down_for_small_windows() -> None:
    assert Budget(400_000, 32_000, 0.7).kept_user == 20_000
    assert Budget(32_000, 4_000, 0.7).kept_user == 2_560
    assert Budget(1_000, 500, 0.7).kept_user == 256


def test_compaction_input_is_bounded_capped_and_keeps_the_newest() -> None:
    entries = [entry("user", f"message {i} " + "word " * 3_000) for i in range(20)]
    text = compaction.compaction_input(entries, budget=10_000, cap=2_000)
    assert count_tokens(text) <= 10_000
    assert "message 19" in text and "message 0 " not in text
    assert text.startswith("[16 older messages were left out to fit.]")
    assert "tokens trimmed" in text


def test_compaction_input_a_small_history_whole() -> None:
    entries = [entry("user", "fix the parser"), entry("assistant", "Fixed."), entry("summary", "earlier")]
    assert compaction.compaction_input(entries, 1_000) == (
        "### User\nfix the parser\n\n### Assistant\nFixed.\n\n### Earlier summary\nearlier"
    )


def test_a_shrunk_transcript_fits_its_budget_and_keeps_the_newest_messages() -> None:
    rng = random.Random(7)
    entries = [
        entry(rng.choice(["user", "assistant"]), f"message {i}: " + 'log line {x} "é"\n' * rng.choice([5, 200, 4_000]))
        for i in range(59)
    ]
    entries.append(entry("user", "message 59: CI log\n" + "FAILED test_x\n" * 3_000))  # the newest is a paste
    budget = compaction.input_budget(4_000, 1_000)
    sizes = []
    while True:
        text = compaction.compaction_input(entries, budget)
        assert count_tokens(text) <= budget
        assert "message 59:" in text  # the newest always has room, capped to fit
        sizes.append(budget)
        if compaction.shrink(budget) == budget:
            break
        budget = compaction.shrink(budget)
    assert sizes == [1_200, 720, 500]
    for budget in (100, 250, 999, 3_000, 30_000):
        assert count_tokens(compaction.compaction_input(entries, budget)) <= budget


def test_shrink_takes_sixty_percent_down_to_a_floor() -> None:
    assert [compaction.shrink(b) for b in (10_000, 1_000, 700, 500, 300)] == [6_000, 600, 500, 500, 300]


@pytest.mark.parametrize(
    ("summary", "ok"),
    [
        (None, False),
        ("", False),
        ("ok", False),
        ("I'm sorry, I can't help with that request at all.", False),
        (SUMMARY, True),
    ],
)
def test_usable(summary: str | None, ok: bool) -> None:
    assert compaction.usable(summary) is ok


TRANSCRIPT = (
    "### User\nPort the lexer in src/lexer.py to a table.\n### Assistant\nRead src/lexer.py; TOKENS has NUM, ID."
)


@pytest.mark.parametrize(
    ("summary", "ok"),
    [
        (
            "## Goal\nPort the lexer (src/lexer.py) to a table-driven design.\n## State\n- TOKENS holds NUM and ID.",
            True,
        ),
        ("asdf qwer zxcv " * 20, False),  # one phrase repeated
        ("Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt.", False),
        ("#### ---- 1234 5678 !!!! ???? .... ,,,, ;;;; ::::", False),  # no words at all
    ],
)
def test_garbage_is_not_a_summary(summary: str, ok: bool) -> None:
    assert compaction.usable(summary, TRANSCRIPT) is ok


# -- scripted sessions ---------------------------------------------------------------------------------------


def responder(summary: Callable[[list[ModelMessage]], Response]) -> Callable[[list[ModelMessage]], Response]:
    def respond(messages: list[ModelMessage]) -> Response:
        return summary(messages) if is_summary_request(messages) else [Say("ok")]

    return respond


def small_session(script: Script, project: Path, settings: Settings, model: ModelInfo = SMALL) -> ConversationSession:
    return open_session(settings, model, project, approver=None, mode="yolo", model_factory=script.factory())


async def events_of(session: ConversationSession, prompt: str) -> list[Event]:
    return [e async for e in session.stream(prompt)]


def user_texts(messages: list[ModelMessage]) -> list[str]:
    return [
        str(p.content)
        for m in messages
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, UserPromptPart)
    ]


async def test_a_long_session_compacts_past_the_threshold_and_remembers(project: Path, settings: Settings) -> None:
    script = Script([], fallback=responder(lambda _m: [Say(SUMMARY)]))
    session = small_session(script, project, settings)
    await session.run("My lucky number is 42. Remember it.")
    padding = "Here is some context about the parser. " * 120  # ~1,000 tokens a turn
    compacted: list[ContextCompacted] = []
    for i in range(8):
        events = await events_of(session, f"turn {i}: {padding}")
        compacted += [e for e in events if isinstance(e, ContextCompacted)]
        usage = [e for e in events if isinstance(e, UsageUpdated)][-1]
        assert usage.size == SMALL.context_limit
        assert usage.used == session.context.context_used()
    assert compacted, "the session never compacted"
    first = compacted[0]
    assert first.reason == "threshold" and not first.fallback
    assert first.tokens_after < first.tokens_before
    summary_requests = [r for r in script.requests if is_summary_request(r)]
    assert "My lucky number is 42." in user_texts(summary_requests[0])[0]
    # The next ordinary request carries the summary, not the old replies.
    after = script.requests[script.requests.index(summary_requests[0]) + 1]
    texts = user_texts(after)
    assert any(SUMMARY_PREFIX in t and "lucky number is 42" in t for t in texts)
    assert all(c.tokens_after < compaction.DEFAULT_THRESHOLD * SMALL.context_limit for c in compacted)
    for request in script.requests:
        assert orphans(request) == []


async def test_failing_summarizer_falls_back_and_the_turn_goes_on(project: Path, settings: Settings) -> None:
    script = Script([], fallback=responder(lambda _m: [Fail(ModelHTTPError(500, "test:small", {"message": "down"}))]))
    session = small_session(script, project, settings)
    await session.run("please rename greet to welcome " + "x " * 2_000)
    events = await events_of(session, "next step " + "y " * 2_000)
    (done,) = [e for e in events if isinstance(e, ContextCompacted)]
    assert done.fallback
    assert "please rename greet to welcome" in done.summary
    assert isinstance(events[-1], TurnEnded) and not events[-1].error
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "ok"


async def test_junk_summary_is_replaced_by_the_fallback(project: Path, settings: Settings) -> None:
    script = Script([], fallback=responder(lambda _m: [Say("ok")]))
    session = small_session(script, project, settings)
    await session.run("first request " + "x " * 2_500)
    events = await events_of(session, "/compact")
    (done,) = [e for e in events if isinstance(e, ContextCompacted)]
    assert done.fallback and done.reason == "command"


async def test_compact_command_uses_instructions_and_stays_out_of_the_history(
    project: Path, settings: Settings
) -> None:
    script = Script([], fallback=responder(lambda _m: [Say(SUMMARY)]))
    session = small_session(script, project, settings)
    await session.run("remember the API notes")
    events = await events_of(session, "/compact keep the API notes verbatim")
    kinds = [type(e).__name__ for e in events]
    assert kinds == [
        "TurnStarted",
        "CompactionStarted",
        "ContextCompacted",
        "UsageUpdated",
        "UsageUpdated",
        "TurnEnded",
    ]
    assert "keep the API notes verbatim" in user_texts(script.requests[-1])[-1]
    assert [e.role for e in session.state.entries] == ["user", "summary"]
    # Kept, and labelled as what it is: not an order given now.
    assert session.state.entries[0].text == compaction.EARLIER_REQUEST + "remember the API notes"


async def test_compact_with_nothing_to_compact_says_so(project: Path, settings: Settings) -> None:
    session = small_session(Script([]), project, settings)
    result = await session.run("/compact")
    assert result.text == "There is nothing to compact yet."


async def test_provider_overflow_compacts_and_retries_once(project: Path, settings: Settings) -> None:
    overflow = ModelHTTPError(
        400, "test:small", {"message": "maximum context length exceeded", "code": "context_length_exceeded"}
    )
    script = Script([[Say("first answer")], [Fail(overflow)], [Say(SUMMARY)], [Say("recovered")]])
    session = small_session(script, project, settings, ModelInfo("test:big", context_limit=1_000_000))
    await session.run("hello")
    events = await events_of(session, "another question")
    started = [e for e in events if isinstance(e, CompactionStarted)]
    assert [e.reason for e in started] == ["overflow"]
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "recovered"
    assert not any(isinstance(e, TurnFailed) for e in events)


async def test_overflow_twice_ends_the_turn_with_a_clear_error(project: Path, settings: Settings) -> None:
    overflow = ModelHTTPError(400, "test:small", {"message": "This model's maximum context length is 8192 tokens"})
    script = Script([[Say("first answer")], [Fail(overflow)], [Say(SUMMARY)], [Fail(overflow)], [Say("fine again")]])
    session = small_session(script, project, settings, ModelInfo("test:big", context_limit=1_000_000))
    await session.run("hello")
    result = await session.run("too big")
    assert result.error is not None and "still too long" in result.error
    assert (await session.run("small")).text == "fine again"


async def test_no_orphan_tool_calls_in_any_request(project: Path, settings: Settings) -> None:
    script = Script(
        [
            [Call("list_files", {}, "a"), Call("read_file", {"path": "src/app.py"}, "b")],
            [Call("run_command", {"command": "echo hi"}, "c")],
            [Say("done")],
            [Say("second turn")],
        ]
    )
    session = small_session(script, project, settings)
    await session.run("explore")
    await session.run("again")
    assert len(script.requests) == 4
    for request in script.requests:
        assert orphans(request) == []
    # Across turns the history is text: the second turn's request has no tool parts at all.
    assert all(isinstance(m, ModelRequest | ModelResponse) for m in script.requests[3])
    assert not any(p.part_kind in ("tool-call", "tool-return") for m in script.requests[3][:-1] for p in m.parts)


# -- the compaction point before a turn ----------------------------------------------------------------------

BOUNDARY_MODEL = ModelInfo("test:boundary", context_limit=100_000, max_output_tokens=10_000)
BOUNDARY_THRESHOLD = 0.5
COMPACT_AT = 42_500
"""The compaction point of BOUNDARY_MODEL at BOUNDARY_THRESHOLD, worked out by hand: the input limit is the window
less the answer's room (10,000) and the 5% safety margin (5,000), 85,000 tokens; half of that is 42,500."""


def test_the_compaction_point_is_the_threshold_share_of_the_input_limit() -> None:
    budget = Budget.of(BOUNDARY_MODEL, BOUNDARY_THRESHOLD)
    assert (budget.input_limit, budget.compact_at) == (85_000, COMPACT_AT)


@pytest.mark.parametrize(
    ("next_request", "compacts"),
    [(COMPACT_AT - 1, False), (COMPACT_AT, False), (COMPACT_AT + 1, True)],
    ids=["just-below", "exactly-at", "just-above"],
)
async def test_a_turn_compacts_first_only_once_its_request_passes_the_session_s_threshold(
    project: Path, settings: Settings, next_request: int, compacts: bool
) -> None:
    """The session's own ``compact_threshold`` (not the default 0.7) sets the point; a request exactly at it
    still fits, one token more compacts first."""
    script = Script([], fallback=responder(lambda _m: [Say(SUMMARY)]))
    session = small_session(
        script, project, replace(settings, compact_threshold=BOUNDARY_THRESHOLD), model=BOUNDARY_MODEL
    )
    await session.run("Notes on the parser:\n" + "the parser keeps its state in one table. " * 2_500)
    state = session.state
    budget = session.context.budget
    # Compacting would leave much less than there is, so only the compaction point decides.
    assert state.history_tokens > (budget.kept_user + budget.summary) * 1.25
    prompt = "go on"
    pending = count_tokens(prompt)
    # The provider's count of the context (as a turn's end records it) puts the next request at next_request;
    # codling's own estimate is below it, so the provider's count is what is compared.
    assert session.context.overhead() + state.history_tokens + pending < COMPACT_AT - 1
    state.reported_input_tokens = next_request - pending
    events = await events_of(session, prompt)
    (turn,) = [e.turn_id for e in events if isinstance(e, TurnEnded)]
    started = [replace(e, call_id="") for e in events if isinstance(e, CompactionStarted)]
    if compacts:
        assert started == [CompactionStarted(turn, "", next_request, "threshold")]
        assert [e.role for e in state.entries] == ["user", "summary", "user", "assistant"]
    else:
        assert started == []
        assert [e.role for e in state.entries] == ["user", "assistant", "user", "assistant"]
    assert isinstance(events[-1], TurnEnded) and not events[-1].error
