"""Every command's `--help`, in process (typer's runner): no type after a flag (typer 0.29 printed `<bool>` after
each, as if it took a value), and docstrings wrapped to the terminal rather than broken where the source breaks."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import typer

from codling.cli.app import app
from tests.fakes.cli_runner import clean_env, codling


def command_paths() -> list[tuple[str, ...]]:
    """Every command and group of codling, as the words that name it (the top level is ())."""
    paths: list[tuple[str, ...]] = []

    def walk(command: object, path: tuple[str, ...]) -> None:
        paths.append(path)
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, (*path, name))

    walk(typer.main.get_command(app), ())
    return paths


def flags_of(path: tuple[str, ...]) -> list[str]:
    """The long names of the flags (options that take no value) of the command ``path`` names."""
    command = typer.main.get_command(app)
    for name in path:
        command = command.commands[name]  # type: ignore[attr-defined]
    return [opt for p in command.params if getattr(p, "is_flag", False) for opt in p.opts if opt.startswith("--")]


PATHS = command_paths()


def test_every_command_is_checked() -> None:
    assert {" ".join(p) for p in PATHS} >= {"", "run", "chat", "acp", "login", "logout", "models", "sessions"}
    assert {"sessions list", "sessions show", "sessions replay", "sessions fork", "sessions delete"} <= {
        " ".join(p) for p in PATHS
    }


@pytest.mark.parametrize("path", PATHS, ids=lambda p: " ".join(p) or "codling")
def test_help_shows_no_type_after_a_flag(path: tuple[str, ...], home: Path) -> None:
    shown = codling(clean_env(home, COLUMNS="120"), *path, "--help")
    assert shown.exit_code == 0, shown.stderr
    assert "<bool>" not in shown.stdout
    for flag in [*flags_of(path), "--help"]:
        [line] = [line for line in shown.stdout.splitlines() if re.search(rf"│ {flag}\b", line)]
        after = line.split(flag, 1)[1]
        assert "<" not in after, line  # a plain flag: its short form and help, no value


def test_a_value_option_still_shows_what_it_takes(home: Path) -> None:
    shown = codling(clean_env(home, COLUMNS="120"), "run", "--help").stdout
    assert re.search(r"--cwd +<path> +Work in this directory", shown)
    assert re.search(r"--image +-i +<path> +Attach an image file", shown)


def test_docstrings_wrap_to_the_terminal_not_where_the_source_breaks(home: Path) -> None:
    wide = clean_env(home, COLUMNS="200")
    login = codling(wide, "login", "--help").stdout
    assert "readable by you only) and choose a model. On a terminal it asks for both; otherwise give" in login
    listed = codling(wide, "--help").stdout
    assert "mark the one `codling run` would use, and say why." in listed
    run = codling(wide, "run", "--help").stdout
    assert "what the turn does and any error go to stderr." in run


def test_parsing_builds_no_pydantic_adapter_for_absent_values_or_strings() -> None:
    """typer 0.29 builds a pydantic TypeAdapter for every parameter of the command it runs; codling's commands
    leave absent values and strings as they are (pydantic's import was ~150 ms of the chat's start)."""
    chat = typer.main.get_command(app).commands["chat"]  # type: ignore[attr-defined]
    context = chat.make_context("chat", ["-m", "openai:gpt-4.1", "--mode", "ask", "fix it"])
    assert context.params == {
        "prompt": "fix it",
        "model": "openai:gpt-4.1",
        "cwd": None,
        "mode": "ask",
        "resume": None,
        "continue_": False,
        "verbose": False,
    }
    built = [
        param.name
        for param in chat.get_params(context)
        if param._runtime_param.__class__.__name__ != "_DeferredCoercion"
    ]
    assert built == []


def test_values_that_need_it_are_still_coerced_by_typer(tmp_path: Path) -> None:
    run = typer.main.get_command(app).commands["run"]  # type: ignore[attr-defined]
    context = run.make_context(
        "run", ["--max-cost", "0.5", "--max-requests", "3", "--cwd", str(tmp_path), "-i", "a.png", "hi"]
    )
    assert (context.params["max_cost"], context.params["max_requests"]) == (0.5, 3)
    assert (context.params["cwd"], context.params["image"]) == (tmp_path, [Path("a.png")])
    with pytest.raises(typer.BadParameter, match="Input should be a valid number"):
        run.make_context("run", ["--max-cost", "lots", "hi"])
