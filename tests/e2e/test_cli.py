"""End to end: the `codling` command in real subprocesses, against the loopback OpenAI-compatible server."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.openai_server import ErrorReply, OpenAIServer, Reply, ToolCall, Usage, running_server
from tests.fakes.processes import measured


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with running_server() as s:
        yield s


def base_env(home: Path) -> dict[str, str]:
    # A clean environment: no provider credentials leak in from the machine running the tests.
    return measured({"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "CODLING_HOME": str(home)})


def codling(
    *args: str, env: dict[str, str], cwd: Path | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "codling", *args],
        env=env,
        cwd=cwd,
        input=stdin if stdin is not None else "",
        capture_output=True,
        text=True,
        timeout=60,
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


def test_models_table_shows_limits_and_credentials(home: Path) -> None:
    (home / "models.json").write_text(
        json.dumps({"models": {"openai-chat:local-coder": {"context_limit": 12345, "max_output_tokens": 100}}})
    )
    result = codling("models", env={**base_env(home), "ANTHROPIC_API_KEY": "x"})
    assert result.returncode == 0
    rows = {line.split()[1]: line for line in result.stdout.splitlines() if "│" in line and ":" in line}
    assert "200,000" in rows["anthropic:claude-sonnet-4-5"] and "yes" in rows["anthropic:claude-sonnet-4-5"]
    assert "no" in rows["openai:gpt-5"]
    assert "12,345" in rows["openai-chat:local-coder"]
    # The model a run would use is marked, and why it was chosen is said.
    selected = [line for line in result.stdout.splitlines() if "← selected" in line]
    assert [line.split()[1] for line in selected] == ["anthropic:claude-sonnet-4-5"]
    assert result.stdout.splitlines()[-1] == (
        "selected: anthropic:claude-sonnet-4-5 (the first listed whose provider has credentials; choose another "
        "with --model, CODLING_MODEL or model in config.toml)"
    )
    chosen = codling("models", env={**base_env(home), "CODLING_MODEL": "openai-chat:elsewhere"})
    assert chosen.stdout.splitlines()[-1] == "selected: openai-chat:elsewhere (set by CODLING_MODEL)"
    assert "openai-chat:elsewhere" in next(line for line in chosen.stdout.splitlines() if "← selected" in line)
    (home / "config.toml").write_text('model = "openai:gpt-5"\n')
    configured = codling("models", env=base_env(home))
    assert configured.stdout.splitlines()[-1] == f"selected: openai:gpt-5 (set by model in {home / 'config.toml'})"
    (home / "config.toml").unlink()
    nothing = codling("models", env=base_env(home))
    assert nothing.returncode == 0 and nothing.stdout.splitlines()[-1].startswith("no model selected: no model is")


def test_run_streams_reply_plain_when_piped(home: Path, project: Path, server: OpenAIServer) -> None:
    server.enqueue(Reply(text=["Hello ", "from ", "the model."]))
    result = codling("run", "say hi", env=model_env(home, server), cwd=project)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "Hello from the model."
    assert "\x1b" not in result.stdout
    assert "read-only" in result.stderr  # stdin is not a terminal: it says which mode it uses
    meter = next(line for line in result.stderr.splitlines() if line.startswith("context: "))
    used = int(meter.split()[1].replace(",", ""))
    assert 0 < used < 32_000 and " / 32,000 tokens (" in meter  # fake-model is in no catalog: 32k assumed
    assert server.requests[0]["messages"][-1]["content"] == "say hi"


def test_run_reads_prompt_from_stdin(home: Path, project: Path, server: OpenAIServer) -> None:
    server.enqueue(Reply(text=["ok"]))
    result = codling("run", "-", env=model_env(home, server), cwd=project, stdin="prompt from a pipe\n")
    assert result.returncode == 0, result.stderr
    assert "prompt from a pipe" in server.requests[0]["messages"][-1]["content"]


def test_run_read_only_refuses_commands_and_model_is_told(home: Path, project: Path, server: OpenAIServer) -> None:
    server.enqueue(
        Reply(tool_calls=[ToolCall("run_command", {"command": "touch hacked"}, id="c1")]),
        Reply(text=["I could not run it."]),
    )
    result = codling("run", "touch a file", env=model_env(home, server), cwd=project)
    assert result.returncode == 0, result.stderr
    assert not (project / "hacked").exists()
    tool_message = server.requests[1]["messages"][-1]
    assert tool_message["role"] == "tool" and "read-only" in tool_message["content"]


def test_run_json_prints_event_lines(home: Path, project: Path, server: OpenAIServer) -> None:
    server.enqueue(
        Reply(tool_calls=[ToolCall("read_file", {"path": "src/app.py"}, id="r1")]),
        Reply(text=["It greets."], usage=Usage(prompt_tokens=120, completion_tokens=7)),
    )
    result = codling("run", "--json", "what does app.py do?", env=model_env(home, server), cwd=project)
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    assert all("kind" not in e for e in events)  # one "type" per event
    session, *turn, titled, outcome = events
    assert session == {
        "type": "session",
        "session_id": outcome["session_id"],
        "model": "openai-chat:fake-model",
        "cwd": str(project.resolve()),
        "resumed": False,
    }
    kinds = [e["type"] for e in turn]
    assert kinds[0] == "turn_started" and kinds[-1] == "turn_ended"
    assert "tool_call_started" in kinds and "tool_call_finished" in kinds
    finished = next(e for e in turn if e["type"] == "tool_call_finished")
    assert finished["status"] == "completed" and "return 'hello'" in finished["text"]
    assert "".join(e["text"] for e in turn if e["type"] == "text_delta") == "It greets."
    # A new session is named once its first turn is over; the result comes last.
    assert titled == {"type": "session_titled", "title": "what does app.py do?", "source": "fallback"}
    duration = outcome.pop("duration_ms")
    assert isinstance(duration, int) and duration >= 0
    assert outcome == {
        "type": "result",
        "session_id": session["session_id"],
        "stop_reason": "end_turn",
        "error": None,
        "usage": {"input_tokens": outcome["usage"]["input_tokens"], "output_tokens": 7},
        "cost": None,
        "turns": 1,
    }
    assert outcome["usage"]["input_tokens"] >= 120
    # A script continues the session from the id the first line gave it.
    server.enqueue(Reply(text=["Still here."]))
    again = codling(
        "run", "--json", "--resume", session["session_id"], "and now?", env=model_env(home, server), cwd=project
    )
    lines = [json.loads(line) for line in again.stdout.splitlines()]
    assert (lines[0]["session_id"], lines[0]["resumed"]) == (session["session_id"], True)
    assert (lines[-1]["stop_reason"], lines[-1]["turns"]) == ("end_turn", 2)


def test_a_failed_turn_s_json_result_says_error(home: Path, project: Path, server: OpenAIServer) -> None:
    exploded = ErrorReply(500, "upstream exploded", headers={"retry-after": "0"})  # retried at once
    server.enqueue(exploded, exploded, exploded)
    result = codling("run", "--json", "hi", env=model_env(home, server), cwd=project)
    assert result.returncode == 1
    outcome = json.loads(result.stdout.splitlines()[-1])
    assert outcome["type"] == "result" and outcome["stop_reason"] == "error"
    assert "upstream exploded" in outcome["error"]
    assert len(server.requests) == 3  # tried three times


def test_run_with_yolo_edits_and_shows_diff(home: Path, project: Path, server: OpenAIServer) -> None:
    server.enqueue(
        Reply(
            tool_calls=[
                ToolCall("edit_file", {"path": "src/app.py", "old_text": "'hello'", "new_text": "'howdy'"}, id="e1")
            ]
        ),
        Reply(text=["Edited."]),
    )
    result = codling("run", "--mode", "yolo", "change it", env=model_env(home, server), cwd=project)
    assert result.returncode == 0, result.stderr
    assert (project / "src" / "app.py").read_text() == "def greet():\n    return 'howdy'\n"
    # Piped, stdout is the answer; the diff is drawn with the rest of the turn on stderr.
    assert result.stdout == "Edited.\n"
    assert "+    return 'howdy'" in result.stderr and "-    return 'hello'" in result.stderr


def test_failed_turn_exits_1_with_error(home: Path, project: Path, server: OpenAIServer) -> None:
    server.enqueue(ErrorReply(401, "Incorrect API key provided", code="invalid_api_key"))
    result = codling("run", "hi", env=model_env(home, server), cwd=project)
    assert result.returncode == 1
    assert result.stdout == ""  # errors are not the answer
    assert "Error" in result.stderr and "Incorrect API key provided" in result.stderr


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


def test_configuration_errors_exit_2_before_any_session(home: Path, project: Path, server: OpenAIServer) -> None:
    env = model_env(home, server)
    for model in ("foo:bar", "anthropic:claude-sonnet-4-5"):  # an unknown provider; a missing key
        result = codling("run", "--model", model, "hi", env=env, cwd=project)
        assert (result.returncode, result.stdout) == (2, ""), result.stderr
        assert result.stderr.startswith("codling: ") and "Traceback" not in result.stderr
    assert "ANTHROPIC_API_KEY" in result.stderr
    assert not (home / "sessions").exists() or list((home / "sessions").iterdir()) == []
    assert server.requests == []


def test_unknown_model_warns_and_still_works(home: Path, project: Path, server: OpenAIServer) -> None:
    server.enqueue(Reply(text=["fine"]))
    env = {**model_env(home, server), "CODLING_MODEL": "openai-chat:never-heard-of-it"}
    result = codling("run", "hi", env=env, cwd=project)
    assert result.returncode == 0, result.stderr
    assert "never-heard-of-it" in result.stderr and "no model catalog" in result.stderr
    assert server.requests[0]["model"] == "never-heard-of-it"


def test_run_on_a_terminal_asks_before_a_command(home: Path, project: Path, server: OpenAIServer) -> None:
    import pty
    import select

    server.enqueue(
        Reply(tool_calls=[ToolCall("run_command", {"command": "echo approved > proof.txt"}, id="c1")]),
        Reply(text=["Done."]),
    )
    primary, secondary = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "codling", "run", "make proof"],
        stdin=secondary,
        stdout=secondary,
        stderr=secondary,
        env={**model_env(home, server), "NO_COLOR": "1", "TERM": "dumb"},
        cwd=project,
    )
    os.close(secondary)
    seen = b""
    answered = False
    try:
        while process.poll() is None or select.select([primary], [], [], 0)[0]:
            ready, _, _ = select.select([primary], [], [], 30)
            assert ready, f"no output from codling; got so far: {seen!r}"
            try:
                chunk = os.read(primary, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
            if not answered and b"Allow?" in seen:
                os.write(primary, b"y\n")
                answered = True
        assert process.wait(timeout=30) == 0, seen
    finally:
        if process.poll() is None:
            process.kill()
        os.close(primary)
    text = seen.decode(errors="replace")
    assert answered, text
    assert "echo approved > proof.txt" in text
    assert (project / "proof.txt").read_text() == "approved\n"
    assert "Done." in text


def test_a_one_shot_run_is_named_after_its_request_without_a_title_request(
    home: Path, project: Path, server: OpenAIServer
) -> None:
    server.enqueue(Reply(text=["Renamed it."]))
    env = model_env(home, server)
    result = codling("run", "rename   greet\nto welcome", env=env, cwd=project)
    assert result.returncode == 0, result.stderr
    assert server.title_requests == [] and len(server.requests) == 1
    assert "“rename greet to welcome”" in result.stderr.splitlines()[-1]
    listed = codling("sessions", "list", "--json", env=env)
    assert json.loads(listed.stdout.splitlines()[0])["title"] == "rename greet to welcome"


def test_with_title_a_new_session_is_named_by_one_title_request(
    home: Path, project: Path, server: OpenAIServer
) -> None:
    server.enqueue(Reply(text=["Renamed it."]))
    env = model_env(home, server)
    result = codling("run", "--title", "rename greet to welcome in src/app.py", env=env, cwd=project)
    assert result.returncode == 0, result.stderr
    (title_request,) = server.title_requests
    # The title special turn over the real provider path: its own system prompt, no tools, no history.
    assert "tools" not in title_request
    roles = [m["role"] for m in title_request["messages"]]
    assert roles == ["system", "user"]
    assert "rename greet to welcome in src/app.py" in title_request["messages"][1]["content"]
    assert "Renamed it." in title_request["messages"][1]["content"]
    assert "“Loopback session title”" in result.stderr.splitlines()[-1]  # the closing line names the session
    listed = codling("sessions", "list", "--json", env=env)
    assert json.loads(listed.stdout.splitlines()[0])["title"] == "Loopback session title"
    # A later turn of the same session is not titled again and never sees the title.
    server.enqueue(Reply(text=["Done."]))
    assert codling("run", "--title", "--continue", "now the tests", env=env, cwd=project).returncode == 0
    assert len(server.title_requests) == 1
    assert "Loopback session title" not in json.dumps(server.requests[-1])


def test_a_failing_title_request_keeps_the_first_request_as_title(
    home: Path, project: Path, server: OpenAIServer
) -> None:
    server.title_reply = ErrorReply(400, "title requests are refused here")
    server.enqueue(Reply(text=["Renamed it."]))
    env = model_env(home, server)
    result = codling("run", "--title", "rename greet to welcome", env=env, cwd=project)
    assert result.returncode == 0, result.stderr  # the user's turn is unaffected
    assert len(server.title_requests) == 1
    listed = codling("sessions", "list", "--json", env=env)
    assert json.loads(listed.stdout.splitlines()[0])["title"] == "rename greet to welcome"


PIXEL = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


def test_run_attaches_images(home: Path, project: Path, server: OpenAIServer) -> None:
    (home / "models.json").write_text(json.dumps({"models": {"openai-chat:fake-model": {"images": True}}}))
    (project / "shot.png").write_bytes(PIXEL)
    server.enqueue(Reply(text=["A pixel."]))
    result = codling("run", "--image", "shot.png", "what is this?", env=model_env(home, server), cwd=project)
    assert result.returncode == 0, result.stderr
    content = server.requests[0]["messages"][-1]["content"]
    assert content[0]["text"] == "what is this?\n\n[image attached: shot.png (image/png)]"
    assert content[1]["image_url"]["url"] == "data:image/png;base64," + base64.b64encode(PIXEL).decode()


def test_run_refuses_what_is_not_an_image_and_tells_a_blind_model_s_user(
    home: Path, project: Path, server: OpenAIServer
) -> None:
    (project / "notes.txt").write_text("text")
    refused = codling("run", "--image", "notes.txt", "look", env=model_env(home, server), cwd=project)
    assert refused.returncode == 2 and "--image notes.txt: not an image" in refused.stderr
    missing = codling("run", "--image", "gone.png", "look", env=model_env(home, server), cwd=project)
    assert missing.returncode == 2 and "--image gone.png: cannot be read" in missing.stderr
    assert server.requests == []
    (project / "shot.png").write_bytes(PIXEL)
    server.enqueue(Reply(text=["I cannot see it."]))
    blind = codling("run", "-i", "shot.png", "look", env=model_env(home, server), cwd=project)
    assert blind.returncode == 0 and "cannot see images" in blind.stderr
    assert "You cannot see images" in server.requests[0]["messages"][-1]["content"]
