"""update_plan: the model's plan as a tool, an event, a record, an ACP plan and a checklist."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from acp import helpers

from codling.acp.replay import replay_updates
from codling.acp.translate import translate
from codling.brain.events import Event, PlanUpdated, ToolCallFinished, ToolCallStarted
from codling.brain.factory import open_session
from codling.cli.render import TerminalRenderer
from codling.cli.transcript import print_transcript
from codling.config import Settings
from codling.llm.catalog import ModelInfo
from codling.store.history import HistoryFile, HistoryRecorder, SessionHeader, read_history
from codling.tools.base import PlanStep
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


async def run_plan(project: Path, settings: Settings, tmp_path: Path, steps: list[dict[str, str]]) -> tuple:
    script = Script([[Call("update_plan", {"steps": steps}, "p1")], [Say("on it")]])
    session = open_session(settings, MODEL, project, approver=None, model_factory=script.factory())
    path = tmp_path / "history.jsonl"
    file = HistoryFile(path, "s1")
    file.write_record(SessionHeader("s1", project, MODEL.id, "ask").record())
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
    kinds = [type(e).__name__ for e in seen]
    at = kinds.index("PlanUpdated")
    assert kinds[at - 2 : at + 1] == ["ToolCallStarted", "ToolCallFinished", "PlanUpdated"]
    assert seen[at] == PlanUpdated(result.turn_id, PLAN)
    assert result.tool_calls[0].started.title == "Update the plan"
    told = script.requests[1][-1].parts[0].content  # type: ignore[union-attr]
    assert told == "Plan updated (1 of 3 steps completed)."
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
    assert error in str(script.requests[1][-1].parts[0].content)  # type: ignore[union-attr]


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
