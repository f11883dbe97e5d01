"""Pinned instructions: found in prompts deterministically, added with /pin, carried by every request through
compactions (with a failing summarizer) and restarts."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.messages import ModelMessage, ModelRequest, UserPromptPart

from codling.brain.context.pin_capture import capture_facts, capture_pins
from codling.brain.context.pin_score import LABELS, LabelledPrompt, PinScore, label_counts, load_corpus, score_pins
from codling.brain.context.pins import (
    FACTS_HEADING,
    MAX_PINS,
    PINS_HEADING,
    Pin,
    add_pins,
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
from codling.store.header import SessionHeader
from codling.store.history import HistoryFile, HistoryRecorder, read_history
from tests.fakes.scenarios import Fail, Response, Say, Script
from tests.fakes.summarizer import is_summary_request

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
        # In the user's words (the first prompt, which compactions keep) or the block, whichever holds it.
        assert "Never touch migrations/." in text_of(request) and "- use tabs in Makefiles" in text_of(request)
    restored = fresh(project, settings, Script([[Say("ok")]]))
    restored.restore(read_history(path).events)
    assert restored.state.pins == session.state.pins


FACTS = [
    ("Run the tests. The staging port is 8431, by the way.", ("The staging port is 8431, by the way.",)),
    ("The owner of the parser is Dana Whitfield.", ("The owner of the parser is Dana Whitfield.",)),
    ("Write the config. It is Postgres 16.", ("It is Postgres 16.",)),
    ("The release codeword is PELICAN-7.", ("The release codeword is PELICAN-7.",)),
    # (a tracker's id names the work, even said of a bug: the played model's ticket was missed)
    ("The ticket for this bug is DOT-4127. Find it.", ("The ticket for this bug is DOT-4127.",)),
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


# --- precision: scopes, one-offs and the code's current state (issue 28) -----------------------------------

CORPUS = Path(__file__).parent / "data" / "pins_corpus.jsonl"

SCOPED_RULES = [
    "Ground rules for this whole session: never modify anything under tests/, and always run ruff first.",
    "Throughout this project, use pathlib instead of os.path.",
    "In this project we always write docstrings in the imperative mood.",
    "every time you edit a python file, run ruff format on it",
    "Whenever a test is flaky, mark it with @pytest.mark.flaky instead of deleting it.",
    "for the whole session, answer in French",
    "As a rule, keep functions under 40 lines.",
    "In general, prefer small pure functions over classes.",
    "ok so ground rules: no force pushes, no merge commits",
    "In this repo we use double quotes for strings.",
    "When you write tests, always use the tmp_path fixture.",
    "We never catch KeyboardInterrupt.",
    "Keep error messages lowercase, that's our style.",
    "no print statements, ever",
]
ONE_OFFS = [
    "don't fix anything yet",
    "just report",
    "Don't change anything, just tell me what's wrong.",
    "don't run the tests this time",
    "do not commit yet",
    "Don't edit yet, first explain what you'd change.",
    "Don't change anything.",
    "don't commit until I say so",
    "Don't touch the parser in this turn.",
    "Please don't push before you've shown me the log.",
    "prefer the smaller fix here",
    "use pytest -x to run it",
    "Whenever you're ready, push it.",
]
NOT_RULES_EITHER = [
    "Add a README for this project.",
    "Throughout the module the naming is inconsistent.",
    "Every time I run it, it hangs.",
    "The docs say you should never call close() twice.",
    'Marc said in review: "always use the factory".',
    "Error: never call run() twice",
    "We always run into this timeout.",
]
STATES = [
    "Current version is 1.2.3, bump it to 1.3.0.",
    "The bug is in src/app.py, line 42 returns None.",
    "The test fails with KeyError: 'id'.",
    "parse_config currently returns None for an empty file.",
    "it's failing at line 3",
    "The error is `ModuleNotFoundError: No module named 'yaml'`.",
    "The current value of MAX_RETRIES is 3 (change it to 4).",
    "The version in pyproject.toml is 0.4.1. Bump it to 0.5.0.",
    "It's 3 now, it should be 4.",
    "MAX_WORKERS is 4 in config.py.",
    "The query takes 4 seconds on staging.",
]
DURABLE_FACTS = [
    "the staging port is 8431",
    "The owner of the parser is Dana Whitfield.",
    "our CI runs on Python 3.11",
    "The API key variable is ACME_TOKEN.",
    "prod DB host is db-7.internal",
    "The design doc lives at docs/design/lexer.md.",
    "the on-call channel is #parser-oncall",
    "We're on Django 4.2 LTS.",
]


def test_the_three_frictions_played_by_hand() -> None:
    ground = (
        "Ground rules for this whole session: never modify anything under tests/, and always run ruff before you "
        "say you're done."
    )
    assert capture_pins(ground) == (ground,)
    assert capture_pins("Have a look at the retry logic in src/net/retry.py. Don't change anything, just report.") == ()
    assert capture_facts("Current version is 1.2.3, bump it to 1.3.0") == ()
    assert capture_facts("The bug is in src/app.py, line 42 returns None") == ()


def test_a_one_off_is_gone_once_the_user_asks_for_a_change() -> None:
    pins = pins_after((), "Look at src/net/retry.py. Don't change anything, just report.", None, 1)
    pins = pins_after(pins, "OK, fix it. Never touch migrations/.", None, 2)
    assert pins == (Pin("Never touch migrations/.", "prompt", 2),)


def test_state_and_facts_in_one_prompt() -> None:
    text = "Current version is 1.2.3, bump it to 1.3.0. The staging port is 8431. It's failing at line 3."
    assert pins_after((), text, None, 1) == (Pin("The staging port is 8431.", "fact", 1),)


@pytest.mark.parametrize("text", SCOPED_RULES, ids=[t[:30] for t in SCOPED_RULES])
def test_rules_with_a_scope_anywhere_are_pinned(text: str) -> None:
    assert capture_pins(text) == (text,)
    assert capture_facts(text) == ()


@pytest.mark.parametrize("text", ONE_OFFS + NOT_RULES_EITHER, ids=[t[:30] for t in ONE_OFFS + NOT_RULES_EITHER])
def test_one_offs_requests_and_reported_rules_are_not_pinned(text: str) -> None:
    assert (capture_pins(text), capture_facts(text)) == ((), ())


@pytest.mark.parametrize("text", STATES, ids=[t[:30] for t in STATES])
def test_the_codes_current_state_is_not_a_fact(text: str) -> None:
    assert (capture_pins(text), capture_facts(text)) == ((), ())


@pytest.mark.parametrize("text", DURABLE_FACTS, ids=[t[:30] for t in DURABLE_FACTS])
def test_durable_facts_are_kept(text: str) -> None:
    assert (capture_pins(text), capture_facts(text)) == ((), (text,))


def test_the_labelled_corpus_is_large_and_has_every_label() -> None:
    counts = label_counts(load_corpus(CORPUS))
    assert sum(counts.values()) >= 300
    assert all(counts[label] >= 50 for label in LABELS), counts


def test_pinning_is_precise_and_complete_on_the_labelled_corpus() -> None:
    score = score_pins(load_corpus(CORPUS))
    assert score.precision >= 0.95, "\n".join(score.wrong)
    assert score.recall >= 0.90, "\n".join(score.missed)


def test_the_score_matches_pins_to_the_parts_they_overlap() -> None:
    corpus: list[LabelledPrompt] = [
        (("other", "Fix the parser,"), ("rule", "and never touch migrations/.")),
        (("fact", "The port is 8431."), ("state", "It fails.")),
        (("one-off", "Don't push yet."),),
        (("rule", "Use tabs."),),
    ]
    pinned = {"Fix the parser, and never touch migrations/.", "Don't push yet."}
    facts = {"The port is 8431.", "It fails."}

    def rules(text: str) -> tuple[str, ...]:
        return tuple(p for p in sorted(pinned) if p in text)

    def stated(text: str) -> tuple[str, ...]:
        return tuple(f for f in sorted(facts) if f in text)

    assert score_pins(corpus, rules, stated) == PinScore(
        pins_made=4,
        correct=2,
        expected=3,
        recalled=2,
        wrong=("fact: It fails.", "rule: Don't push yet."),
        missed=("rule: Use tabs.",),
    )
    assert score_pins([], rules, stated).precision == score_pins([], rules, stated).recall == 1.0


def test_a_malformed_corpus_line_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "corpus.jsonl"
    path.write_text('[["rule", "Never push."]]\n\n[["fact", "The port is 8431."], ["other", "Go."]]\n')
    assert load_corpus(path) == [(("rule", "Never push."),), (("fact", "The port is 8431."), ("other", "Go."))]
    for bad in ('[["maybe", "Never push."]]', '[["rule", ""]]', "[]", '{"rule": "x"}'):
        path.write_text(bad + "\n")
        with pytest.raises(ValueError, match=r"corpus\.jsonl:1"):
            load_corpus(path)
