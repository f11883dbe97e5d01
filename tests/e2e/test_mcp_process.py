"""End to end: `codling acp` with MCP servers from the client (stdio, HTTP, a third-party npm server) and from
config.toml, against the loopback OpenAI-compatible server."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from acp import PROTOCOL_VERSION, helpers, spawn_agent_process
from acp.schema import EnvVariable, HttpMcpServer, McpServerStdio

from tests.e2e.test_acp_process import API_KEY, agent_env, spawned
from tests.fakes import warm
from tests.fakes.acp_client import RecordingClient
from tests.fakes.deadlines import deadline
from tests.fakes.mcp import ROOT, SERVER_MODULE, http_server, pid_written
from tests.fakes.npm_mcp import everything_server
from tests.fakes.openai_server import OpenAIServer, Reply, ToolCall, running_server
from tests.fakes.processes import alive, gone

pytestmark = pytest.mark.timeout(deadline(120))


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with running_server() as s:
        yield s


def stdio_server(name: str, pidfile: Path, *args: str) -> McpServerStdio:
    env = [EnvVariable(name="PYTHONPATH", value=str(ROOT)), EnvVariable(name="MCP_FAKE_PIDFILE", value=str(pidfile))]
    return McpServerStdio(name=name, command=sys.executable, args=["-m", SERVER_MODULE, "--name", name, *args], env=env)


def offered(body: dict[str, Any]) -> set[str]:
    return {tool["function"]["name"] for tool in body.get("tools", [])}


def tool_messages(body: dict[str, Any]) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in body["messages"] if m["role"] == "tool"}


async def test_editor_servers_over_stdio_and_http_are_isolated_reported_and_stopped(
    home: Path, project: Path, server: OpenAIServer, tmp_path: Path
) -> None:
    server.enqueue(
        Reply(tool_calls=[ToolCall("mcp__local__echo", {"text": "from A"}, id="a1")]),
        Reply(text=["A done"]),
        Reply(tool_calls=[ToolCall("mcp__web__add", {"a": 20, "b": 22}, id="b1")]),
        Reply(text=["B done"]),
    )
    client = RecordingClient(answers=["allow_once", "allow_once"])
    with http_server("http", "web") as url:
        async with spawned(client, home, server) as conn:
            init = await asyncio.wait_for(conn.initialize(protocol_version=PROTOCOL_VERSION), 30)
            assert init.agent_capabilities is not None
            caps = init.agent_capabilities.mcp_capabilities
            assert caps is not None and (caps.http, caps.sse) == (True, True)
            first = await conn.new_session(cwd=str(project), mcp_servers=[stdio_server("local", tmp_path / "a.pid")])
            web = HttpMcpServer(type="http", name="web", url=url, headers=[])
            second = await conn.new_session(cwd=str(project), mcp_servers=[web])
            broken = await conn.new_session(
                cwd=str(project), mcp_servers=[stdio_server("broken", tmp_path / "c.pid", "--fail")]
            )
            kept = await conn.new_session(cwd=str(project), mcp_servers=[stdio_server("kept", tmp_path / "d.pid")])

            a = await asyncio.wait_for(conn.prompt(session_id=first.session_id, prompt=[helpers.text_block("A")]), 60)
            b = await asyncio.wait_for(conn.prompt(session_id=second.session_id, prompt=[helpers.text_block("B")]), 60)
            assert (a.stop_reason, b.stop_reason) == ("end_turn", "end_turn")

            # The broken server is reported to the client (a failed card with its stderr), not silently dropped.
            async with asyncio.timeout(deadline(30)):
                while not [u for s, u in client.updates if s == broken.session_id and u.session_update == "tool_call"]:
                    client.update_seen.clear()
                    await client.update_seen.wait()
            (card,) = [u for s, u in client.updates if s == broken.session_id and u.session_update == "tool_call"]
            assert card.status == "failed" and card.title.startswith("MCP server broken (")
            assert "refuses to start" in card.content[0].content.text

            # Closing a session ends its server's process; the others end with the agent.
            pid_a = await pid_written(tmp_path / "a.pid")
            await conn.close_session(session_id=first.session_id)
            assert await gone(pid_a, 10)
            pid_d = await pid_written(tmp_path / "d.pid")
            assert kept.session_id
        assert await gone(pid_d, 10)

    requests = server.requests
    # Each session's provider requests carry its own server's tools only.
    assert {"mcp__local__echo", "mcp__local__add"} <= offered(requests[0]) and "mcp__web__add" not in offered(
        requests[0]
    )
    assert {"mcp__web__echo", "mcp__web__add"} <= offered(requests[2]) and "mcp__local__echo" not in offered(
        requests[2]
    )
    # The calls reached the servers; their results reached the model and the client.
    assert tool_messages(requests[1]) == {"a1": "echo: from A"}
    assert tool_messages(requests[3]) == {"b1": "42"}
    # (A wait for the servers, if the prompt came before they were ready, has a card of its own: left out.)
    calls = ("a1", "b1")
    done = [u for u in client.of_kind("tool_call_update") if u.status == "completed" and u.tool_call_id in calls]
    assert [u.content[0].content.text for u in done] == ["echo: from A", "42"]

    assert [p.tool_call.title for p in client.permissions] == [
        'local: echo (text: "from A")',
        "web: add (a: 20, b: 22)",
    ]


@pytest.mark.parametrize("ending", ["stdin EOF", "SIGTERM", "SIGKILL"])
async def test_daemons_a_stdio_server_starts_end_with_its_session_and_with_codling(
    ending: str, home: Path, project: Path, server: OpenAIServer, tmp_path: Path
) -> None:
    def daemonizing(name: str) -> McpServerStdio:
        return stdio_server(name, tmp_path / f"{name}.pid", "--daemon", str(tmp_path / f"{name}.daemon"))

    client = RecordingClient()
    command = (*warm.codling(), "acp")
    async with spawn_agent_process(client, *command, env=agent_env(home, server)) as (conn, process):
        try:
            await asyncio.wait_for(conn.initialize(protocol_version=PROTOCOL_VERSION), deadline(30))
            # (A fake MCP server costs a second or more of CPU to start: the close is shown once, beside EOF.)
            closing = ending == "stdin EOF"
            if closing:
                closed = await conn.new_session(cwd=str(project), mcp_servers=[daemonizing("closed")])
            await conn.new_session(cwd=str(project), mcp_servers=[daemonizing("kept")])
            daemon_kept = await pid_written(tmp_path / "kept.daemon", 20)
            assert alive(daemon_kept)

            if closing:
                # session/close ends the server and the daemon it left in a session of its own; the other stays.
                daemon_closed = await pid_written(tmp_path / "closed.daemon", 20)
                assert alive(daemon_closed)
                await conn.close_session(session_id=closed.session_id)
                assert await gone(daemon_closed, 10)
                assert alive(daemon_kept)

            # codling going away, however it goes, takes the other server's daemon with it.
            if ending == "stdin EOF":
                assert process.stdin is not None
                process.stdin.close()
            else:
                process.send_signal(signal.SIGTERM if ending == "SIGTERM" else signal.SIGKILL)
            await asyncio.wait_for(process.wait(), deadline(20))
            assert await gone(daemon_kept, 10)
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
            for daemon in tmp_path.glob("*.daemon"):  # what a failing run left behind
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(daemon.read_text()), signal.SIGKILL)


async def test_a_third_party_npm_server_from_config_toml_works_and_sees_no_secrets(
    home: Path, project: Path, server: OpenAIServer
) -> None:
    binary = everything_server()
    (home / "config.toml").write_text(
        f'mode = "yolo"\n[mcp_servers.everything]\ncommand = "{binary}"\nargs = ["stdio"]\n'
        '[mcp_servers.off]\ncommand = "never-started"\nenabled = false\n'
    )
    server.enqueue(
        Reply(
            tool_calls=[
                ToolCall("mcp__everything__echo", {"message": "third party"}, id="e1"),
                ToolCall("mcp__everything__get-env", {}, id="e2"),
            ]
        ),
        Reply(text=["ok"]),
    )
    client = RecordingClient()
    async with spawned(client, home, server) as conn:
        await asyncio.wait_for(conn.initialize(protocol_version=PROTOCOL_VERSION), 30)
        session = await conn.new_session(cwd=str(project), mcp_servers=[])
        done = await asyncio.wait_for(conn.prompt(session_id=session.session_id, prompt=[helpers.text_block("go")]), 60)
        assert done.stop_reason == "end_turn"
    results = tool_messages(server.requests[1])
    assert results["e1"] == "Echo: third party"
    environment = json.loads(results["e2"])
    assert "PATH" in environment and API_KEY not in results["e2"] and "OPENAI_API_KEY" not in environment


def run_in_yolo(home: Path, project: Path, server: OpenAIServer, prompt: str) -> subprocess.CompletedProcess[str]:
    """``codling run --mode yolo PROMPT`` in ``project``, to its end (exit 0, else the test fails)."""
    done = subprocess.run(
        [*warm.codling(), "run", "--mode", "yolo", prompt],
        cwd=project,
        env={**agent_env(home, server), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=deadline(90),
    )
    assert done.returncode == 0, done.stderr
    return done


async def test_codling_run_uses_config_toml_servers(
    home: Path, project: Path, server: OpenAIServer, tmp_path: Path
) -> None:
    (home / "config.toml").write_text(
        "[mcp_servers.local]\n"
        f'command = "{sys.executable}"\n'
        f'args = ["-m", "{SERVER_MODULE}", "--name", "local"]\n'
        f'env = {{ PYTHONPATH = "{ROOT}", MCP_FAKE_PIDFILE = "{tmp_path / "run.pid"}" }}\n'
    )
    server.enqueue(Reply(tool_calls=[ToolCall("mcp__local__add", {"a": 1, "b": 2}, id="r1")]), Reply(text=["three"]))
    done = run_in_yolo(home, project, server, "add them")
    assert "three" in done.stdout
    assert tool_messages(server.requests[1]) == {"r1": "3"}
    assert await gone(int((tmp_path / "run.pid").read_text()))


@pytest.mark.parametrize("sandboxed", [True, False])
async def test_an_mcp_server_that_opts_in_runs_in_the_sandbox(
    home: Path, project: Path, server: OpenAIServer, tmp_path: Path, sandboxed: bool
) -> None:
    # $CODLING_HOME is hidden from a confined server, and read-only to it: the probe lies there.
    probe = home / "probe.txt"
    probe.write_text("codling's own file")
    (home / "config.toml").write_text(
        "[mcp_servers.local]\n"
        f'command = "{sys.executable}"\n'
        f'args = ["-m", "{SERVER_MODULE}", "--name", "local", "--probe", "{probe}"]\n'
        f'env = {{ PYTHONPATH = "{ROOT}" }}\n' + ("sandbox = true\n" if sandboxed else "")
    )
    server.enqueue(Reply(tool_calls=[ToolCall("mcp__local__escape", {}, id="r1")]), Reply(text=["done"]))
    run_in_yolo(home, project, server, "try it")
    told = tool_messages(server.requests[1])["r1"]
    if sandboxed:
        assert told == "read refused: No such file or directory; write refused: Read-only file system"
        assert not (home / "written-by-server").exists()
    else:
        assert told == 'read: "codling\'s own file"; wrote'
