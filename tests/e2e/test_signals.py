"""SIGTERM and SIGHUP to `codling acp` and `codling run`: the running command's processes go, the turn ends
recorded (its turn_end is the history's last record), and the agent exits with 128 + the signal's number."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from acp import PROTOCOL_VERSION, helpers, spawn_agent_process

from tests.fakes import warm
from tests.fakes.acp_client import RecordingClient
from tests.fakes.deadlines import deadline
from tests.fakes.openai_server import OpenAIServer, Reply, ToolCall, running_server
from tests.fakes.processes import Fifo, alive, gone

# The shell writes its pid (its process group's id) once its background child runs, then waits. The test makes
# cmd.pid a named pipe (tests/fakes/processes.Fifo) and waits on it.
COMMAND = "sleep 300 & echo $! > child.pid; echo $$ > cmd.pid; wait"
SECONDS = 60.0  # a liveness deadline; the fakes' helpers scale it themselves
DEADLINE = deadline(SECONDS)
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


async def command_started(pids: Fifo, agent: asyncio.subprocess.Process) -> tuple[int, int]:
    """The command's shell pid (its process group's id) and its background child's, once the shell has written
    its pid into the pipe ``cmd.pid``; AssertionError if ``agent`` exits first."""
    started = asyncio.ensure_future(pids.pid(SECONDS))
    exited = asyncio.ensure_future(agent.wait())
    try:
        await asyncio.wait((started, exited), return_when=asyncio.FIRST_COMPLETED)
        if not started.done():
            raise AssertionError(f"the agent exited ({agent.returncode}) before the command started")
        pgid = started.result()
    finally:
        started.cancel()
        exited.cancel()
    child = _pid(pids.path.parent / "child.pid")  # written before cmd.pid
    assert child is not None
    return pgid, child


async def group_gone(pgid: int, *also: int) -> None:
    """Wait (on pidfds) until every member of process group ``pgid`` and the pids ``also`` are gone."""
    for pid in {*_pids_in_group(pgid), pgid, *also}:
        assert await gone(pid, SECONDS), f"process {pid} of the command's group {pgid} is still there"
    assert _group_gone(pgid)


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


async def run_it(home: Path, project: Path, server: OpenAIServer) -> asyncio.subprocess.Process:
    """`codling run --mode yolo "run it"` in ``project``, its output dropped."""
    return await asyncio.create_subprocess_exec(
        *warm.codling(),
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


def last_record(home: Path) -> dict[str, object]:
    (history,) = (home / "sessions").glob("*/history.jsonl")
    return json.loads(history.read_text().splitlines()[-1])


async def check_shutdown(process: asyncio.subprocess.Process, pids: Fifo, home: Path, sig: signal.Signals) -> None:
    pgid, child = await command_started(pids, process)
    try:
        process.send_signal(sig)
        assert await asyncio.wait_for(process.wait(), DEADLINE) == 128 + sig
        await group_gone(pgid, child)
        assert not alive(child)
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
    with Fifo(project / "cmd.pid") as pids:
        async with spawn_agent_process(client, *warm.codling(), "acp", env=env) as (conn, process):
            try:
                await asyncio.wait_for(conn.initialize(protocol_version=PROTOCOL_VERSION), 30)
                session = await asyncio.wait_for(conn.new_session(cwd=str(project)), 30)
                prompt = asyncio.ensure_future(
                    conn.prompt(session_id=session.session_id, prompt=[helpers.text_block("run it")])
                )
                await check_shutdown(process, pids, home, sig)
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
    pids = Fifo(project / "cmd.pid")
    process = await run_it(home, project, server)
    try:
        await check_shutdown(process, pids, home, sig)
    finally:
        pids.close()
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
    pids = Fifo(project / "cmd.pid")
    read_end, write_end = os.pipe()
    process = await asyncio.create_subprocess_exec(
        *warm.codling(),
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
        pgid, _ = await command_started(pids, process)
        if closed == "stdin":
            process.stdin.close()  # the client is gone, mid-turn
            prompted = await answer(3)
            assert prompted["result"] == {"stopReason": "cancelled"}  # heard before the agent went
        else:
            reading.close()  # the client stops reading, mid-turn; stdin stays open
        assert await asyncio.wait_for(process.wait(), DEADLINE) == 0
        await group_gone(pgid)
    finally:
        pids.close()
        reading.close()
        if process.returncode is None:
            process.kill()
            await process.wait()
        if pgid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGKILL)
    record = last_record(home)
    assert (record["kind"], record["stop_reason"]) == ("turn_end", "cancelled")


async def test_codling_killed_outright_mid_command_leaves_nothing_it_started(home: Path, project: Path) -> None:
    """Issue 35: SIGKILL gives codling no chance to stop anything; the command's subreaper sees codling's pipe
    close and stops everything below it, a `setsid` daemon (out of the command's group) included."""
    # A double fork: the daemon's parent (a subshell) is gone, so no walk of the command's tree finds it; it
    # writes its pid once in its own session, which the shell waits for before it says it runs.
    command = (
        "(setsid sh -c 'echo $$ > child.pid.new && mv child.pid.new child.pid; exec sleep 300' &); "
        "while [ ! -e child.pid ]; do :; done; echo $$ > cmd.pid; exec sleep 300"
    )
    with running_server() as server:
        server.enqueue(
            Reply(tool_calls=[ToolCall("run_command", {"command": command}, id="call_1")]),
            Reply(text=["never reached"]),
        )
        pids = Fifo(project / "cmd.pid")
        process = await run_it(home, project, server)
        pgid = child = 0
        try:
            pgid, child = await command_started(pids, process)
            assert os.getsid(child) == child != os.getsid(pgid)  # the daemon left the command's session
            os.kill(warm.behind(process.pid), signal.SIGKILL)
            await asyncio.wait_for(process.wait(), DEADLINE)
            await group_gone(pgid, child)
            assert not alive(child)
        finally:
            pids.close()
            for pid in (child, pgid):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    if pid:
                        os.kill(pid, signal.SIGKILL)
            if process.returncode is None:
                process.kill()
                await process.wait()
