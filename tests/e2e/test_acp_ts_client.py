"""The reference ACP client library (@agentclientprotocol/sdk, TypeScript, from npm) drives a spawned
`codling acp` through a scripted session with the editor's files, terminals, permission prompts and boolean
config options (thinking switched off between the prompts); every message either side sent is checked against
the protocol's JSON schema shipped with that library."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from codling.credentials import credentials_file, store
from codling.store.index import SessionStore
from tests.e2e.raw_acp import agent_env
from tests.fakes import warm
from tests.fakes.deadlines import deadline
from tests.fakes.npm_acp import client_script, schema_violations
from tests.fakes.openai_server import OpenAIServer, Reply, ToolCall, running_server


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with running_server() as s:
        yield s


def test_a_scripted_session_under_the_typescript_sdk_client(
    home: Path, project: Path, tmp_path: Path, server: OpenAIServer
) -> None:
    notes = project / "notes.txt"
    notes.write_text("saved text on disk\n")
    server.title_reply = Reply(text=["Notes"])
    server.enqueue(
        Reply(tool_calls=[ToolCall("read_file", {"path": "notes.txt"}, id="call_r")]),
        Reply(tool_calls=[ToolCall("write_file", {"path": "notes.txt", "content": "edited\n"}, id="call_w")]),
        Reply(tool_calls=[ToolCall("run_command", {"command": "echo from-ts; exit 2"}, id="call_c")]),
        Reply(text=["Done."]),
        Reply(tool_calls=[ToolCall("write_file", {"path": "other.txt", "content": "x\n"}, id="call_x")]),
        Reply(text=["OK, I left it."]),
        Reply(text=["First queued."]),
        Reply(text=["Second queued."]),
    )
    # The session's model thinks (so the client gets the thinking toggle, which it switches off before the
    # second prompt).
    (home / "models.json").write_text(
        json.dumps({"models": {"openai-chat:gpt-5": {"context_limit": 100_000, "thinking": True}}})
    )
    store_a_login(home)
    result, traffic = tmp_path / "result.json", tmp_path / "traffic.jsonl"
    node = shutil.which("node")
    assert node is not None, "node is needed for the TypeScript SDK client (apt-get install nodejs)"
    env = {
        **agent_env(home, server),
        "CODLING_MODEL": "openai-chat:gpt-5",
        "ACP_ANSWERS": "allow_once,allow_once,reject",
        "ACP_QUEUED": "queued one,queued two",
        "PATH": os.environ["PATH"],
    }
    done = subprocess.run(
        [
            node,
            str(client_script()),
            str(result),
            str(traffic),
            json.dumps([*warm.codling(), "acp"]),
            str(project),
            "update the notes",
            "write another",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=deadline(120),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(result.read_text())
    assert (seen["agent"], seen["stops"], seen["errors"]) == ("codling", ["end_turn", "end_turn"], [])
    # Files went through the editor: the read saw the unsaved buffer, the approved write saved.
    assert [path for op, path in seen["fs"] if op == "write"] == [str(notes)]
    assert seen["fs"][0] == ["read", str(notes)]
    assert notes.read_text() == "edited\n" and not (project / "other.txt").exists()
    told = [m["content"] for m in server.requests[1]["messages"] if m["role"] == "tool"]
    assert "unsaved text in the editor" in told[0]
    # The command ran in the editor's terminal, which was shown, then released.
    # (codling's environment holds OPENAI_* secrets: the command is run without them)
    [created, released] = seen["terminals"]
    assert created[0] == "create" and created[1].endswith("/bin/sh -c echo from-ts; exit 2")
    assert released == ["release", "term-1"]
    assert [(p["id"], p["answer"]) for p in seen["permissions"]] == [
        ("call_w", "allow_once"),
        ("call_c", "allow_once"),
        ("call_x", "reject"),
    ]
    calls = {u["id"]: [v for v in seen["updates"] if v["id"] == u["id"]] for u in seen["updates"] if u["id"]}
    assert ["terminal"] in [u["content"] for u in calls["call_c"]]
    assert calls["call_c"][-1]["status"] == "completed"
    assert calls["call_w"][-1]["content"] == ["diff"] and calls["call_w"][-1]["status"] == "completed"
    assert calls["call_x"][-1]["status"] is None  # rejected: left as the client marked it
    # The config options: the model picker grouped by provider (the current model in it), thinking as a boolean
    # (the client advertised boolean options), which the client switched off before the second prompt: the
    # requests of that turn ask for the least reasoning gpt-5 takes.
    options = {o["id"]: o for o in seen["options"]}
    assert list(options) == ["model", "thinking", "thought_level", "mode"]
    picker = options["model"]
    assert [(g["group"], g["name"]) for g in picker["options"]] == [
        ("anthropic", "Anthropic"),  # (the stored login's key)
        ("openai", "OpenAI"),
        ("openai-chat", "OpenAI-compatible (chat completions)"),
    ]
    assert picker["currentValue"] == "openai-chat:gpt-5"
    assert {"value": "openai-chat:gpt-5", "name": "gpt-5", "description": "openai-chat:gpt-5"} in picker["options"][2][
        "options"
    ]
    assert (options["thinking"]["type"], options["thinking"]["currentValue"]) == ("boolean", True)
    assert options["thought_level"]["category"] == "thought_level"
    assert {o["id"]: o["currentValue"] for o in seen["thinkingOff"]} == {
        "model": "openai-chat:gpt-5",
        "thinking": False,
        "thought_level": "default",
        "mode": "ask",
    }
    assert [r.get("reasoning_effort") for r in server.requests] == ["medium"] * 4 + [
        "minimal"
    ] * 4  # (the two queued prompts too)
    check_delete_and_logout(seen, home)
    kinds = {u["kind"] for u in seen["updates"]}
    assert {"available_commands_update", "usage_update", "tool_call", "tool_call_update"} <= kinds
    # Every message, both ways, as the protocol's schema defines it.
    messages = [json.loads(line) for line in traffic.read_text().splitlines()]
    assert len(messages) > 30
    assert schema_violations(messages) == []
    # Queued prompts: the second was sent before the first was answered, waited for it, then ran after it.
    assert seen["queued"] == ["end_turn", "end_turn"]
    first, second = [m["message"]["id"] for m in messages if m["message"].get("method") == "session/prompt"][-2:]
    [sent] = [
        i
        for i, m in enumerate(messages)
        if m["from"] == "client" and m["message"].get("id") == second and m["message"].get("method") == "session/prompt"
    ]
    [answered] = [
        i
        for i, m in enumerate(messages)
        if m["from"] == "agent" and "result" in m["message"] and m["message"]["id"] == first
    ]
    assert sent < answered
    last = [m for m in server.requests[-1]["messages"] if m["role"] in ("user", "assistant")]
    assert "queued two" in str(last[-1]["content"]) and "First queued." in str(last[-2]["content"])
    # (and the check does reject what the schema forbids)
    update = next(m for m in messages if m["message"].get("method") == "session/update")
    broken = {**update["message"], "params": {**update["message"]["params"], "update": {"sessionUpdate": "nope"}}}
    assert schema_violations([{"from": "agent", "message": broken}]) != []


# -- session/delete and logout: after the scripted session, in the same process (acp_ts_client.mjs deleteAndLogOut)

STORED_KEY = "sk-ant-stored-0123456789abcdef"


def store_a_login(home: Path) -> None:
    """What `codling login` would have stored: the agent takes it up at start-up; its logout removes it."""
    store(home, "ANTHROPIC_API_KEY", STORED_KEY, None)


def check_delete_and_logout(seen: dict[str, Any], home: Path) -> None:
    """The session was deleted (a second delete is -32002, which the SDK takes as done) and gone from the list,
    logout removed the stored key, and the environment's key still opened a session."""
    outcome = dict(seen["deleteAndLogout"])
    after = outcome.pop("sessionAfterLogout")
    assert outcome == {
        "capabilities": {"delete": {}, "logout": {}},
        "deleted": {},
        "deletedAgain": {},
        "listed": [],
        "loggedOut": {},
    }
    assert not credentials_file(home).exists()
    assert [s.session_id for s in SessionStore(home).list()] == [after]
