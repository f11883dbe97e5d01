"""`codling run --json` read as a script reads it, in process against the loopback OpenAI-compatible server
(issue 32 item 5): every line parsed, the sequence of types checked, and the lines a script relies on
(`session`, `assistant_message`, `turn_ended`, `result`) compared whole."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.fakes.cli_runner import codling
from tests.fakes.openai_server import ErrorReply, OpenAIServer, Reply, ToolCall, Usage


def read_stream(stdout: str) -> list[dict[str, Any]]:
    """Every line of a run's stdout as a JSON object (a line that is not one fails the test)."""
    lines = [json.loads(line) for line in stdout.splitlines()]
    assert all(isinstance(line, dict) and isinstance(line.get("type"), str) for line in lines)
    return lines


def of_type(lines: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [line for line in lines if line["type"] == kind]


def test_a_script_reads_each_message_whole_and_the_answer_in_the_result(
    served: dict[str, str | None], project: Path, server: OpenAIServer
) -> None:
    server.enqueue(
        Reply(text=["Let me ", "look."], tool_calls=[ToolCall("read_file", {"path": "src/app.py"}, id="r1")]),
        Reply(text=["It ", "greets."], usage=Usage(prompt_tokens=120, completion_tokens=7)),
    )
    result = codling(served, "run", "--json", "what does app.py do?")
    assert result.exit_code == 0, result.stderr
    lines = read_stream(result.stdout)
    types = [line["type"] for line in lines]
    turn_id = lines[1]["turn_id"]
    # Each message's whole text comes once it is complete: before the tool call it led to, before the turn's end.
    assert [t for t in types if t not in ("text_delta", "usage_updated", "tool_call_running")] == [
        "session",
        "turn_started",
        "assistant_message",
        "tool_call_started",
        "tool_call_finished",
        "assistant_message",
        "turn_ended",
        "session_titled",
        "result",
    ]
    assert of_type(lines, "assistant_message") == [
        {"type": "assistant_message", "turn_id": turn_id, "text": "Let me look."},
        {"type": "assistant_message", "turn_id": turn_id, "text": "It greets."},
    ]
    # The deltas are still there for a script that streams them, and add up to the messages.
    assert "".join(line["text"] for line in of_type(lines, "text_delta")) == "Let me look.It greets."
    (ended,) = of_type(lines, "turn_ended")
    assert (ended["stop_reason"], ended["error"]) == ("end_turn", False)
    outcome = lines[-1]
    assert outcome == {
        "type": "result",
        "session_id": lines[0]["session_id"],
        "stop_reason": "end_turn",
        "text": "It greets.",
        "error": None,
        "usage": {
            "input_tokens": ended["usage"]["input_tokens"],
            "output_tokens": ended["usage"]["output_tokens"],
            "cache_read_tokens": 0,
            "cache_write_tokens": 0,
        },
        "cost": None,
        "duration_ms": outcome["duration_ms"],
        "turns": 1,
    }


def test_a_failed_turn_says_error_in_turn_ended_and_in_the_result(
    served: dict[str, str | None], server: OpenAIServer
) -> None:
    """The turn's own stop reason for a failure is end_turn with an error; a script reads `error` on both lines."""
    exploded = ErrorReply(400, "the request was refused")  # not retried
    server.enqueue(exploded)
    result = codling(served, "run", "--json", "hi")
    assert result.exit_code == 1
    lines = read_stream(result.stdout)
    (ended,) = of_type(lines, "turn_ended")
    (failed,) = of_type(lines, "turn_failed")
    outcome = lines[-1]
    assert (ended["stop_reason"], ended["error"]) == ("error", True)
    assert (outcome["type"], outcome["stop_reason"], outcome["text"]) == ("result", "error", "")
    assert outcome["error"] == failed["message"] and "the request was refused" in failed["message"]
    assert of_type(lines, "assistant_message") == []
