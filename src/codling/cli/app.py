"""The ``codling`` command line (typer): the composition root for the terminal and for ``codling acp``.

Exit codes (``cli/session_plan.py``): 0 the turn completed, 1 the turn failed, 2 usage or configuration error,
130 interrupted (Ctrl-C), 128 + N ended by signal N (SIGTERM, SIGHUP).
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from codling import __version__
from codling.brain.prompt import ImageBlock, PromptBlock, TextBlock
from codling.cli import complete
from codling.cli.acp_main import run_acp, setup_logging
from codling.cli.home import open_store
from codling.cli.oneshot import Limits, Output, run_turn
from codling.cli.session_plan import (
    EXIT_OK,
    EXIT_USAGE,
    SessionPlan,
    check_model,
    could_be_id,
    load,
    pick,
    plan_session,
    read_image,
    restored_mode_note,
)
from codling.cli.sessions import sessions_app
from codling.cli.typer_app import CodlingTyper
from codling.config import Settings, parse_mode
from codling.errors import CodlingError, ConfigError, SessionError
from codling.llm.catalog import Catalog
from codling.vocabulary import PermissionMode

if TYPE_CHECKING:
    from rich.console import Console

app = CodlingTyper(
    name="codling",
    help="A coding agent for ACP editors (Zed) and the terminal.\n\n"
    '`codling` opens the chat; `codling "fix the bug"` opens it with that prompt; `codling -c` continues the '
    "latest session here, `codling -r [ID]` resumes one (no ID: choose from a list); chat's options (-m, --mode, "
    '--cwd, -v) may come first. Without a terminal these run one turn as `codling run` does: `echo "say hi" | '
    "codling`. A first word that is a command's name is that command; `codling -- sessions` sends it as a prompt.",
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
)

app.add_typer(sessions_app, name="sessions")

ModelOption = Annotated[
    str | None,
    typer.Option(
        "--model",
        "-m",
        help="Model id, e.g. anthropic:claude-sonnet-5-5 (see `codling models`).",
        autocompletion=complete.models,
    ),
]
CwdOption = Annotated[Path | None, typer.Option("--cwd", help="Work in this directory (default: the current one).")]
ResumeOption = Annotated[
    str | None,
    typer.Option(
        "--resume",
        "-r",
        help="Continue this session (an id, or the start of it or of its part after the date); with no id, "
        "choose from a list on a terminal.",
        autocompletion=complete.sessions,
    ),
]
ContinueOption = Annotated[
    bool, typer.Option("--continue", "-c", help="Continue the latest session in this directory.")
]
VerboseOption = Annotated[
    bool, typer.Option("--verbose", "-v", help="Show commands' whole output, not just their last lines.")
]


def _version(value: bool) -> None:
    if value:
        typer.echo(f"codling {__version__}")
        raise typer.Exit()


@app.callback(invoke_without_command=True)
def _main(
    ctx: typer.Context,
    version: Annotated[
        bool,
        typer.Option("--version", "-V", callback=_version, is_eager=True, help="Print the version and exit."),
    ] = False,
) -> None:
    """codling: a coding agent for ACP editors and the terminal."""
    if ctx.invoked_subcommand is not None:
        return
    if sys.stdin.isatty() and sys.stdout.isatty():
        ctx.invoke(chat)
    else:
        typer.echo(ctx.get_help())


def command_names() -> frozenset[str]:
    """The names of codling's commands: a first word that is one of them is that command, not a prompt
    (``cli/argv.py``)."""
    names = {group.name for group in app.registered_groups if group.name}
    for command in app.registered_commands:
        if command.name:
            names.add(command.name)
        elif command.callback is not None:
            names.add(command.callback.__name__.replace("_", "-"))
    return frozenset(names)


def _fail_config(e: ConfigError) -> typer.Exit:
    typer.echo(f"codling: {e}", err=True)
    return typer.Exit(EXIT_USAGE)


def _start_logging() -> None:
    try:
        setup_logging()
    except ConfigError as e:
        raise _fail_config(e) from e


@app.command()
def acp(model: ModelOption = None) -> None:
    """Serve the Agent Client Protocol on stdin/stdout (point your editor here)."""
    run_acp(model)


ProviderOption = Annotated[
    str | None,
    typer.Option(
        "--provider", "-p", help="anthropic, openai, google, openrouter, deepseek, mistral, groq, xai, cerebras."
    ),
]


@app.command("login")
def login_command(provider: ProviderOption = None, model: ModelOption = None) -> None:
    """Store a provider key for codling (in $CODLING_HOME/credentials.json, readable by you only) and choose a
    model. On a terminal it asks for both; otherwise give --provider and the key on stdin. A key set in the
    environment still wins."""
    from codling.cli.login import login

    interactive = sys.stdin.isatty()
    try:
        _, catalog = load()
        typer.echo(login(catalog, provider, model, interactive=interactive, say=typer.echo))
    except ConfigError as e:
        raise _fail_config(e) from e
    except (EOFError, KeyboardInterrupt) as e:
        typer.echo("codling login: cancelled; nothing was stored", err=True)
        raise typer.Exit(EXIT_USAGE) from e


@app.command("logout")
def logout_command(provider: ProviderOption = None) -> None:
    """Remove the provider keys `codling login` stored (with --provider, that provider's only)."""
    from codling.cli.login import logout

    try:
        typer.echo(logout(provider))
    except ConfigError as e:
        raise _fail_config(e) from e


@app.command()
def models() -> None:
    """List the models codling knows, their context limits and whether credentials are set; mark the one
    `codling run` would use, and say why."""
    from rich.console import Console

    from codling.llm.providers import has_credentials, select_model

    try:
        settings, catalog = load()
    except ConfigError as e:
        raise _fail_config(e) from e
    try:
        choice = select_model(None, settings, catalog)
    except ConfigError as e:
        selected, why = None, str(e)
    else:
        selected, why = choice.info.id, _why_selected(choice.source, settings)
    listed = list(catalog)
    if selected is not None and all(info.id != selected for info in listed):
        listed.insert(0, choice.info)  # chosen by name, and in no catalog
    rows = [
        (
            info.id,
            f"{info.context_limit:,}",
            "yes" if has_credentials(info.id, settings.env) else "no",
            "← selected" if info.id == selected else "",
        )
        for info in listed
    ]
    print_models(rows, f"selected: {selected} ({why})" if selected else f"no model selected: {why}", Console())


def print_models(rows: list[tuple[str, str, str, str]], selected: str, console: Console) -> None:
    """The models table and the line saying which is selected, laid out to ``console``'s width: a value too long
    for its column folds onto more lines rather than ending in "…" (the ids were cut at 40 columns)."""
    from rich.table import Table

    table = Table("model", "context limit", "credentials", "", box=None, pad_edge=False)  # as `sessions list`
    for column in table.columns:
        column.overflow = "fold"  # rich's default cuts a value too long for its column (issue 32)
    table.columns[1].min_width = max((len(row[1]) for row in rows), default=0)  # a number is read whole
    for row in rows:
        table.add_row(*row)
    console.print(table)
    console.print(selected, highlight=False, soft_wrap=True)  # one line, for the terminal to wrap: a path stays whole


def _why_selected(source: str, settings: Settings) -> str:
    from codling.paths import config_file

    return {
        "CODLING_MODEL": "set by CODLING_MODEL",
        "config.toml": f"set by model in {config_file(settings.home)}",
        "codling login": "chosen at `codling login`; choose another with --model, CODLING_MODEL or model in "
        "config.toml",
        "server": "the first model the server at OPENAI_BASE_URL lists",
        "credentials": "the first listed whose provider has credentials; choose another with --model, "
        "CODLING_MODEL or model in config.toml",
    }.get(source, f"from {source}")


def _read_prompt(prompt: str | None) -> tuple[str, bool]:
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


_EMPTY_FROM_STDIN = (
    'codling: the prompt is empty: nothing came on stdin; pipe one in (echo "say hi" | codling) or give it as '
    "an argument (`codling --help` lists the commands)"
)


@app.command()
def run(
    prompt: Annotated[str | None, typer.Argument(help="What to do; '-' (or a pipe) reads it from stdin.")] = None,
    model: ModelOption = None,
    cwd: CwdOption = None,
    mode: Annotated[
        str | None,
        typer.Option(
            "--mode",
            help="read-only | ask | accept-edits | yolo. Default: ask on a terminal, read-only when stdin is not one.",
            autocompletion=complete.modes,
        ),
    ] = None,
    resume: ResumeOption = None,
    continue_: ContinueOption = False,
    json_output: Annotated[
        bool,
        typer.Option(
            "--json",
            help='Print JSON lines: a session event, the turn\'s events, and a result event (one "type" each).',
        ),
    ] = False,
    last_message: Annotated[
        Path | None,
        typer.Option("--output-last-message", "-o", help="Also write the turn's last message to this file."),
    ] = None,
    verbose: VerboseOption = False,
    image: Annotated[
        list[Path] | None,
        typer.Option(
            "--image", "-i", metavar="<path>", help="Attach an image file (PNG, JPEG, GIF, WebP); repeat for more."
        ),
    ] = None,
    title: Annotated[
        bool,
        typer.Option(
            "--title",
            help="Have the model title a new session (one short request after the answer); by default the "
            "first request names it, with no wait.",
        ),
    ] = False,
    max_requests: Annotated[
        int | None,
        typer.Option(
            "--max-requests",
            min=1,
            help="Stop the turn (exit 3) rather than make more than this many model requests.",
        ),
    ] = None,
    max_cost: Annotated[
        float | None,
        typer.Option(
            "--max-cost",
            help="Stop the turn (exit 3) before its next model request once it has spent more than this many US "
            "dollars at the model's list price.",
        ),
    ] = None,
) -> None:
    """Run one prompt in the terminal and print the reply as it streams; the session is recorded.

    When stdout is not a terminal it gets the answer only (the turn's last message, at its end); what the
    turn does and any error go to stderr."""
    _start_logging()
    if max_cost is not None and not max_cost > 0:  # (typer's min cannot exclude 0)
        typer.echo(f"codling: --max-cost {max_cost:g} allows no request; give more than 0 US dollars", err=True)
        raise typer.Exit(EXIT_USAGE)
    if resume is not None and prompt is None and not could_be_id(resume):
        prompt, resume = resume, PICK  # `codling run --resume "go on"`: the prompt, and a session to choose
    text, from_stdin = _read_prompt(prompt)
    if not text.strip():
        typer.echo(_EMPTY_FROM_STDIN if from_stdin else "codling: the prompt is empty", err=True)
        raise typer.Exit(EXIT_USAGE)
    images: list[ImageBlock] = []
    for path in image or []:
        try:
            images.append(read_image(path))
        except ConfigError as e:
            typer.echo(f"codling: --image {path}: {e}", err=True)
            raise typer.Exit(EXIT_USAGE) from e
    settings, _, plan, chosen_mode = _prepare(model, cwd, mode, resume, continue_, from_stdin)
    limits = Limits(max_requests, max_cost)
    if (unpriced := limits.unpriced(plan.model)) is not None:  # before any session exists
        typer.echo(f"codling: {unpriced}", err=True)
        raise typer.Exit(EXIT_USAGE)
    interactive = sys.stdin.isatty() and not from_stdin
    if not interactive and chosen_mode is None:
        chosen_mode = "read-only"
        typer.echo(
            "codling: stdin is not a terminal, so no one can approve edits or commands: "
            "running in read-only mode (use --mode to change).",
            err=True,
        )
    elif chosen_mode is None and plan.stored is not None and plan.stored.mode != settings.mode:
        note = restored_mode_note(plan.stored.mode, settings.mode, "--mode")
        typer.echo(f"codling: {note[:1].lower()}{note[1:]}", err=True)
    from codling.brain.images import may_see_images

    if images and not may_see_images(plan.model):
        typer.echo(f"codling: note: {plan.model.id} cannot see images; it is only told their names.", err=True)
    prompt_blocks: tuple[PromptBlock, ...] = (TextBlock(text), *images)
    output = Output(json_output, last_message, verbose, title)
    code = asyncio.run(run_turn(prompt_blocks, settings, plan, chosen_mode, interactive, output, limits))
    raise typer.Exit(code)


@app.command()
def chat(
    prompt: Annotated[str | None, typer.Argument(help="A first prompt, run before the input line opens.")] = None,
    model: ModelOption = None,
    cwd: CwdOption = None,
    mode: Annotated[
        str | None,
        typer.Option(
            "--mode", help="read-only | ask | accept-edits | yolo (default: ask).", autocompletion=complete.modes
        ),
    ] = None,
    resume: ResumeOption = None,
    continue_: ContinueOption = False,
    verbose: VerboseOption = False,
) -> None:
    """Talk with codling in this terminal: a multi-turn session with input history, multi-line editing, slash
    commands (/help lists them) and @path mentions that attach files. Esc or Ctrl-C cancels a turn; Ctrl-D
    leaves. Plain `codling` (or `codling "a prompt"`, `-c`, `-r`) on a terminal opens it too."""
    _start_logging()
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        typer.echo(
            "codling: chat needs a terminal for its input and output; for a prompt from a pipe or a script, use "
            "`codling run` (it reads the prompt from stdin)",
            err=True,
        )
        raise typer.Exit(EXIT_USAGE)
    if resume is not None and prompt is None and not could_be_id(resume):
        prompt, resume = resume, PICK
    if prompt is not None:
        prompt = _read_prompt(prompt)[0]
    settings, catalog, plan, chosen_mode = _prepare(model, cwd, mode, resume, continue_, False, build=False)
    raise typer.Exit(asyncio.run(_chat(settings, catalog, plan, chosen_mode, verbose, prompt)))


async def _chat(
    settings: Settings,
    catalog: Catalog,
    plan: SessionPlan,
    mode: PermissionMode | None,
    verbose: bool,
    first: str | None,
) -> int:
    from codling.brain.slash import COMMANDS
    from codling.cli.chat import Chat
    from codling.cli.chat_commands import CHAT_COMMANDS
    from codling.cli.chat_input import PromptInput
    from codling.cli.chat_ports import ChatViews, SettledInput
    from codling.cli.draw import use_color
    from codling.cli.oneshot import redacted_output, terminal_views
    from codling.cli.preload import Preload
    from codling.llm.providers import credential_names
    from codling.secrecy import Redactor

    redact = Redactor.from_env(settings.env, credential_names())
    commands = {**CHAT_COMMANDS, **COMMANDS}
    # Made first, on the terminal itself: the input line echoes what the user types, which redaction (keeping
    # back what may start a secret) would garble.
    # The mode shown on the input line is the chat's (made below), read afresh for every line.
    # The model stack loads once the input line is drawn: loading sooner slows the drawing (one GIL).
    preload = Preload(settings, plan.model.id)
    line = PromptInput(
        settings.home, commands, plan.header.cwd, redact, mode=lambda: session.mode(), shown=preload.start
    )
    # Everything else the chat prints (replies, tool output, notes, transcripts, questions) is redacted by value,
    # as codling run's output is.
    with redacted_output(redact) as settle:

        def views() -> ChatViews:  # at the first turn, on the redacted streams
            from codling.cli.notify import terminal_notifier

            renderer, approver = terminal_views(sys.stdout, err=sys.stderr, approve=True, verbose=verbose)
            return ChatViews(renderer, approver, terminal_notifier(settings, sys.stdout, os.environ))

        session = Chat(
            settings,
            catalog,
            plan,
            mode,
            input=SettledInput(line, settle),
            views=views,
            out=sys.stdout,
            color=use_color(sys.stdout, os.environ),
            keys=line,  # Esc cancels a running turn
            preload=preload,
        )
        return await session.run(first)


def _prepare(
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
