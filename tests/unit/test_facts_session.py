"""The planted-facts session (tests/fakes/facts_session.py; scripts/bench.py reports the 100-turn version): the
script plants each value in one turn only, and the harness measures what it should. A short schedule on an
8,000-token model: the facts are planted in turns 2–28 and each is asked 15 turns later, after several
compactions. A working summarizer must keep every fact; a failing one nine in ten over 100 turns at 16k (issue
28's target; the bench reports 8k too)."""

from __future__ import annotations

import json

import pytest

from tests.fakes.deadlines import deadline
from tests.fakes.facts_session import (
    FACTS,
    MODES,
    ask_gap,
    garbage,
    good_summary,
    plant_turn,
    repo_files,
    run_facts_session,
    script,
    table,
)

TURNS = 44


def test_each_value_is_planted_once_and_asked_60_turns_later() -> None:
    turns = script(100)
    assert ask_gap(100) >= 60
    assert len(FACTS) >= 12
    assert {fact.where for fact in FACTS} == {"user", "tool", "assistant"}
    for index, fact in enumerate(FACTS):
        for number, turn in enumerate(turns, start=1):
            said = "\n".join([turn.prompt, turn.reply, *(json.dumps(c.arguments) for c in turn.calls)])
            planted = number == plant_turn(index)
            assert bool(fact.regex.search(said)) == (planted and fact.where != "tool"), (fact.key, number)
        holding = {path for path, text in repo_files().items() if fact.regex.search(text)}
        assert holding == ({fact.source} if fact.where == "tool" else set()), fact.key
        assert turns[plant_turn(index) + ask_gap(100) - 1].prompt == fact.ask


def test_the_working_summarizer_keeps_what_its_transcript_states() -> None:
    transcript = (
        "### User\nWe are porting the exporter. Staging DB: db-7.internal:5432. Read the settings.\n\n"
        "### Assistant\nRead them. We'll use msgpack for the cache from here on.\n\n[Tool calls in this turn]\n"
        "- Read src/settings.py (done):\n    Read src/settings.py: lines 1-3 of 3\n         1\tPOOL_SIZE = 9\n\n"
        "---\nKeep the summary under about 400 words."
    )
    summary = good_summary(transcript)
    for value in ("db-7.internal:5432", "msgpack", "POOL_SIZE = 9", "porting the exporter"):
        assert value in summary
    assert len(garbage(1)) >= 200
    assert not any(ch.isdigit() for ch in garbage(1))
    assert set(MODES) == {"working", "failing", "empty", "garbage", "hanging"}


@pytest.mark.timeout(deadline(180))  # about 6 s of CPU; a busy machine may stretch it
async def test_a_short_session_runs_and_a_working_summarizer_keeps_every_fact() -> None:
    # A failing summarizer's session (every compaction a fallback) is the 100-turn test's below.
    working = await run_facts_session(8_000, "working", TURNS)
    print("\n" + table([working]))
    assert working.compactions >= 3  # the session was under pressure
    assert working.rejected == 0
    assert len(working.kept) + len(working.lost) == len(FACTS)
    assert working.fallbacks == 0
    assert working.lost == ()


@pytest.mark.timeout(deadline(240))  # about 10 s of CPU; a busy machine may stretch it
async def test_a_failing_summarizer_keeps_nine_facts_in_ten_over_100_turns_at_16k() -> None:
    # Issue 28's target for a summary assembled without the model: facts planted in prompts, tool results and
    # replies, asked 71 turns later. (At 8k the fallback has about 550 tokens and keeps 11 of 14: the bench
    # reports it.)
    failing = await run_facts_session(16_000, "failing")
    assert failing.fallbacks == failing.compactions >= 5
    assert failing.rejected == 0
    assert len(failing.kept) + len(failing.lost) == len(FACTS)
    assert failing.share >= 0.9, failing.lost
