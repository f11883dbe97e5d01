"""`codling run` on a real pseudo-terminal: the permission prompt as a person meets it."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.test_cli import model_env
from tests.fakes.openai_server import OpenAIServer, Reply, ToolCall, running_server
from tests.fakes.pty_process import PtyProcess


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with running_server() as s:
        yield s


def on_terminal(home: Path, project: Path, server: OpenAIServer, *args: str) -> PtyProcess:
    env = {**model_env(home, server), "NO_COLOR": "1", "TERM": "xterm"}
    return PtyProcess([sys.executable, "-m", "codling", "run", *args], env=env, cwd=project)


def test_a_rejection_with_a_reason_reaches_the_model(home: Path, project: Path, server: OpenAIServer) -> None:
    server.enqueue(
        Reply(tool_calls=[ToolCall("run_command", {"command": "grep -r TODO ."}, id="c1")]),
        Reply(text=["Understood, I will use rg."]),
    )
    codling = on_terminal(home, project, server, "find the TODOs")
    try:
        codling.expect("Allow? [y]es, [a]lways (every `grep` command, for this session), [n]o (or: n <reason>): ")
        codling.send("n use rg, it skips .gitignored files\r")
        codling.expect("Understood, I will use rg.")
        assert codling.wait() == 0
    finally:
        codling.close()
    returned = [m for m in server.requests[1]["messages"] if m["role"] == "tool"]
    assert "The user rejected Run grep -r TODO ., saying: use rg, it skips .gitignored files" in returned[0]["content"]
    assert not (project / "TODO").exists()


def test_an_allowed_edit_shows_its_diff_once(home: Path, project: Path, server: OpenAIServer) -> None:
    (project / "app.py").write_text("x = 1\ny = 2\n")
    server.enqueue(
        Reply(
            tool_calls=[ToolCall("edit_file", {"path": "app.py", "old_text": "x = 1", "new_text": "x = 10"}, id="e1")]
        ),
        Reply(text=["Changed x."]),
    )
    codling = on_terminal(home, project, server, "set x to 10")
    try:
        codling.expect("[a]lways (every edit, for this session)")
        codling.send("y\r")
        codling.expect("Changed x.")
        assert codling.wait() == 0
    finally:
        codling.close()
    assert (project / "app.py").read_text() == "x = 10\ny = 2\n"
    assert codling.output.count("+x = 10") == 1, codling.output
