"""End to end: the `codling` command in real subprocesses, against the loopback OpenAI-compatible server.

Only what a real process shows is tested here (its exit status, stdin, what goes to its piped stdout and stderr, a
terminal); what a turn does is tested in process, over the same server, in `tests/unit/test_cli_commands.py`."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes import warm
from tests.fakes.deadlines import deadline
from tests.fakes.openai_server import ErrorReply, OpenAIServer, Reply, ToolCall, running_server
from tests.fakes.processes import measured
from tests.fakes.scenarios import user_prompt


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with running_server() as s:
        yield s


def base_env(home: Path) -> dict[str, str]:
    # A clean environment: no provider credentials leak in from the machine running the tests.
    return measured({"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "CODLING_HOME": str(home)})


def codling(
    *args: str, env: dict[str, str], cwd: Path | None = None, stdin: str | None = None, cold: bool = False
) -> subprocess.CompletedProcess[str]:
    """``codling *args`` run to its end (warm, unless ``cold``: ``tests/fakes/warm.py``)."""
    return subprocess.run(
        [*(warm.cold() if cold else warm.codling()), *args],
        env=env,
        cwd=cwd,
        input=stdin if stdin is not None else "",
        capture_output=True,
        text=True,
        timeout=deadline(60),
        check=False,
    )


def model_env(home: Path, server: OpenAIServer) -> dict[str, str]:
    return {
        **base_env(home),
        "CODLING_MODEL": "openai-chat:fake-model",
        "OPENAI_BASE_URL": server.base_url,
        "OPENAI_API_KEY": "sk-cli-test",
    }


def test_version_and_help(home: Path) -> None:
    from codling import __version__

    version = codling("--version", env=base_env(home))
    assert (version.returncode, version.stdout.strip()) == (0, f"codling {__version__}")
    help_ = codling("--help", env=base_env(home))
    assert help_.returncode == 0
    for command in ("acp", "run", "models"):
        assert command in help_.stdout


def test_no_credentials_exits_2_naming_the_variables(home: Path, project: Path) -> None:
    result = codling("run", "hello", env=base_env(home), cwd=project)
    assert result.returncode == 2
    assert "ANTHROPIC_API_KEY" in result.stderr and "OPENAI_API_KEY" in result.stderr
    assert result.stdout == ""


def test_bad_usage_exits_2(home: Path, project: Path) -> None:
    assert codling("run", "--mode", "chaos", "x", env=base_env(home), cwd=project).returncode == 2
    assert codling("run", "--no-such-flag", env=base_env(home), cwd=project).returncode == 2
    assert codling("run", "x", "--cwd", str(project / "missing"), env=base_env(home)).returncode == 2


def test_run_reads_its_prompt_from_stdin_and_streams_the_reply_plain_when_piped(
    home: Path, project: Path, server: OpenAIServer
) -> None:
    # One process for both sides of a pipe (each start costs seconds of CPU): `run -` reads the prompt from
    # stdin, and a piped stdout gets the reply without colour.
    server.enqueue(Reply(text=["Hello ", "from ", "the model."]))
    result = codling("run", "-", env=model_env(home, server), cwd=project, stdin="prompt from a pipe\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "Hello from the model."
    assert "\x1b" not in result.stdout
    assert "read-only" in result.stderr  # stdin is not a terminal: it says which mode it uses
    meter = next(line for line in result.stderr.splitlines() if line.startswith("context: "))
    used = int(meter.split()[1].replace(",", ""))
    assert 0 < used < 32_000 and " / 32,000 tokens (" in meter  # fake-model is in no catalog: 32k assumed
    assert user_prompt(server.requests[0]["messages"][-1]["content"]).strip() == "prompt from a pipe"


def test_a_prompt_piped_into_bare_codling_runs_as_codling_run_would(
    home: Path, project: Path, server: OpenAIServer
) -> None:
    """`echo "say hi" | codling`: the process itself routes a bare command line without a terminal to `run`
    (it used to print the help and exit 0, dropping the prompt)."""
    server.enqueue(Reply(text=["Hi ", "there."]))
    result = codling(env=model_env(home, server), cwd=project, stdin="say hi\n")
    assert (result.returncode, result.stdout) == (0, "Hi there.\n"), result.stderr
    assert "read-only" in result.stderr  # as `codling run` says, with no terminal to ask on
    assert user_prompt(server.requests[0]["messages"][-1]["content"]) == "say hi\n"


def test_failed_turn_exits_1_with_error(home: Path, project: Path, server: OpenAIServer) -> None:
    server.enqueue(ErrorReply(401, "Incorrect API key provided", code="invalid_api_key"))
    result = codling("run", "hi", env=model_env(home, server), cwd=project)
    assert result.returncode == 1
    assert result.stdout == ""  # errors are not the answer
    assert "Error" in result.stderr and "Incorrect API key provided" in result.stderr


def test_a_script_reads_json_and_exit_code_3_when_a_limit_stops_the_turn(
    home: Path, project: Path, server: OpenAIServer
) -> None:
    """The process's own side of issue 32 items 5 and 8: stdout is JSON lines alone, the limit's note is on
    stderr, and the exit status says the turn stopped at a limit (the stream itself is tested in process)."""
    server.enqueue(
        Reply(text=["Let me read it."], tool_calls=[ToolCall("read_file", {"path": "README.md"}, id="r1")]),
        Reply(text=["Never asked for."]),
    )
    result = codling("run", "--json", "--max-requests", "1", "summarise", env=model_env(home, server), cwd=project)
    assert result.returncode == 3, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [line["type"] for line in lines if line["type"] in ("session", "assistant_message", "result")] == [
        "session",
        "assistant_message",
        "result",
    ]
    outcome = lines[-1]
    assert (outcome["stop_reason"], outcome["error"]) == ("max_turn_requests", None)
    assert len(server.requests) == 1
    assert "stopped: the turn made 1 model request, as many as --max-requests 1 allows" in result.stderr


def test_piped_stdout_is_the_last_message_alone(home: Path, project: Path, server: OpenAIServer) -> None:
    (project / "README.md").write_text("# Demo\nA tiny demo project.\n")
    server.enqueue(
        Reply(text=["Let me read it first."], tool_calls=[ToolCall("read_file", {"path": "README.md"}, id="r1")]),
        Reply(text=["## Summary\n\nA tiny demo project."]),
    )
    answer = project / "answer.md"
    result = codling("run", "-o", str(answer), "summarise README.md", env=model_env(home, server), cwd=project)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "## Summary\n\nA tiny demo project.\n"
    assert answer.read_text() == result.stdout
    # What the turn did is on stderr, the narration before the tool call included.
    assert "Read README.md" in result.stderr and "Let me read it first." in result.stderr


def test_run_on_a_terminal_asks_before_a_command(home: Path, project: Path, server: OpenAIServer) -> None:
    server.enqueue(
        Reply(tool_calls=[ToolCall("run_command", {"command": "echo approved > proof.txt"}, id="c1")]),
        Reply(text=["Done."]),
    )
    text = on_a_terminal(model_env(home, server), project, b"y\n", "run", "make proof")
    assert "echo approved > proof.txt" in text
    assert (project / "proof.txt").read_text() == "approved\n"
    assert "Done." in text


def on_a_terminal(env: dict[str, str], project: Path, answer: bytes, *args: str) -> str:
    """``codling *args`` on a pseudo-terminal, answering its first "Allow?" with ``answer``; all it showed."""
    import pty
    import select

    primary, secondary = pty.openpty()
    process = subprocess.Popen(
        [*warm.codling(), *args],
        stdin=secondary,
        stdout=secondary,
        stderr=secondary,
        env={**env, "NO_COLOR": "1", "TERM": "dumb"},
        cwd=project,
    )
    os.close(secondary)
    seen = b""
    answered = False
    try:
        while process.poll() is None or select.select([primary], [], [], 0)[0]:
            ready, _, _ = select.select([primary], [], [], deadline(30))
            assert ready, f"no output from codling; got so far: {seen!r}"
            try:
                chunk = os.read(primary, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
            if not answered and b"Allow?" in seen:
                os.write(primary, answer)
                answered = True
        assert process.wait(timeout=deadline(30)) == 0, seen
    finally:
        if process.poll() is None:
            process.kill()
        os.close(primary)
    assert answered, seen
    return seen.decode(errors="replace")


def test_a_local_server_url_alone_is_enough(home: Path, server: OpenAIServer) -> None:
    # A new user's first run against a local server: its URL, no key, no model (issue 30 item 4).
    server.listed_models = ["qwen2.5-coder:7b"]
    server.enqueue(Reply("served locally"))
    result = codling("run", "hi", env={**base_env(home), "OPENAI_BASE_URL": server.base_url})
    assert result.returncode == 0, result.stderr
    assert "served locally" in result.stdout
    assert f"using openai-chat:qwen2.5-coder:7b, the first model {server.base_url} lists" in result.stderr
    [turn] = server.requests  # chat completions (titles apart)
    assert turn["model"] == "qwen2.5-coder:7b"
