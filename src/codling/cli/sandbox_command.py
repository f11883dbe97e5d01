"""``codling sandbox check``: what the sandbox enforces here, each rule tried with a confined command
(``tools/sandbox/check.py``). Exit 0 when everything that could be tried was enforced, 1 otherwise."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer

from codling.cli.session_args import fail_config
from codling.cli.typer_app import CodlingTyper
from codling.config import load_settings
from codling.errors import ConfigError
from codling.paths import user_home

sandbox_app = CodlingTyper(
    help="The sandbox commands run in: `codling sandbox check` says what it enforces here.", no_args_is_help=True
)

_WHERE = {
    "on": "in read-only, ask, accept-edits and auto mode; yolo runs commands unconfined",
    "always": 'in every mode, yolo included (sandbox = "always")',
    "off": 'never: sandbox = "off" in config.toml runs every command unconfined',
}


@sandbox_app.command("check")
def check_command(
    cwd: Annotated[Path | None, typer.Option("--cwd", help="The workspace to check in (default: here).")] = None,
) -> None:
    """Try what the sandbox enforces on this machine, with confined commands, and say what it found."""
    from codling.tools.sandbox.check import check
    from codling.tools.sandbox.policy import build_sandbox

    try:
        settings = load_settings()
    except ConfigError as e:
        raise fail_config(e) from e
    workspace = (cwd or Path.cwd()).resolve()
    home = user_home(settings.env)
    sandbox = build_sandbox(
        (workspace,),
        home=home,
        codling_home=settings.home,
        extra_writable=settings.sandbox_writable,
        setting=settings.sandbox,
        env=dict(settings.env),
    )
    report = asyncio.run(check(sandbox, workspace, home, settings.home))
    typer.echo(f"Sandbox: {settings.sandbox} — commands are confined {_WHERE[settings.sandbox]}.")
    typer.echo(f"This machine: {report.kernel}; Landlock ABI {report.landlock or 'none'}.")
    if report.unavailable is not None:
        typer.echo(f"✗ The sandbox cannot run here: {report.unavailable}.")
        typer.echo('  Commands that must run in it are refused, never run unconfined; sandbox = "off" in')
        typer.echo("  config.toml (or yolo mode) runs them without it, asked as before.")
        raise typer.Exit(1)
    typer.echo(f"Tried with confined commands in {workspace}:")
    for probe in report.probes:
        mark = "?" if probe.enforced is None else "✓" if probe.enforced else "✗"
        detail = f" ({probe.detail})" if probe.detail else ""
        typer.echo(f"  {mark} {probe.what}{detail}")
    typer.echo(
        'Not covered: macOS and Windows (no sandbox there: commands are refused unless sandbox = "off"); '
        "Unix sockets reached by their path outside the hidden places; a repository a command creates itself; "
        "what a command does once the sandbox is lifted for it (README, The sandbox)."
    )
    if not report.ok:
        raise typer.Exit(1)
