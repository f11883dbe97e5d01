"""ConversationSession: the turn loop on scripted FunctionModel scenarios, with real tools on real files."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart

from codling.brain.events import (
    Event,
    TextDelta,
    ThoughtDelta,
    ToolCallFinished,
    ToolCallStarted,
    TurnEnded,
    TurnFailed,
    TurnStarted,
    Usage,
    UsageUpdated,
)
from codling.brain.factory import open_session
from codling.brain.session import ConversationSession
from codling.brain.state import SessionState
from codling.config import Settings
from codling.errors import SessionError
from codling.llm.catalog import ModelInfo
from codling.mcp_servers import McpServerSpec
from codling.tools.approval import Permissions
from codling.tools.deps import ToolDeps
from codling.tools.local import LocalFileSystem, LocalTerminal
from codling.tools.ports import Approver
from codling.tools.workspace import Workspace
from codling.vocabulary import FileDiff, PermissionMode
from tests.fakes.approver import ScriptedApprover
from tests.fakes.deadlines import deadline
from tests.fakes.processes import Fifo, gone
from tests.fakes.scenarios import Call, Fail, Say, Script, Think, Until

MODEL = ModelInfo("test:scripted", context_limit=100_000)


def session_for(
    script: Script,
    project: Path,
    settings: Settings,
    mode: PermissionMode = "yolo",
    approver: Approver | None = None,
    mcp_servers: tuple[McpServerSpec, ...] = (),
) -> ConversationSession:
    return open_session(
        settings,
        MODEL,
        project,
        approver=approver,
        mode=mode,
        model_factory=script.factory(),
        mcp_servers=mcp_servers,
    )


async def collect(session: ConversationSession, prompt: str) -> list[Event]:
    return [event async for event in session.stream(prompt)]


async def test_a_session_leaves_the_deps_it_is_given_as_they_were(project: Path, settings: Settings) -> None:
    approver = ScriptedApprover("allow_once")
    permissions = Permissions("ask", approver)
    deps = ToolDeps(Workspace(project), LocalFileSystem(), LocalTerminal(), permissions)
    before = replace(deps)
    session = ConversationSession(SessionState("s", project, MODEL, "ask"), deps, model_factory=Script([]).factory())
    assert deps == before and permissions.approver is approver
    # The session works with its own view of them: it asks through a wrapper that delivers events first, and
    # a mode change still applies to the permissions it was given.
    assert session.deps.permissions.approver is not approver and session.deps.delegator is not None
    session.set_mode("yolo")
    assert (permissions.mode, session.deps.permissions.mode) == ("yolo", "yolo")


async def test_text_streams_and_turn_ends(project: Path, settings: Settings) -> None:
    session = session_for(Script([[Say("Hel", "lo")]]), project, settings)
    events = await collect(session, "hi")
    assert isinstance(events[0], TurnStarted)
    assert events[0].prompt == "hi"
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Hello"
    end = events[-1]
    assert isinstance(end, TurnEnded)
    assert (end.stop_reason, end.error, end.usage.requests) == ("end_turn", False, 1)


async def test_text_reaches_observers_before_the_reply_is_finished(project: Path, settings: Settings) -> None:
    seen_first = asyncio.Event()
    script = Script([[Say("first "), Until(seen_first), Say("second")]])
    session = session_for(script, project, settings)
    order: list[str] = []

    async def observer(event: Event) -> None:
        if isinstance(event, TextDelta):
            order.append(event.text)
            seen_first.set()

    session.subscribe(observer)
    result = await asyncio.wait_for(session.run("go"), timeout=deadline(5))
    # The model only produced "second" after the observer had received "first".
    assert order == ["first ", "second"]
    assert result.text == "first second"


async def test_observers_see_exactly_what_stream_yields(project: Path, settings: Settings) -> None:
    session = session_for(Script([[Think("hmm"), Say("ok")]]), project, settings)
    observed: list[Event] = []

    async def observer(event: Event) -> None:
        observed.append(event)

    session.subscribe(observer)
    streamed = await collect(session, "x")
    assert observed == streamed
    assert [type(e) for e in streamed] == [TurnStarted, ThoughtDelta, TextDelta, UsageUpdated, TurnEnded]
    assert isinstance(streamed[0], TurnStarted)
    assert streamed[1] == ThoughtDelta(streamed[0].turn_id, "hmm")


async def test_tool_call_edits_file_and_reports_diff(project: Path, settings: Settings) -> None:
    script = Script(
        [
            [Call("edit_file", {"path": "src/app.py", "old_text": "'hello'", "new_text": "'hi'"}, "c1")],
            [Say("Done.")],
        ]
    )
    session = session_for(script, project, settings, mode="yolo")
    events = await collect(session, "change greeting")
    target = project / "src" / "app.py"
    assert target.read_text() == "def greet():\n    return 'hi'\n"
    started = next(e for e in events if isinstance(e, ToolCallStarted))
    finished = next(e for e in events if isinstance(e, ToolCallFinished))
    assert (started.call_id, started.tool_name, started.tool_kind) == ("c1", "edit_file", "edit")
    assert started.raw_input == {"path": "src/app.py", "old_text": "'hello'", "new_text": "'hi'"}
    assert started.locations[0].path == target
    assert finished.status == "completed"
    assert finished.diff == FileDiff(target, "def greet():\n    return 'hello'\n", "def greet():\n    return 'hi'\n")
    # The second model request carried the tool result for the same call id.
    returns = [p for m in script.requests[1] for p in getattr(m, "parts", []) if isinstance(p, ToolReturnPart)]
    assert [r.tool_call_id for r in returns] == ["c1"]


async def test_bad_path_is_a_failed_tool_call_the_model_can_act_on(project: Path, settings: Settings) -> None:
    script = Script([[Call("read_file", {"path": "../outside.txt"}, "c1")], [Say("I cannot read that.")]])
    session = session_for(script, project, settings)
    result = await session.run("read it")
    (record,) = result.tool_calls
    assert record.finished is not None
    assert record.finished.status == "failed"
    assert "outside the workspace" in record.finished.text
    assert result.text == "I cannot read that."
    assert result.error is None


async def test_request_bound_ends_turn_with_max_turn_requests(project: Path, settings: Settings) -> None:
    def always_list(_messages: object) -> list[Call]:
        return [Call("list_files", {}, f"c{len(script.requests)}")]

    script = Script([], fallback=always_list)
    session = open_session(
        Settings(home=settings.home, max_requests_per_turn=3, env=settings.env),
        MODEL,
        project,
        approver=None,
        mode="yolo",
        model_factory=script.factory(),
    )
    result = await session.run("loop forever")
    assert result.stop_reason == "max_turn_requests"
    assert len(script.requests) == 3
    assert result.error is None


async def test_provider_error_gives_error_reply_and_session_stays_usable(project: Path, settings: Settings) -> None:
    boom = ModelHTTPError(400, "scripted", {"error": {"message": "upstream exploded"}})
    script = Script([[Fail(boom)], [Say("back again")]])
    session = session_for(script, project, settings)
    events = await collect(session, "first")
    failed = [e for e in events if isinstance(e, TurnFailed)]
    assert len(failed) == 1
    assert "HTTP 400" in failed[0].message and "upstream exploded" in failed[0].message
    assert isinstance(events[-1], TurnEnded) and events[-1].error is True
    result = await session.run("second")
    assert (result.text, result.error) == ("back again", None)
    # The failed turn is in the history as an error reply.
    first_reply = session.state.entries[1]
    assert first_reply.role == "assistant" and "[Error]" in first_reply.text


async def test_history_across_turns_is_text_with_tool_summaries(project: Path, settings: Settings) -> None:
    script = Script(
        [
            [Call("run_command", {"command": "echo marker-42"}, "c1")],
            [Say("ran it")],
            [Say("second answer")],
        ]
    )
    session = session_for(script, project, settings, mode="yolo")
    await session.run("run echo")
    await session.run("and now?")
    third_request = script.requests[2]
    parts = [p for m in third_request for p in m.parts]
    assert not any(isinstance(p, ToolCallPart | ToolReturnPart) for p in parts)
    earlier = [m for m in third_request if isinstance(m, ModelResponse)]
    assert len(earlier) == 1
    summary = earlier[0].parts[0]
    assert isinstance(summary, TextPart)
    assert summary.content.startswith("ran it")
    assert "echo marker-42" in summary.content and "marker-42" in summary.content.split("\n", 2)[-1]
    assert isinstance(third_request[0], ModelRequest)


async def test_rejected_permission_is_reported_and_model_carries_on(project: Path, settings: Settings) -> None:
    approver = ScriptedApprover("reject")
    script = Script(
        [
            [Call("run_command", {"command": "rm -rf build"}, "c1")],
            [Say("Understood, I will not delete it.")],
        ]
    )
    session = session_for(script, project, settings, mode="ask", approver=approver)
    result = await session.run("clean")
    assert [r.subject for r in approver.asked] == ["rm -rf build"]
    assert approver.asked[0].kind == "execute"
    (record,) = result.tool_calls
    assert record.finished is not None and record.finished.status == "failed"
    assert "rejected" in record.finished.text
    assert result.text == "Understood, I will not delete it."
    assert result.stop_reason == "end_turn"


async def test_cancel_stops_the_model_promptly(project: Path, settings: Settings) -> None:
    script = Script([[Say("thinking about it"), Until(asyncio.Event())]])  # a reply that never ends
    session = session_for(script, project, settings)
    events: list[Event] = []

    async def consume() -> None:
        async for event in session.stream("slow"):
            events.append(event)
            if isinstance(event, TextDelta):
                session.cancel()

    await asyncio.wait_for(consume(), timeout=deadline(5))
    assert isinstance(events[-1], TurnEnded)
    assert events[-1].stop_reason == "cancelled"
    assert not session.running


async def test_cancel_kills_running_command(project: Path, settings: Settings, tmp_path: Path) -> None:
    started = Fifo(tmp_path / "started")  # the command says it runs, with its pid, through a named pipe
    command = f"sh -c 'echo $$ > {started.path}; exec sleep 300'"
    script = Script([[Call("run_command", {"command": command}, "c1")]])
    session = session_for(script, project, settings, mode="yolo")
    pids: list[int] = []

    async def consume() -> list[Event]:
        seen: list[Event] = []
        async for event in session.stream("run it"):
            seen.append(event)
            if isinstance(event, ToolCallStarted):
                pids.append(await started.pid())  # the command surely runs
                session.cancel()
        return seen

    with started:
        events = await asyncio.wait_for(consume(), timeout=deadline(20))
    assert isinstance(events[-1], TurnEnded) and events[-1].stop_reason == "cancelled"
    # The interrupted call is closed, so no client shows it running forever.
    assert isinstance(events[0], TurnStarted)
    assert events[-3] == ToolCallFinished(
        events[0].turn_id, "c1", "run_command", "failed", "aborted: the user cancelled the turn", ended_by="cancelled"
    )
    assert await gone(pids[0])
    # The next turn still works.
    script.responses.append([Say("fine")])
    assert (await session.run("again")).text == "fine"


async def test_second_prompt_while_running_is_refused(project: Path, settings: Settings) -> None:
    gate = asyncio.Event()
    session = session_for(Script([[Say("a"), Until(gate)]]), project, settings)
    stream = session.stream("one")
    first = await anext(stream)
    assert isinstance(first, TurnStarted)
    with pytest.raises(SessionError):
        await anext(session.stream("two"))
    gate.set()
    rest = [e async for e in stream]
    assert isinstance(rest[-1], TurnEnded)


async def test_usage_is_reported(project: Path, settings: Settings) -> None:
    session = session_for(Script([[Say("x")]]), project, settings)
    result = await session.run("count")
    assert result.usage.requests == 1
    assert result.usage.input_tokens > 0
    assert isinstance(result.usage, Usage)


async def test_bad_tool_arguments_are_retried_and_failed_calls_are_closed(project: Path, settings: Settings) -> None:
    script = Script([[Call("read_file", {"wrong": 1}, "c1")], [Say("sorry")]])
    session = session_for(script, project, settings)
    events = await collect(session, "read")
    started = next(e for e in events if isinstance(e, ToolCallStarted))
    finished = next(e for e in events if isinstance(e, ToolCallFinished))
    assert started.title == "read_file (no path given)"
    assert finished.status == "failed" and "path" in finished.text
    assert isinstance(events[-1], TurnEnded) and not events[-1].error


async def test_what_the_model_said_at_each_step_stays_a_paragraph_of_its_own(project: Path, settings: Settings) -> None:
    # Glued, the played model read "…yielded at all).Fixed." in its history, its ledger and its summaries.
    script = Script(
        [
            [Say("The loop never yielded at all)."), Call("run_command", {"command": "true"}, "c1")],
            [Say("Fixed.")],
        ]
    )
    session = session_for(script, project, settings)
    result = await session.run("fix the hang")
    assert result.text == "The loop never yielded at all).\n\nFixed."
    assert session.state.entries[1].text.startswith("The loop never yielded at all).\n\nFixed.\n\n[Tool calls")
    assert session.state.turn_recaps[-1].reply == "Fixed."
