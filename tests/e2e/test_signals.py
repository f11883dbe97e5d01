"""SIGTERM and SIGHUP to `codling acp` and `codling run`: the running command's processes go, the turn ends
recorded (its turn_end is the history's last record), and the agent exits with 128 + the signal's number."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from acp import PROTOCOL_VERSION, helpers, spawn_agent_process

from tests.fakes.acp_client import RecordingClient
from tests.fakes.deadlines import deadline
from tests.fakes.openai_server import OpenAIServer, Reply, ToolCall, running_server
from tests.fakes.processes import alive

# The shell writes its pid (its process group's id) once its background child runs, then waits.
COMMAND = "sleep 300 & echo $! > child.pid; echo $$ > cmd.pid; wait"
DEADLINE = deadline(60.0)
"""Liveness only: each wait ends as soon as what it waits for happens (eight test processes at once on a small
machine took over 15 s to start a command)."""


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with running_server() as s:
        s.enqueue(
            Reply(tool_calls=[ToolCall("run_command", {"command": COMMAND}, id="call_1")]),
            Reply(text=["never reached"]),
        )
        yield s


def agent_env(home: Path, server: OpenAIServer) -> dict[str, str]:
    (home / "config.toml").write_text('mode = "yolo"\ntitles = false\n')
    return {
        **os.environ,
        "CODLING_HOME": str(home),
        "CODLING_MODEL": "openai-chat:fake-model",
        "OPENAI_BASE_URL": server.base_url,
        "OPENAI_API_KEY": "sk-test-secret-123456",
        "CODLING_LOG_FILE": str(home / "codling.log"),
    }


async def until(check: object, what: str, agent: asyncio.subprocess.Process | None = None) -> None:
    """Wait until ``check()`` holds, while ``agent`` still runs, within the deadline."""
    deadline = time.monotonic() + DEADLINE
    while not check():  # type: ignore[operator]
        if agent is not None and agent.returncode is not None:
            raise AssertionError(f"the agent exited ({agent.returncode}) before {what}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


def _group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    # Members may be zombies until reaped: alive means some member is not.
    return all(not alive(pid) for pid in _pids_in_group(pgid))


def _pids_in_group(pgid: int) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid:
                pids.append(int(entry.name))
    return pids


def _pid(path: Path) -> int | None:
    text = path.read_text().strip() if path.exists() else ""
    return int(text) if text else None


def last_record(home: Path) -> dict[str, object]:
    (history,) = (home / "sessions").glob("*/history.jsonl")
    return json.loads(history.read_text().splitlines()[-1])


async def check_shutdown(process: asyncio.subprocess.Process, project: Path, home: Path, sig: signal.Signals) -> None:
    cmd_pid, child_pid = project / "cmd.pid", project / "child.pid"
    await until(lambda: _pid(cmd_pid) is not None, "the command to start", process)
    pgid, child = _pid(cmd_pid), _pid(child_pid)
    assert pgid is not None and child is not None
    try:
        process.send_signal(sig)
        assert await asyncio.wait_for(process.wait(), DEADLINE) == 128 + sig
        await until(lambda: _group_gone(pgid) and not alive(child), "the command's process group to go")
    finally:
        with contextlib.suppress(ProcessLookupError):  # a failed test leaves nothing behind
            os.killpg(pgid, signal.SIGKILL)
    record = last_record(home)
    assert (record["kind"], record["stop_reason"]) == ("turn_end", "cancelled")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
async def test_a_signal_to_codling_acp_stops_commands_and_records_the_turn(
    home: Path, project: Path, server: OpenAIServer, sig: signal.Signals
) -> None:
    client = RecordingClient()
    env = agent_env(home, server)
    async with spawn_agent_process(client, sys.executable, "-m", "codling", "acp", env=env) as (conn, process):
        try:
            await asyncio.wait_for(conn.initialize(protocol_version=PROTOCOL_VERSION), 30)
            session = await asyncio.wait_for(conn.new_session(cwd=str(project)), 30)
            prompt = asyncio.ensure_future(
                conn.prompt(session_id=session.session_id, prompt=[helpers.text_block("run it")])
            )
            await check_shutdown(process, project, home, sig)
            # The client heard how the turn ended before the agent went.
            assert (await asyncio.wait_for(prompt, DEADLINE)).stop_reason == "cancelled"
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])  # SIGINT: Ctrl-C exits 130
async def test_a_signal_to_codling_run_stops_commands_and_records_the_turn(
    home: Path, project: Path, server: OpenAIServer, sig: signal.Signals
) -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "codling",
        "run",
        "--mode",
        "yolo",
        "run it",
        cwd=project,
        env=agent_env(home, server),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        await check_shutdown(process, project, home, sig)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


@pytest.mark.parametrize("closed", ["stdin", "stdout"])
async def test_a_client_gone_mid_turn_ends_the_turn_as_cancelled_and_recorded(
    home: Path, project: Path, server: OpenAIServer, closed: str
) -> None:
    """The client closes codling's stdin (issue 29 D14: codling exited at once, the prompt unanswered and the
    turn without its turn_end), or stops reading its stdout but keeps stdin open (codling streamed on into the
    closed pipe): the turn ends as cancelled and recorded, its command stopped, and codling exits 0."""
    read_end, write_end = os.pipe()
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "codling",
        "acp",
        cwd=project,
        env=agent_env(home, server),
        stdin=asyncio.subprocess.PIPE,
        stdout=write_end,
        stderr=asyncio.subprocess.DEVNULL,
    )
    os.close(write_end)
    stdout = asyncio.StreamReader()
    loop = asyncio.get_running_loop()
    reading, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdout), os.fdopen(read_end, "rb"))
    assert process.stdin is not None

    async def answer(request_id: int) -> dict[str, object]:
        while True:
            line = await asyncio.wait_for(stdout.readline(), DEADLINE)
            assert line, f"the agent closed stdout before answering request {request_id}"
            message = json.loads(line)
            if message.get("id") == request_id and "method" not in message:
                return message

    def send(request_id: int, method: str, params: dict[str, object]) -> None:
        line = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        process.stdin.write((json.dumps(line) + "\n").encode())  # type: ignore[union-attr]

    pgid = None
    try:
        send(1, "initialize", {"protocolVersion": PROTOCOL_VERSION})
        await answer(1)
        send(2, "session/new", {"cwd": str(project), "mcpServers": []})
        session_id = (await answer(2))["result"]["sessionId"]  # type: ignore[index]
        send(3, "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": "run it"}]})
        await until(lambda: _pid(project / "cmd.pid") is not None, "the command to start", process)
        pgid = _pid(project / "cmd.pid")
        if closed == "stdin":
            process.stdin.close()  # the client is gone, mid-turn
            prompted = await answer(3)
            assert prompted["result"] == {"stopReason": "cancelled"}  # heard before the agent went
        else:
            reading.close()  # the client stops reading, mid-turn; stdin stays open
        assert await asyncio.wait_for(process.wait(), DEADLINE) == 0
        assert pgid is not None
        await until(lambda: _group_gone(pgid), "the command's process group to go")
    finally:
        reading.close()
        if process.returncode is None:
            process.kill()
            await process.wait()
        if pgid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGKILL)
    record = last_record(home)
    assert (record["kind"], record["stop_reason"]) == ("turn_end", "cancelled")
