"""The fallback summary: bounded, built from what the session keeps, never from an earlier summary."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.messages import ModelMessage

from codling.brain.context import compaction
from codling.brain.context.budget import Budget
from codling.brain.context.fallback import NOTE, FallbackInput, fallback_summary, share_out
from codling.brain.events import ContextCompacted
from codling.brain.factory import open_session
from codling.config import Settings
from codling.llm.catalog import ModelInfo
from codling.llm.tokens import count_tokens
from codling.vocabulary import PlanStep
from tests.fakes.scenarios import Call, Fail, Response, Say, Script
from tests.fakes.summarizer import is_summary_request

P = Path("/p")
NOTE_TEXT = (
    "## Note\nThis summary was assembled without the model (the summarizer was unavailable): the user's pinned "
    "instructions, the facts and decisions of the conversation, what each turn did, the plan and the latest "
    "exchange."
)


def test_a_small_session_gives_every_section_whole() -> None:
    source = FallbackInput(
        pins=["Never touch migrations/."],
        turns_recent=["Turn 2 — request: fix the test\nReply: Fixed."],
        turns_older=["Turn 1: look around — It is small."],
        plan=(PlanStep("Fix the parser", "completed"), PlanStep("Update the docs", "in_progress")),
        recent_files=(P / "src/parser.py",),
        delegate_notes={"reviewer": "Line 3 divides by zero."},
        first_request="Port the lexer.",
        last_request="fix the test",
        last_reply="Fixed; the suite passes.",
        cwd=P,
    )
    assert fallback_summary(source, 2_000) == "\n\n".join(
        [
            NOTE,
            "## Pinned instructions\n- Never touch migrations/.",
            "## First request\nPort the lexer.",
            "## Latest request\nfix the test",
            "## What each turn did\nTurn 1: look around — It is small.\nTurn 2 — request: fix the test\nReply: Fixed.",
            "## Plan (open steps)\n- [in_progress] Update the docs",
            "## Files recently changed\n- src/parser.py",
            "## Delegates' latest answers\n- reviewer: Line 3 divides by zero.",
            # (no end of the latest reply: the ledger's latest entry says it)
        ]
    )


@pytest.mark.parametrize(
    ("source", "section"),
    [
        (
            FallbackInput(pins=["Never touch migrations/.", "Use tabs."]),
            "## Pinned instructions\n- Never touch migrations/.\n- Use tabs.",
        ),
        (FallbackInput(first_request="Port the lexer."), "## First request\nPort the lexer."),
        (FallbackInput(last_request="fix the test"), "## Latest request\nfix the test"),
        (
            FallbackInput(
                turns_recent=["Turn 2 — request: fix the test\nReply: Fixed."], turns_older=["Turn 1: look."]
            ),
            "## What each turn did\nTurn 1: look.\nTurn 2 — request: fix the test\nReply: Fixed.",
        ),
        (
            FallbackInput(plan=(PlanStep("Fix the parser", "completed"), PlanStep("Update the docs", "pending"))),
            "## Plan (open steps)\n- [pending] Update the docs",
        ),
        (
            FallbackInput(recent_files=(P / "src/parser.py", Path("/elsewhere/x.py")), cwd=P),
            "## Files recently changed\n- src/parser.py\n- /elsewhere/x.py",
        ),
        (
            FallbackInput(delegate_notes={"reviewer": "Line 3\n  divides by zero.", "planner": "1. Read 2. Fix"}),
            "## Delegates' latest answers\n- reviewer: Line 3 divides by zero.\n- planner: 1. Read 2. Fix",
        ),
        (FallbackInput(last_reply="Fixed; the suite passes."), "## End of the latest reply\nFixed; the suite passes."),
    ],
    ids=["pins", "first", "last", "turns", "plan", "files", "delegates", "reply"],
)
def test_each_section_alone_is_the_note_then_its_heading_and_content(source: FallbackInput, section: str) -> None:
    blocks = fallback_summary(source, 2_000).split("\n\n")
    assert blocks == [NOTE_TEXT, section]


def test_with_nothing_kept_the_summary_is_the_note_alone() -> None:
    assert fallback_summary(FallbackInput(), 2_000) == NOTE_TEXT


def test_it_stays_within_its_budget_however_much_there_is() -> None:
    source = FallbackInput(
        pins=[f"never break rule {i} " * 4 for i in range(60)],
        turns_recent=["Turn 299 " + "detail " * 800, "Turn 300 " + "detail " * 800],
        turns_older=[f"Turn {i}: goal {i} " + "words " * 40 for i in range(1, 299)],
        recent_files=tuple(P / f"f{i}.py" for i in range(10)),
        first_request="paste " * 12_000,  # 50 KB
        last_request="again " * 12_000,
        last_reply="reply " * 10_000,
        cwd=P,
    )
    for budget in (480, 960, 2_000):
        text = fallback_summary(source, budget)
        assert count_tokens(text) <= budget
        assert text.startswith(NOTE) and "## First request" in text
    text = fallback_summary(source, 2_000)
    assert "earlier turns left out" in text and "Turn 298: goal 298" in text  # the newest older turns first


def test_it_stays_within_its_budget_on_random_inputs() -> None:
    rng = random.Random(5)
    words = ["fix", "parser", "é", "日本語", "```", "{", "\n", "Traceback", "—", "x" * 30, "/src/a.py", "42"]

    def text(size: int) -> str:
        return " ".join(rng.choices(words, k=size))

    for _ in range(15):
        source = FallbackInput(
            pins=[text(rng.randint(1, 60)) for _ in range(rng.randint(0, 50))],
            turns_recent=[text(rng.choice([10, 300, 3_000])) for _ in range(rng.randint(0, 2))],
            turns_older=[f"Turn {i}: " + text(rng.randint(1, 40)) for i in range(rng.choice([0, 5, 300]))],
            plan=tuple(PlanStep(text(rng.randint(1, 30)), "pending") for _ in range(rng.randint(0, 30))),
            recent_files=tuple(P / f"d{i}/{text(2)}.py" for i in range(rng.randint(0, 40))),
            delegate_notes={f"role{i}": text(rng.choice([5, 2_000])) for i in range(rng.randint(0, 4))},
            first_request=text(rng.choice([0, 20, 12_000])),
            last_request=text(rng.choice([0, 20, 12_000])),
            last_reply=text(rng.choice([0, 20, 5_000])),
            cwd=P,
        )
        for budget in (40, 200, 480, 1_000, 2_000):
            assert count_tokens(fallback_summary(source, budget)) <= budget


def test_the_newest_turns_are_kept_and_the_left_out_ones_counted() -> None:
    source = FallbackInput(
        turns_recent=["Turn 299 in full", "Turn 300 in full"],
        turns_older=[f"Turn {i}: goal {i}, done." for i in range(1, 299)],
    )
    text = fallback_summary(source, 1_000)
    shown = [line for line in text.splitlines() if line.startswith("Turn ")]
    (note,) = [line for line in text.splitlines() if line.startswith("(… ")]
    assert shown[-3:] == ["Turn 298: goal 298, done.", "Turn 299 in full", "Turn 300 in full"]
    assert [int(line.split()[1].rstrip(":")) for line in shown] == list(range(301 - len(shown), 301))
    assert note == f"(… {300 - len(shown)} earlier turns left out)"


def test_room_other_sections_do_not_need_goes_to_the_turns() -> None:
    older = [f"Turn {i}: read src/mod{i}.py, changed {i} lines; tests pass." for i in range(1, 41)]
    text = fallback_summary(FallbackInput(turns_older=older, first_request="Port the lexer."), 1_000)
    assert count_tokens("\n".join(older)) > 0.33 * 1_000  # more than the turns' own share
    assert text == "\n\n".join(
        [NOTE, "## First request\nPort the lexer.", "## What each turn did\n" + "\n".join(older)]
    )


def test_a_latest_turn_too_big_for_the_room_is_cut_not_dropped() -> None:
    source = FallbackInput(turns_recent=["Turn 7 — request: run the suite\n" + "FAILED test_x\n" * 2_000])
    text = fallback_summary(source, 600)
    assert "## What each turn did\nTurn 7 — request: run the suite\nFAILED test_x" in text
    assert text.endswith("\n[… cut]") and count_tokens(text) <= 600


def test_share_out_gives_what_a_section_leaves_to_the_others() -> None:
    shares = {"a": 0.5, "b": 0.25, "c": 0.25}
    assert share_out(1_000, {"a": 100, "b": 0, "c": 5_000}, shares) == {"a": 100, "b": 0, "c": 900}
    assert share_out(1_000, {"a": 900, "b": 900, "c": 100}, shares) == {"a": 600, "b": 300, "c": 100}
    assert share_out(1_000, {"a": 10, "b": 20, "c": 30}, shares) == {"a": 10, "b": 20, "c": 30}
    assert share_out(0, {"a": 10, "b": 20, "c": 30}, shares) == {"a": 0, "b": 0, "c": 0}


MODEL = ModelInfo("test:small", context_limit=8_000, max_output_tokens=1_000)


def failing(messages: list[ModelMessage]) -> Response:
    if is_summary_request(messages):
        return [Fail(ModelHTTPError(500, MODEL.id, {"message": "down"}))]
    return [Say("ok")]


async def test_compacting_again_and_again_never_nests_or_grows(project: Path, settings: Settings) -> None:
    session = open_session(
        settings, MODEL, project, approver=None, mode="yolo", model_factory=Script([], fallback=failing).factory()
    )
    summaries: list[str] = []
    for i in range(20):
        await session.run(f"step {i}: the staging port is 84{i:02}. " + "notes " * 120)
        summaries += [e.summary async for e in session.stream("/compact") if isinstance(e, ContextCompacted)]
    assert len(summaries) == 20
    budget = Budget.of(MODEL, 0.7).fallback
    assert all(count_tokens(s) <= budget for s in summaries)
    assert not any("Summary of the conversation so far" in s for s in summaries)  # never an earlier summary
    assert summaries[-1].count("## Note") == 1


FULL_MODEL = ModelInfo("test:fallback", context_limit=100_000)
"""A window large enough for the full tool set (plan and delegates), so every section has something to show."""


async def test_a_fallback_compaction_summarises_every_part_of_the_session(project: Path, settings: Settings) -> None:
    """The summary a failed summarizer leaves is built from everything the session keeps beside its history and
    the next request does not say anyway: the turn ledger (the oldest turn as one line), the open plan, the
    edited file and the delegate's answer (the latest reply is the ledger's latest entry)."""
    plan = [{"step": "Read the lexer", "status": "completed"}, {"step": "Write lexer.rs", "status": "in_progress"}]
    script = Script(
        [
            [
                Call("update_plan", {"steps": plan}, "p1"),
                Call("write_file", {"path": "src/lexer.rs", "content": "fn lex() {}\n"}, "w1"),
            ],
            [Say("Wrote src/lexer.rs.")],
            [Call("delegate", {"agent": "reviewer", "task": "Review src/lexer.rs"}, "d1")],
            [Say("Line 3 divides by zero.")],  # the reviewer
            [Say("Reviewed.")],
            [Say("Fixed the division; the suite passes.")],
        ],
        fallback=failing,
    )
    session = open_session(settings, FULL_MODEL, project, approver=None, mode="yolo", model_factory=script.factory())
    for prompt in ("Port the lexer to Rust. Never touch migrations/.", "review it", "fix the division"):
        assert (await session.run(prompt)).error is None
    (done,) = [e async for e in session.stream("/compact") if isinstance(e, ContextCompacted)]
    assert done.fallback
    # The pin (every request's context block shows it) and the requests the compaction keeps word for word are
    # not said a second time.
    assert [e.text for e in session.state.entries[:-1]] == [
        compaction.EARLIER_REQUEST + "Port the lexer to Rust. Never touch migrations/.",
        compaction.EARLIER_REQUEST + "review it",
        compaction.EARLIER_REQUEST + "fix the division",
    ]
    assert done.summary == "\n\n".join(
        [
            NOTE_TEXT,
            "## What each turn did\n"
            "Turn 1: Port the lexer to Rust. — changed src/lexer.rs — Wrote src/lexer.rs.\n"
            "Turn 2 — request: review it\nSteps:\n- Delegate to the reviewer: Review src/lexer.rs (done)\n"
            "    Line 3 divides by zero.\nReply: Reviewed.\n"
            "Turn 3 — request: fix the division\nReply: Fixed the division; the suite passes.",
            "## Plan (open steps)\n- [in_progress] Write lexer.rs",
            "## Files recently changed\n- src/lexer.rs",
            "## Delegates' latest answers\n- reviewer: Line 3 divides by zero.",
        ]
    )


def test_a_one_request_session_shows_its_request_once_as_the_first() -> None:
    """In a session of one request the first request is the latest: the summary says it once, under "First
    request", and spends no room saying it again."""
    source = FallbackInput(first_request="Port the lexer.", last_request="Port the lexer.", last_reply="Done.")
    assert fallback_summary(source, 2_000) == "\n\n".join(
        [NOTE_TEXT, "## First request\nPort the lexer.", "## End of the latest reply\nDone."]
    )
