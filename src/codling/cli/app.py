"""The ``codling`` command line (typer): the composition root for the terminal and for ``codling acp``.

Exit codes: 0 the turn completed, 1 the turn failed, 2 usage or configuration error, 130 interrupted (Ctrl-C),
128 + N ended by signal N (SIGTERM, SIGHUP).
"""

from __future__ import annotations

import asyncio
import base64
import os
import signal
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from codling import __version__
from codling.brain.prompt import ImageBlock, PromptBlock, TextBlock
from codling.cli import complete
from codling.cli.acp_main import run_acp, setup_logging
from codling.cli.home import open_store
from codling.cli.sessions import sessions_app
from codling.config import PermissionMode, Settings, load_settings, parse_mode
from codling.errors import CodlingError, ConfigError, SessionError
from codling.llm.catalog import Catalog, ModelInfo, load_catalog
from codling.paths import user_catalog_file

if TYPE_CHECKING:
    from codling.store.history import SessionHeader, SessionLog

app = typer.Typer(
    name="codling",
    help="A coding agent for ACP editors (Zed) and the terminal.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)

app.add_typer(sessions_app, name="sessions")

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130

ModelOption = Annotated[
    str | None,
    typer.Option(
        "--model",
        "-m",
        help="Model id, e.g. anthropic:claude-sonnet-4-5 (see `codling models`).",
        autocompletion=complete.models,
    ),
]


def _version(value: bool) -> None:
    if value:
        typer.echo(f"codling {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """codling: a coding agent for ACP editors and the terminal."""


def _fail_config(e: ConfigError) -> typer.Exit:
    typer.echo(f"codling: {e}", err=True)
    return typer.Exit(EXIT_USAGE)


@app.command()
def acp(model: ModelOption = None) -> None:
    """Serve the Agent Client Protocol on stdin/stdout (point your editor here)."""
    run_acp(model)


def _load() -> tuple[Settings, Catalog]:
    settings = load_settings()
    return settings, load_catalog(user_catalog_file(settings.home))


@app.command()
def models() -> None:
    """List the models codling knows, their context limits and whether credentials are set; mark the one
    `codling run` would use, and say why."""
    from rich.console import Console
    from rich.table import Table

    from codling.llm.providers import has_credentials, select_model

    try:
        settings, catalog = _load()
    except ConfigError as e:
        raise _fail_config(e) from e
    try:
        choice = select_model(None, settings, catalog)
    except ConfigError as e:
        selected, why = None, str(e)
    else:
        selected, why = choice.info.id, _why_selected(choice.source, settings)
    table = Table("model", "context limit", "credentials", "")
    listed = list(catalog)
    if selected is not None and all(info.id != selected for info in listed):
        listed.insert(0, choice.info)  # chosen by name, and in no catalog
    for info in listed:
        table.add_row(
            info.id,
            f"{info.context_limit:,}",
            "yes" if has_credentials(info.id, settings.env) else "no",
            "← selected" if info.id == selected else "",
        )
    console = Console(soft_wrap=True)
    console.print(table)
    console.print(f"selected: {selected} ({why})" if selected else f"no model selected: {why}", highlight=False)


def _why_selected(source: str, settings: Settings) -> str:
    from codling.paths import config_file

    return {
        "CODLING_MODEL": "set by CODLING_MODEL",
        "config.toml": f"set by model in {config_file(settings.home)}",
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


@app.command()
def run(
    prompt: Annotated[str | None, typer.Argument(help="What to do; '-' (or a pipe) reads it from stdin.")] = None,
    model: ModelOption = None,
    cwd: Annotated[
        Path | None, typer.Option("--cwd", help="Work in this directory (default: the current one).")
    ] = None,
    mode: Annotated[
        str | None,
        typer.Option(
            "--mode",
            help="read-only | ask | accept-edits | yolo. Default: ask on a terminal, read-only when stdin is not one.",
            autocompletion=complete.modes,
        ),
    ] = None,
    resume: Annotated[
        str | None,
        typer.Option(
            "--resume",
            "-r",
            help="Continue this session (an id, or the start of it or of its part after the date); with no id, "
            "choose from a list on a terminal.",
            autocompletion=complete.sessions,
        ),
    ] = None,
    continue_: Annotated[
        bool, typer.Option("--continue", "-c", help="Continue the latest session in this directory.")
    ] = False,
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
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Show commands' whole output, not just their last lines.")
    ] = False,
    image: Annotated[
        list[Path] | None,
        typer.Option("--image", "-i", help="Attach an image file (PNG, JPEG, GIF, WebP); repeat for more."),
    ] = None,
    title: Annotated[
        bool,
        typer.Option(
            "--title",
            help="Have the model title a new session (one short request after the answer); by default the "
            "first request names it, with no wait.",
        ),
    ] = False,
) -> None:
    """Run one prompt in the terminal and print the reply as it streams; the session is recorded.

    When stdout is not a terminal it gets the answer only (the turn's last message, at its end); what the
    turn does and any error go to stderr."""
    setup_logging()
    if resume is not None and prompt is None and not _could_be_id(resume):
        prompt, resume = resume, PICK  # `codling run --resume "go on"`: the prompt, and a session to choose
    if resume is not None and continue_:
        typer.echo("codling: use --resume or --continue, not both", err=True)
        raise typer.Exit(EXIT_USAGE)
    text, from_stdin = _read_prompt(prompt)
    if not text.strip():
        typer.echo("codling: the prompt is empty", err=True)
        raise typer.Exit(EXIT_USAGE)
    workdir = (cwd or Path.cwd()).resolve()
    if not workdir.is_dir():
        typer.echo(f"codling: --cwd {workdir} is not a directory", err=True)
        raise typer.Exit(EXIT_USAGE)
    try:
        images = read_images(image or [])
        settings, catalog = _load()
        if resume == PICK:
            resume = _pick(settings, workdir, from_stdin)
        chosen_mode: PermissionMode | None = parse_mode(mode) if mode else None
        plan = _plan_session(settings, catalog, model, workdir, resume, continue_, cwd is not None)
        _check_model(plan.model, settings)
        open_store(settings).check()
    except CodlingError as e:
        typer.echo(f"codling: {e}", err=True)
        raise typer.Exit(EXIT_USAGE) from e
    interactive = sys.stdin.isatty() and not from_stdin
    if not interactive and chosen_mode is None:
        chosen_mode = "read-only"
        typer.echo(
            "codling: stdin is not a terminal, so no one can approve edits or commands: "
            "running in read-only mode (use --mode to change).",
            err=True,
        )
    if images and not plan.model.images:
        typer.echo(f"codling: note: {plan.model.id} cannot see images; it is only told their names.", err=True)
    prompt_blocks: tuple[PromptBlock, ...] = (TextBlock(text), *images)
    output = _Output(json_output, last_message, verbose, title)
    code = asyncio.run(_run_turn(prompt_blocks, settings, plan, chosen_mode, interactive, output))
    raise typer.Exit(code)


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


def _could_be_id(value: str) -> bool:
    from codling.errors import InvalidSessionIdError
    from codling.store.ids import check_prefix

    try:
        check_prefix(value)
    except InvalidSessionIdError:
        return False
    return True


def _pick(settings: Settings, workdir: Path, from_stdin: bool) -> str:
    """The id of the session the user chooses at the terminal (this directory's, else all); exits when there
    is no terminal to choose on, nothing to choose from, or the user chooses nothing."""
    from datetime import UTC, datetime

    from codling.cli.picker import pick_session

    if from_stdin or not (sys.stdin.isatty() and sys.stderr.isatty()):
        raise SessionError(
            "--resume needs a session id when there is no terminal to choose on; see `codling sessions list`"
        )
    store = open_store(settings)
    sessions, where = store.list(workdir), f"in {workdir}"
    if not sessions:
        sessions, where = store.list(), "in every directory"
    if not sessions:
        raise SessionError("there is no session to resume yet; start one with `codling run`")
    chosen = pick_session(sessions, input=sys.stdin, output=sys.stderr, now=datetime.now(UTC), where=where)
    if chosen is None:
        typer.echo("codling: no session chosen", err=True)
        raise typer.Exit(EXIT_OK)
    return chosen


def _check_model(info: ModelInfo, settings: Settings) -> None:
    """Build the model once before any session exists: a missing key, an unknown provider or an unusable
    name is a configuration error (exit 2) rather than a failed turn in a session nobody wanted."""
    from codling.llm.providers import build_model

    build_model(info.id, env=settings.env)


@dataclass(frozen=True)
class _Output:
    """Where a one-shot run reports: JSON lines or text, and the file for its last message (if any)."""

    json: bool
    last_message: Path | None
    verbose: bool = False
    model_title: bool = False
    """Ask the model for a new session's title (else its first request names it, at once)."""


IMAGE_TYPES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
}
MAX_IMAGE_BYTES = 20 * 1024 * 1024


def read_images(paths: list[Path]) -> tuple[ImageBlock, ...]:
    """Image files as prompt blocks; a missing, unreadable, too large or non-image file is a ``ConfigError``
    naming it (nothing runs)."""
    images: list[ImageBlock] = []
    for path in paths:
        mime = IMAGE_TYPES.get(path.suffix.lower())
        if mime is None:
            kinds = ", ".join(sorted(IMAGE_TYPES))
            raise ConfigError(f"--image {path}: not an image codling can attach (use {kinds})")
        try:
            data = path.read_bytes()
        except OSError as e:
            raise ConfigError(f"--image {path}: cannot be read: {e.strerror or e}") from e
        if len(data) > MAX_IMAGE_BYTES:
            raise ConfigError(f"--image {path}: {len(data):,} bytes is more than the {MAX_IMAGE_BYTES:,} allowed")
        images.append(ImageBlock(base64.b64encode(data).decode("ascii"), mime, path.resolve().as_uri()))
    return tuple(images)


@dataclass(frozen=True)
class _SessionPlan:
    """Which session `codling run` works in: a new one, or a stored one to continue."""

    model: ModelInfo
    header: SessionHeader
    stored: SessionLog | None


def _plan_session(
    settings: Settings,
    catalog: Catalog,
    model: str | None,
    workdir: Path,
    resume: str | None,
    continue_: bool,
    cwd_given: bool,
) -> _SessionPlan:
    from codling.llm.providers import select_model
    from codling.store.history import SessionHeader
    from codling.store.ids import new_session_id

    choice = select_model(model, settings, catalog)
    if not resume and not continue_:
        header = SessionHeader(new_session_id(), workdir, choice.info.id, settings.mode)
        return _SessionPlan(choice.info, header, None)
    store = open_store(settings)
    if resume:
        session_id = store.resolve(resume)
    else:
        latest = store.latest(workdir)
        if latest is None:
            raise SessionError(f"no session to continue in {workdir}; start one without --continue")
        session_id = latest.session_id
    stored = store.read(session_id)
    # A resumed session keeps its own model and directory unless told otherwise on the command line.
    info = choice.info if choice.source == "--model" else catalog.get(stored.model)
    header = replace(stored.header, cwd=workdir) if cwd_given else stored.header
    return _SessionPlan(info, header, stored)


async def _run_turn(
    prompt: tuple[PromptBlock, ...],
    settings: Settings,
    plan: _SessionPlan,
    mode: PermissionMode | None,
    interactive: bool,
    output: _Output,
) -> int:
    from codling.cli.approve import TerminalApprover
    from codling.cli.draw import can_animate, use_color
    from codling.cli.render import JsonLinesRenderer, LastMessage, TerminalRenderer
    from codling.store.live import start_session

    info = plan.model
    if not info.known:
        print(
            f"codling: warning: {info.id} is in no model catalog; assuming a {info.context_limit:,}-token context "
            "(add it to $CODLING_HOME/models.json)",
            file=sys.stderr,
        )
    # Piped or redirected, stdout carries the answer alone; what the turn does is drawn on stderr.
    answer_only = not output.json and not sys.stdout.isatty()
    screen = sys.stderr if answer_only else sys.stdout
    color = use_color(screen, os.environ)
    shown_diffs: set[str] = set()  # an edit's diff, shown when the user allowed it, is not drawn again
    approver = (
        TerminalApprover(input=sys.stdin, output=sys.stderr, color=color, shown_diffs=shown_diffs)
        if interactive
        else None
    )
    header = plan.header if plan.stored or mode is None else replace(plan.header, mode=mode)
    try:
        live = start_session(open_store(settings), settings, info, header, plan.stored, approver=approver)
    except CodlingError as e:  # e.g. the session is being written by another codling process
        print(f"codling: {e}", file=sys.stderr)
        return EXIT_USAGE
    if plan.stored is not None and info.id != plan.stored.model:
        live.set_model(info)
    live.brain.options = replace(live.brain.options, model_titles=output.model_title)
    if mode is not None:
        # This run's mode only: a resumed session keeps its recorded mode for its next user.
        live.brain.set_mode(mode)
    renderer: JsonLinesRenderer | TerminalRenderer
    if output.json:
        renderer = JsonLinesRenderer(sys.stdout)
        renderer.write(_session_event(live.id, info.id, header.cwd, plan.stored is not None))
    elif answer_only:
        renderer = TerminalRenderer(
            sys.stderr,
            color=color,
            interactive=can_animate(sys.stderr, os.environ),
            verbose=output.verbose,
            shown_diffs=shown_diffs,
        )
    else:
        renderer = TerminalRenderer(
            sys.stdout,
            err=sys.stderr,
            color=color,
            interactive=can_animate(sys.stderr, os.environ) or can_animate(sys.stdout, os.environ),
            verbose=output.verbose,
            shown_diffs=shown_diffs,
        )
    last = LastMessage()
    live.brain.subscribe(renderer)
    live.brain.subscribe(last)
    loop = asyncio.get_running_loop()
    interrupted: list[bool] = []

    def interrupt() -> None:
        interrupted.append(True)
        live.brain.cancel()

    loop.add_signal_handler(signal.SIGINT, interrupt)
    terminated: list[int] = []

    def terminate(sig: int) -> None:
        """SIGTERM or SIGHUP: end the turn as on Ctrl-C (commands stopped, turn_end recorded), skip the title,
        then exit with 128 + the signal's number; past SHUTDOWN_SECONDS, exit anyway (records are flushed)."""
        if not terminated:
            terminated.append(sig)
            loop.call_later(SHUTDOWN_SECONDS, os._exit, 128 + sig)
        live.brain.cancel()
        live.brain.cancel_background()

    for sig in (signal.SIGTERM, signal.SIGHUP):
        loop.add_signal_handler(sig, terminate, sig)
    started = time.monotonic()
    try:
        result = await live.brain.run(prompt)
        # With --title, a new session's title is asked for once the answer is shown; Ctrl-C skips it.
        loop.add_signal_handler(signal.SIGINT, live.brain.cancel_background)
        if not terminated:
            await live.brain.settle()
    finally:
        if isinstance(renderer, TerminalRenderer):
            renderer.close()
        await live.close()
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            loop.remove_signal_handler(sig)
    failed = result.error is not None
    completed = not failed and result.stop_reason != "cancelled"
    if completed and answer_only and last.text:
        sys.stdout.write(last.text + "\n")
    if completed and output.last_message is not None:
        _write_last_message(output.last_message, last.text)
    if isinstance(renderer, JsonLinesRenderer):
        renderer.write(
            {
                "type": "result",
                "session_id": live.id,
                "stop_reason": "error" if failed else result.stop_reason,
                "error": result.error,
                "usage": {"input_tokens": result.usage.input_tokens, "output_tokens": result.usage.output_tokens},
                "cost": result.cost,
                "duration_ms": round((time.monotonic() - started) * 1000),
                "turns": live.brain.state.turn_count,
            }
        )
    else:
        if result.context is not None:
            print(context_meter(result.context.used, result.context.size), file=sys.stderr)
        named = f" “{live.recorder.title}”" if live.recorder.title else ""
        print(f"codling: session {live.id}{named} (continue with: codling run --resume {live.id} …)", file=sys.stderr)
    if terminated:
        return 128 + terminated[0]
    if failed:
        return EXIT_FAILED
    if result.stop_reason == "cancelled":
        return EXIT_INTERRUPTED if interrupted else EXIT_FAILED
    return EXIT_OK


def _session_event(session_id: str, model_id: str, cwd: Path, resumed: bool) -> dict[str, object]:
    """The first JSON line of a run: what a script needs to continue the session later."""
    return {"type": "session", "session_id": session_id, "model": model_id, "cwd": str(cwd), "resumed": resumed}


def _write_last_message(path: Path, text: str) -> None:
    try:
        path.write_text(text + "\n" if text else "")
    except OSError as e:
        print(f"codling: cannot write the last message to {path}: {e.strerror or e}", file=sys.stderr)


SHUTDOWN_SECONDS = 5.0
"""How long SIGTERM or SIGHUP waits for the turn to end and be recorded before ``codling run`` exits anyway."""


def context_meter(used: int, size: int) -> str:
    """The one-line context meter printed after a turn: ``context: 12,345 / 200,000 tokens (6%)``."""
    share = used / size if size else 0.0
    return f"context: {used:,} / {size:,} tokens ({share:.0%})"
