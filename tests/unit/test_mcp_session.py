"""MCP servers in a session: real servers (the ``mcp`` SDK's, over stdio, HTTP and SSE) and a scripted model."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import replace
from io import StringIO
from pathlib import Path

import pytest
from acp import helpers
from acp.schema import ToolCallProgress
from pydantic_ai.messages import BinaryContent, ModelRequest, ToolReturnPart

from codling.acp.translate import translate
from codling.brain.events import (
    Event,
    McpServerNotice,
    McpServersStarting,
    ToolCallFinished,
    ToolCallStarted,
    TurnEnded,
    TurnStarted,
)
from codling.brain.factory import open_session
from codling.brain.session import ConversationSession
from codling.cli.render import TerminalRenderer
from codling.config import Settings
from codling.llm.tokens import count_tokens
from codling.mcp_servers import McpServerSpec
from codling.store.records import event_record
from codling.tools.mcp.names import tool_name
from codling.tools.ports import Answer, Approver
from codling.vocabulary import PermissionMode
from tests.fakes.approver import ScriptedApprover
from tests.fakes.deadlines import deadline
from tests.fakes.mcp import http_server, pid_written, stdio_spec
from tests.fakes.mcp_server import HOSTILE_NAME, PNG
from tests.fakes.processes import Fifo, gone
from tests.fakes.scenarios import Call, Say, Script, Until
from tests.unit.test_session import MODEL, session_for

pytestmark = pytest.mark.timeout(deadline(90))


@pytest.fixture(scope="module")
def shared() -> Iterator[McpServerSpec]:
    """The fake server over HTTP, one for the tests that need only its tools (starting one takes most of a
    second; the tests of starting, stopping and crashing run servers of their own)."""
    with http_server("http", "fake") as url:
        yield McpServerSpec("fake", "http", url=url)


def mcp_session(
    script: Script,
    project: Path,
    settings: Settings,
    *servers: McpServerSpec,
    mode: PermissionMode = "yolo",
    approver: Approver | None = None,
) -> ConversationSession:
    return session_for(script, project, settings, mode, approver, servers)


async def turn(session: ConversationSession, prompt: str) -> list[Event]:
    return [event async for event in session.stream(prompt)]


def tool_returns(script: Script, request: int) -> list[ToolReturnPart]:
    return [
        part
        for message in script.requests[request]
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    ]


async def test_a_servers_tools_reach_the_model_and_a_call_reaches_the_server(project: Path, settings: Settings) -> None:
    script = Script([[Call("mcp__fake__echo", {"text": "hi there"}, "c1")], [Say("done")]])
    session = mcp_session(script, project, settings, stdio_spec("fake"))
    try:
        events = await turn(session, "use the echo tool")
    finally:
        await session.close()
    offered = script.tools[0]
    for name in ("mcp__fake__echo", "mcp__fake__add", "mcp__fake__slow", "read_file", "run_command"):
        assert name in offered
    (started,) = [e for e in events if isinstance(e, ToolCallStarted)]
    assert (started.title, started.tool_kind) == ('fake: echo (text: "hi there")', "other")
    (finished,) = [e for e in events if isinstance(e, ToolCallFinished)]
    assert (finished.status, finished.text) == ("completed", "echo: hi there")
    (returned,) = tool_returns(script, 1)
    assert (returned.tool_name, returned.content) == ("mcp__fake__echo", "echo: hi there")
    # The next turn's history keeps a plain-text summary of the call, like any tool's.
    assert "fake: echo" in session.state.entries[-1].text and "echo: hi there" in session.state.entries[-1].text


async def test_http_and_sse_servers_work_like_stdio_ones(project: Path, settings: Settings) -> None:
    with http_server("http", "web") as http_url, http_server("sse", "events") as sse_url:
        script = Script(
            [
                [Call("mcp__web__add", {"a": 2, "b": 40}, "c1"), Call("mcp__sse__whoami", {}, "c2")],
                [Say("done")],
            ]
        )
        servers = (McpServerSpec("web", "http", url=http_url), McpServerSpec("sse", "sse", url=sse_url))
        session = mcp_session(script, project, settings, *servers)
        try:
            await turn(session, "add")
        finally:
            await session.close()
    returned = {part.tool_name: part.content for part in tool_returns(script, 1)}
    assert returned == {"mcp__web__add": "42", "mcp__sse__whoami": "events token="}


async def test_two_sessions_see_only_their_own_servers(project: Path, settings: Settings) -> None:
    first_script = Script([[Call("mcp__one__whoami", {}, "c1")], [Say("ok")]])
    second_script = Script([[Call("mcp__two__whoami", {}, "c1")], [Say("ok")]])
    first = mcp_session(first_script, project, settings, stdio_spec("one", MCP_FAKE_TOKEN="t-one"))
    second = mcp_session(second_script, project, settings, stdio_spec("two", MCP_FAKE_TOKEN="t-two"))
    try:
        await asyncio.gather(turn(first, "who"), turn(second, "who"))
    finally:
        await asyncio.gather(first.close(), second.close())
    first_mcp = [n for n in first_script.tools[0] if n.startswith("mcp__")]
    second_mcp = [n for n in second_script.tools[0] if n.startswith("mcp__")]
    assert len(first_mcp) == len(second_mcp) == 9
    assert all(n.startswith("mcp__one__") for n in first_mcp)
    assert all(n.startswith("mcp__two__") for n in second_mcp)
    assert tool_returns(first_script, 1)[0].content == "one token=t-one"
    assert tool_returns(second_script, 1)[0].content == "two token=t-two"


async def test_a_server_that_cannot_start_is_reported_and_the_session_goes_on(
    project: Path, settings: Settings
) -> None:
    script = Script([[Say("fine without it")]])
    servers = (stdio_spec("broken", "--fail"), McpServerSpec("ghost", "stdio", command="/nonexistent/mcp-server"))
    session = mcp_session(script, project, settings, *servers)
    try:
        events = await turn(session, "hello")
    finally:
        await session.close()
    notices = {e.server: e for e in events if isinstance(e, McpServerNotice)}
    assert set(notices) == {"broken", "ghost"}
    assert notices["broken"].message.startswith("MCP server broken (")
    assert "did not start" in notices["broken"].message
    assert notices["broken"].detail == "error: the fake server refuses to start (--fail)"
    assert notices["ghost"].detail == "no such program: /nonexistent/mcp-server"
    assert isinstance(events[-1], TurnEnded) and not events[-1].error
    assert not [n for n in script.tools[0] if n.startswith("mcp__")]


async def test_a_slow_server_is_waited_for_within_its_startup_timeout_and_then_left_out(
    project: Path, settings: Settings
) -> None:
    from dataclasses import replace

    script = Script([[Say("ok")]])
    session = mcp_session(
        script, project, replace(settings, mcp_startup_timeout=1.0), stdio_spec("sloth", "--start-delay", "30")
    )
    try:
        events = await turn(session, "hello")
    finally:
        await session.close()
    (notice,) = [e for e in events if isinstance(e, McpServerNotice)]
    assert notice.message.startswith("MCP server sloth (") and "no answer within 1 s" in notice.message + notice.detail
    assert isinstance(events[-1], TurnEnded) and not events[-1].error


async def test_a_server_crashing_mid_call_is_restarted_once_at_the_next_call_then_its_tools_go(
    project: Path, settings: Settings
) -> None:
    # (issue 31 item 7: a crashed server's tools were gone for the rest of the session; now it is restarted once)
    script = Script(
        [
            [Call("mcp__fake__crash", {}, "c1")],
            [Call("mcp__fake__echo", {"text": "back"}, "c2")],
            [Call("mcp__fake__crash", {}, "c3")],
            [Say("it crashed twice")],
            [Say("still here")],
        ],
    )
    session = mcp_session(script, project, settings, stdio_spec("fake"))
    try:
        events = await turn(session, "crash it")
        later = await turn(session, "again")
    finally:
        await session.close()
    first, echoed, second = [e for e in events if isinstance(e, ToolCallFinished)]
    assert first.status == "failed"
    assert first.text.startswith("The MCP server fake stopped working while running crash (")
    assert "it will be started again when one of its tools is called next." in first.text
    assert "Its last output:" in first.text and first.text.endswith("fatal: the fake server crashed on purpose")
    assert "mcp__fake__echo" in script.tools[1]  # still offered while it is down
    assert (echoed.status, echoed.text) == ("completed", "echo: back")  # a new process answered
    assert second.status == "failed"
    assert "it stopped working again, after it had been restarted once, so its tools are gone" in second.text
    crashed, gone = [e for e in events if isinstance(e, McpServerNotice)]
    assert crashed.message.startswith("MCP server fake stopped working during crash: ")
    assert crashed.message.endswith("; it will be restarted at its next call")
    assert crashed.detail.endswith("fatal: the fake server crashed on purpose")
    assert gone.message.startswith("MCP server fake stopped working again, after it had been restarted once")
    assert isinstance(later[-1], TurnEnded) and not later[-1].error
    assert not [n for n in script.tools[4] if n.startswith("mcp__")]


async def test_cancelling_the_turn_cancels_the_running_mcp_call(
    project: Path, settings: Settings, tmp_path: Path
) -> None:
    marker = Fifo(tmp_path / "marker")  # the server's tool says "started", then "cancelled", through a named pipe
    script = Script([[Call("mcp__fake__slow", {"seconds": 60, "marker": str(marker.path)}, "c1")]])
    session = mcp_session(script, project, settings, stdio_spec("fake"))
    try:
        events: list[Event] = []

        async def run() -> None:
            async for event in session.stream("be slow"):
                events.append(event)

        task = asyncio.create_task(run())
        await marker.receive(lambda said: said == "started", within=20)  # the server has the call
        session.cancel()
        await asyncio.wait_for(task, deadline(10))
        said = await marker.receive(lambda said: said.endswith("cancelled"))
    finally:
        await session.close()
        marker.close()
    assert said == "startedcancelled"
    assert isinstance(events[-1], TurnEnded) and events[-1].stop_reason == "cancelled"


async def test_closing_the_session_ends_the_server_process(project: Path, settings: Settings, tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    session = mcp_session(Script([[Say("ok")]]), project, settings, stdio_spec("fake", MCP_FAKE_PIDFILE=str(pidfile)))
    await turn(session, "hello")
    pid = await pid_written(pidfile)
    await session.close()
    assert await gone(pid)


@pytest.mark.parametrize(
    ("mode", "answers", "runs", "asked"),
    [
        ("read-only", (), False, 0),
        ("ask", ("reject",), False, 1),
        ("ask", ("allow_once",), True, 1),
        ("accept-edits", ("allow_always",), True, 1),
        ("yolo", (), True, 0),
    ],
)
async def test_mcp_calls_are_gated_like_commands(
    project: Path,
    settings: Settings,
    shared: McpServerSpec,
    mode: PermissionMode,
    answers: tuple[Answer, ...],
    runs: bool,
    asked: int,
) -> None:
    approver = ScriptedApprover(*answers)
    script = Script([[Call("mcp__fake__add", {"a": 1, "b": 2}, "c1")], [Say("ok")]])
    session = mcp_session(script, project, settings, shared, mode=mode, approver=approver)
    try:
        await turn(session, "add")
    finally:
        await session.close()
    (returned,) = tool_returns(script, 1)
    assert (returned.content == "3") is runs
    assert len(approver.asked) == asked
    if asked:
        (request,) = approver.asked
        assert (request.mcp_tool, request.title, request.subject) == (
            "mcp__fake__add",
            "fake: add (a: 1, b: 2)",
            "a: 1, b: 2",
        )


async def test_always_allowing_one_mcp_tool_allows_that_tool_only(
    project: Path, settings: Settings, shared: McpServerSpec
) -> None:
    approver = ScriptedApprover("allow_always", "allow_once")
    script = Script(
        [
            [Call("mcp__fake__add", {"a": 1, "b": 2}, "c1")],
            [Call("mcp__fake__add", {"a": 2, "b": 2}, "c2")],
            [Call("mcp__fake__echo", {"text": "x"}, "c3")],
            [Say("ok")],
        ]
    )
    session = mcp_session(script, project, settings, shared, mode="ask", approver=approver)
    try:
        await turn(session, "go")
    finally:
        await session.close()
    assert [r.mcp_tool for r in approver.asked] == ["mcp__fake__add", "mcp__fake__echo"]


async def test_a_huge_result_is_capped_and_a_hostile_tool_name_is_made_safe(
    project: Path, settings: Settings, shared: McpServerSpec
) -> None:
    hostile = tool_name("fake", HOSTILE_NAME, set())
    script = Script([[Call("mcp__fake__huge", {"chars": 2_000_000}, "c1"), Call(hostile, {}, "c2")], [Say("ok")]])
    session = mcp_session(script, project, settings, shared)
    try:
        await turn(session, "go")
    finally:
        await session.close()
    assert hostile.startswith("mcp__fake__read_file_rm_-rf_") and len(hostile) <= 64
    assert hostile in script.tools[0]
    returned = {part.tool_name: str(part.content) for part in tool_returns(script, 1)}
    cap = session.context.budget.tool_output
    assert count_tokens(returned["mcp__fake__huge"]) <= cap
    assert "tokens cut here" in returned["mcp__fake__huge"] and returned["mcp__fake__huge"].startswith("line 000000")
    assert returned[hostile] == "hostile tool ran"


async def test_the_context_counts_the_mcp_tool_definitions(
    project: Path, settings: Settings, shared: McpServerSpec
) -> None:
    plain = mcp_session(Script([[Say("ok")]]), project, settings)
    with_mcp = mcp_session(Script([[Say("ok")]]), project, settings, shared)
    try:
        assert with_mcp.deps.mcp is not None
        await with_mcp.deps.mcp.ready()
        assert with_mcp.context.tool_tokens() > plain.context.tool_tokens() + 100
    finally:
        await with_mcp.close()


async def test_a_server_that_fails_between_turns_is_shown_to_the_observers(project: Path, settings: Settings) -> None:
    seen: list[Event] = []
    reported = asyncio.Event()

    async def observe(event: Event) -> None:
        seen.append(event)
        reported.set()

    session = mcp_session(Script([]), project, settings, stdio_spec("broken", "--fail"))
    session.subscribe(observe)
    session.start_servers()
    try:
        await asyncio.wait_for(reported.wait(), 20)
    finally:
        await session.close()
    (notice,) = seen
    assert isinstance(notice, McpServerNotice) and notice.turn_id == "" and notice.server == "broken"


async def test_delegates_get_no_mcp_tools(project: Path, settings: Settings, shared: McpServerSpec) -> None:
    gate = asyncio.Event()
    gate.set()
    script = Script(
        [
            [Call("delegate", {"agent": "planner", "task": "plan it"}, "c1")],
            [Until(gate), Say("the plan")],
            [Say("done")],
        ]
    )
    session = mcp_session(script, project, settings, shared)
    try:
        await turn(session, "plan")
    finally:
        await session.close()
    assert any(n.startswith("mcp__") for n in script.tools[0])
    assert not any(n.startswith("mcp__") for n in script.tools[1])


async def test_a_call_past_the_tool_timeout_is_cancelled_and_the_server_stays(
    project: Path, settings: Settings, tmp_path: Path
) -> None:
    from dataclasses import replace

    marker = tmp_path / "marker"
    script = Script(
        [
            [Call("mcp__fake__slow", {"seconds": 60, "marker": str(marker)}, "c1")],
            [Call("mcp__fake__add", {"a": 1, "b": 1}, "c2")],
            [Say("ok")],
        ]
    )
    session = mcp_session(script, project, replace(settings, mcp_tool_timeout=1.0), stdio_spec("fake"))
    try:
        events = await turn(session, "slow then add")
    finally:
        await session.close()
    finished = [e for e in events if isinstance(e, ToolCallFinished)]
    assert [f.status for f in finished] == ["failed", "completed"]
    assert finished[0].text == "slow on MCP server fake did not answer within 1 s and was cancelled."
    assert finished[1].text == "2"


async def test_a_turn_waiting_for_servers_shows_the_wait_until_each_is_ready_or_failed(
    project: Path, settings: Settings
) -> None:
    # (issue 31 item 6: the first message waited silently for MCP servers, 17 s with six)
    script = Script([[Say("one")], [Say("two")]])
    servers = (stdio_spec("fake"), McpServerSpec("ghost", "stdio", command="/nonexistent/mcp-server"))
    session = mcp_session(script, project, settings, *servers)
    try:
        first = await turn(session, "hello")
        second = await turn(session, "again")
    finally:
        await session.close()
    waits = [e for e in first if isinstance(e, McpServersStarting)]
    assert isinstance(first[0], TurnStarted)
    assert waits[0] == McpServersStarting(first[0].turn_id, waits[0].call_id, ("fake", "ghost"), 0, 0, 2, "waiting")
    assert waits[0].title == "Starting MCP servers: fake, ghost (0 of 2 ready)…"
    (progress,) = waits[1:-1]  # one server settled, the other still starting
    assert progress.status == "progress" and len(progress.starting) == 1 and progress.ready + progress.failed == 1
    assert waits[-1] == replace(waits[0], starting=(), ready=1, failed=1, status="ready")
    assert waits[-1].title == "MCP servers started (1 of 2 ready, 1 failed)"
    # The wait ends before the model is asked, the failure's own notice inside it.
    notice = next(e for e in first if isinstance(e, McpServerNotice))
    assert first.index(waits[0]) < first.index(notice) < first.index(waits[-1])
    assert [e for e in first[first.index(waits[-1]) :] if isinstance(e, McpServerNotice)] == []
    assert "mcp__fake__echo" in script.tools[0]
    # Servers already settled: nothing to wait for, nothing shown.
    assert not [e for e in second if isinstance(e, McpServersStarting)]


WAITING = McpServersStarting("t1", "mcp-start-1", ("a", "b"), 4, 0, 6)


def test_the_editor_sees_the_wait_as_a_card_retitled_and_settled() -> None:
    title = "Starting MCP servers: a, b (4 of 6 ready)…"
    assert translate(WAITING) == [helpers.start_tool_call("mcp-start-1", title, kind="other", status="in_progress")]
    progress = replace(WAITING, starting=("b",), ready=5, status="progress")
    assert translate(progress) == [
        helpers.update_tool_call("mcp-start-1", title="Starting MCP servers: b (5 of 6 ready)…")
    ]
    done = replace(WAITING, starting=(), ready=5, failed=1, status="ready")
    assert translate(done) == [
        helpers.update_tool_call(
            "mcp-start-1", title="MCP servers started (5 of 6 ready, 1 failed)", status="completed"
        )
    ]
    assert translate(replace(WAITING, status="cancelled")) == [
        helpers.update_tool_call(
            "mcp-start-1", title="Stopped waiting for MCP servers a, b: the turn was cancelled", status="failed"
        )
    ]
    assert event_record(WAITING, "20261122-0b9f3c2a41de") is None  # live only


async def test_the_terminal_prints_the_wait_once_dimmed_on_stderr() -> None:
    out, err = StringIO(), StringIO()
    renderer = TerminalRenderer(out, err=err, color=False, interactive=False)
    for event in (WAITING, replace(WAITING, status="progress"), replace(WAITING, status="ready")):
        await renderer(event)
    assert err.getvalue() == "Starting MCP servers: a, b (4 of 6 ready)…\n"
    assert out.getvalue() == ""


async def test_cancelling_a_turn_that_waits_for_servers_settles_the_wait_as_cancelled(
    project: Path, settings: Settings
) -> None:
    script = Script([[Say("never asked")]])
    session = mcp_session(script, project, settings, stdio_spec("sloth", "--start-delay", "60"))
    events: list[Event] = []
    try:
        async for event in session.stream("hello"):
            events.append(event)
            if isinstance(event, McpServersStarting) and event.status == "waiting":
                session.cancel()
    finally:
        await session.close()
    waits = [e for e in events if isinstance(e, McpServersStarting)]
    assert [w.status for w in waits] == ["waiting", "cancelled"]
    assert waits[-1].title == "Stopped waiting for MCP servers sloth: the turn was cancelled"
    assert isinstance(events[-1], TurnEnded) and events[-1].stop_reason == "cancelled"
    assert script.requests == []


LINK = "[resource link: Chart data (chart.csv) <file:///srv/data/chart.csv>, text/csv: The numbers behind the chart.]"


@pytest.mark.parametrize("sees", [True, False], ids=["sees-images", "blind"])
async def test_an_mcp_tools_image_reaches_a_model_that_sees_images_and_its_link_stays_a_link(
    sees: bool, project: Path, settings: Settings
) -> None:
    # (issue 31 item 7: images and resource links were flattened to "[image …: not shown to the model]" and
    # "[resource URI]" for every model)
    script = Script([[Call("mcp__fake__picture", {}, "c1")], [Say("a chart")], [Say("still a chart")]])
    model = replace(MODEL, images=sees)
    session = open_session(
        settings,
        model,
        project,
        approver=None,
        mode="yolo",
        model_factory=script.factory(),
        mcp_servers=(stdio_spec("fake"),),
    )
    try:
        events = await turn(session, "show me the chart")
        later = await turn(session, "and now?")  # the history with the image goes on to the next turn
    finally:
        await session.close()
    assert isinstance(later[-1], TurnEnded) and not later[-1].error
    (part,) = tool_returns(script, 1)
    if sees:
        text = f"Here is the chart.\n[image 1 (image/png, {len(PNG)} bytes): attached]\n{LINK}"
        assert part.content == [text, BinaryContent(PNG, media_type="image/png")]
    else:
        assert (
            part.content == f"Here is the chart.\n[image (image/png, about 72 bytes): not shown to the model]\n{LINK}"
        )
    (finished,) = [e for e in events if isinstance(e, ToolCallFinished)]
    assert LINK in finished.text and finished.status == "completed"
    # The editor's card holds the link as a link, after the text.
    (update,) = translate(finished)
    assert isinstance(update, ToolCallProgress) and update.content is not None
    assert update.content[-1] == helpers.tool_content(
        helpers.resource_link_block(
            "chart.csv",
            "file:///srv/data/chart.csv",
            mime_type="text/csv",
            description="The numbers behind the chart.",
            title="Chart data",
        )
    )
