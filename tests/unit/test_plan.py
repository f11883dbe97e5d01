"""update_plan: the model's plan as a tool, an event, a record, an ACP plan and a checklist."""

from __future__ import annotations

import io
from datetime import UTC, datetime
from pathlib import Path

import pytest
from acp import helpers
from pydantic_ai.messages import ToolReturnPart

from codling.acp.replay import replay_updates
from codling.acp.translate import translate
from codling.brain.events import (
    Event,
    PlanUpdated,
    TextDelta,
    ThoughtDelta,
    ToolCallFinished,
    ToolCallStarted,
    TurnEnded,
    TurnStarted,
)
from codling.brain.factory import open_session
from codling.brain.prompt import TextBlock
from codling.brain.session import ConversationSession, TurnResult
from codling.cli.render import TerminalRenderer
from codling.cli.transcript import print_transcript
from codling.config import Settings
from codling.llm.catalog import ModelInfo
from codling.store.header import SessionHeader
from codling.store.history import HistoryFile, HistoryRecorder, read_history
from codling.vocabulary import PlanStep
from tests.fakes.scenarios import Call, Say, Script

MODEL = ModelInfo("test:plan", context_limit=100_000)
STEPS = [
    {"step": "Read the failing test", "status": "completed"},
    {"step": "Fix the parser", "status": "in_progress", "priority": "high"},
    {"step": "Run the tests", "status": "pending", "priority": "low"},
]
PLAN = (
    PlanStep("Read the failing test", "completed", "medium"),
    PlanStep("Fix the parser", "in_progress", "high"),
    PlanStep("Run the tests", "pending", "low"),
)


async def run_plan(
    project: Path, settings: Settings, tmp_path: Path, steps: list[dict[str, str]]
) -> tuple[TurnResult, list[Event], Path, Script, ConversationSession]:
    script = Script([[Call("update_plan", {"steps": steps}, "p1")], [Say("on it")]])
    session = open_session(settings, MODEL, project, approver=None, model_factory=script.factory())
    path = tmp_path / "history.jsonl"
    file = HistoryFile(path, "s1")
    file.write(SessionHeader("s1", project, MODEL.id, "ask").record())
    session.subscribe(HistoryRecorder(file))
    seen: list[Event] = []

    async def observer(event: Event) -> None:
        seen.append(event)

    session.subscribe(observer)
    result = await session.run("fix the parser")
    await session.settle()
    file.close()
    return result, seen, path, script, session


async def test_a_plan_becomes_an_event_after_its_call_and_a_record(
    project: Path, settings: Settings, tmp_path: Path
) -> None:
    result, seen, path, script, session = await run_plan(project, settings, tmp_path, STEPS)
    kinds = [type(e).__name__ for e in seen if type(e).__name__ != "ToolCallRunning"]
    at = kinds.index("PlanUpdated")
    assert kinds[at - 2 : at + 1] == ["ToolCallStarted", "ToolCallFinished", "PlanUpdated"]
    assert next(e for e in seen if isinstance(e, PlanUpdated)) == PlanUpdated(result.turn_id, PLAN)
    assert result.tool_calls[0].started.title == "Update the plan"
    told = script.requests[1][-1].parts[0]
    assert isinstance(told, ToolReturnPart)
    assert told.content == "Plan updated (1 of 3 steps completed)."
    # Recorded, and read back as the same event (the plan of a restored session is replayed too).
    assert PlanUpdated(result.turn_id, PLAN) in read_history(path).events
    # The next turns' history keeps the plan, as the call's summary.
    assert "Plan (1/3 done):\n    [x] Read the failing test\n    [>] Fix the parser" in session.state.entries[-1].text


@pytest.mark.parametrize(
    ("steps", "error"),
    [
        ([], "the plan has no steps"),
        ([{"step": "a", "status": "in_progress"}, {"step": "b", "status": "in_progress"}], "more than one step"),
        ([{"step": "  ", "status": "pending"}], "a step has no text"),
    ],
)
async def test_a_bad_plan_is_a_message_the_model_can_act_on(
    project: Path, settings: Settings, tmp_path: Path, steps: list[dict[str, str]], error: str
) -> None:
    result, seen, _path, script, _session = await run_plan(project, settings, tmp_path, steps)
    assert not any(isinstance(e, PlanUpdated) for e in seen)
    assert result.tool_calls[0].finished is not None and result.tool_calls[0].finished.status == "failed"
    told = script.requests[1][-1].parts[0]
    assert isinstance(told, ToolReturnPart)
    assert error in str(told.content)


def test_the_client_gets_the_plan_not_a_tool_call_for_it() -> None:
    started = ToolCallStarted("t", "p1", "update_plan", "Update the plan", "think", {"steps": []})
    finished = ToolCallFinished("t", "p1", "update_plan", "completed", "Plan updated.")
    assert translate(started) == [] and translate(finished) == []
    assert translate(PlanUpdated("t", PLAN)) == [
        helpers.update_plan(
            [
                helpers.plan_entry("Read the failing test", priority="medium", status="completed"),
                helpers.plan_entry("Fix the parser", priority="high", status="in_progress"),
                helpers.plan_entry("Run the tests", priority="low", status="pending"),
            ]
        )
    ]


async def test_replay_and_show_draw_the_plan(project: Path, settings: Settings, tmp_path: Path) -> None:
    _result, _seen, path, _script, _session = await run_plan(project, settings, tmp_path, STEPS)
    events = read_history(path).events
    plans = [u for u in replay_updates(events) if u.session_update == "plan"]
    assert [e.content for e in plans[0].entries] == [s.step for s in PLAN]
    out = io.StringIO()
    print_transcript(events, out, color=False)
    assert "    [x] Read the failing test\n    [>] Fix the parser\n    [ ] Run the tests\n" in out.getvalue()


async def test_the_terminal_draws_the_plan_as_a_checklist() -> None:
    out = io.StringIO()
    renderer = TerminalRenderer(out, err=io.StringIO(), color=False, interactive=False)
    await renderer(PlanUpdated("t", PLAN))
    renderer.close()
    assert out.getvalue() == "    [x] Read the failing test\n    [>] Fix the parser\n    [ ] Run the tests\n"


def test_a_rejected_plan_is_shown_as_a_failed_call_and_an_unfinished_one_is_not_replayed() -> None:
    failed = ToolCallFinished("t", "p1", "update_plan", "failed", "Error: more than one step is in_progress")
    assert translate(failed) == [
        helpers.start_tool_call(
            "p1",
            "Update the plan",
            kind="think",
            status="failed",
            content=[helpers.tool_content(helpers.text_block("Error: more than one step is in_progress"))],
        )
    ]
    started = ToolCallStarted("t", "p1", "update_plan", "Update the plan", "think", {"steps": []})
    turn = TurnStarted("t", "plan it", False, datetime.now(UTC), (TextBlock("plan it"),))
    # The process died during the (hidden) call: the replay closes no call the client never saw.
    assert [u.session_update for u in replay_updates([turn, started])] == ["user_message_chunk"]


async def test_steps_are_one_line_each(project: Path, settings: Settings, tmp_path: Path) -> None:
    steps = [{"step": "Fix the\n  parser", "status": "in_progress"}]
    _result, seen, _path, _script, _session = await run_plan(project, settings, tmp_path, steps)
    (plan,) = [e for e in seen if isinstance(e, PlanUpdated)]
    assert plan.steps == (PlanStep("Fix the parser", "in_progress", "medium"),)


def test_show_draws_a_plan_set_inside_a_collapsed_reasoning_block() -> None:
    at = datetime(2025, 1, 2, 3, 0, tzinfo=UTC)
    events: list[Event] = [
        TurnStarted("t", "fix it", True, at, (TextBlock("fix it"),)),
        ThoughtDelta("t", "make a plan"),
        ToolCallStarted("t", "p1", "update_plan", "Update the plan", "think", {}),
        ToolCallFinished("t", "p1", "update_plan", "completed", "Plan updated."),
        PlanUpdated("t", PLAN),
        TextDelta("t", "Working on it."),
        TurnEnded("t", "end_turn"),
    ]
    out = io.StringIO()
    print_transcript(events, out, color=False)
    lines = out.getvalue().splitlines()
    at_block = next(i for i, line in enumerate(lines) if "reasoning (1 tool call)" in line)
    assert lines[at_block + 1 : at_block + 4] == [
        "    [x] Read the failing test",
        "    [>] Fix the parser",
        "    [ ] Run the tests",
    ]


def test_show_draws_a_planner_s_plan_under_its_delegate_call() -> None:
    at = datetime(2025, 1, 2, 3, 0, tzinfo=UTC)
    lead = (PlanStep("Look", "in_progress"), PlanStep("Fix"))
    events: list[Event] = [
        TurnStarted("t", "plan", False, at, (TextBlock("plan"),)),
        ToolCallStarted("t", "p1", "update_plan", "Update the plan", "think", {}),
        ToolCallFinished("t", "p1", "update_plan", "completed", "Plan updated."),
        PlanUpdated("t", lead),
        ToolCallStarted("t", "d1", "delegate", "Delegate to the planner: Plan it", "think", {}),
        PlanUpdated("t", (PlanStep("Planner step A"),)),
        ToolCallFinished("t", "d1", "delegate", "completed", "A."),
        TurnEnded("t", "end_turn"),
    ]
    out = io.StringIO()
    print_transcript(events, out, color=False)
    text = out.getvalue()
    assert "Update the plan -> completed\n    [>] Look\n    [ ] Fix\n" in text
    # The delegate's report under its call, then the plan it made.
    assert "Delegate to the planner: Plan it -> completed\n    A.\n    [ ] Planner step A\n" in text
