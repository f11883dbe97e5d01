"""End to end over the Gemini API: the real ``codling run`` process (twice: a turn, then ``--continue``) against the
loopback Gemini fake (tests/fakes/gemini_server.py), with thinking, a tool call whose thought signature must come
back, a rate limit retried visibly and the prompt cache's reads in the reported usage. Everything else about the
provider is tested in process (tests/unit/test_gemini_provider.py)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.fakes import warm
from tests.fakes.deadlines import deadline
from tests.fakes.gemini_server import FunctionCall, GeminiError, Reply, running_gemini_server, signature
from tests.fakes.processes import measured

API_KEY = "AIza-test-gemini-key"


def test_codling_run_over_gemini_thinks_calls_a_tool_retries_then_continues(home: Path, project: Path) -> None:
    with running_gemini_server(expected_api_key=API_KEY) as server:
        server.enqueue(
            Reply(thoughts=["Read ", "it first."], function_calls=[FunctionCall("read_file", {"path": "src/app.py"})]),
            GeminiError.resource_exhausted(retry_delay_seconds=0),
            Reply(thoughts="It returns a constant.", text=["greet returns ", "'hello'"]),
            Reply(text="Second answer " + "padding " * 20),
        )
        env = measured(
            {
                "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                "HOME": str(home),
                "CODLING_HOME": str(home),
                "CODLING_MODEL": "google:gemini-2.5-flash",
                **server.env(API_KEY),
            }
        )

        def run(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [*warm.codling(), "run", *args],
                env=env,
                cwd=project,
                input="",
                capture_output=True,
                text=True,
                timeout=deadline(120),  # liveness only
                check=False,
            )

        first = run("what does greet return?")
        second = run("--continue", "--json", "and now?")
        requests, headers, bills = server.requests, server.headers, server.bills

    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == "greet returns 'hello'"
    assert "HTTP 429" in first.stderr  # the retry was shown, not waited out in silence
    assert second.returncode == 0, second.stderr
    lines = [json.loads(line) for line in second.stdout.splitlines()]
    (outcome,) = [line for line in lines if line["type"] == "result"]
    assert outcome["error"] is None and "Second answer" in second.stdout

    assert all(h["x-goog-api-key"] == API_KEY for h in headers)
    _called, limited, retried, continued = requests
    assert limited == retried  # the rate-limited request went again unchanged
    (call,) = [p for c in retried["contents"] if c["role"] == "model" for p in c["parts"] if "functionCall" in p]
    assert call["thoughtSignature"] == signature(0) and call["functionCall"]["args"] == {"path": "src/app.py"}
    assert "and now?" in json.dumps(continued["contents"][-1]) and "greet returns" in json.dumps(continued)
    # The second run repeats the first one's prefix: Gemini bills it as cached, and codling reports it so.
    assert bills[-1].cached_tokens > 0
    assert outcome["usage"]["cache_read_tokens"] == bills[-1].cached_tokens
    assert outcome["usage"]["input_tokens"] == bills[-1].prompt_tokens
