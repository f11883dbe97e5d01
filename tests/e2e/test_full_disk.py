"""A full disk under a real `codling acp` (issue 29 D10): the file-size limit of the running process is lowered
until history.jsonl cannot grow (what a full disk does to its writes), then lifted. The prompt that could not
be recorded is a -32603 saying so and what to do, the agent keeps serving, and once there is room every record
is written whole: the history reads back with nothing torn and nothing lost."""

from __future__ import annotations

import asyncio
import json
import resource
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from codling.brain.events import TextDelta, TurnEnded, TurnStarted
from codling.store.history import read_history
from tests.e2e.raw_acp import RawAgent, agent_env
from tests.fakes import warm
from tests.fakes.deadlines import deadline
from tests.fakes.openai_server import OpenAIServer, Reply, running_server

# codling under a file-size limit that a test can lower: SIGXFSZ ignored (inherited through exec), so a write
# past the limit fails with EFBIG part-way, as a write to a full disk fails with ENOSPC.
UNDER_A_LIMIT = """
import os, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
os.execv(sys.executable, {command!r})
"""


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with running_server() as s:
        yield s


async def prompt(agent: RawAgent, request_id: int, session_id: str, text: str) -> dict:
    return await agent.request(
        request_id,
        "session/prompt",
        {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]},
        timeout=deadline(60),
    )


async def test_a_full_disk_is_a_clear_error_and_nothing_is_lost_once_there_is_room(
    home: Path, project: Path, server: OpenAIServer, tmp_path: Path
) -> None:
    server.enqueue(Reply(text=["first reply"]), Reply(text=["second reply"]), Reply(text=["third reply"]))
    with (tmp_path / "stderr").open("wb") as err:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            UNDER_A_LIMIT.format(command=[*warm.codling(), "acp"]),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=err,
            # (a module first imported under the limit would leave a cut .pyc behind for every later import)
            env={**agent_env(home, server), "PYTHONDONTWRITEBYTECODE": "1"},
        )
        agent = RawAgent(process)
        try:
            await agent.request(0, "initialize", {"protocolVersion": 1}, timeout=deadline(30))
            new = await agent.request(1, "session/new", {"cwd": str(project), "mcpServers": []}, 30)
            session_id = new["result"]["sessionId"]
            assert "result" in await prompt(agent, 2, session_id, "one")
            history = home / "sessions" / session_id / "history.jsonl"
            _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
            resource.prlimit(warm.behind(process.pid), resource.RLIMIT_FSIZE, (history.stat().st_size + 40, hard))

            full = await prompt(agent, 3, session_id, "two")
            assert full["error"]["code"] == -32603
            message = full["error"]["message"]
            assert full["error"]["data"] == {"details": message}  # Zed shows only this shape cleanly
            assert f"cannot write session {session_id}'s history (File too large)" in message
            assert "free some space" in message and "written as soon as there is room" in message
            lines = history.read_bytes().splitlines(keepends=True)
            assert all(line.endswith(b"\n") and json.loads(line) for line in lines)  # nothing torn

            resource.prlimit(warm.behind(process.pid), resource.RLIMIT_FSIZE, (hard, hard))
            assert "result" in await prompt(agent, 4, session_id, "three")
            listed = await agent.request(5, "session/list", {}, timeout=deadline(30))
            assert [s["sessionId"] for s in listed["result"]["sessions"]] == [session_id]  # still serving
        finally:
            assert process.stdin is not None
            process.stdin.close()
            await asyncio.wait_for(process.wait(), deadline(20))
    log = read_history(history)
    assert log.skipped_lines == 0
    assert [e.prompt for e in log.events if isinstance(e, TurnStarted)] == ["one", "two", "three"]
    said = "".join(e.text for e in log.events if isinstance(e, TextDelta))
    assert said == "first replysecond replythird reply"
    assert [e.stop_reason for e in log.events if isinstance(e, TurnEnded)] == ["end_turn"] * 3


# `codling run` with room for the session's first records but not its reply's.
RUN_UNDER_A_LIMIT = """
import os, resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, resource.RLIM_INFINITY))
os.execv(sys.executable, [*{command!r}, *sys.argv[1:]])
"""


def test_codling_run_says_what_it_could_not_record_and_exits_1(home: Path, project: Path, server: OpenAIServer) -> None:
    reply = "a long reply " * 800
    server.enqueue(Reply(text=[reply]))
    done = subprocess.run(
        [sys.executable, "-c", RUN_UNDER_A_LIMIT.format(command=[*warm.codling(), "run"]), "say something long"],
        env={**agent_env(home, server), "PYTHONDONTWRITEBYTECODE": "1"},  # (no cut .pyc left behind: see above)
        cwd=project,
        capture_output=True,
        text=True,
        timeout=deadline(60),
        check=False,
    )
    assert done.stdout.strip() == reply.strip()  # the reply is shown whole
    assert done.returncode == 1, done.stderr
    (history,) = (home / "sessions").glob("*/history.jsonl")
    assert f"codling: codling cannot write session {history.parent.name}'s history (File too large)" in done.stderr
    assert "free some space (they are lost if codling exits first)" in done.stderr
    log = read_history(history)  # what was written is whole
    assert log.skipped_lines == 0 and [type(e).__name__ for e in log.events][:1] == ["TurnStarted"]
