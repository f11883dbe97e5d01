"""Hostile input to a spawned `codling acp` over real pipes: it answers, keeps serving, and nothing leaks to disk."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from acp import PROTOCOL_VERSION

from codling.store.header import SessionHeader
from codling.store.index import SessionStore
from tests.e2e.raw_acp import agent_env, raw_agent
from tests.fakes.openai_server import OpenAIServer, Reply, last_user_text, running_server
from tests.fakes.scenarios import user_prompt


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with running_server() as s:
        yield s


def deep(kind: str, levels: int) -> bytes:
    open_, close = ("[", "]") if kind == "array" else ('{"a":', "}")
    return (open_ * levels + "0" + close * levels).encode()


async def test_deep_nesting_and_bad_bytes_are_answered_and_the_agent_keeps_serving(
    home: Path, tmp_path: Path, server: OpenAIServer
) -> None:
    lines = [deep(kind, levels) + b"\n" for kind in ("array", "object") for levels in (1_000, 100_000)]
    lines += [
        b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"x":'
        + deep("array", 1_000)
        + b"}}\n",
        b'{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":1,"x":'
        + deep("object", 500)
        + b"}}\n",
        b'{"jsonrpc":"2.0","id":3,"method":"initialize","params":{"protocolVersion":1,"x":"caf\xe9"}}\n',
        b"\xff\xfe\xfd\n",
    ]
    async with raw_agent(agent_env(home, server), tmp_path / "stderr.log") as agent:
        await agent.write(*lines)
        init = await agent.request(4, "initialize", {"protocolVersion": 0})
        assert init["result"]["protocolVersion"] == PROTOCOL_VERSION
        await agent.wait_until(lambda: len(agent.messages) == len(lines) + 1)
        assert agent.answers(2)[0]["error"]["code"] == -32600  # parseable, but past the depth cap
        assert [m["error"]["code"] for m in agent.answers(None)] == [-32700] * 7
        assert agent.answers(1) == agent.answers(3) == []  # unparsable: answered with id null


async def test_load_by_traversal_through_a_spawned_agent_is_refused_and_the_decoy_untouched(
    home: Path, project: Path, tmp_path: Path, server: OpenAIServer
) -> None:
    other = SessionStore(tmp_path / "elsewhere")
    other.create(SessionHeader("20240101-0123456789ab", project, "openai-chat:fake-model", "yolo"))
    decoy = other.history_path("20240101-0123456789ab")
    before = decoy.read_bytes()
    sneaky = os.path.relpath(decoy.parent, home / "sessions")
    assert sneaky.startswith("../../")
    async with raw_agent(agent_env(home, server), tmp_path / "stderr.log") as agent:
        await agent.request(1, "initialize", {"protocolVersion": 1})
        for n, method in enumerate(("session/load", "session/resume", "session/fork"), start=2):
            reply = await agent.request(n, method, {"sessionId": sneaky, "cwd": str(project), "mcpServers": []})
            assert reply["error"]["code"] == -32602 and reply["error"]["data"]["sessionId"] == sneaky
    assert decoy.read_bytes() == before


async def test_a_lone_surrogate_in_a_prompt_never_poisons_the_session(
    home: Path, project: Path, tmp_path: Path, server: OpenAIServer
) -> None:
    server.enqueue(Reply(text=["first answer"]), Reply(text=["second answer"]))
    async with raw_agent(agent_env(home, server), tmp_path / "stderr.log") as agent:
        await agent.request(1, "initialize", {"protocolVersion": 1})
        session = (await agent.request(2, "session/new", {"cwd": str(project), "mcpServers": []}))["result"]
        sid = session["sessionId"]
        # Written by hand: a JSON escape for a lone high surrogate, as a buggy client might send.
        line = (
            b'{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"'
            + sid.encode()
            + b'","prompt":[{"type":"text","text":"broken \\ud800 text"}]}}\n'
        )
        await agent.write(line)
        assert (await agent.answer(3))["result"]["stopReason"] == "end_turn"
        second = await agent.request(
            4, "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "next"}]}
        )
        assert second["result"]["stopReason"] == "end_turn"
    assert [user_prompt(r["messages"][-1]["content"]) for r in server.requests] == ["broken \ufffd text", "next"]
    history = (home / "sessions" / sid / "history.jsonl").read_bytes()
    assert "broken \ufffd text" in history.decode("utf-8")  # strict: valid UTF-8 throughout
    assert b"\\ud800" not in history


async def test_cancel_request_ends_a_pending_prompt_as_cancelled(
    home: Path, project: Path, tmp_path: Path, server: OpenAIServer
) -> None:
    server.enqueue(Reply(text=["partial ", "never sent"], stall_after=3), Reply(text=["still serving"]))
    stderr = tmp_path / "stderr.log"
    async with raw_agent(agent_env(home, server), stderr) as agent:
        await agent.request(1, "initialize", {"protocolVersion": PROTOCOL_VERSION})
        sid = (await agent.request(2, "session/new", {"cwd": str(project), "mcpServers": []}))["result"]["sessionId"]
        prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}
        await agent.send({"jsonrpc": "2.0", "id": "p-1", "method": "session/prompt", "params": prompt})
        await agent.wait_until(
            lambda: any(
                m.get("params", {}).get("update", {}).get("sessionUpdate") == "agent_message_chunk"
                for m in agent.messages
            )
        )
        # A request id nobody sent, a $/ notification codling does not know, then the real cancel.
        await agent.send({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": "nope"}})
        await agent.send({"jsonrpc": "2.0", "method": "$/progress", "params": {"token": 1}})
        await agent.send({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": "p-1"}})
        assert (await agent.answer("p-1"))["result"]["stopReason"] == "cancelled"
        # The session goes on.
        again = await agent.request("p-2", "session/prompt", {**prompt, "prompt": [{"type": "text", "text": "on"}]})
        assert again["result"]["stopReason"] == "end_turn"
    assert "Unhandled error" not in stderr.read_text()


async def test_a_prompt_and_its_cancel_sent_as_session_new_is_answered_reach_the_session_once_it_is_live(
    home: Path, project: Path, tmp_path: Path, server: OpenAIServer
) -> None:
    # session/new is answered before the session's brain is made (its imports take longer than the answer), so
    # a client that prompts and cancels at once reaches a session still opening: the prompt waits for it, and
    # the cancel, counted for it, stops it before any model request. A cold process: a warm one has the brain
    # imported already, and opens the session before the prompt arrives.
    server.enqueue(Reply(text=["after the cancel"]))
    stderr = tmp_path / "stderr.log"
    async with raw_agent(agent_env(home, server), stderr, cold=True) as agent:
        await agent.request(1, "initialize", {"protocolVersion": PROTOCOL_VERSION})
        sid = (await agent.request(2, "session/new", {"cwd": str(project), "mcpServers": []}))["result"]["sessionId"]
        prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}
        await agent.write(
            b'{"jsonrpc":"2.0","id":"p-1","method":"session/prompt","params":%s}\n' % json.dumps(prompt).encode(),
            b'{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"%s"}}\n' % sid.encode(),
        )
        assert await agent.answer("p-1") == {"jsonrpc": "2.0", "id": "p-1", "result": {"stopReason": "cancelled"}}
        assert server.requests == []
        again = await agent.request("p-2", "session/prompt", {**prompt, "prompt": [{"type": "text", "text": "on"}]})
        assert again["result"]["stopReason"] == "end_turn"
        assert [user_prompt(last_user_text(body)) for body in server.requests] == ["on"]
    assert "Unhandled error" not in stderr.read_text() and "not live" not in stderr.read_text()
