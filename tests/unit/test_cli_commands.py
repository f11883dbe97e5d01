"""The `codling` command line in process (typer's runner): usage errors and the answers of `run`, `models` and
`sessions` that need no model, shell completion, and `run`'s turns against the loopback OpenAI-compatible server
over real HTTP (the real provider path). The sessions are real files under a private CODLING_HOME; the runner keeps
stdout and stderr apart, as pipes do. Conversations carried across runs and the `sessions` commands on a recorded
session are in `test_cli_sessions.py`; `tests/e2e/test_cli*.py` run what only a real process shows (stdin, pipes,
terminals, exit status, locks held by another process) as real processes."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import sys
from pathlib import Path

import pytest

from codling.brain.events import TurnEnded, TurnStarted
from codling.brain.events import Usage as EventUsage
from codling.cli import complete
from codling.cli.session_plan import MAX_IMAGE_BYTES
from codling.cli.sessions import list_sessions
from codling.store.header import SessionHeader
from codling.store.history import read_history
from codling.store.ids import new_session_id
from codling.store.index import SessionStore
from tests.fakes.cli_runner import MODEL, clean_env, codling
from tests.fakes.openai_server import ErrorReply, OpenAIServer, Reply, ToolCall, Usage
from tests.fakes.scenarios import user_prompt

OTHER = "openai-chat:other-model"


@pytest.fixture
def env(home: Path) -> dict[str, str | None]:
    """codling's environment: a private home, a model, its (unused) credentials; no other provider's keys."""
    return {
        "CODLING_HOME": str(home),
        "CODLING_MODEL": MODEL,
        "OPENAI_API_KEY": "sk-cli-test-0123456789",
        "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",  # never contacted: these commands make no model request
        "ANTHROPIC_API_KEY": None,
        "CODLING_LOG_FILE": None,
    }


def stored_session(home: Path, project: Path, title: str | None = None) -> str:
    """A recorded session with no turns (as `codling run` leaves one), its id."""
    session_id = new_session_id()
    file = SessionStore(home).create(SessionHeader(session_id, project, MODEL, "ask"))
    file.close()
    return session_id


def prompts(home: Path, session_id: str) -> list[str]:
    return [e.prompt for e in SessionStore(home).read(session_id).events if isinstance(e, TurnStarted)]


# -- usage errors ---------------------------------------------------------------------------------------------


def test_a_broken_config_toml_is_a_usage_error_of_models_and_sessions(env: dict[str, str | None], home: Path) -> None:
    (home / "config.toml").write_text("model = \n")
    for args in (["models"], ["sessions", "list"]):
        result = codling(env, *args)
        assert result.exit_code == 2, args
        assert result.stderr.startswith(f"codling: {home / 'config.toml'}: not valid TOML: "), args
        assert result.stdout == ""


@pytest.mark.parametrize(
    ("args", "stdin", "said"),
    [
        (["run", "  \n "], None, "codling: the prompt is empty\n"),
        (
            ["run", "--resume", "20260101", "--continue", "go on"],
            None,
            "codling: use --resume or --continue, not both\n",
        ),
        (
            ["run", "--resume=", "-"],
            "go on",
            "codling: --resume needs a session id when the prompt is read from stdin\n",
        ),
        (
            # Not an id: the words are the prompt, and the session is to be chosen, which needs a terminal.
            ["run", "--resume", "go on"],
            None,
            "codling: --resume needs a session id when there is no terminal to choose on; see `codling sessions "
            "list`\n",
        ),
        (
            ["run", "\ud800 lone surrogate"],
            None,
            "codling: the PROMPT argument holds characters that are not valid Unicode text; convert it to UTF-8 "
            "first (e.g. with iconv) and try again\n",
        ),
    ],
)
def test_run_refuses_what_it_cannot_run_with_one_line_and_exit_2(
    env: dict[str, str | None], home: Path, project: Path, args: list[str], stdin: str | None, said: str
) -> None:
    result = codling(env, *args, "--cwd", str(project), stdin=stdin)
    assert (result.exit_code, result.stderr, result.stdout) == (2, said, "")
    assert not (home / "sessions").exists() or list((home / "sessions").iterdir()) == []


def test_an_image_too_large_to_attach_is_refused_before_anything_runs(
    env: dict[str, str | None], home: Path, project: Path
) -> None:
    big = project / "screen.png"
    with big.open("wb") as f:
        f.truncate(MAX_IMAGE_BYTES + 1)
    result = codling(env, "run", "--image", str(big), "what is this?", "--cwd", str(project))
    assert (result.exit_code, result.stderr) == (
        2,
        f"codling: --image {big}: 20,971,521 bytes is more than the 20,971,520 allowed\n",
    )
    assert not (home / "sessions").exists()


# -- commands that need no model ------------------------------------------------------------------------------


def test_a_session_command_without_a_model_menu_says_it_cannot_switch(
    env: dict[str, str | None], home: Path, project: Path
) -> None:
    result = codling(env, "run", f"/model {OTHER}", "--cwd", str(project), stdin="")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "This session cannot switch models.\n"
    [summary] = SessionStore(home).list()
    assert summary.model == MODEL


def test_an_id_after_resume_with_the_prompt_on_stdin_continues_that_session(
    env: dict[str, str | None], home: Path, project: Path
) -> None:
    session_id = stored_session(home, project)
    result = codling(env, "run", "--resume", session_id[9:15], "--cwd", str(project), stdin="/pins")
    assert result.exit_code == 0, result.stderr
    assert prompts(home, session_id) == ["/pins"]
    assert result.stdout.startswith("No pinned instructions")


def test_a_model_given_when_resuming_replaces_the_recorded_one(
    env: dict[str, str | None], home: Path, project: Path
) -> None:
    session_id = stored_session(home, project)
    result = codling(env, "run", "--resume", session_id, "--model", OTHER, "/usage", "--cwd", str(project))
    assert result.exit_code == 0, result.stderr
    assert f"with {OTHER}" in result.stdout
    assert SessionStore(home).read(session_id).model == OTHER  # recorded: the next run goes on with it


# -- codling sessions ---------------------------------------------------------------------------------------


def test_sessions_list_says_when_there_are_none(env: dict[str, str | None], project: Path) -> None:
    everywhere = codling(env, "sessions", "list")
    here = codling(env, "sessions", "list", "--cwd", str(project))
    assert (everywhere.exit_code, everywhere.stdout, everywhere.stderr) == (0, "", "no sessions\n")
    assert (here.exit_code, here.stdout, here.stderr) == (0, "", f"no sessions in {project}\n")


def test_show_names_the_session_a_fork_came_from(env: dict[str, str | None], home: Path, project: Path) -> None:
    parent = stored_session(home, project)
    forked = codling(env, "sessions", "fork", parent)
    assert forked.exit_code == 0, forked.stderr
    child = forked.stdout.strip()
    shown = codling(env, "sessions", "show", child)
    assert shown.exit_code == 0, shown.stderr
    assert shown.stdout.splitlines()[:2] == [
        f"session {child} · (untitled) · {project} · {MODEL}",
        f"forked from {parent}",
    ]


def test_on_a_terminal_sessions_list_draws_a_table(home: Path, project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if not hasattr(os, "openpty"):
        pytest.skip("needs a pseudo-terminal")
    monkeypatch.setenv("CODLING_HOME", str(home))
    monkeypatch.setenv("COLUMNS", "200")
    session_id = stored_session(home, project)
    master, slave = os.openpty()
    try:
        with os.fdopen(slave, "w", closefd=False) as screen, contextlib.redirect_stdout(screen):
            list_sessions(cwd=None, json_output=False)
            screen.flush()
        drawn = os.read(master, 65536).decode()
    finally:
        os.close(slave)
        os.close(master)
    lines = [line.rstrip() for line in re.sub(r"\x1b\[[0-9;]*m", "", drawn).splitlines()]
    assert lines[0].split() == ["id", "updated", "title", "directory"]
    assert lines[1].split()[0] == session_id and lines[1].endswith(str(project))


# -- shell completion -----------------------------------------------------------------------------------------


def test_completion_offers_sessions_and_models_and_nothing_when_the_setup_is_broken(
    home: Path, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CODLING_HOME", str(home))
    session_id = stored_session(home, project)
    assert complete.sessions(session_id[:4]) == [(session_id, "")]
    assert "anthropic:claude-sonnet-4-5" in complete.models("anthropic:")
    assert complete.modes("a") == ["ask", "accept-edits", "auto"]
    (home / "config.toml").write_text("colour = 'red'\n")
    assert (complete.sessions(""), complete.models("")) == ([], [])


def test_json_list_of_a_fork_names_its_parent(env: dict[str, str | None], home: Path, project: Path) -> None:
    parent = stored_session(home, project)
    child = codling(env, "sessions", "fork", parent).stdout.strip()
    listed = [json.loads(line) for line in codling(env, "sessions", "list", "--json").stdout.splitlines()]
    assert {row["session_id"]: row["parent"] for row in listed} == {parent: None, child: parent}


@pytest.mark.parametrize("closed", ["stdin", "stdout"])
def test_codling_acp_with_a_closed_stdin_or_stdout_says_so_and_exits_2(
    closed: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from codling.cli.acp_main import run_acp

    monkeypatch.setattr(sys, closed, None)  # what Python makes of a descriptor closed when it started
    with pytest.raises(SystemExit) as exited:
        run_acp()
    assert exited.value.code == 2
    assert capsys.readouterr().err == (
        f"codling acp: {closed} is closed; an editor speaks ACP to codling over stdin and stdout\n"
    )


# -- turns against the loopback server ------------------------------------------------------------------------


def test_models_table_shows_limits_and_credentials(home: Path) -> None:
    (home / "models.json").write_text(
        json.dumps({"models": {"openai-chat:local-coder": {"context_limit": 12345, "max_output_tokens": 100}}})
    )
    result = codling(clean_env(home, ANTHROPIC_API_KEY="x"), "models")
    assert result.exit_code == 0
    rows = {line.split()[0]: line for line in result.stdout.splitlines() if line.strip()}
    assert "200,000" in rows["anthropic:claude-sonnet-4-5"] and "yes" in rows["anthropic:claude-sonnet-4-5"]
    assert "no" in rows["openai:gpt-5"]
    assert "12,345" in rows["openai-chat:local-coder"]
    # The model a run would use is marked, and why it was chosen is said.
    selected = [line for line in result.stdout.splitlines() if "← selected" in line]
    assert [line.split()[0] for line in selected] == ["anthropic:claude-sonnet-5-5"]
    assert result.stdout.splitlines()[-1] == (
        "selected: anthropic:claude-sonnet-5-5 (the first listed whose provider has credentials; choose another "
        "with --model, CODLING_MODEL or model in config.toml)"
    )
    chosen = codling(clean_env(home, CODLING_MODEL="openai-chat:elsewhere"), "models")
    assert chosen.stdout.splitlines()[-1] == "selected: openai-chat:elsewhere (set by CODLING_MODEL)"
    assert "openai-chat:elsewhere" in next(line for line in chosen.stdout.splitlines() if "← selected" in line)
    (home / "config.toml").write_text('model = "openai:gpt-5"\n')
    configured = codling(clean_env(home), "models")
    assert configured.stdout.splitlines()[-1] == f"selected: openai:gpt-5 (set by model in {home / 'config.toml'})"
    (home / "config.toml").unlink()
    nothing = codling(clean_env(home), "models")
    assert nothing.exit_code == 0 and nothing.stdout.splitlines()[-1].startswith("no model selected: no model is")


def test_run_read_only_refuses_commands_and_model_is_told(
    served: dict[str, str | None], project: Path, server: OpenAIServer
) -> None:
    server.enqueue(
        Reply(tool_calls=[ToolCall("run_command", {"command": "touch hacked"}, id="c1")]),
        Reply(text=["I could not run it."]),
    )
    result = codling(served, "run", "touch a file")
    assert result.exit_code == 0, result.stderr
    assert not (project / "hacked").exists()
    tool_message = server.requests[1]["messages"][-1]
    assert tool_message["role"] == "tool" and "read-only" in tool_message["content"]


def test_run_json_prints_event_lines(served: dict[str, str | None], project: Path, server: OpenAIServer) -> None:
    server.enqueue(
        Reply(tool_calls=[ToolCall("read_file", {"path": "src/app.py"}, id="r1")]),
        Reply(text=["It greets."], usage=Usage(prompt_tokens=120, completion_tokens=7)),
    )
    result = codling(served, "run", "--json", "what does app.py do?")
    assert result.exit_code == 0, result.stderr
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
        "text": "It greets.",
        "error": None,
        "usage": {
            "input_tokens": outcome["usage"]["input_tokens"],
            "output_tokens": 7,
            "cache_read_tokens": 0,
            "cache_write_tokens": 0,
        },
        "cost": None,
        "turns": 1,
    }
    assert outcome["usage"]["input_tokens"] >= 120
    # A script continues the session from the id the first line gave it.
    server.enqueue(Reply(text=["Still here."]))
    again = codling(served, "run", "--json", "--resume", session["session_id"], "and now?")
    lines = [json.loads(line) for line in again.stdout.splitlines()]
    assert (lines[0]["session_id"], lines[0]["resumed"]) == (session["session_id"], True)
    assert (lines[-1]["stop_reason"], lines[-1]["turns"]) == ("end_turn", 2)


def test_cached_tokens_are_recorded_priced_and_shown_everywhere_usage_is(
    served: dict[str, str | None], home: Path, server: OpenAIServer
) -> None:
    """A provider's cached-token count (OpenAI's prompt_tokens_details.cached_tokens) goes into the turn's
    usage, its cost at the cache's price, the --json result, the history (read back as it was) and sessions
    show (issue 30 item 3)."""
    (home / "models.json").write_text(json.dumps({"models": {MODEL: {"price": [1, 2, 0.1]}}}))
    server.enqueue(
        Reply(text=["Cached."], usage=Usage(prompt_tokens=10_000, completion_tokens=50, cached_tokens=8_000))
    )
    result = codling(served, "run", "--json", "hi")
    assert result.exit_code == 0, result.stderr
    outcome = json.loads(result.stdout.splitlines()[-1])
    assert outcome["usage"] == {
        "input_tokens": 10_000,
        "output_tokens": 50,
        "cache_read_tokens": 8_000,
        "cache_write_tokens": 0,
    }
    assert outcome["cost"] == pytest.approx((2_000 * 1 + 8_000 * 0.1 + 50 * 2) / 1e6)
    ended = next(
        e for e in read_history(next((home / "sessions").glob("*/history.jsonl"))).events if isinstance(e, TurnEnded)
    )
    assert ended.usage == EventUsage(10_000, 50, 1, 8_000, 0)
    shown = codling(served, "sessions", "show", outcome["session_id"])
    assert shown.stdout.splitlines()[-1] == (
        "spent: 10,000 input tokens (8,000 read from the prompt cache, 80%; 0 written to it), 50 output tokens, "
        "1 model requests; about $0.0029 at list prices"
    )


def test_a_failed_turn_s_json_result_says_error(served: dict[str, str | None], server: OpenAIServer) -> None:
    exploded = ErrorReply(500, "upstream exploded", headers={"retry-after": "0"})  # retried at once
    server.enqueue(exploded, exploded, exploded)
    result = codling(served, "run", "--json", "hi")
    assert result.exit_code == 1
    outcome = json.loads(result.stdout.splitlines()[-1])
    assert outcome["type"] == "result" and outcome["stop_reason"] == "error"
    assert "upstream exploded" in outcome["error"]
    assert len(server.requests) == 3  # tried three times


def test_run_with_yolo_edits_and_shows_diff(served: dict[str, str | None], project: Path, server: OpenAIServer) -> None:
    server.enqueue(
        Reply(
            tool_calls=[
                ToolCall("edit_file", {"path": "src/app.py", "old_text": "'hello'", "new_text": "'howdy'"}, id="e1")
            ]
        ),
        Reply(text=["Edited."]),
    )
    result = codling(served, "run", "--mode", "yolo", "change it")
    assert result.exit_code == 0, result.stderr
    assert (project / "src" / "app.py").read_text() == "def greet():\n    return 'howdy'\n"
    # Piped, stdout is the answer; the diff is drawn with the rest of the turn on stderr (the runner keeps the two
    # apart, as a pipe does).
    assert result.stdout == "Edited.\n"
    assert "+    return 'howdy'" in result.stderr and "-    return 'hello'" in result.stderr


def test_configuration_errors_exit_2_before_any_session(
    served: dict[str, str | None], home: Path, server: OpenAIServer
) -> None:
    for model in ("foo:bar", "anthropic:claude-sonnet-4-5"):  # an unknown provider; a missing key
        result = codling(served, "run", "--model", model, "hi")
        assert (result.exit_code, result.stdout) == (2, ""), result.stderr
        assert result.stderr.startswith("codling: ") and "Traceback" not in result.stderr
    assert "ANTHROPIC_API_KEY" in result.stderr
    assert not (home / "sessions").exists() or list((home / "sessions").iterdir()) == []
    assert server.requests == []


def test_unknown_model_warns_and_still_works(served: dict[str, str | None], server: OpenAIServer) -> None:
    server.enqueue(Reply(text=["fine"]))
    result = codling({**served, "CODLING_MODEL": "openai-chat:never-heard-of-it"}, "run", "hi")
    assert result.exit_code == 0, result.stderr
    assert "never-heard-of-it" in result.stderr and "no model catalog" in result.stderr
    assert server.requests[0]["model"] == "never-heard-of-it"


def test_a_one_shot_run_is_named_after_its_request_without_a_title_request(
    served: dict[str, str | None], server: OpenAIServer
) -> None:
    server.enqueue(Reply(text=["Renamed it."]))
    result = codling(served, "run", "rename   greet\nto welcome")
    assert result.exit_code == 0, result.stderr
    assert server.title_requests == [] and len(server.requests) == 1
    assert "“rename greet to welcome”" in result.stderr.splitlines()[-1]
    listed = codling(served, "sessions", "list", "--json")
    assert json.loads(listed.stdout.splitlines()[0])["title"] == "rename greet to welcome"


def test_with_title_a_new_session_is_named_by_one_title_request(
    served: dict[str, str | None], server: OpenAIServer
) -> None:
    server.enqueue(Reply(text=["Renamed it."]))
    result = codling(served, "run", "--title", "rename greet to welcome in src/app.py")
    assert result.exit_code == 0, result.stderr
    (title_request,) = server.title_requests
    # The title special turn over the real provider path: its own system prompt, no tools, no history.
    assert "tools" not in title_request
    roles = [m["role"] for m in title_request["messages"]]
    assert roles == ["system", "user"]
    assert "rename greet to welcome in src/app.py" in title_request["messages"][1]["content"]
    assert "Renamed it." in title_request["messages"][1]["content"]
    assert "“Loopback session title”" in result.stderr.splitlines()[-1]  # the closing line names the session
    listed = codling(served, "sessions", "list", "--json")
    assert json.loads(listed.stdout.splitlines()[0])["title"] == "Loopback session title"
    # A later turn of the same session is not titled again and never sees the title.
    server.enqueue(Reply(text=["Done."]))
    assert codling(served, "run", "--title", "--continue", "now the tests").exit_code == 0
    assert len(server.title_requests) == 1
    assert "Loopback session title" not in json.dumps(server.requests[-1])


def test_a_failing_title_request_keeps_the_first_request_as_title(
    served: dict[str, str | None], server: OpenAIServer
) -> None:
    server.title_reply = ErrorReply(400, "title requests are refused here")
    server.enqueue(Reply(text=["Renamed it."]))
    result = codling(served, "run", "--title", "rename greet to welcome")
    assert result.exit_code == 0, result.stderr  # the user's turn is unaffected
    assert len(server.title_requests) == 1
    listed = codling(served, "sessions", "list", "--json")
    assert json.loads(listed.stdout.splitlines()[0])["title"] == "rename greet to welcome"


PIXEL = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


def test_run_attaches_images(served: dict[str, str | None], home: Path, project: Path, server: OpenAIServer) -> None:
    (home / "models.json").write_text(json.dumps({"models": {"openai-chat:fake-model": {"images": True}}}))
    (project / "shot.png").write_bytes(PIXEL)
    server.enqueue(Reply(text=["A pixel."]))
    result = codling(served, "run", "--image", "shot.png", "what is this?")
    assert result.exit_code == 0, result.stderr
    content = server.requests[0]["messages"][-1]["content"]
    assert user_prompt(content[0]["text"]) == "what is this?\n\n[image attached: shot.png (image/png)]"
    assert content[1]["image_url"]["url"] == "data:image/png;base64," + base64.b64encode(PIXEL).decode()


def test_run_refuses_what_is_not_an_image_and_tells_a_blind_model_s_user(
    served: dict[str, str | None], project: Path, server: OpenAIServer, home: Path
) -> None:
    (project / "notes.txt").write_text("text")
    refused = codling(served, "run", "--image", "notes.txt", "look")
    assert refused.exit_code == 2 and "--image notes.txt: not an image" in refused.stderr
    missing = codling(served, "run", "--image", "gone.png", "look")
    assert missing.exit_code == 2 and "--image gone.png: cannot be read" in missing.stderr
    assert server.requests == []
    (project / "shot.png").write_bytes(PIXEL)
    server.enqueue(Reply(text=["I cannot see it."]))
    # The catalog says this model cannot see images (a model it does not know is sent them).
    (home / "models.json").write_text(json.dumps({"models": {MODEL: {"images": False}}}))
    blind = codling(served, "run", "-i", "shot.png", "look")
    assert blind.exit_code == 0 and "cannot see images" in blind.stderr
    assert "You cannot see images" in server.requests[0]["messages"][-1]["content"]
