"""End to end: a real `codling run` on an ``openai:`` model (the Responses API) against the loopback Responses server
(tests/fakes/responses_server.py). One process for a whole scripted turn — reasoning, a tool call, a rate limit
retried, an image, the answer — so the wire format, prompt_cache_key and the process's output meet once; the
same pieces are tested one by one in process (tests/unit/test_responses_provider.py)."""

from __future__ import annotations

import base64
import json
import os
import subprocess
from pathlib import Path

from tests.fakes import warm
from tests.fakes.deadlines import deadline
from tests.fakes.processes import measured
from tests.fakes.responses_server import ErrorReply, Reply, ToolCall, running_responses_server

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)


def test_codling_run_on_the_responses_api_streams_reasons_calls_tools_and_retries(home: Path, project: Path) -> None:
    (project / "shot.png").write_bytes(PNG)
    with running_responses_server(expected_api_key="sk-resp-test") as server:
        server.enqueue(
            Reply(reasoning=["Read the ", "source."], tool_calls=[ToolCall("read_file", {"path": "src/app.py"})]),
            ErrorReply.rate_limited(retry_after=0),
            Reply(text=["greet() returns ", "'hello'."]),
        )
        env = measured(
            {
                "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                "HOME": str(home),
                "CODLING_HOME": str(home),
                "CODLING_MODEL": "openai:gpt-5-mini",
                **server.env("sk-resp-test"),
            }
        )
        result = subprocess.run(
            [*warm.codling(), "run", "--json", "-i", "shot.png", "What does greet return?"],
            env=env,
            cwd=project,
            capture_output=True,
            text=True,
            timeout=deadline(120),  # liveness only
            check=False,
        )
        requests, bills = server.requests, server.bills

    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    (outcome,) = [line for line in lines if line["type"] == "result"]
    assert outcome["stop_reason"] == "end_turn" and outcome["error"] is None
    assert "greet() returns 'hello'." in result.stdout
    assert outcome["usage"]["input_tokens"] == sum(b.input_tokens for b in bills)  # the fake's bill, as reported

    first, limited, retried = requests
    assert limited == retried  # the rate-limited request went again unchanged
    assert {body["prompt_cache_key"] for body in requests} == {f"codling-{outcome['session_id']}"}
    assert any(
        p.get("type") == "input_image" for i in first["input"] for p in (i.get("content") or []) if isinstance(p, dict)
    )
    sent_back = [i.get("type") for i in retried["input"] if isinstance(i, dict)]
    assert sent_back.count("reasoning") == 1 and "function_call" in sent_back and "function_call_output" in sent_back
    output = next(i for i in retried["input"] if i.get("type") == "function_call_output")
    assert "return 'hello'" in output["output"]
