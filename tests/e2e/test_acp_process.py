"""End to end: spawn `codling acp` with the SDK's client side, against the loopback OpenAI-compatible server."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from acp import PROTOCOL_VERSION, RequestError, helpers, spawn_agent_process
from acp.client.connection import ClientSideConnection
from acp.schema import ClientCapabilities, ContentToolCallContent, FileSystemCapabilities, TextContentBlock

from tests.fakes import warm
from tests.fakes.acp_client import RecordingClient
from tests.fakes.deadlines import deadline
from tests.fakes.editor import FakeEditor
from tests.fakes.openai_server import ErrorReply, OpenAIServer, Reply, ToolCall, Usage, running_server
from tests.fakes.processes import measured

API_KEY = "sk-test-secret-123456"


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with running_server() as s:
        yield s


def agent_env(home: Path, server: OpenAIServer) -> dict[str, str]:
    return measured(
        {
            "CODLING_HOME": str(home),
            "CODLING_MODEL": "openai-chat:fake-model",
            "OPENAI_BASE_URL": server.base_url,
            "OPENAI_API_KEY": API_KEY,
            "CODLING_LOG_FILE": str(home / "codling.log"),
            "CODLING_LOG_LEVEL": "DEBUG",
        }
    )


@asynccontextmanager
async def spawned(client: RecordingClient, home: Path, server: OpenAIServer) -> AsyncIterator[ClientSideConnection]:
    async with spawn_agent_process(client, *warm.codling(), "acp", env=agent_env(home, server)) as (
        conn,
        process,
    ):
        try:
            yield conn
        finally:
            if process.returncode is None:
                process.kill()
            await asyncio.wait_for(process.wait(), 10)


async def test_initialize_new_prompt_with_tool_call_then_cancel(
    home: Path, project: Path, server: OpenAIServer
) -> None:
    server.enqueue(
        Reply(tool_calls=[ToolCall("run_command", {"command": "echo from-the-agent > out.txt"}, id="call_1")]),
        Reply(text=["The command ", "ran."], usage=Usage(120, 7)),
        Reply(text=["slow "] * 200, stall_after=3),  # two chunks of text, then nothing until the server stops
    )
    client = RecordingClient(answers=["allow_once"])
    async with spawned(client, home, server) as conn:
        init = await asyncio.wait_for(conn.initialize(protocol_version=PROTOCOL_VERSION), 30)
        assert init.agent_info is not None and init.agent_info.name == "codling"
        session = await asyncio.wait_for(conn.new_session(cwd=str(project)), 30)
        response = await asyncio.wait_for(
            conn.prompt(session_id=session.session_id, prompt=[helpers.text_block("write a file")]), 30
        )
        assert response.stop_reason == "end_turn"
        assert (project / "out.txt").read_text() == "from-the-agent\n"
        assert client.agent_text() == "The command ran."
        (call,) = client.of_kind("tool_call")
        assert (call.tool_call_id, call.kind) == ("call_1", "execute")
        (permission,) = client.permissions
        shown = permission.tool_call.content
        assert shown is not None and isinstance(shown[0], ContentToolCallContent)
        assert isinstance(shown[0].content, TextContentBlock)
        assert shown[0].content.text == "echo from-the-agent > out.txt"
        updates = client.of_kind("tool_call_update")
        assert updates[-1].status == "completed"
        assert "exit code 0" in updates[-1].content[0].content.text

        # Cancel a reply that stalls mid-stream: the prompt answers `cancelled` although the stream never ends.
        chunks_before = len(client.of_kind("agent_message_chunk"))
        prompt = asyncio.create_task(
            conn.prompt(session_id=session.session_id, prompt=[helpers.text_block("talk slowly")])
        )
        await client.wait_for("agent_message_chunk", chunks_before + 1)
        await conn.cancel(session_id=session.session_id)
        cancelled = await asyncio.wait_for(prompt, deadline(5))
        assert cancelled.stop_reason == "cancelled"

    # The provider got the real tool-call round trip and the key, which never reached the log.
    bodies = server.requests
    assert bodies[1]["messages"][-1]["role"] == "tool"
    assert bodies[1]["messages"][-1]["tool_call_id"] == "call_1"
    assert server.authorizations[0] == f"Bearer {API_KEY}"
    log = (home / "codling.log").read_text()
    assert API_KEY not in log


async def test_provider_error_is_reported_and_session_continues(
    home: Path, project: Path, server: OpenAIServer
) -> None:
    server.enqueue(ErrorReply(400, "This model's maximum context length is 10 tokens", code="bad_request"))
    server.enqueue(Reply(text=["recovered"]))
    client = RecordingClient()
    async with spawned(client, home, server) as conn:
        await asyncio.wait_for(conn.initialize(protocol_version=PROTOCOL_VERSION), 30)
        session = await asyncio.wait_for(conn.new_session(cwd=str(project)), 30)
        with pytest.raises(RequestError) as failed:
            await asyncio.wait_for(conn.prompt(session_id=session.session_id, prompt=[helpers.text_block("one")]), 30)
        assert failed.value.data is not None
        assert failed.value.code == -32603 and list(failed.value.data) == ["details"]
        assert "HTTP 400" in str(failed.value) and "maximum context length" in str(failed.value)
        assert client.agent_text() == ""
        second = await asyncio.wait_for(
            conn.prompt(session_id=session.session_id, prompt=[helpers.text_block("two")]), 30
        )
        assert second.stop_reason == "end_turn"
        assert client.agent_text().endswith("recovered")


async def test_malformed_input_gets_json_rpc_errors_and_server_keeps_serving(home: Path, server: OpenAIServer) -> None:
    env = {**agent_env(home, server), "PATH": "/usr/bin:/bin"}
    process = await asyncio.create_subprocess_exec(
        *warm.codling(),
        "acp",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    assert process.stdin is not None and process.stdout is not None
    lines = [
        b"this is not json\n",
        b"[1, 2, 3]\n",
        b'{"jsonrpc": "2.0", "id": 7, "method": "no/such/method", "params": {}}\n',
        b'{"jsonrpc": "2.0", "id": 8, "method": "session/prompt", "params": {"sessionId": 5}}\n',
        b'{"jsonrpc": "2.0", "id": 9, "method": "session/new", "params": {"cwd": "relative"}}\n',
        json.dumps({"jsonrpc": "2.0", "id": 10, "method": "initialize", "params": {"protocolVersion": 1}}).encode()
        + b"\n",
    ]
    try:
        for line in lines:
            process.stdin.write(line)
        await process.stdin.drain()
        replies: list[dict[str, Any]] = []
        while len(replies) < 6:
            raw = await asyncio.wait_for(process.stdout.readline(), 30)
            assert raw, "the agent closed stdout"
            replies.append(json.loads(raw))
    finally:
        process.kill()
        await process.wait()
    by_id = {r.get("id"): r for r in replies if r.get("id") is not None}
    unnamed = [r for r in replies if r.get("id") is None]
    assert sorted(r["error"]["code"] for r in unnamed) == [-32700, -32600]
    assert by_id[7]["error"]["code"] == -32601
    assert by_id[8]["error"]["code"] == -32602
    assert by_id[9]["error"]["code"] == -32602
    assert by_id[10]["result"]["agentInfo"]["name"] == "codling"
    assert all(r["jsonrpc"] == "2.0" for r in replies)


@pytest.mark.parametrize("stdout_is_a_file", [True, False], ids=["file to file", "file to pipe"])
def test_serves_from_and_to_regular_files(
    home: Path, tmp_path: Path, server: OpenAIServer, stdout_is_a_file: bool
) -> None:
    requests = tmp_path / "requests.jsonl"
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}},
        {"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": str(tmp_path), "mcpServers": []}},
    ]
    requests.write_text("".join(json.dumps(line) + "\n" for line in lines))
    replies = tmp_path / "replies.jsonl"
    env = {**agent_env(home, server), "PATH": "/usr/bin:/bin"}
    command = [*warm.codling(), "acp"]
    with requests.open() as stdin, replies.open("w") as file:
        ran = subprocess.run(
            command, stdin=stdin, stdout=file if stdout_is_a_file else subprocess.PIPE, env=env, timeout=deadline(60)
        )
    assert ran.returncode == 0
    written = replies.read_text() if stdout_is_a_file else ran.stdout.decode()
    initialized, created = [json.loads(line) for line in written.splitlines()]
    assert initialized["id"] == 1 and initialized["result"]["agentInfo"]["name"] == "codling"
    assert created["id"] == 2 and created["result"]["sessionId"]


@pytest.mark.parametrize("command", [["acp"], ["run", "hi"]], ids=["acp", "run"])
def test_a_log_file_that_cannot_be_written_is_a_usage_error_that_names_it(
    home: Path, project: Path, server: OpenAIServer, command: list[str]
) -> None:
    env = {**agent_env(home, server), "PATH": "/usr/bin:/bin", "CODLING_LOG_FILE": str(home / "no" / "such.log")}
    ran = subprocess.run(
        [*warm.codling(), *command],
        env=env,
        cwd=project,
        capture_output=True,
        text=True,
        timeout=deadline(60),
    )
    prefix = "codling acp" if command == ["acp"] else "codling"
    assert (ran.returncode, ran.stdout, ran.stderr) == (
        2,
        "",
        f"{prefix}: the log file CODLING_LOG_FILE={home}/no/such.log cannot be written: No such file or directory\n",
    )
    assert not (home / "sessions").exists()  # nothing was started


async def test_greeting_and_title_over_the_real_provider_path(home: Path, project: Path, server: OpenAIServer) -> None:
    (home / "config.toml").write_text("greeting = true\n")
    server.title_reply = Reply(text=["Rename greet"])
    server.enqueue(Reply(text=["Hi! Ready to work on this project."]), Reply(text=["Renamed."]))
    client = RecordingClient()
    async with spawned(client, home, server) as conn:
        await asyncio.wait_for(conn.initialize(protocol_version=PROTOCOL_VERSION), 30)
        session = await asyncio.wait_for(conn.new_session(cwd=str(project)), 30)
        sid = session.session_id
        assert not client.of_kind("agent_message_chunk")  # the greeting follows the response naming the session
        await asyncio.wait_for(conn.prompt(session_id=sid, prompt=[helpers.text_block("rename greet")]), 30)
        await client.wait_for("session_info_update", 2)
    chunks = [u.content.text for u in client.of_kind("agent_message_chunk")]
    assert chunks == ["Hi! Ready to work on this project.", "Renamed."]
    assert [u.title for u in client.of_kind("session_info_update")] == ["rename greet", "Rename greet"]
    greeting_request, turn_request = server.requests
    assert "tools" not in greeting_request and [m["role"] for m in greeting_request["messages"]] == ["system", "user"]
    # The user's turn sees the greeting behind a user lead-in (roles alternate), never the greeting's request.
    roles = [m["role"] for m in turn_request["messages"]]
    assert roles == ["system", "user", "assistant", "user"]
    assert turn_request["messages"][2]["content"] == "Hi! Ready to work on this project."
    assert "Rename greet" not in json.dumps(turn_request)


async def test_an_editor_s_files_and_terminal_serve_a_spawned_agent(
    home: Path, project: Path, server: OpenAIServer
) -> None:
    notes = project / "notes.txt"
    notes.write_text("on disk\n")
    server.enqueue(
        Reply(tool_calls=[ToolCall("read_file", {"path": "notes.txt"}, id="call_1")]),
        Reply(tool_calls=[ToolCall("run_command", {"command": "echo in-the-editor"}, id="call_2")]),
        Reply(text=["done"]),
    )
    editor = FakeEditor(buffers={notes: "in the buffer\n"})
    client = RecordingClient(answers=["allow_once"], editor=editor)
    files = FileSystemCapabilities(read_text_file=True, write_text_file=True)
    capabilities = ClientCapabilities(fs=files, terminal=True)
    try:
        async with spawned(client, home, server) as conn:
            await asyncio.wait_for(
                conn.initialize(protocol_version=PROTOCOL_VERSION, client_capabilities=capabilities), 30
            )
            session = await asyncio.wait_for(conn.new_session(cwd=str(project)), 30)
            response = await asyncio.wait_for(
                conn.prompt(session_id=session.session_id, prompt=[helpers.text_block("read and run")]), 30
            )
    finally:
        await editor.close()
    assert response.stop_reason == "end_turn"
    assert [m for m, _ in editor.calls if m != "terminal/output"] == [
        "fs/read_text_file",
        "terminal/create",
        "terminal/wait_for_exit",
        "terminal/release",
    ]
    tool_messages = [m["content"] for m in server.requests[2]["messages"] if m["role"] == "tool"]
    assert "in the buffer" in tool_messages[0] and tool_messages[1].startswith("exit code 0\nin-the-editor")
    terminal_updates = [u for u in client.of_kind("tool_call_update") if u.tool_call_id == "call_2"]
    assert [helpers.tool_terminal_ref("term-1")] in [u.content for u in terminal_updates]
    assert terminal_updates[-1].status == "completed" and terminal_updates[-1].content is None
