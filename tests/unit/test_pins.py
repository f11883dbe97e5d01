"""Pinned instructions: found in prompts deterministically, added with /pin, carried by every request through
compactions (with a failing summarizer) and restarts."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.messages import ModelMessage, ModelRequest, UserPromptPart

from codling.brain.context.pins import (
    FACTS_HEADING,
    MAX_PINS,
    PINS_HEADING,
    Pin,
    add_pins,
    capture_facts,
    capture_pins,
    describe_pins,
    pins_after,
    render_pins,
)
from codling.brain.events import ContextCompacted, TextDelta
from codling.brain.factory import open_session
from codling.brain.session import ConversationSession
from codling.config import Settings
from codling.llm.catalog import ModelInfo
from codling.llm.tokens import count_tokens
from codling.store.history import HistoryFile, HistoryRecorder, SessionHeader, read_history
from tests.fakes.scenarios import Fail, Response, Say, Script

PINS = [
    ("Never touch migrations/.", ("Never touch migrations/.",)),
    ("Fix the parser. Always run the tests before you answer.", ("Always run the tests before you answer.",)),
    ("From now on answer in English only", ("From now on answer in English only",)),
    ("please don't modify the public API", ("please don't modify the public API",)),
    ("Use tabs in Makefiles.", ("Use tabs in Makefiles.",)),
    ("Remember: the codeword is PELICAN-7.", ("Remember: the codeword is PELICAN-7.",)),
    ("Going forward, prefer pathlib over os.path.", ("Going forward, prefer pathlib over os.path.",)),
    (
        "We must never log tokens.\nAlso, avoid global state.",
        ("We must never log tokens.", "Also, avoid global state."),
    ),
    ("never touch migrations/. NEVER touch migrations/", ("never touch migrations/.",)),
    ("Make sure you always run ruff. Then fix it.", ("Make sure you always run ruff.",)),
    ("make sure to never print tokens", ("make sure to never print tokens",)),
    ("Do not ever print the API key.", ("Do not ever print the API key.",)),
    ("Don’t ever squash my commits", ("Don’t ever squash my commits",)),
    ("Stop adding docstrings to private helpers.", ("Stop adding docstrings to private helpers.",)),
    ("I prefer pathlib over os.path.", ("I prefer pathlib over os.path.",)),
    ("We'd rather you indent with 4 spaces.", ("We'd rather you indent with 4 spaces.",)),
    ("Keep in mind that the API is v2.", ("Keep in mind that the API is v2.",)),
    ("Note that the staging DB is read-only.", ("Note that the staging DB is read-only.",)),
    ("Passwords must not be logged.", ("Passwords must not be logged.",)),
    ("Fix it\n\nfrom here on, reply in French", ("from here on, reply in French",)),
]

NOT_PINS = [
    "Never mind, it works now.",
    "It always fails on CI.",
    "The build never worked on Windows.",
    "Should we always run the linter?",
    "I have always used tabs",
    "Fix the failing test in parser.py",
    "```\n# never do this\nalways = True\n```",
    "Traceback: " + "x " * 400 + " never retry",
    "I never said that.",
    "You should not have deleted that file.",
    "Stop the server.",
    "Don't push this time.",
    "Avoid the flaky test for now.",
    "Why does it always crash?",
    "The parser always returns None.",
]


@pytest.mark.parametrize(("text", "pins"), PINS, ids=[p[0][:30] for p in PINS])
def test_standing_instructions_are_pinned(text: str, pins: tuple[str, ...]) -> None:
    assert capture_pins(text) == pins


@pytest.mark.parametrize("text", NOT_PINS, ids=[t[:30] for t in NOT_PINS])
def test_descriptions_questions_and_code_are_not_pins(text: str) -> None:
    assert capture_pins(text) == ()


def test_pins_are_kept_once_and_the_oldest_captured_go_first() -> None:
    pins = add_pins((), ["never push", "Never push."], "prompt", 1)
    assert add_pins(pins, ["NEVER  push"], "prompt", 2) == pins == (Pin("never push", "prompt", 1),)
    pins = add_pins((), ["/pin rule"], "command", 1)
    for turn in range(2, MAX_PINS + 6):
        pins = add_pins(pins, [f"never do thing {turn}"], "prompt", turn)
    assert len(pins) == MAX_PINS
    assert pins[0] == Pin("/pin rule", "command", 1)  # a /pin outlives captured pins
    assert pins[1].text == "never do thing 7"  # thing 2 … 6 went first


def test_the_block_fits_its_budget_keeping_the_newest_and_pinned_ones() -> None:
    pins = (Pin("use tabs", "command", 1), *(Pin(f"never break rule {i} " * 5, "prompt", i) for i in range(40)))
    block = render_pins(pins, 200)
    assert count_tokens(block) <= 200
    lines = block.splitlines()
    assert lines[0] == PINS_HEADING and lines[1] == "- use tabs"
    assert lines[-2].startswith("- never break rule 39") and lines[-1].endswith("/pins lists them all)")
    assert render_pins((), 200) == ""


def test_the_block_holds_its_budget_exactly_on_random_pins() -> None:
    rng = random.Random(3)
    words = ["never", "push", "to", "main", "é", "日本語", "`code`", "migrations/", "8431", "—", "x" * 40]
    for _ in range(80):
        pins: tuple[Pin, ...] = ()
        for turn in range(rng.randint(1, 70)):
            text = " ".join(rng.choices(words, k=rng.randint(1, 60)))
            pins = add_pins(pins, [f"{turn} {text}"], rng.choice(["prompt", "command", "fact"]), turn)
        budget = rng.choice([0, 10, 20, 40, 80, 200, 400, 1_000, 5_000])
        block = render_pins(pins, budget)
        assert count_tokens(block) <= budget
        if budget >= 5_000:  # (room for every /pin: at most 50 of at most 300 characters)
            lines = block.splitlines()
            assert all(f"- {p.text}" in lines for p in pins if p.source == "command")


def test_the_block_whole_and_with_nothing_fitting() -> None:
    pins = (Pin("never push", "prompt", 1), Pin("use tabs", "command", 2))
    assert render_pins(pins, 1_000) == f"{PINS_HEADING}\n- never push\n- use tabs"
    assert render_pins(pins, 16) == "(… 2 left out for room; /pins lists them all)"
    assert render_pins(pins, 5) == ""
    pins = (Pin("never push to main without a review by the lead " * 3, "prompt", 1), Pin("use tabs", "command", 2))
    squeezed = f"{PINS_HEADING}\n- use tabs\n(… 1 left out for room; /pins lists them all)"
    assert render_pins(pins, count_tokens(squeezed)) == squeezed  # the /pin kept, the captured one left out


def test_pinned_ones_are_kept_before_captured_ones_and_the_newest_captured_before_older() -> None:
    pins = tuple(
        Pin(f"{'always' if i % 2 else 'never'} do thing {i}", "command" if i % 2 else "prompt", i) for i in range(20)
    )
    expected = "\n".join(
        [
            PINS_HEADING,
            *(f"- {p.text}" for p in pins if p.source == "command" or p.turn >= 16),
            "(… 8 left out for room; /pins lists them all)",
        ]
    )
    assert render_pins(pins, count_tokens(expected)) == expected


def test_pins_shows_how_to_add_one_when_there_are_none() -> None:
    assert describe_pins(()).startswith("No pinned instructions yet.") and "/pin TEXT" in describe_pins(())


def test_pin_and_unpin_commands() -> None:
    pins = pins_after((), "never touch migrations/", None, 1)
    pins = pins_after(pins, "/pin use tabs", ("pin", "use tabs"), 2)
    assert [p.text for p in pins] == ["never touch migrations/", "use tabs"]
    assert pins_after(pins, "/unpin 1", ("unpin", "1"), 3) == (Pin("use tabs", "command", 2),)
    assert pins_after(pins, "/unpin x", ("unpin", "x"), 3) == pins
    assert describe_pins(pins).splitlines() == [
        "Pinned instructions (every request carries them; /unpin N drops one):",
        "1. never touch migrations/ (from turn 1)",
        "2. use tabs (/pin)",
    ]


# --- through a session -------------------------------------------------------------------------------------

MODEL = ModelInfo("test:small", context_limit=8_000, max_output_tokens=1_000)


def is_summary_request(messages: list[ModelMessage]) -> bool:
    last = messages[-1]
    return isinstance(last, ModelRequest) and "handoff summary" in (last.instructions or "")


def failing_summarizer(messages: list[ModelMessage]) -> Response:
    if is_summary_request(messages):
        return [Fail(ModelHTTPError(500, MODEL.id, {"message": "down"}))]
    return [Say("ok")]


def text_of(messages: list[ModelMessage]) -> str:
    return "\n".join(
        str(p.content)
        for m in messages
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, UserPromptPart)
    )


def fresh(project: Path, settings: Settings, script: Script) -> ConversationSession:
    return open_session(settings, MODEL, project, approver=None, mode="yolo", model_factory=script.factory())


async def test_pins_reach_every_request_through_compactions_and_restarts(
    project: Path, settings: Settings, tmp_path: Path
) -> None:
    script = Script([], fallback=failing_summarizer)
    path = tmp_path / "history.jsonl"
    file = HistoryFile(path, "s1")
    file.write(SessionHeader("s1", project, MODEL.id, "yolo").record())
    session = fresh(project, settings, script)
    session.subscribe(HistoryRecorder(file))
    await session.run("Never touch migrations/. Start with the parser.")
    said = [e async for e in session.stream("/pin use tabs in Makefiles")]
    assert isinstance(said[1], TextDelta)
    assert TextDelta(said[1].turn_id, "Pinned: use tabs in Makefiles") in said
    compacted = []
    for i in range(12):
        compacted += [e async for e in session.stream(f"step {i}: " + "notes on the parser " * 150)]
    file.close()
    assert sum(isinstance(e, ContextCompacted) for e in compacted) >= 2
    turns = [r for r in script.requests if not is_summary_request(r)]
    for request in turns[1:]:
        assert "- Never touch migrations/." in text_of(request) and "- use tabs in Makefiles" in text_of(request)
    restored = fresh(project, settings, Script([[Say("ok")]]))
    restored.restore(read_history(path).events)
    assert restored.state.pins == session.state.pins


FACTS = [
    ("Run the tests. The staging port is 8431, by the way.", ("The staging port is 8431, by the way.",)),
    ("The owner of the parser is Dana Whitfield.", ("The owner of the parser is Dana Whitfield.",)),
    ("Write the config. It is Postgres 16.", ("It is Postgres 16.",)),
    ("The release codeword is PELICAN-7.", ("The release codeword is PELICAN-7.",)),
]
NOT_FACTS = ["The test is failing.", "What is the port 8431?", "Never touch migrations/.", "Fix the parser."]


@pytest.mark.parametrize(("text", "facts"), FACTS, ids=[f[0][:30] for f in FACTS])
def test_facts_stated_with_a_concrete_value_are_kept(text: str, facts: tuple[str, ...]) -> None:
    assert capture_facts(text) == facts
    assert [p.source for p in pins_after((), text, None, 1)] == ["fact"] * len(facts)


@pytest.mark.parametrize("text", NOT_FACTS)
def test_vague_statements_questions_and_rules_are_not_facts(text: str) -> None:
    assert capture_facts(text) == ()


def test_facts_go_under_their_own_heading_after_the_rules_and_go_first_for_room() -> None:
    pins = (Pin("never push", "prompt", 1), Pin("The port is 8431.", "fact", 2))
    assert render_pins(pins, 500).splitlines() == [PINS_HEADING, "- never push", FACTS_HEADING, "- The port is 8431."]
    pins = (Pin("never push", "prompt", 1), Pin("The staging port of the billing service is 8431.", "fact", 2))
    squeezed = f"{PINS_HEADING}\n- never push\n(… 1 left out for room; /pins lists them all)"
    assert render_pins(pins, count_tokens(squeezed)) == squeezed
