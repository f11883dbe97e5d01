"""MCP servers over ACP in-process: per request (new, load, resume, fork), started without blocking."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from acp import PROTOCOL_VERSION, helpers
from acp.schema import AcpMcpServer, EnvVariable, HttpHeader, HttpMcpServer, McpServerStdio, SseMcpServer

from codling.acp.mcp_specs import mcp_specs
from codling.acp.server import CodlingAgent
from codling.config import Settings
from codling.mcp_servers import McpServerSpec
from tests.fakes.acp_client import RecordingClient, connected
from tests.fakes.deadlines import deadline
from tests.fakes.mcp import ROOT, SERVER_MODULE, pid_written
from tests.fakes.processes import gone
from tests.fakes.scenarios import Say, Script

pytestmark = pytest.mark.timeout(deadline(90))


def stdio(name: str, *args: str, pidfile: Path | None = None) -> McpServerStdio:
    env = [EnvVariable(name="PYTHONPATH", value=str(ROOT))]
    if pidfile is not None:
        env.append(EnvVariable(name="MCP_FAKE_PIDFILE", value=str(pidfile)))
    return McpServerStdio(name=name, command=sys.executable, args=["-m", SERVER_MODULE, "--name", name, *args], env=env)


@pytest.fixture
def agent_for(home: Path) -> Callable[[Script], CodlingAgent]:
    def make(script: Script) -> CodlingAgent:
        settings = Settings(home=home, env={"CODLING_HOME": str(home), "CODLING_MODEL": "openai-chat:scripted"})
        return CodlingAgent(settings_loader=lambda: settings, model_factory=script.factory(), warm_up=False)

    return make


def mcp_tools(names: list[str]) -> set[str]:
    return {n.split("__")[1] for n in names if n.startswith("mcp__")}


async def test_each_session_request_brings_its_own_servers(
    project: Path, agent_for: Callable[[Script], CodlingAgent]
) -> None:
    script = Script([[Say("one")], [Say("two")], [Say("three")], [Say("four")]])
    client = RecordingClient()
    async with connected(agent_for(script), client) as conn:
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        new = await conn.new_session(cwd=str(project), mcp_servers=[stdio("first")])
        await conn.prompt(session_id=new.session_id, prompt=[helpers.text_block("a")])
        await conn.load_session(cwd=str(project), session_id=new.session_id, mcp_servers=[stdio("second")])
        await conn.prompt(session_id=new.session_id, prompt=[helpers.text_block("b")])
        await conn.resume_session(cwd=str(project), session_id=new.session_id, mcp_servers=[])
        await conn.prompt(session_id=new.session_id, prompt=[helpers.text_block("c")])
        fork = await conn.fork_session(cwd=str(project), session_id=new.session_id, mcp_servers=[stdio("third")])
        await conn.prompt(session_id=fork.session_id, prompt=[helpers.text_block("d")])
    assert [mcp_tools(tools) for tools in script.tools] == [{"first"}, {"second"}, set(), {"third"}]


async def test_session_new_does_not_wait_for_a_slow_server_and_close_stops_it_while_starting(
    project: Path, agent_for: Callable[[Script], CodlingAgent], tmp_path: Path
) -> None:
    pidfile = tmp_path / "slow.pid"
    agent = agent_for(Script([]))
    async with connected(agent, RecordingClient()) as conn:
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        new = await conn.new_session(
            cwd=str(project), mcp_servers=[stdio("sloth", "--start-delay", "60", pidfile=pidfile)]
        )
        mcp = agent._sessions[new.session_id].brain.deps.mcp
        assert mcp is not None and [s.status for s in mcp.servers] == ["starting"]
        pid = await pid_written(pidfile)  # the server runs, and is still starting
        await conn.close_session(session_id=new.session_id)
        assert [s.status for s in mcp.servers] == ["stopped"]
    assert await gone(pid)


def test_the_servers_an_editor_names_become_specs_and_an_unknown_transport_is_left_out(
    caplog: pytest.LogCaptureFixture,
) -> None:
    token = [HttpHeader(name="Authorization", value="Bearer t0ken")]
    servers = [
        HttpMcpServer(type="http", name="docs", url="https://mcp.example.com/mcp", headers=token),
        AcpMcpServer(type="acp", name="inline", server_id="s1"),
        SseMcpServer(type="sse", name="events", url="http://127.0.0.1:9/sse", headers=[]),
        McpServerStdio(name="local", command="mcp-local", args=["--quiet"], env=[EnvVariable(name="A", value="1")]),
    ]
    with caplog.at_level("WARNING", logger="codling.acp.mcp_specs"):
        specs = mcp_specs(servers)
    assert specs == (
        McpServerSpec(
            "docs",
            "http",
            url="https://mcp.example.com/mcp",
            headers=(("Authorization", "Bearer t0ken"),),
            source="editor",
        ),
        McpServerSpec("events", "sse", url="http://127.0.0.1:9/sse", source="editor"),
        McpServerSpec("local", "stdio", command="mcp-local", args=("--quiet",), env=(("A", "1"),), source="editor"),
    )
    assert [r.getMessage() for r in caplog.records] == [
        "MCP server 'inline' uses a transport codling does not support; left out"
    ]
    assert mcp_specs(None) == ()
