"""acpx (the headless ACP client from npm, ``acpx --agent "<command>" exec``) runs a scripted session against a
spawned `codling acp`: a read and a write through the client's files, a failing command in the client's
terminal, all approved, with the thinking toggle switched off first (acpx sets config options as strings).
Its JSON output (every message both ways) is checked against the ACP schema, and its text output must show
what the command printed and how it ended."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.raw_acp import agent_env
from tests.fakes import warm
from tests.fakes.deadlines import deadline
from tests.fakes.mcp import ROOT
from tests.fakes.npm import npm_install
from tests.fakes.npm_acp import schema_violations
from tests.fakes.openai_server import OpenAIServer, Reply, ToolCall, running_server

PREFIX = ROOT / ".venv" / "acpx-npm"
PACKAGE = "acpx@0.19.1"
AGENT_METHODS = ("session/update", "session/request_permission", "fs/", "terminal/")
"""What the agent sends (by name or prefix); the client sends everything else."""


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with running_server() as s:
        yield s


def acpx() -> Path:
    """The acpx program, installed with npm on first use."""
    return npm_install(PACKAGE, PREFIX, PREFIX / "node_modules" / ".bin" / "acpx")


def run_acpx(home: Path, project: Path, server: OpenAIServer, output: str) -> str:
    (project / "notes.txt").write_text("saved text on disk\n")
    server.title_reply = Reply(text=["Notes"])
    server.enqueue(
        Reply(tool_calls=[ToolCall("read_file", {"path": "notes.txt"}, id="call_r")]),
        Reply(tool_calls=[ToolCall("write_file", {"path": "notes.txt", "content": "edited\n"}, id="call_w")]),
        Reply(tool_calls=[ToolCall("run_command", {"command": "echo from-acpx; exit 2"}, id="call_c")]),
        Reply(text=["Done."]),
    )
    # A thinking model, whose thinking acpx switches off before the prompt (`--config-option`, a string value:
    # acpx does not advertise boolean options, so codling offers the toggle as an on/off select).
    (home / "models.json").write_text(json.dumps({"models": {"openai-chat:gpt-5": {"thinking": True}}}))
    env = {
        **agent_env(home, server),
        "CODLING_MODEL": "openai-chat:gpt-5",
        "PATH": os.environ["PATH"],
        "HOME": str(home),
    }
    agent = " ".join([*warm.codling(), "acp"])
    argv = [str(acpx()), "--agent", agent, "--approve-all", "--format", output, "--cwd", str(project)]
    done = subprocess.run(
        [*argv, "exec", "--config-option", "thinking=off", "update the notes"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=deadline(120),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert (project / "notes.txt").read_text() == "edited\n"
    assert [r.get("reasoning_effort") for r in server.requests] == ["minimal"] * 4  # thinking off, as set
    return done.stdout


def traffic(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """acpx's JSON lines as ``{"from", "message"}``: a request's sender by its method, a response's as the
    other side of the latest open request with its id (ids of the two sides overlap)."""
    entries: list[dict[str, Any]] = []
    open_requests: list[tuple[str, Any]] = []
    for message in lines:
        if "method" in message:
            method = message["method"]
            sender = "agent" if method.startswith(AGENT_METHODS) else "client"
            if "id" in message:
                open_requests.append((sender, message["id"]))
        else:
            asker = next(s for s, i in reversed(open_requests) if i == message["id"])
            open_requests.remove((asker, message["id"]))
            sender = "agent" if asker == "client" else "client"
        entries.append({"from": sender, "message": message})
    return entries


def test_acpx_json_traffic_is_schema_valid(home: Path, project: Path, server: OpenAIServer) -> None:
    lines = [json.loads(line) for line in run_acpx(home, project, server, "json").splitlines() if line.strip()]
    seen = traffic(lines)
    assert schema_violations(seen) == []
    assert [m for m in lines if "error" in m] == []
    answers = {
        e["message"]["id"]: e["message"]["result"] for e in seen if e["from"] == "agent" and "result" in e["message"]
    }
    prompt_id = next(m["id"] for m in lines if m.get("method") == "session/prompt")
    assert answers[prompt_id] == {"stopReason": "end_turn"}  # the loopback server reports no tokens
    updates = [m["params"]["update"] for m in lines if m.get("method") == "session/update"]
    [command_end] = [u for u in updates if u.get("toolCallId") == "call_c" and u.get("status") == "completed"]
    assert command_end["rawOutput"] == {"status": "exit code 2", "output": "from-acpx\n", "exitCode": 2}
    [write_end] = [u for u in updates if u.get("toolCallId") == "call_w" and u.get("status") == "completed"]
    assert [c["type"] for c in write_end["content"]] == ["diff"]
    # The thinking toggle as acpx got it and set it: a select, since acpx takes no boolean options.
    set_id = next(m["id"] for m in lines if m.get("method") == "session/set_config_option")
    options = {o["id"]: o for o in answers[set_id]["configOptions"]}
    assert (options["thinking"]["type"], options["thinking"]["currentValue"]) == ("select", "off")


def test_acpx_text_output_shows_what_the_command_did(home: Path, project: Path, server: OpenAIServer) -> None:
    shown = run_acpx(home, project, server, "text")
    command = shown[shown.index("[tool] Run echo from-acpx; exit 2 (completed)") :]
    assert "from-acpx" in command and "Done." in command
    assert "[done] end_turn" in shown
