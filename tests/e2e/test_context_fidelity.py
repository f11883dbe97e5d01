"""Context fidelity under pressure, black-box: the scripted long session (``tests/fakes/long_session.py``) through
a spawned ``codling acp`` on an 8,000-token model whose summarizer always fails, restarted before every other
turn (each restore after two more turns' content: a read, commands, edits, a delegate, a pasted log), against
the same session run live (``tests/fakes/fidelity.py``; ``scripts/bench.py`` runs the 30-turn version).

The first eight turns read a 138 KB file, run commands printing 12–45 KB, edit, write, patch, delegate, paste a
20 KB CI log and state facts and standing constraints. Targets (issue 12): no request over the window, at most
one rejected, every constraint in every later request, and the restarted process sending exactly the requests
the live one sent.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from codling.brain.builtin_turns import prompt_text
from tests.fakes.acp_fidelity import RunSpec, identical_turns, measure, run_session
from tests.fakes.deadlines import deadline
from tests.fakes.long_session import SESSION, LongSessionModel

TURNS = 8
WINDOW = 8_000
MAX_OUTPUT = 1_000


def test_the_responder_follows_the_script_by_content() -> None:
    """The scripted model finds the turn and the step in the request itself, and rejects what does not fit."""
    model = LongSessionModel(window=WINDOW, summarizer="failing")
    first = {
        "messages": [{"role": "system", "content": "You are codling."}, {"role": "user", "content": SESSION[0].prompt}]
    }
    reply = model(first)
    assert [c.name for c in reply.tool_calls] == ["read_file"]  # type: ignore[union-attr]
    assert [c.id for c in reply.tool_calls] == ["t01s0c0"]  # type: ignore[union-attr]
    call = {"id": "t01s0c0", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
    second = {
        "messages": [
            *first["messages"],
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "t01s0c0", "content": "1\tdef greet(name):"},
        ]
    }
    assert model(second).full_text == SESSION[0].reply  # type: ignore[union-attr]
    huge = {"messages": [{"role": "user", "content": SESSION[1].prompt + " word" * WINDOW}]}
    rejected = model(huge)
    assert rejected.status == 400 and rejected.code == "context_length_exceeded"  # type: ignore[union-attr]
    assert [(r.kind, r.turn, r.step, r.rejected) for r in model.log] == [
        ("main", 1, 0, False),
        ("main", 1, 1, False),
        ("main", 2, 0, True),
    ]


def test_the_summarizer_keeps_stated_facts_or_always_fails() -> None:
    transcript = f"### User\n{SESSION[0].prompt}\n\n### Assistant\nRead it.\n\n### User\n{SESSION[1].prompt}"
    body = {
        "messages": [{"role": "system", "content": prompt_text("compact")}, {"role": "user", "content": transcript}]
    }
    summary = LongSessionModel(window=WINDOW, summarizer="working")(body).full_text  # type: ignore[union-attr]
    assert summary.startswith(f"## Goal\n{SESSION[0].prompt}\n")
    assert "- Never touch migrations/.\n- The staging port is 8431.\n- Remember the codeword PELICAN-7.\n" in summary
    failing = LongSessionModel(window=WINDOW, summarizer="failing")
    assert [failing(body).status for _ in range(3)] == [500, 500, 500]  # type: ignore[union-attr]
    assert [r.kind for r in failing.log] == ["summary"] * 3


@pytest.mark.timeout(deadline(120))
async def test_small_window_failing_summarizer_restarted_every_other_turn(tmp_path: Path) -> None:
    root = tmp_path / "run"  # the same for both runs: paths are part of every request
    spec = RunSpec(WINDOW, MAX_OUTPUT, "failing", turns=TURNS)
    live = await run_session(spec, root=root)
    # Every other turn: four processes rather than eight (~18 CPU-s less); each restore still reads every kind
    # of record the session has written by then, and the unit test restores before every turn in process.
    restarted = await run_session(
        RunSpec(WINDOW, MAX_OUTPUT, "failing", turns=TURNS, restart=True, restart_every=2), root=root
    )
    got = measure(restarted)
    same = identical_turns(restarted, live)
    report = f"{got}\nidentical: {same}\nlive: {measure(live)}"
    assert len(restarted.turns) == TURNS and got.pins == 3, report  # the script ran, and stated its pins
    assert {
        "requests over window - max output": got.over_budget,
        "more than one rejected request": got.rejected > 1,
        "pins missing from a later request": got.pins - got.pins_kept,
        "turns whose requests differ from live": same.differing,
    } == {
        "requests over window - max output": 0,
        "more than one rejected request": False,
        "pins missing from a later request": 0,
        "turns whose requests differ from live": (),
    }, report
