"""The `codling` command line in process (typer's runner): usage errors and the answers of `run`, `models` and
`sessions` that need no model, and shell completion. The sessions are real files under a private CODLING_HOME;
`tests/e2e/test_cli*.py` run the same commands as real processes."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from codling.brain.events import TurnStarted
from codling.cli import complete
from codling.cli.app import app
from codling.cli.plan import MAX_IMAGE_BYTES
from codling.cli.sessions import list_sessions
from codling.store.history import SessionHeader
from codling.store.ids import new_session_id
from codling.store.index import SessionStore

MODEL = "openai-chat:fake-model"
OTHER = "openai-chat:other-model"


@pytest.fixture(autouse=True)
def _logging_restored() -> Iterator[None]:
    # `codling run` points the root logger at its stderr, which the runner closes when the command returns.
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


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


def codling(env: dict[str, str | None], *args: str, stdin: str | None = None) -> Result:
    return CliRunner().invoke(app, list(args), input=stdin, env=env, catch_exceptions=False)


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
    assert complete.modes("a") == ["ask", "accept-edits"]
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
