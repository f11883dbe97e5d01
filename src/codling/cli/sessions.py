"""``codling sessions …``: list, show, replay, fork and delete recorded sessions.

Wherever a session is named, the start of its id or of its random part (after the date) will do, as long as
it names one session; an ambiguous one lists the sessions it matches.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TextIO

import typer

from codling.cli import complete
from codling.cli.home import open_store
from codling.cli.typer_app import CodlingTyper
from codling.config import load_settings
from codling.errors import CodlingError, ConfigError

if TYPE_CHECKING:  # the store (pydantic models) loads when a command needs it: --help and --version never do
    from rich.console import Console

    from codling.store.history import SessionLog
    from codling.store.index import SessionListing, SessionStore

sessions_app = CodlingTyper(help="List, show, replay, fork and delete recorded sessions.", no_args_is_help=True)

EXIT_USAGE = 2

IdArgument = Annotated[
    str,
    typer.Argument(
        help="A session id, or the unambiguous start of it or of its part after the date.",
        autocompletion=complete.sessions,
    ),
]


def _store() -> SessionStore:
    try:
        return open_store(load_settings())
    except ConfigError as e:
        typer.echo(f"codling: {e}", err=True)
        raise typer.Exit(EXIT_USAGE) from e


@contextmanager
def _usage_errors() -> Iterator[None]:
    """A malformed id, an unknown or ambiguous one, or a session that cannot be read: a message and exit 2."""
    try:
        yield
    except CodlingError as e:
        typer.echo(f"codling: {e}", err=True)
        raise typer.Exit(EXIT_USAGE) from e


def _read(store: SessionStore, id_or_prefix: str) -> SessionLog:
    with _usage_errors():
        return store.read(store.resolve(id_or_prefix))


def _local_time(stamp: str) -> str:
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).astimezone().strftime("%Y-%m-%d %H:%M")
    except ValueError:
        return stamp


def _summary_json(summary: SessionListing) -> dict[str, object]:
    return {
        "session_id": summary.session_id,
        "cwd": str(summary.cwd),
        "title": summary.title,
        "created_at": summary.created_at,
        "updated_at": summary.updated_at,
        "parent": summary.parent,
        "model": summary.model,
    }


@sessions_app.command("list")
def list_sessions(
    cwd: Annotated[Path | None, typer.Option("--cwd", help="Only sessions working in this directory.")] = None,
    json_output: Annotated[bool, typer.Option("--json", help="One JSON object per session, per line.")] = False,
) -> None:
    """Recorded sessions, most recently updated first."""
    store = _store()
    with _usage_errors():
        sessions = store.list(cwd.resolve() if cwd else None)
    if json_output:
        for summary in sessions:
            print(json.dumps(_summary_json(summary), ensure_ascii=False))
        return
    if not sessions:
        typer.echo("no sessions" + (f" in {cwd}" if cwd else ""), err=True)
        return
    rows = [(s.session_id, _local_time(s.updated_at), s.title or "", str(s.cwd)) for s in sessions]
    if not sys.stdout.isatty():
        # Piped: whole values, tab-separated, so nothing is cut to fit a width that is not there.
        for row in rows:
            print("\t".join(" ".join(value.split()) for value in row))
        return
    from rich.console import Console

    print_table(rows, Console())


def print_table(rows: list[tuple[str, str, str, str]], console: Console) -> None:
    """The sessions as a table on a terminal: every value whole, folded into its column rather than cut."""
    from rich.table import Table

    table = Table("id", "updated", "title", "directory", box=None, pad_edge=False)
    table.columns[0].no_wrap = True  # an id is only useful whole (it keeps its width while the others fold)
    for column in table.columns:
        column.overflow = "fold"  # rich's default ends a value too long for its column with "…" (issue 32)
    for row in rows:
        table.add_row(*row)
    console.print(table)


@sessions_app.command()
def show(session: IdArgument) -> None:
    """The transcript by turn: prompts, replies, tool calls; reasoning collapsed, errors marked."""
    from codling.cli.draw import use_color
    from codling.cli.transcript import print_transcript, spent_line

    stored = _read(_store(), session)
    header = stored.header
    typer.echo(f"session {header.session_id} · {stored.title or '(untitled)'} · {header.cwd} · {stored.model}")
    if header.parent:
        typer.echo(f"forked from {header.parent}")
    if stored.skipped_lines:
        lines = "1 line" if stored.skipped_lines == 1 else f"{stored.skipped_lines:,} lines"
        typer.echo(f"warning: {lines} of its history.jsonl could not be read and are not shown", err=True)
    print_transcript(stored.events, sys.stdout, color=use_color(sys.stdout, os.environ))
    if (spent := spent_line(stored.events)) is not None:
        typer.echo(spent)


@sessions_app.command()
def replay(session: IdArgument) -> None:
    """The session/update notifications an ACP client receives when it loads the session, as JSON lines."""
    from codling.acp.replay import replay_messages

    stored = _read(_store(), session)
    for message in replay_messages(stored.header.session_id, stored.events):
        print(json.dumps(message, ensure_ascii=False, separators=(",", ":")))


@sessions_app.command()
def fork(session: IdArgument) -> None:
    """A new session holding a copy of this one's history; prints the new id."""
    from codling.store.ids import new_session_id

    store = _store()
    with _usage_errors():
        forked = store.fork(store.resolve(session), new_session_id())
    print(forked.header.session_id)


@sessions_app.command()
def delete(
    session: IdArgument,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Delete without asking (for scripts).")] = False,
) -> None:
    """Delete a session's directory (its history and metadata) for good. On a terminal it asks first, naming
    the session; elsewhere it needs --yes."""
    store = _store()
    stored = _read(store, session)
    session_id = stored.header.session_id
    what = f"{session_id} ({stored.title or 'untitled'}, {stored.turns} turns)"
    if not yes:
        if not (sys.stdin.isatty() and sys.stderr.isatty()):
            typer.echo(
                f"codling: not deleting session {what} without asking, and there is no terminal to ask on: "
                "pass --yes to delete it",
                err=True,
            )
            raise typer.Exit(EXIT_USAGE)
        if not confirm_delete(what, sys.stdin, sys.stderr):
            typer.echo(f"kept session {session_id}", err=True)
            return
    with _usage_errors():
        removed = store.delete(session_id)
    typer.echo(f"deleted session {what}: {removed}")


def confirm_delete(what: str, terminal_in: TextIO, terminal_out: TextIO) -> bool:
    """Ask on the terminal whether to delete the session ``what`` names; only an answer of y or yes deletes
    (Enter, anything else, or the end of input keeps it)."""
    terminal_out.write(f"Delete session {what} for good? [y/N] ")
    terminal_out.flush()
    answer = terminal_in.readline()
    if not answer.endswith("\n"):
        terminal_out.write("\n")
    return answer.strip().lower() in ("y", "yes")
