"""A session's MCP servers on their own (``tools/mcp/servers.py``), against the real fake server over stdio: what
the user is told, when, and what becomes of a call."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from codling.errors import ToolError
from codling.mcp_servers import McpServerSpec
from codling.tools.mcp.servers import MAX_TOOLS, McpNotice, McpServer, McpServers
from tests.fakes.deadlines import deadline
from tests.fakes.mcp import RecordingHttpServer, pid_written, stdio_spec
from tests.fakes.mcp_server import LISTING_ERROR, REFUSAL
from tests.fakes.processes import Fifo, gone

pytestmark = pytest.mark.timeout(deadline(60))


class Running:
    """Servers started for a test, and what they told the listener."""

    def __init__(self, servers: McpServers) -> None:
        self.servers = servers
        self.notices: list[McpNotice] = []

    def server(self) -> McpServer:
        (server,) = self.servers.servers
        return server

    async def call(self, name: str, args: dict[str, object] | None = None, timeout: float = 20) -> str:
        found = self.servers.find(name)
        assert found is not None, name
        server, tool = found
        return (await server.call(tool, dict(args or {}), deadline(timeout))).text


async def running(spec: McpServerSpec, cwd: Path, *, listen: bool = True) -> AsyncIterator[Running]:
    servers = McpServers((spec,), cwd, startup_timeout=deadline(30))
    run = Running(servers)
    if listen:
        servers.listen(run.notices.append)
    try:
        await servers.ready()
        yield run
    finally:
        await servers.stop()


async def test_a_notice_from_before_anyone_listened_reaches_the_first_listener(tmp_path: Path) -> None:
    spec = stdio_spec("broken", "--fail")
    async for run in running(spec, tmp_path, listen=False):
        server = run.server()
        assert server.status == "failed"
        run.servers.listen(run.notices.append)
        (notice,) = run.notices
        assert notice.server == "broken"
        # (The spec's environment values are kept out of what the user sees, the PYTHONPATH of the fake included.)
        assert notice.message == spec.scrub(
            f"MCP server broken ({spec.describe()}) did not start: MCPError: Connection closed"
        )
        assert notice.detail == "error: the fake server refuses to start (--fail)"
        assert server.stderr_tail() == "error: the fake server refuses to start (--fail)"
    assert server.stderr_tail() == ""  # stopped: its stderr is let go


async def test_a_failed_servers_tool_is_not_called(tmp_path: Path) -> None:
    async for run in running(stdio_spec("fake"), tmp_path):
        found = run.servers.find("mcp__fake__echo")
        assert found is not None
        server, echo = found
        await server.stop()
        with pytest.raises(ToolError) as e:
            await server.call(echo, {"text": "hi"}, deadline(20))
        assert str(e.value) == "The MCP server fake is not running, so echo cannot be called."
        assert run.servers.tools() == ()


async def test_a_server_that_cannot_list_its_tools_did_not_start_and_is_ended(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    spec = stdio_spec("unlisted", "--fail-listing", MCP_FAKE_PIDFILE=str(pidfile))
    async for run in running(spec, tmp_path):
        (notice,) = run.notices
        assert notice.message == spec.scrub(
            f"MCP server unlisted ({spec.describe()}) did not start: MCPError: {LISTING_ERROR}"
        )
        assert run.server().status == "failed" and run.servers.tools() == ()
        assert await gone(await pid_written(pidfile))  # not left running until the session ends


async def test_a_server_with_too_many_tools_is_cut_and_the_user_told(tmp_path: Path) -> None:
    async for run in running(stdio_spec("many", "--extra-tools", str(MAX_TOOLS)), tmp_path):
        assert run.notices == [
            McpNotice("many", f"MCP server many offers {MAX_TOOLS + 9} tools; the model gets the first 100")
        ]
        tools = run.servers.tools()
        assert len(tools) == MAX_TOOLS
        assert [t.tool for t in tools[:3]] == ["echo", "add", "whoami"]


async def test_a_refused_call_and_a_failed_tool_fail_only_that_call(tmp_path: Path) -> None:
    async for run in running(stdio_spec("fake", "--refusing"), tmp_path):
        with pytest.raises(ToolError) as refused:
            await run.call("mcp__fake__refuse")
        assert str(refused.value) == f"MCP server fake refused refuse: MCPError: {REFUSAL}"
        with pytest.raises(ToolError) as failed:
            await run.call("mcp__fake__fail")
        assert str(failed.value) == "fail on MCP server fake failed: Error executing tool fail"
        assert await run.call("mcp__fake__echo", {"text": "still here"}) == "echo: still here"
        assert run.server().status == "ready" and run.notices == []


async def test_calls_failing_together_with_their_server_give_one_notice(tmp_path: Path) -> None:
    with Fifo(tmp_path / "marker") as marker:
        async for run in running(stdio_spec("fake"), tmp_path):
            slow = asyncio.create_task(run.call("mcp__fake__slow", {"seconds": 60, "marker": str(marker.path)}))
            await marker.receive(lambda said: said == "started")  # the server holds the slow call
            with pytest.raises(ToolError) as crashed:
                await run.call("mcp__fake__crash")
            with pytest.raises(ToolError) as cut:
                await slow
            assert "The MCP server fake stopped working while running crash" in str(crashed.value)
            assert "The MCP server fake stopped working while running slow" in str(cut.value)
            (notice,) = run.notices
            assert notice.message.startswith("MCP server fake stopped working during ")
            assert notice.detail.endswith("fatal: the fake server crashed on purpose")


async def test_servers_stopped_before_they_start_never_start(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    servers = McpServers((stdio_spec("idle", MCP_FAKE_PIDFILE=str(pidfile)),), tmp_path)
    await servers.stop()
    await servers.ready()  # a stopped session's first turn: nothing starts, nothing waits
    assert servers.tools() == () and not pidfile.exists()
    assert [server.status for server in servers.servers] == ["stopped"]


async def test_stopping_an_http_server_ends_its_session_with_a_delete(tmp_path: Path) -> None:
    # (issue 31 item 7: HTTP MCP sessions were never closed, so the server kept each one until it restarted)
    async with RecordingHttpServer("web", legacy=True) as web:
        async for run in running(McpServerSpec("web", "http", url=web.url), tmp_path):
            assert await run.call("mcp__web__echo", {"text": "hi"}) == "echo: hi"
            sessions = {session for _, session in web.requests if session}
            assert len(sessions) == 1 and web.deletes() == []
        assert web.deletes() == list(sessions)
