"""The ``codling`` command line (typer): the composition root for the terminal and for ``codling acp``.

Exit codes (``cli/session_plan.py``): 0 the turn completed, 1 the turn failed, 2 usage or configuration error,
130 interrupted (Ctrl-C), 128 + N ended by signal N (SIGTERM, SIGHUP).
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from codling import __version__
from codling.brain.prompt import ImageBlock, PromptBlock, TextBlock
from codling.cli import complete
from codling.cli.acp_main import run_acp, setup_logging
from codling.cli.models_command import models
from codling.cli.oneshot import Limits, Output, run_turn
from codling.cli.sandbox_command import sandbox_app
from codling.cli.session_args import EMPTY_FROM_STDIN, PICK, fail_config, prepare, read_prompt
from codling.cli.session_plan import (
    EXIT_USAGE,
    SessionPlan,
    could_be_id,
    load,
    read_image,
    restored_mode_note,
)
from codling.cli.sessions import sessions_app
from codling.cli.typer_app import CodlingTyper
from codling.config import Settings
from codling.errors import ConfigError
from codling.llm.catalog import Catalog
from codling.vocabulary import PermissionMode

if TYPE_CHECKING:
    pass

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
app.add_typer(sandbox_app, name="sandbox")

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


def _start_logging() -> None:
    try:
        setup_logging()
    except ConfigError as e:
        raise fail_config(e) from e


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
        raise fail_config(e) from e
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
        raise fail_config(e) from e


app.command()(models)


@app.command()
def run(
    prompt: Annotated[str | None, typer.Argument(help="What to do; '-' (or a pipe) reads it from stdin.")] = None,
    model: ModelOption = None,
    cwd: CwdOption = None,
    mode: Annotated[
        str | None,
        typer.Option(
            "--mode",
            help="read-only | ask | accept-edits | auto | yolo. Default: ask on a terminal, read-only when stdin is "
            "not one.",
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
    text, from_stdin = read_prompt(prompt)
    if not text.strip():
        typer.echo(EMPTY_FROM_STDIN if from_stdin else "codling: the prompt is empty", err=True)
        raise typer.Exit(EXIT_USAGE)
    images: list[ImageBlock] = []
    for path in image or []:
        try:
            images.append(read_image(path))
        except ConfigError as e:
            typer.echo(f"codling: --image {path}: {e}", err=True)
            raise typer.Exit(EXIT_USAGE) from e
    settings, _, plan, chosen_mode = prepare(model, cwd, mode, resume, continue_, from_stdin)
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
            "--mode", help="read-only | ask | accept-edits | auto | yolo (default: ask).", autocompletion=complete.modes
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
        prompt = read_prompt(prompt)[0]
    settings, catalog, plan, chosen_mode = prepare(model, cwd, mode, resume, continue_, False, build=False)
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
