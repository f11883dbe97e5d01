"""Which session a terminal command works in, checked before anything is created: the model, the directory, a
new session or a stored one (by id, ``--continue`` or a picker), and the images to attach.

Shared by ``codling run`` (``cli/oneshot.py``) and ``codling chat`` (``cli/chat.py``). Everything here raises a
:class:`~codling.errors.CodlingError` for bad input, which the commands turn into one line and exit code 2.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from codling.brain.prompt import ImageBlock
from codling.cli.home import open_store
from codling.config import Settings, load_settings
from codling.errors import ConfigError, InvalidSessionIdError, SessionError
from codling.llm.catalog import Catalog, ModelInfo, load_catalog
from codling.paths import user_catalog_file
from codling.vocabulary import PermissionMode

if TYPE_CHECKING:
    from codling.brain.host import ModelFactory
    from codling.store.header import SessionHeader
    from codling.store.history import SessionLog
    from codling.store.index import SessionListing
    from codling.store.live import LiveSession
    from codling.tools.ports import Approver

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_LIMIT, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
"""The terminal commands' exit codes: the turn completed, it failed, usage or configuration error, it stopped at
a limit (``--max-requests``, ``--max-cost``, ``max_requests_per_turn``), Ctrl-C (a signal N other than SIGINT
ends ``codling run`` with 128 + N)."""


def load() -> tuple[Settings, Catalog]:
    """The settings and the model catalog (``ConfigError`` for a bad config.toml or models.json)."""
    settings = load_settings()
    return settings, load_catalog(user_catalog_file(settings.home))


@dataclass(frozen=True)
class SessionPlan:
    """The session a command works in: a new one, or a stored one to continue."""

    model: ModelInfo
    header: SessionHeader
    stored: SessionLog | None
    note: str | None = None
    """What to tell the user about the model choice (the model a local server offered), or None."""


def plan_session(
    settings: Settings,
    catalog: Catalog,
    model: str | None,
    workdir: Path,
    resume: str | None,
    continue_: bool,
    cwd_given: bool,
) -> SessionPlan:
    """A new session in ``workdir`` with the selected model, or the stored one ``resume`` names (``continue_``:
    this directory's latest). A resumed session keeps its model and directory unless ``model`` or ``cwd_given``
    say otherwise."""
    from codling.llm.providers import select_model
    from codling.store.header import SessionHeader
    from codling.store.ids import new_session_id

    if not resume and not continue_:
        choice = select_model(model, settings, catalog)
        header = SessionHeader(new_session_id(), workdir, choice.info.id, settings.mode)
        return SessionPlan(choice.info, header, None, choice.note)
    # A resumed session keeps its model: nothing to select (or ask a server) unless --model names one.
    chosen = select_model(model, settings, catalog).info if model else None
    store = open_store(settings)
    if resume:
        session_id = store.resolve(resume)
    else:
        latest = store.latest(workdir)
        if latest is None:
            raise SessionError(f"no session to continue in {workdir}; start one without --continue")
        session_id = latest.session_id
    stored = store.read(session_id)
    info = chosen or catalog.get(stored.model)
    header = replace(stored.header, cwd=workdir) if cwd_given else stored.header
    return SessionPlan(info, header, stored)


def restored_mode_note(mode: PermissionMode, default: PermissionMode, change: str) -> str:
    """What a resumed session that brings back a mode other than the default says (``change``: what changes it,
    ``/mode`` in the chat, ``--mode`` for ``codling run``)."""
    return f"Continuing in {mode} mode, as this session was left (the default is {default}); {change} changes it."


def check_model(info: ModelInfo, settings: Settings, *, build: bool = True) -> None:
    """Build the model once before any session exists: a missing key, an unknown provider or an unusable
    name is a configuration error (exit 2) rather than a failed turn in a session nobody wanted. Without
    ``build``, only the credentials are checked (the rest needs pydantic-ai, a second's import)."""
    from codling.llm.providers import build_model, check_credentials

    if build:
        build_model(info.id, env=settings.env)
    else:
        check_credentials(info.id, settings.env)


def could_be_id(value: str) -> bool:
    """Whether ``value`` has the form of a session id or the start of one (else it is a prompt)."""
    from codling.store.ids import check_prefix

    try:
        check_prefix(value)
    except InvalidSessionIdError:
        return False
    return True


def pick(settings: Settings, workdir: Path, *, input: TextIO, output: TextIO) -> str | None:
    """The id of the session the user chooses at the terminal (this directory's, else all), or None if they
    choose none; ``SessionError`` when there is no terminal to choose on or nothing to choose from."""
    from datetime import UTC, datetime

    from codling.cli.draw import is_terminal
    from codling.cli.picker import pick_session

    if not (is_terminal(input) and is_terminal(output)):
        raise SessionError(
            "--resume needs a session id when there is no terminal to choose on; see `codling sessions list`"
        )
    sessions, where = resumable(settings, workdir)
    about = open_store(settings).first_request
    return pick_session(
        sessions, input=input, output=output, now=datetime.now(UTC), where=where, about=lambda s: about(s.session_id)
    )


def resumable(settings: Settings, workdir: Path) -> tuple[list[SessionListing], str]:
    """The sessions to offer for resuming, newest first: ``workdir``'s, else every directory's; and which of the
    two they are (``in DIR`` or ``in every directory``). ``SessionError`` when there are none."""
    store = open_store(settings)
    sessions, where = store.list(workdir), f"in {workdir}"
    if not sessions:
        sessions, where = store.list(), "in every directory"
    if not sessions:
        raise SessionError("there is no session to resume yet; start one with `codling run` or `codling chat`")
    return sessions, where


def unknown_model(info: ModelInfo) -> str | None:
    """The warning for a model in no catalog (its context window is a guess), or None."""
    if info.known:
        return None
    return (
        f"{info.id} is in no model catalog; assuming a {info.context_limit:,}-token context (add it to "
        "$CODLING_HOME/models.json)"
    )


def open_live(
    settings: Settings,
    plan: SessionPlan,
    mode: PermissionMode | None,
    approver: Approver | None,
    *,
    model_titles: bool,
    catalog: Catalog | None = None,
    model_factory: ModelFactory | None = None,
) -> LiveSession:
    """Start ``plan``'s session, recorded: with the model the plan chose (a switch is recorded), in ``mode`` for
    this process only (a resumed session keeps its recorded mode for its next user), and with ``catalog``'s
    models for ``/model`` (None: no switching)."""
    from codling.store.live import start_session

    header = plan.header if plan.stored or mode is None else replace(plan.header, mode=mode)
    live = start_session(
        open_store(settings),
        settings,
        plan.model,
        header,
        plan.stored,
        approver=approver,
        catalog=catalog,
        model_factory=model_factory,
    )
    if plan.stored is not None and plan.model.id != plan.stored.model:
        live.set_model(plan.model)
    live.brain.options = replace(live.brain.options, model_titles=model_titles)
    if mode is not None:
        live.brain.set_mode(mode)
    return live


IMAGE_TYPES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
}
MAX_IMAGE_BYTES = 20 * 1024 * 1024


def read_image(path: Path) -> ImageBlock:
    """An image file as a prompt block. A missing, unreadable, too large or non-image file is a ``ConfigError``
    saying why; the caller names the file as its user gave it (``--image x.png``, ``@x.png``)."""
    mime = IMAGE_TYPES.get(path.suffix.lower())
    if mime is None:
        raise ConfigError(f"not an image codling can attach (use {', '.join(sorted(IMAGE_TYPES))})")
    try:
        data = path.read_bytes()
    except OSError as e:
        raise ConfigError(f"cannot be read: {e.strerror or e}") from e
    if len(data) > MAX_IMAGE_BYTES:
        raise ConfigError(f"{len(data):,} bytes is more than the {MAX_IMAGE_BYTES:,} allowed")
    return ImageBlock(base64.b64encode(data).decode("ascii"), mime, path.resolve().as_uri())
