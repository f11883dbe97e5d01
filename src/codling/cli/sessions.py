"""``codling sessions …``: list, show, replay, fork, rewind and delete recorded sessions.

Wherever a session is named, the start of its id or of its random part (after the date) will do, as long as
it names one session; an ambiguous one lists the sessions it matches.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
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
    from codling.tools.ports import Answer, PermissionRequest

sessions_app = CodlingTyper(help="List, show, replay, fork, rewind and delete recorded sessions.", no_args_is_help=True)

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
def rewind(
    session: IdArgument,
    to: Annotated[
        str | None,
        typer.Option(
            "--to",
            help="Go back to before this turn (N), or before step S of turn N (N.S, code only), as the listing "
            "without --to numbers them.",
        ),
    ] = None,
    code: Annotated[bool, typer.Option("--code", help="Put back the files only.")] = False,
    conversation: Annotated[bool, typer.Option("--conversation", help="Put back the conversation only.")] = False,
    both: Annotated[bool, typer.Option("--both", help="Put back both (the default).")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Rewind without asking (for scripts).")] = False,
    force: Annotated[
        bool, typer.Option("--force", help="Also overwrite files changed outside codling since its last checkpoint.")
    ] = False,
) -> None:
    """Put a session's files, its conversation or both back as they were before one of its turns. Without --to,
    lists the turns (with what each changed). It shows what will change first and asks on a terminal; elsewhere
    it needs --yes. Files changed outside codling since its last checkpoint are not overwritten without --force.
    The rewind is recorded in the session (its later turns stay, marked abandoned)."""
    import asyncio

    if code + conversation + both > 1:
        typer.echo("codling: choose one of --code, --conversation and --both", err=True)
        raise typer.Exit(EXIT_USAGE)
    scope = "code" if code else "conversation" if conversation else "both"
    store = _store()
    with _usage_errors():
        session_id = store.resolve(session)
    interactive = sys.stdin.isatty() and sys.stderr.isatty()
    raise typer.Exit(asyncio.run(_rewind(session_id, to, scope, RewindAnswers(yes, force, interactive))))


async def _rewind(session_id: str, to: str | None, scope: str, answers: RewindAnswers) -> int:
    """Run ``/rewind`` in the stored session, its reply written out as it comes; the exit code (1: not rewound)."""
    from codling.brain.events import Event, TextDelta
    from codling.brain.rewinding import REWIND_TOOL
    from codling.cli.session_plan import load, open_live, plan_session

    with _usage_errors():
        settings, catalog = load()
        plan = plan_session(settings, catalog, None, Path.cwd(), session_id, False, False)
        live = open_live(settings, plan, None, answers, model_titles=False)

    async def write(event: Event) -> None:
        if isinstance(event, TextDelta):
            sys.stdout.write(event.text)
            sys.stdout.flush()

    live.brain.subscribe(write)
    try:
        result = await live.brain.run(f"/rewind {to} {scope}" if to else "/rewind")
    finally:
        await live.close()
    sys.stdout.write("\n")
    if to is None:
        sys.stdout.write(f"Here: codling sessions rewind {session_id} --to N [--code | --conversation]\n")
    rewound = any(
        call.started.tool_name == REWIND_TOOL and call.finished is not None and call.finished.status == "completed"
        for call in result.tool_calls
    )
    return 0 if rewound or to is None else 1


@dataclass(frozen=True)
class RewindAnswers:
    """How ``codling sessions rewind`` answers the rewind's question: ``yes`` (unless it would overwrite files
    changed outside codling, without ``force``), else on the terminal if ``interactive``, else no."""

    yes: bool
    force: bool
    interactive: bool

    async def ask(self, request: PermissionRequest) -> Answer:
        """The answer to the rewind's question (the preview was written out before it)."""
        outside = request.raw_input.get("outside") or []
        if outside and not self.force:
            sys.stderr.write(
                f"\ncodling: not rewinding over {len(outside)} file(s) changed outside codling since its last "
                "checkpoint; pass --force to overwrite them\n"
            )
            return "reject"
        if self.yes:
            return "allow_once"
        if not self.interactive:
            sys.stderr.write("\ncodling: not rewinding without asking, and there is no terminal to ask on: add --yes\n")
            return "reject"
        sys.stderr.write(f"\n{request.title}? [y/N] ")
        sys.stderr.flush()
        answer = sys.stdin.readline()
        return "allow_once" if answer.strip().lower() in ("y", "yes") else "reject"


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
