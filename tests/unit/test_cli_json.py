"""`codling run --json` read as a script reads it, in process against the loopback OpenAI-compatible server
(issue 32 item 5): every line parsed, the sequence of types checked, and the lines a script relies on
(`session`, `assistant_message`, `turn_ended`, `result`) compared whole."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from codling.brain.events import TurnEnded
from codling.store.history import read_history
from tests.fakes.cli_runner import MODEL, codling
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


# -- limits for scripts (issue 32 item 8) ----------------------------------------------------------------------


def reads(*paths: str) -> list[Reply]:
    """A model that reads one file per request, for as long as it is let."""
    return [
        Reply(
            tool_calls=[ToolCall("read_file", {"path": path}, id=f"r{n}")],
            usage=Usage(prompt_tokens=100_000, completion_tokens=0),
        )
        for n, path in enumerate(paths)
    ]


def recorded_end(home: Path) -> TurnEnded:
    (history,) = (home / "sessions").glob("*/history.jsonl")
    return next(e for e in read_history(history).events if isinstance(e, TurnEnded))


def test_max_requests_stops_the_turn_before_the_request_past_it(
    served: dict[str, str | None], home: Path, server: OpenAIServer
) -> None:
    server.enqueue(*reads("src/app.py", "README.md", "src/app.py"), Reply(text=["Done."]))
    result = codling(served, "run", "--json", "--max-requests", "2", "read everything")
    assert result.exit_code == 3, result.stderr
    assert len(server.requests) == 2  # the third request was never made
    lines = read_stream(result.stdout)
    (ended,) = of_type(lines, "turn_ended")
    outcome = lines[-1]
    assert (ended["stop_reason"], ended["error"]) == ("max_turn_requests", False)
    assert (outcome["stop_reason"], outcome["error"], outcome["text"]) == ("max_turn_requests", None, "")
    assert [line["status"] for line in of_type(lines, "tool_call_finished")] == ["completed", "completed"]
    session_id = outcome["session_id"]
    assert (
        "codling: stopped: the turn made 2 model requests, as many as --max-requests 2 allows, so its next "
        "request was not made; raise it, or what it did is recorded; continue with: codling run --resume "
        f'{session_id} "go on"\n'
    ) in result.stderr
    end = recorded_end(home)
    assert (end.stop_reason, end.error, end.usage.requests) == ("max_turn_requests", False, 2)


def test_max_cost_stops_the_turn_once_its_spend_passes_the_cap(
    served: dict[str, str | None], home: Path, server: OpenAIServer
) -> None:
    """$0.10 a request (100,000 input tokens at $1 a million): after two, $0.20 is past $0.15, so no third."""
    (home / "models.json").write_text(json.dumps({"models": {MODEL: {"price": [1, 2]}}}))
    server.enqueue(*reads("src/app.py", "README.md", "src/app.py"), Reply(text=["Done."]))
    result = codling(served, "run", "--max-cost", "0.15", "read everything")
    assert result.exit_code == 3, result.stderr
    assert len(server.requests) == 2
    assert (
        "codling: stopped: the turn had spent $0.2000 at list prices, past --max-cost 0.15 US dollars, so its next "
        "model request was not made; raise the cap, or what it did is recorded; continue with: codling run --resume "
    ) in result.stderr
    # The turn's own note, drawn on stderr as the output is piped, says it in words, not by the stop reason's name.
    assert "(stopped: the turn's spend passed its cap, --max-cost)\n" in result.stderr
    assert "max_cost" not in result.stderr
    end = recorded_end(home)
    assert (end.stop_reason, end.error, end.usage.requests) == ("max_cost", False, 2)
    assert end.cost == pytest.approx(0.2)


def test_a_spend_under_the_cap_runs_the_turn_to_its_end(
    served: dict[str, str | None], home: Path, server: OpenAIServer
) -> None:
    (home / "models.json").write_text(json.dumps({"models": {MODEL: {"price": [1, 2]}}}))
    server.enqueue(*reads("src/app.py"), Reply(text=["Done."]))
    result = codling(served, "run", "--json", "--max-cost", "0.15", "--max-requests", "2", "read it")
    assert result.exit_code == 0, result.stderr
    assert (read_stream(result.stdout)[-1]["stop_reason"], len(server.requests)) == ("end_turn", 2)


def test_max_cost_on_a_model_without_a_price_is_refused_up_front(
    served: dict[str, str | None], home: Path, server: OpenAIServer
) -> None:
    result = codling(served, "run", "--max-cost", "1", "hi")
    assert result.exit_code == 2
    assert result.stderr == (
        f'codling: --max-cost needs the model\'s price, and {MODEL} has none; add "price": [input, output] (US '
        "dollars per million tokens) to its entry in $CODLING_HOME/models.json, or use --max-requests\n"
    )
    assert (server.requests, result.stdout) == ([], "")
    assert not list((home / "sessions").glob("*/history.jsonl"))


@pytest.mark.parametrize("args", [["--max-requests", "0"], ["--max-cost", "0"], ["--max-cost", "-1"]])
def test_a_limit_that_allows_nothing_is_a_usage_error(
    served: dict[str, str | None], server: OpenAIServer, args: list[str]
) -> None:
    result = codling(served, "run", *args, "hi")
    assert result.exit_code == 2
    assert args[0] in result.stderr and server.requests == []


def test_the_readme_s_example_is_the_stream_a_run_writes(served: dict[str, str | None], server: OpenAIServer) -> None:
    """The README's example of the stream, in its order, and each of its whole lines with the fields a real run's
    line of that type has (a line with `…` is abbreviated: only its place in the order is checked)."""
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    block = readme.split("For example (deltas left out", 1)[1].split("```", 2)[1]
    example = [line for line in block.splitlines() if line.startswith("{")]
    server.enqueue(
        Reply(text=["Let me look."], tool_calls=[ToolCall("read_file", {"path": "src/app.py"}, id="r1")]),
        Reply(text=["It greets."]),
    )
    result = codling(served, "run", "--json", "what does app.py do?")
    real = read_stream(result.stdout)
    shown = [json.loads(line.replace("…,", ",").replace(", …}", "}"))["type"] for line in example]
    assert [line["type"] for line in real if line["type"] in shown] == shown
    whole = [json.loads(line) for line in example if ", …}" not in line]
    assert {line["type"] for line in whole} == {"session", "assistant_message", "result"}
    for line in whole:
        assert line.keys() == next(r for r in real if r["type"] == line["type"]).keys(), line["type"]


def test_max_cost_counts_what_a_delegate_spent_in_the_turn(
    served: dict[str, str | None], home: Path, server: OpenAIServer
) -> None:
    """$0.10 for the turn's own first request and $0.10 for its delegate's: $0.20 is past $0.15 only with the
    delegate's spend counted, so the turn's second request is never made."""
    (home / "models.json").write_text(json.dumps({"models": {MODEL: {"price": [1, 2]}}}))
    spent = Usage(prompt_tokens=100_000, completion_tokens=0)
    server.enqueue(
        Reply(tool_calls=[ToolCall("delegate", {"agent": "planner", "task": "plan it"}, id="d1")], usage=spent),
        Reply(text=["The plan."], usage=spent),  # the delegate's one request
        Reply(text=["Done."]),
    )
    result = codling(served, "run", "--max-cost", "0.15", "plan and do it")
    assert result.exit_code == 3, result.stderr
    assert len(server.requests) == 2
    end = recorded_end(home)
    assert (end.stop_reason, end.usage.requests) == ("max_cost", 2)
    assert end.cost == pytest.approx(0.2)
