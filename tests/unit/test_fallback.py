"""The fallback summary: bounded, built from what the session keeps, never from an earlier summary."""

from __future__ import annotations

from pathlib import Path

from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.messages import ModelMessage, ModelRequest

from codling.brain.context.budget import Budget
from codling.brain.context.fallback import NOTE, FallbackInput, fallback_summary
from codling.brain.events import ContextCompacted
from codling.brain.factory import open_session
from codling.config import Settings
from codling.llm.catalog import ModelInfo
from codling.llm.tokens import count_tokens
from codling.tools.ports import PlanStep
from tests.fakes.scenarios import Fail, Response, Say, Script

P = Path("/p")


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
            "## End of the latest reply\nFixed; the suite passes.",
        ]
    )


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


MODEL = ModelInfo("test:small", context_limit=8_000, max_output_tokens=1_000)


def failing(messages: list[ModelMessage]) -> Response:
    last = messages[-1]
    if isinstance(last, ModelRequest) and "handoff summary" in (last.instructions or ""):
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
