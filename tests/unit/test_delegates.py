"""Delegates: sub-agents in sessions of their own, with their role's tools, seen under the parent call."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

from acp import helpers
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.messages import ModelMessage, ModelRequest, UserPromptPart

from codling.acp.translate import translate
from codling.brain.builtin_turns import prompt_text
from codling.brain.context.pins import render_pins
from codling.brain.events import ContextCompacted, PlanUpdated, ToolCallNote
from codling.brain.factory import open_session
from codling.brain.thinking import Thinking
from codling.config import Settings
from codling.llm.catalog import ModelInfo
from codling.store.header import SessionHeader
from codling.store.history import HistoryFile, HistoryRecorder, read_history
from codling.tools.ports import ShownCall
from codling.tools.specs import role_tools
from codling.vocabulary import PlanStep
from tests.fakes.approver import ScriptedApprover
from tests.fakes.deadlines import deadline
from tests.fakes.observer import observed
from tests.fakes.scenarios import Call, Fail, Gate, Say, Script, Until

MODEL = ModelInfo("test:delegates", context_limit=100_000)
PLAN_STEPS = [{"step": "Read parser.py", "status": "pending"}, {"step": "Fix the bug", "status": "pending"}]


def prompt_of(request: list[ModelMessage]) -> str:
    return "\n".join(
        str(p.content) for m in request if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, UserPromptPart)
    )


async def test_a_planner_works_alone_with_its_tools_and_its_plan_becomes_the_session_s(
    project: Path, settings: Settings
) -> None:
    script = Script(
        [
            [Say("I did the groundwork.")],  # the parent's first turn
            [Call("delegate", {"agent": "planner", "task": "Plan the parser fix", "context": "see parser.py"}, "d1")],
            [Call("update_plan", {"steps": PLAN_STEPS}, "p1")],  # the planner
            [Say("1. Read parser.py 2. Fix the bug")],  # the planner's answer
            [Say("The plan is ready.")],  # the parent again
        ]
    )
    session = open_session(settings, MODEL, project, approver=None, model_factory=script.factory())
    await session.run("look around. Never touch migrations/.")
    seen = observed(session)
    result = await session.run("plan the fix")
    assert result.text == "The plan is ready."
    # The planner was offered its role's tools only (no delegate: depth is bounded), with its instructions.
    assert sorted(script.tools[2]) == sorted(role_tools("planner")) == sorted(script.tools[3])
    planner_request = script.requests[2]
    assert prompt_text("planner") in (planner_request[-1].instructions or "")  # type: ignore[union-attr]
    asked = prompt_of(planner_request)
    assert "# Task\nPlan the parser fix" in asked and "# Context from the lead agent\nsee parser.py" in asked
    assert "# Prior context" in asked and "look around" in asked  # the parent's last turn summary
    assert render_pins(session.state.pins, 10_000) in asked  # the user's rules bind the delegate too
    assert "Never touch migrations/." in asked
    assert len(planner_request) == 1  # a fresh session: no conversation, only its task
    # Its steps showed under the parent call; its plan became the session's; its answer is the call's result.
    notes = [e for e in seen if isinstance(e, ToolCallNote)]
    assert notes and notes[0].call_id == "d1" and notes[0].text == "→ Update the plan"
    assert [e.steps for e in seen if isinstance(e, PlanUpdated)] == [
        (PlanStep("Read parser.py"), PlanStep("Fix the bug"))
    ]
    (call,) = result.tool_calls
    assert call.finished is not None and call.finished.text == "1. Read parser.py 2. Fix the bug"
    assert call.started.title == "Delegate to the planner: Plan the parser fix"


async def test_carryover_brings_the_previous_run_and_survives_a_restore(
    project: Path, settings: Settings, tmp_path: Path
) -> None:
    script = Script(
        [
            [Call("delegate", {"agent": "reviewer", "task": "Review parser.py"}, "d1")],
            [Say("Line 3 divides by zero.")],
            [Say("Reviewed.")],
            [Call("delegate", {"agent": "reviewer", "task": "Check the fix", "carryover": True}, "d2")],
            [Say("Fixed now.")],
            [Say("Done.")],
        ]
    )
    session = open_session(settings, MODEL, project, approver=None, model_factory=script.factory())
    path = tmp_path / "history.jsonl"
    file = HistoryFile(path, "s1")
    file.write(SessionHeader("s1", project, MODEL.id, "ask").record())
    session.subscribe(HistoryRecorder(file))
    await session.run("review it")
    file.close()
    restored = open_session(settings, MODEL, project, approver=None, model_factory=script.factory())
    restored.restore(read_history(path).events)
    assert restored.state.delegate_notes == {"reviewer": "Line 3 divides by zero."}
    await restored.run("check again")
    again = prompt_of(script.requests[4])
    assert "# Your previous run as the reviewer in this session ended with\nLine 3 divides by zero." in again


async def test_a_coder_s_edits_ask_the_user_and_cancelling_the_turn_stops_it(project: Path, settings: Settings) -> None:
    working = Gate()  # never opened: the second delegate's model is still answering when the turn is cancelled
    script = Script(
        [
            [Call("delegate", {"agent": "coder", "task": "Create notes.txt"}, "d1")],
            [Call("write_file", {"path": "notes.txt", "content": "hi"}, "w1")],
            [Say("Created notes.txt.")],
            [Say("Done.")],
            [Call("delegate", {"agent": "coder", "task": "Wait forever"}, "d2")],
            [Until(working), Say("never")],
        ]
    )
    approver = ScriptedApprover("allow_once")
    session = open_session(settings, MODEL, project, approver=approver, mode="ask", model_factory=script.factory())
    await session.run("make notes")
    assert (project / "notes.txt").read_text() == "hi"
    # The user was asked, as for any edit, under the delegate's call (the one the client shows).
    (asked,) = approver.asked
    assert (asked.tool_name, asked.title) == ("write_file", "coder: Write notes.txt")
    assert asked.within == ShownCall(
        "d1",
        "Delegate to the coder: Create notes.txt",
        "think",
        {"agent": "coder", "task": "Create notes.txt", "context": "", "carryover": False},
    )
    running = asyncio.create_task(session.run("wait"))
    await working.arrival()  # the delegate runs
    session.cancel()
    result = await asyncio.wait_for(running, deadline(5))
    assert result.stop_reason == "cancelled"
    assert result.tool_calls[0].finished is not None and result.tool_calls[0].finished.status == "failed"


def test_the_client_sees_a_delegate_s_steps_under_its_call() -> None:
    note = ToolCallNote("t", "d1", "→ Read parser.py\n→ Search for divide")
    assert translate(note) == [
        helpers.update_tool_call(
            "d1",
            status="in_progress",
            content=[helpers.tool_content(helpers.text_block("→ Read parser.py\n→ Search for divide"))],
        )
    ]


async def test_a_fallback_summary_keeps_what_delegates_found(project: Path, settings: Settings) -> None:
    down = ModelHTTPError(503, "test:delegates", {"message": "overloaded"})
    script = Script(
        [
            [Call("delegate", {"agent": "reviewer", "task": "Review parser.py"}, "d1")],
            [Say("Line 3 divides by zero.")],
            [Say("Reviewed.")],
            [Fail(down)],  # the summarize request
        ]
    )
    session = open_session(settings, MODEL, project, approver=None, model_factory=script.factory())
    await session.run("review it")
    seen = observed(session)
    await session.run("/compact")
    (done,) = [e for e in seen if isinstance(e, ContextCompacted)]
    assert done.fallback and "## Delegates' latest answers\n- reviewer: Line 3 divides by zero." in done.summary


async def test_a_delegate_that_fails_reports_what_it_did_and_keeps_the_last_good_answer(
    project: Path, settings: Settings
) -> None:
    (project / "a.txt").write_text("alpha\n")
    down = ModelHTTPError(400, "test:delegates", {"message": "down"})  # not retried: a 400 will not pass
    script = Script(
        [
            [Call("delegate", {"agent": "reviewer", "task": "Review a.txt"}, "d1")],
            [Say("a.txt is fine.")],
            [Say("Reviewed.")],
            [Call("delegate", {"agent": "reviewer", "task": "Review again"}, "d2")],
            [Call("read_file", {"path": "a.txt"}, "r1")],
            [Fail(down)],
            [Say("The reviewer failed.")],
        ]
    )
    session = open_session(settings, MODEL, project, approver=None, model_factory=script.factory())
    first = await session.run("review")
    result = await session.run("review again")
    (call,) = result.tool_calls
    assert call.finished is not None and call.finished.status == "failed"
    told = call.finished.text
    assert "the reviewer did not finish: The model provider returned HTTP 400" in told
    assert "What it did:\n→ Read a.txt" in told
    assert session.state.delegate_notes == {"reviewer": "a.txt is fine."}  # the failed run replaced nothing
    assert first.usage.requests == 3  # the turn's usage counts its delegate's: 2 of the lead + 1 of the reviewer


async def test_always_allow_is_shared_between_the_session_and_its_delegates(project: Path, settings: Settings) -> None:
    script = Script(
        [
            [Call("write_file", {"path": "one.txt", "content": "1"}, "w1")],
            [Say("Wrote one.")],
            [Call("delegate", {"agent": "coder", "task": "Write two.txt"}, "d1")],
            [Call("write_file", {"path": "two.txt", "content": "2"}, "w2")],
            [Say("Wrote two.")],
            [Say("Both written.")],
        ]
    )
    approver = ScriptedApprover("allow_always")
    session = open_session(settings, MODEL, project, approver=approver, mode="ask", model_factory=script.factory())
    await session.run("write one")
    await session.run("have a coder write two")
    assert (project / "two.txt").read_text() == "2"
    assert [r.tool_call_id for r in approver.asked] == ["w1"]  # "always allow" covered the delegate's edit


async def test_what_a_coder_changed_is_the_turn_s_and_survives_a_restore(
    project: Path, settings: Settings, tmp_path: Path
) -> None:
    script = Script(
        [
            [Call("delegate", {"agent": "coder", "task": "Write b.py"}, "d1")],
            [Call("write_file", {"path": "b.py", "content": "x = 1\n"}, "w1")],
            [Say("Wrote b.py.")],
            [Say("Done.")],
        ]
    )
    session = open_session(settings, MODEL, project, approver=None, mode="yolo", model_factory=script.factory())
    path = tmp_path / "history.jsonl"
    file = HistoryFile(path, "s1")
    file.write(SessionHeader("s1", project, MODEL.id, "yolo").record())
    session.subscribe(HistoryRecorder(file))
    result = await session.run("have b.py written")
    file.close()
    b = project.resolve() / "b.py"
    assert session.state.recent_files == (b,)
    assert session.state.turn_recaps[-1].files_changed == (b,)
    assert result.tool_calls[0].finished is not None and result.tool_calls[0].finished.changed == (b,)
    assert "Files it changed: b.py" in session.state.entries[-1].text  # what later turns see of the call
    restored = open_session(settings, MODEL, project, approver=None, model_factory=script.factory())
    restored.restore(read_history(path).events)
    assert restored.state.recent_files == (b,)


async def test_delegates_can_be_switched_off(project: Path, settings: Settings) -> None:
    script = Script([[Say("one")], [Say("two")]])
    session = open_session(settings, MODEL, project, approver=None, model_factory=script.factory())
    await session.run("first")
    session.options = replace(session.options, delegates=False)
    await session.run("second")
    assert "delegate" in script.tools[0] and "delegate" not in script.tools[1]
    off = open_session(
        replace(settings, delegates=False), MODEL, project, approver=None, model_factory=script.factory()
    )
    assert off.deps.delegator is None


async def test_a_delegate_thinks_as_the_session_chose(project: Path, settings: Settings) -> None:
    script = Script(
        [
            [Call("delegate", {"agent": "reviewer", "task": "Review it", "context": ""}, "d1")],
            [Say("Looks fine.")],  # the reviewer
            [Say("Reviewed.")],
        ]
    )
    thinker = replace(MODEL, thinking=True)
    # A model whose profile says it thinks (pydantic-ai passes the setting on only then).
    model = script.model(profile={"supports_thinking": True})
    session = open_session(settings, thinker, project, approver=None, model_factory=lambda _: model)
    session.set_thinking(Thinking(on=True, level="low"))
    await session.run("review the change")
    # Every request of the turn, the reviewer's included, asked for a low effort.
    assert [info.model_request_parameters.thinking for info in script.infos] == ["low", "low", "low"]
