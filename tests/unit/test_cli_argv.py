"""The top-level forms of `codling` (`cli/argv.py`): a prompt, -c, -r, -h, -V, a prompt piped into bare `codling`,
routed to the command they mean before typer parses; and, in process through typer's runner, what the routed
command lines do."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer

from codling import __version__
from codling.cli.app import app, command_names
from codling.cli.argv import (
    LIGHT_COMMANDS,
    OPTIONS_WITH_VALUE,
    TOOL_COMMANDS,
    TOP_LEVEL_OPTIONS,
    Refusal,
    route,
    runs_tools,
)
from codling.cli.session_args import resume_without_id
from codling.store.index import SessionStore
from tests.fakes.cli_runner import codling
from tests.fakes.openai_server import OpenAIServer, Reply
from tests.fakes.scenarios import user_prompt

TERMINAL = {"stdin_tty": True, "stdout_tty": True}
PIPED = {"stdin_tty": False, "stdout_tty": False}


def routed(line: list[str], *, stdin_tty: bool, stdout_tty: bool) -> list[str] | Refusal:
    """What `__main__` hands typer for `codling LINE`."""
    return route(resume_without_id(["codling", *line])[1:], command_names(), stdin_tty=stdin_tty, stdout_tty=stdout_tty)


def test_the_command_names_are_typers() -> None:
    group = typer.main.get_command(app)
    assert isinstance(group, typer.core.TyperGroup)
    assert command_names() == set(group.commands) >= {"chat", "run", "sessions", "models", "acp", "login"}


def test_the_options_taking_a_value_are_chats_and_runs() -> None:
    """The router must know which words are option values, not prompts: exactly those of `chat` and `run`."""
    group = typer.main.get_command(app)
    assert isinstance(group, typer.core.TyperGroup)
    taking = {
        name
        for command in ("chat", "run")
        for param in group.commands[command].params
        if not getattr(param, "is_flag", True)
        for name in param.opts
        if name.startswith("-")
    }
    assert taking == OPTIONS_WITH_VALUE
    top = {name for param in group.params for name in param.opts}
    assert top | {"-h", "--help"} == TOP_LEVEL_OPTIONS


def command_line(line: list[str], **terminal: bool) -> list[str]:
    """The arguments typer gets for `codling LINE`, which must not be refused."""
    args = routed(line, **terminal)
    assert not isinstance(args, Refusal), args
    return args


ROUTES = [
    # On a terminal: the chat, with a first prompt, continuing or resuming.
    ([], TERMINAL, ["chat"]),
    (["fix the bug"], TERMINAL, ["chat", "fix the bug"]),
    (["-c"], TERMINAL, ["chat", "-c"]),
    (["--continue", "go on"], TERMINAL, ["chat", "--continue", "go on"]),
    (["-r"], TERMINAL, ["chat", "--resume="]),
    (["--resume"], TERMINAL, ["chat", "--resume="]),
    (["-r", "20261123-0a1b"], TERMINAL, ["chat", "-r", "20261123-0a1b"]),
    (["-r", "-m", "x:y"], TERMINAL, ["chat", "--resume=", "-m", "x:y"]),
    (["-m", "sessions", "hi"], TERMINAL, ["chat", "-m", "sessions", "hi"]),  # an option's value is no command
    (["--mode", "yolo", "-v", "go"], TERMINAL, ["chat", "--mode", "yolo", "-v", "go"]),
    (["-vm", "models", "go"], TERMINAL, ["chat", "-vm", "models", "go"]),  # flags run together, as click reads
    (["-mmodels", "go"], TERMINAL, ["chat", "-mmodels", "go"]),  # the value attached
    (["--model=x:y", "go"], TERMINAL, ["chat", "--model=x:y", "go"]),
    # A command's name is the command; `--` makes it a prompt.
    (["sessions"], TERMINAL, ["sessions"]),
    (["run", "x"], TERMINAL, ["run", "x"]),
    (["--", "sessions"], TERMINAL, ["chat", "--", "sessions"]),
    (["sessions list"], TERMINAL, ["chat", "sessions list"]),
    # codling's own options stay its own.
    (["-h"], TERMINAL, ["-h"]),
    (["-V"], TERMINAL, ["-V"]),
    (["--version"], PIPED, ["--version"]),
    (["-c", "-h"], TERMINAL, ["chat", "-c", "-h"]),  # the chat's help: -c is the chat's
    # Without a terminal: what `codling run` would do.
    ([], PIPED, ["run"]),
    (["-c"], PIPED, ["run", "-c"]),
    (["--json", "say hi"], PIPED, ["run", "--json", "say hi"]),
    (["fix it"], {"stdin_tty": True, "stdout_tty": False}, ["run", "fix it"]),
    # stdin a terminal, stdout not, nothing asked: the help, as before.
    ([], {"stdin_tty": True, "stdout_tty": False}, []),
]


@pytest.mark.parametrize(("line", "terminal", "expected"), ROUTES)
def test_top_level_forms_route_to_the_command_they_mean(
    line: list[str], terminal: dict[str, bool], expected: list[str]
) -> None:
    assert routed(line, **terminal) == expected


def test_every_command_is_either_light_or_one_that_runs_tools() -> None:
    assert command_names() == LIGHT_COMMANDS | TOOL_COMMANDS
    assert not LIGHT_COMMANDS & TOOL_COMMANDS


@pytest.mark.parametrize(("line", "terminal", "expected"), ROUTES)
def test_every_form_that_reaches_a_command_running_tools_is_sealed(
    line: list[str], terminal: dict[str, bool], expected: list[str]
) -> None:
    """The restart that hides the secrets (codling.seal) is decided from the raw line, before routing: no form
    that routes to chat, run or acp may skip it, unless it only asks for help. (Bare `codling` is always sealed,
    though without a terminal for its output it prints the help.)"""
    asks_help = any(arg in ("-h", "--help") for arg in expected)
    routes_to_tools = bool(expected) and expected[0] in TOOL_COMMANDS and not asks_help
    assert runs_tools(line) == (routes_to_tools or not line)


@pytest.mark.parametrize(
    ("line", "sealed"),
    [
        (["--version"], False),
        (["-V"], False),
        (["--help"], False),
        (["models"], False),
        (["sessions", "show", "2026"], False),
        (["login", "--provider", "openai"], False),
        (["logout"], False),
        (["run", "--help"], False),
        (["acp"], True),
        (["acp", "login"], True),
        (["run", "--", "--help"], True),  # a prompt, after `--`
        (["-m", "openai:gpt-4.1"], True),
        (["sesions"], True),  # refused later; sealed all the same
    ],
)
def test_only_commands_that_may_run_tools_restart_to_hide_secrets(line: list[str], sealed: bool) -> None:
    assert runs_tools(line) is sealed


@pytest.mark.parametrize("word", ["sesions", "model", "chats", "logn"])
def test_a_mistyped_command_is_refused_not_sent_as_a_prompt(word: str) -> None:
    refusal = routed([word], **TERMINAL)
    assert isinstance(refusal, Refusal)
    assert f"'{word}' is not a command; did you mean `codling " in refusal.message
    assert f"`codling -- {word}`" in refusal.message
    assert routed(["--", word], **TERMINAL) == ["chat", "--", word]


@pytest.mark.parametrize("word", ["hi", "what", "refactor", "Sessions?"])
def test_a_word_no_command_resembles_is_a_prompt(word: str) -> None:
    assert routed([word], **TERMINAL) == ["chat", word]


def test_dash_h_and_dash_v_answer_as_their_long_forms(home: Path) -> None:
    env: dict[str, str | None] = {"CODLING_HOME": str(home)}
    version = codling(env, "-V")
    assert (version.exit_code, version.stdout) == (0, f"codling {__version__}\n")
    for args in (["-h"], ["run", "-h"], ["sessions", "-h"]):
        short, long = codling(env, *args), codling(env, *args[:-1], "--help")
        assert short.exit_code == 0 and short.stdout == long.stdout and "Usage:" in short.stdout, args
    assert "`codling -c` continues" in codling(env, "-h").stdout


def test_a_piped_prompt_into_bare_codling_with_c_continues_the_latest_session(
    served: dict[str, str | None], home: Path, server: OpenAIServer
) -> None:
    """`echo … | codling` and `echo … | codling -c`, routed as `__main__` routes them, run as `codling run` would."""
    server.enqueue(Reply(text=["first answer"]), Reply(text=["second answer"]))
    first = codling(served, *command_line([], **PIPED), stdin="say hi\n")
    assert (first.exit_code, first.stdout) == (0, "first answer\n"), first.stderr
    again = codling(served, *command_line(["-c"], **PIPED), stdin="and again\n")
    assert (again.exit_code, again.stdout) == (0, "second answer\n"), again.stderr
    sessions = SessionStore(home).list()
    assert len(sessions) == 1  # -c continued the first session rather than starting one
    assert [user_prompt(m["content"]) for m in server.requests[1]["messages"] if m["role"] == "user"] == [
        "say hi\n",
        "and again\n",
    ]
