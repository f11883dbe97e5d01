"""End to end over ACP on the OpenAI Responses API and on Gemini: one real ``codling acp`` process, a session on
each provider's loopback fake (tests/fakes/responses_server.py, tests/fakes/gemini_server.py), each turn with
reasoning, a tool call and its answer, as an editor sees them. (Anthropic has its own: test_anthropic_process.py;
each provider's details are tested in process in tests/unit/test_<provider>_provider.py.)"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from acp import PROTOCOL_VERSION, helpers, spawn_agent_process

from tests.fakes import gemini_server, responses_server, warm
from tests.fakes.acp_client import RecordingClient
from tests.fakes.deadlines import deadline
from tests.fakes.processes import measured

GEMINI = "google-gla:gemini-2.5-flash"


def of_session(client: RecordingClient, session_id: str, kind: str) -> list[Any]:
    return [u for sid, u in client.updates if sid == session_id and u.session_update == kind]


def text_of(updates: list[Any]) -> str:
    return "".join(u.content.text for u in updates)


async def test_codling_acp_on_the_responses_api_and_on_gemini_reasons_and_calls_tools(
    home: Path, project: Path
) -> None:
    with (
        responses_server.running_responses_server(expected_api_key="sk-resp") as openai,
        gemini_server.running_gemini_server(expected_api_key="g-key") as gemini,
    ):
        openai.enqueue(
            responses_server.Reply(
                reasoning=["Read the ", "source."],
                tool_calls=[responses_server.ToolCall("read_file", {"path": "src/app.py"})],
            ),
            responses_server.Reply(text=["greet() returns ", "'hello'."]),
        )
        gemini.enqueue(
            gemini_server.Reply(
                thoughts="Read it first.",
                function_calls=[gemini_server.FunctionCall("read_file", {"path": "src/app.py"})],
            ),
            gemini_server.Reply(text=["It returns ", "'hello'."]),
        )
        env = measured(
            {
                "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                "HOME": str(home),
                "CODLING_HOME": str(home),
                "CODLING_MODEL": "openai:gpt-5-mini",
                **openai.env("sk-resp"),
                **gemini.env("g-key"),
            }
        )
        client = RecordingClient()
        async with spawn_agent_process(client, *warm.codling(), "acp", env=env) as (conn, process):
            await asyncio.wait_for(conn.initialize(protocol_version=PROTOCOL_VERSION), deadline(30))
            first = await asyncio.wait_for(conn.new_session(cwd=str(project)), deadline(30))
            second = await asyncio.wait_for(conn.new_session(cwd=str(project)), deadline(30))
            switched = await asyncio.wait_for(
                conn.set_config_option(config_id="model", session_id=second.session_id, value=GEMINI), deadline(30)
            )
            on_openai, on_gemini = await asyncio.wait_for(
                asyncio.gather(
                    conn.prompt(session_id=first.session_id, prompt=[helpers.text_block("what does greet return?")]),
                    conn.prompt(session_id=second.session_id, prompt=[helpers.text_block("and greet?")]),
                ),
                deadline(60),
            )
            process.kill()
            await asyncio.wait_for(process.wait(), deadline(10))
        openai_requests, gemini_requests = openai.requests, gemini.requests

    model = next(o for o in switched.config_options if o.id == "model")
    assert model.current_value == GEMINI
    assert on_openai.stop_reason == on_gemini.stop_reason == "end_turn"
    for session_id, thought, answer in (
        (first.session_id, "Read the source.", "greet() returns 'hello'."),
        (second.session_id, "Read it first.", "It returns 'hello'."),
    ):
        assert text_of(of_session(client, session_id, "agent_thought_chunk")) == thought
        assert text_of(of_session(client, session_id, "agent_message_chunk")) == answer
        (call,) = of_session(client, session_id, "tool_call")
        assert call.kind == "read"
        assert of_session(client, session_id, "tool_call_update")[-1].status == "completed"
    # Each provider got the tool's result back with what it requires: the reasoning item (Responses), the
    # thought signature (Gemini).
    sent_back = [i.get("type") for i in openai_requests[1]["input"] if isinstance(i, dict)]
    assert "reasoning" in sent_back and "function_call_output" in sent_back
    parts = [p for c in gemini_requests[1]["contents"] for p in c["parts"]]
    call_part = next(p for p in parts if "functionCall" in p or "function_call" in p)
    assert (call_part.get("thoughtSignature") or call_part.get("thought_signature")) == gemini_server.signature(0)
    assert any("functionResponse" in p or "function_response" in p for p in parts)
