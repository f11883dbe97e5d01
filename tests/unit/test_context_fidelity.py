"""A short version of the fidelity benchmark (scripts/bench.py, section 8): the scripted coding session on an
8,000-token model with a failing summarizer, live and restarted before every turn, over the real provider path
against a server that rejects any request larger than the window."""

from __future__ import annotations

import statistics
from pathlib import Path

from codling.brain.context.budget import Budget
from codling.llm.catalog import ModelInfo
from tests.fakes.fidelity import MAX_OUTPUT, run_session

TURNS = 12


async def test_a_small_window_and_a_failing_summarizer_hold(tmp_path: Path) -> None:
    root = tmp_path / "run"  # the same for both runs: paths are part of every request
    live = await run_session(8_000, False, restarts=False, turn_count=TURNS, root=root)
    restarted = await run_session(8_000, False, restarts=True, turn_count=TURNS, root=root)
    assert live.compactions >= 2  # the session was under pressure
    assert (live.over_budget, live.rejected) == (0, 0)
    assert live.constraints_kept == 1.0
    assert live.facts_kept >= 0.8
    assert restarted.turn_bodies == live.turn_bodies
    # A compaction frees room: the next request holds at most half of what a request may, besides the turn's
    # own prompt (the median).
    half = Budget.of(ModelInfo("m", context_limit=8_000, max_output_tokens=MAX_OUTPUT), 0.7).input_limit // 2
    assert statistics.median(live.compacted_to) <= half
