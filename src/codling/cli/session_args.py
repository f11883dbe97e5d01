"""A command's arguments made into what its session needs, checked before anything is created: the prompt text
(:func:`read_prompt`, UTF-8 or refused), the settings, plan and mode (:func:`prepare`), and ``--resume`` given no id
(:data:`PICK`, :func:`resume_without_id`: a list to choose from). Each refusal is one line and exit 2."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import NoReturn

import typer

from codling.cli.home import open_store
from codling.cli.session_plan import EXIT_OK, EXIT_USAGE, SessionPlan, check_model, load, pick, plan_session
from codling.config import Settings, parse_mode
from codling.errors import CodlingError, ConfigError, SessionError
from codling.llm.catalog import Catalog
from codling.vocabulary import PermissionMode


def read_prompt(prompt: str | None) -> tuple[str, bool]:
    """The prompt text and whether it came from stdin; text that is not UTF-8 is refused (exit 2) before
    anything is created, rather than guessed at or half recorded."""
    if prompt == "-" or (prompt is None and not sys.stdin.isatty()):
        return _utf8(sys.stdin.buffer.read(), "the prompt on stdin"), True
    if prompt is None:
        raise typer.BadParameter("give a prompt, or '-' to read it from stdin", param_hint="PROMPT")
    try:
        prompt.encode("utf-8")
    except UnicodeEncodeError:
        # Bytes that are not UTF-8 reach argv as surrogate escapes; fsencode gives the bytes back.
        try:
            raw = os.fsencode(prompt)
        except UnicodeEncodeError:
            _refuse_prompt("the PROMPT argument holds characters that are not valid Unicode text")
        return _utf8(raw, "the PROMPT argument"), False
    return prompt, False


def _utf8(data: bytes, source: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        _refuse_prompt(f"{source} is not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start})")


def _refuse_prompt(problem: str) -> NoReturn:
    typer.echo(f"codling: {problem}; convert it to UTF-8 first (e.g. with iconv) and try again", err=True)
    raise typer.Exit(EXIT_USAGE)


EMPTY_FROM_STDIN = (
    'codling: the prompt is empty: nothing came on stdin; pipe one in (echo "say hi" | codling) or give it as '
    "an argument (`codling --help` lists the commands)"
)


def prepare(
    model: str | None,
    cwd: Path | None,
    mode: str | None,
    resume: str | None,
    continue_: bool,
    from_stdin: bool,
    *,
    build: bool = True,
) -> tuple[Settings, Catalog, SessionPlan, PermissionMode | None]:
    """Everything a session needs, checked before one exists (else one line and exit 2): the directory, the
    settings, the session (chosen from a list for ``--resume`` with no id), the mode, the model, the store.
    Without ``build``, the model's credentials are checked but the model is neither built nor the store
    checked (the chat does both in the background: ``cli/preload.py``)."""
    if resume is not None and continue_:
        typer.echo("codling: use --resume or --continue, not both", err=True)
        raise typer.Exit(EXIT_USAGE)
    workdir = (cwd or Path.cwd()).resolve()
    if not workdir.is_dir():
        typer.echo(f"codling: --cwd {workdir} is not a directory", err=True)
        raise typer.Exit(EXIT_USAGE)
    try:
        settings, catalog = load()
        if resume == PICK:
            resume = _pick(settings, workdir, from_stdin)
        chosen_mode: PermissionMode | None = parse_mode(mode) if mode else None
        plan = plan_session(settings, catalog, model, workdir, resume, continue_, cwd is not None)
        check_model(plan.model, settings, build=build)
        if build:
            open_store(settings).check()
    except CodlingError as e:
        typer.echo(f"codling: {e}", err=True)
        raise typer.Exit(EXIT_USAGE) from e
    return settings, catalog, plan, chosen_mode


PICK = ""
"""The ``--resume`` value that asks for a list to choose from (``--resume`` given no id)."""


def resume_without_id(argv: list[str]) -> list[str]:
    """``argv`` with a ``--resume``/``-r`` that has no id after it (it ends the line, or an option follows) given
    the empty id, which typer would otherwise refuse: ``codling run --resume`` offers a list."""
    fixed = list(argv)
    for index, arg in enumerate(fixed):
        if arg in ("--resume", "-r") and (index + 1 == len(fixed) or fixed[index + 1].startswith("-")):
            fixed[index] = f"--resume={PICK}"
    return fixed


def _pick(settings: Settings, workdir: Path, from_stdin: bool) -> str:
    """The id of the session the user chooses at the terminal; exits when the user chooses none."""
    if from_stdin:  # the prompt took stdin: nothing is left to answer with
        raise SessionError("--resume needs a session id when the prompt is read from stdin")
    chosen = pick(settings, workdir, input=sys.stdin, output=sys.stderr)
    if chosen is None:
        typer.echo("codling: no session chosen", err=True)
        raise typer.Exit(EXIT_OK)
    return chosen


def fail_config(e: ConfigError) -> typer.Exit:
    """The exit for a configuration error, said on stderr in one line (exit 2)."""
    typer.echo(f"codling: {e}", err=True)
    return typer.Exit(EXIT_USAGE)
