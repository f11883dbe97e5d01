"""The machinery under the ACP agent's protocol methods (``server.CodlingAgent``): configuration, the open
sessions and how each is made live, introduced to the client and forwarded to it (its brain's events as
session updates, its settings as the pickers' state).

Like ``server``, it imports only the SDK and codling's foundation at start-up; the brain and the store are
imported when the first session is opened.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Coroutine, MutableMapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from acp import RequestError, helpers
from acp.interfaces import Client
from acp.schema import (
    AvailableCommand,
    AvailableCommandInput,
    ClientCapabilities,
    ConfigOptionUpdate,
    SessionInfoUpdate,
    UnstructuredCommandInput,
)

from codling.acp.client_paths import ClientPaths
from codling.acp.config_options import (
    config_options,
    mode_state,
    takes_booleans,
)
from codling.acp.newer import NewerEdge, NewerUpdate, wire
from codling.acp.rpc_errors import (
    directory,
    held,
    invalid_session_id,
    not_found,
)
from codling.acp.served import ServedSession
from codling.acp.warmup import WarmUp
from codling.config import Settings, load_settings
from codling.errors import (
    CodlingError,
    ConfigError,
    InvalidSessionIdError,
    SessionError,
    SessionHeldError,
    UnknownSessionError,
)
from codling.llm.catalog import Catalog, ModelInfo, load_catalog
from codling.paths import codling_home, user_catalog_file
from codling.secrecy import Redactor
from codling.store.ids import check_session_id
from codling.vocabulary import PermissionMode

if TYPE_CHECKING:
    from codling.acp.translate import Update
    from codling.brain.events import Event
    from codling.brain.host import ModelFactory
    from codling.brain.thinking import Thinking
    from codling.store.header import SessionHeader
    from codling.store.history import SessionLog
    from codling.store.index import SessionStore

log = logging.getLogger(__name__)

INTRODUCTION_DELAY = 0.1
"""Seconds between the response naming a new (or forked) session and the notifications introducing it (its
slash commands, its usage), unless the client names the session in a request first. Zed registers a session
only once it has handled that response, and drops notifications for a session it does not know; 2 ms was
too soon for it. A loaded or resumed session is one the client named, so it is introduced at once."""


class AgentCore:
    """The agent's state and the sessions' machinery; ``CodlingAgent`` adds the ACP protocol's methods."""

    def __init__(
        self,
        *,
        settings_loader: Any = load_settings,
        model_factory: ModelFactory | None = None,
        cli_model: str | None = None,
        warm_up: bool = True,
        environ: MutableMapping[str, str] | None = None,
    ) -> None:
        self._settings_loader = settings_loader
        self._environ = os.environ if environ is None else environ
        """Where keys ``codling login`` stored are taken up (the process's environment, which models are built
        from; a test's own mapping)."""
        self._data_home: Path | None = None
        self._settings: Settings | None = None
        self._catalog: Catalog | None = None
        self._store: SessionStore | None = None
        self._redact = Redactor(())
        """Removes the environment's secrets from text sent to the client (set with the settings)."""
        self._model_factory = model_factory
        self._cli_model = cli_model
        self._warm_up = warm_up
        self._client: Client | None = None
        self._client_capabilities = ClientCapabilities()
        """What the client said it offers at ``initialize`` (nothing until then)."""
        self.newer = NewerEdge()
        """The newer protocol the SDK cannot carry: wrap the connection's transport with ``newer.wrap``."""
        self._sessions: dict[str, ServedSession] = {}
        self._background: set[asyncio.Task[None]] = set()
        self._warming: WarmUp | None = None
        """The warm-up thread (None: there is none), which the loop waits for (``_warmed``) before anything
        that imports pydantic-ai: a turn, a restore, MCP servers."""

    # -- plumbing -------------------------------------------------------------------------------------------

    def on_connect(self, conn: Client) -> None:
        """Keep the client connection for notifications and permission requests."""
        self._client = conn

    @property
    def client(self) -> Client:
        if self._client is None:
            raise RequestError.internal_error({"details": "no client connection"})
        return self._client

    def _config(self) -> tuple[Settings, Catalog]:
        """The settings and the model catalog, read once (-32603 if they cannot be)."""
        if self._settings is None or self._catalog is None:
            from codling.llm.providers import credential_names

            try:
                settings = self._settings_loader()
                self._catalog = load_catalog(user_catalog_file(settings.home))
            except ConfigError as e:
                raise RequestError.internal_error({"details": f"configuration error: {e}"}) from e
            self._settings = settings
            self._redact = Redactor.from_env(settings.env, credential_names())
        return self._settings, self._catalog

    def _session_store(self) -> SessionStore:
        """The session store in the settings' data home (imported on first use: it brings the brain's events)."""
        if self._store is None:
            from codling.store.index import SessionStore

            settings, _ = self._config()
            self._store = SessionStore(settings.home, self._redact)
        return self._store

    def _session(self, session_id: str) -> ServedSession:
        """The open (or still opening) session ``session_id`` (which the client, naming it, surely knows): -32602
        for a malformed id, -32002 for one not open here."""
        try:
            check_session_id(session_id)
        except InvalidSessionIdError as e:
            raise invalid_session_id(session_id, e) from e
        session = self._sessions.get(session_id)
        if session is None:
            raise not_found(session_id, "no open session has this id (it was closed, or never opened here)")
        session.known_to_client.set()
        return session

    async def _live_session(self, session_id: str) -> ServedSession:
        """``_session``, once it is live (the error that kept it from opening, if one did)."""
        session = self._session(session_id)
        await session.ready()
        return session

    async def _stored(self, session_id: str) -> SessionLog:
        """The stored session with exactly this id (no prefixes over ACP): -32602 for a malformed id, -32002 for
        one not on disk. A session still opening here is read once it is on disk."""
        try:
            check_session_id(session_id)
        except InvalidSessionIdError as e:
            raise invalid_session_id(session_id, e) from e
        if (opening := self._sessions.get(session_id)) is not None:
            with contextlib.suppress(RequestError):  # one that could not be opened is not on disk either
                await opening.ready()
        try:
            return self._session_store().read(session_id)  # an unreadable history is a SessionError too
        except UnknownSessionError as e:
            raise not_found(session_id, str(e)) from e
        except SessionHeldError as e:
            raise held(session_id, str(e)) from e
        except SessionError as e:
            raise RequestError.invalid_params({"sessionId": session_id, "message": str(e)}) from e

    def _home(self) -> Path:
        """The data home this agent reads (the environment's, if config.toml cannot be read), found once."""
        if self._data_home is None:
            try:
                self._data_home = cast(Path, self._settings_loader().home)
            except ConfigError:
                self._data_home = codling_home(self._environ)
        return self._data_home

    async def _warmed(self) -> None:
        """Return once the warm-up thread is done (at once when there is none)."""
        if self._warming is not None:
            await self._warming.wait()

    async def _start_servers(self, session: ServedSession) -> None:
        """Start the session's MCP servers and its first checkpoint once the warm-up is done (connecting imports
        pydantic-ai's MCP support); a turn waits for them anyway."""
        await self._warmed()
        if self._sessions.get(session.id) is session:  # not closed (or reopened) meanwhile
            session.brain.start_servers()
            session.brain.start_checkpoints()

    def _likely_model(self) -> str | None:
        """The model a new session would use (None: none is configured), read afresh: the warm-up thread calls
        this, so it touches none of the agent's state."""
        from codling.llm.providers import select_model

        try:
            settings = self._settings_loader()
            return select_model(self._cli_model, settings, load_catalog(user_catalog_file(settings.home))).info.id
        except ConfigError:
            return None

    async def _reopen(
        self,
        stored: SessionLog,
        cwd: str,
        additional_directories: list[str] | None,
        mcp_servers: list[Any] | None = None,
    ) -> ServedSession:
        from dataclasses import replace

        root = directory(cwd, "cwd")
        extra = tuple(directory(d, "additionalDirectories") for d in additional_directories or ())
        header = replace(stored.header, cwd=root, additional_dirs=extra or stored.header.additional_dirs)
        existing = self._sessions.pop(header.session_id, None)
        if existing is not None:
            await existing.close()
        return self._open(header, stored, [cwd, *(additional_directories or ())], mcp_servers)

    def _open(
        self,
        header: SessionHeader,
        stored: SessionLog | None,
        client_dirs: Sequence[str] = (),
        mcp_servers: list[Any] | None = None,
    ) -> ServedSession:
        """Make a session live now: its brain (restored from ``stored`` if given), its recorder, its forwarder, its
        MCP servers (the client's and config.toml's, started in the background); ``client_dirs`` are its
        directories as the client named them (before symbolic links are resolved)."""
        session = ServedSession(header.session_id)
        self._sessions[session.id] = session
        try:
            self._make_live(session, header, stored, client_dirs, mcp_servers)
        except Exception as e:  # nothing may wait for a session that will never be live
            del self._sessions[session.id]
            session.failed(e if isinstance(e, RequestError) else RequestError.internal_error({"details": str(e)}))
            raise
        return session

    def _open_later(
        self, header: SessionHeader, client_dirs: Sequence[str], mcp_servers: list[Any] | None
    ) -> ServedSession:
        """A new session, answered before it is live: its history and brain are made once the warm-up thread has
        imported them (their imports are most of a new session's cost, and the response need not wait for them).
        Requests naming it meanwhile wait (``ServedSession.ready``). It is made even if closed first (closing
        waits for it), so the session the client was told of is on disk."""
        session = ServedSession(header.session_id)
        self._sessions[session.id] = session

        async def opening() -> None:
            if self._warming is not None:
                await self._warming.session_path()
            try:
                self._make_live(session, header, None, client_dirs, mcp_servers)
            except RequestError as e:
                log.warning("session %s could not be opened: %s", session.id, e.data)
                session.failed(e)
            except Exception as e:  # a fault of codling's: said to the client at its next request, and logged
                log.exception("session %s could not be opened", session.id)
                session.failed(RequestError.internal_error({"details": f"the session could not be opened: {e}"}))

        self._spawn(opening())
        return session

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` in the background, kept until it ends."""
        task = asyncio.get_running_loop().create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _make_live(
        self,
        session: ServedSession,
        header: SessionHeader,
        stored: SessionLog | None,
        client_dirs: Sequence[str],
        mcp_servers: list[Any] | None,
    ) -> None:
        from codling.acp.client_ports import AcpApprover
        from codling.acp.mcp_specs import mcp_specs
        from codling.store.clock import now
        from codling.store.live import start_session

        settings, catalog = self._config()
        paths = ClientPaths(client_dirs)

        async def send_title(title: str) -> None:
            title = self._redact(title)  # a title is made from the prompt, which may hold a secret
            update = SessionInfoUpdate(session_update="session_info_update", title=title, updated_at=now())
            await self.client.session_update(session_id=header.session_id, update=update)

        try:
            live = start_session(
                self._session_store(),
                settings,
                catalog.get(stored.model if stored else header.model),
                header,
                stored,
                approver=AcpApprover(self.client, header.session_id, paths),
                model_factory=self._model_factory,
                on_title=send_title,
                mcp_servers=mcp_specs(mcp_servers),
                catalog=catalog,
                **self._ports(header.session_id, paths),
            )
        except SessionHeldError as e:
            raise held(header.session_id, str(e)) from e
        except (OSError, CodlingError) as e:
            raise RequestError.internal_error({"details": f"cannot open the session history: {e}"}) from e
        session.opened(live)
        session.brain.subscribe(self._forwarder(session, paths))
        self._spawn(self._start_servers(session))
        if stored is not None and stored.header.session_id == header.session_id:
            session.known_to_client.set()  # loaded or resumed: the client named it
        # After the response that introduces the session id (it is queued before this task first runs).
        session.introduction = asyncio.get_running_loop().create_task(self._introduce(session))

    def _ports(self, session_id: str, paths: ClientPaths) -> dict[str, Any]:
        """The editor's files (if it offers both reading and writing them) and terminals for a session (else
        the local ones); ``paths`` names files as the client does."""
        from codling.acp.client_ports import AcpFileSystem, AcpTerminal
        from codling.tools.local import LocalFileSystem

        caps = self._client_capabilities
        ports: dict[str, Any] = {}
        if caps.fs and caps.fs.read_text_file and caps.fs.write_text_file:
            ports["fs"] = AcpFileSystem(self.client, session_id, local=LocalFileSystem(), paths=paths)
        if caps.terminal:
            settings, _ = self._config()
            ports["terminal"] = AcpTerminal(
                self.client, session_id, environment=settings.env, allow=settings.command_env_allow
            )
        return ports

    async def _introduce(self, session: ServedSession) -> None:
        """What a client learns of a session once it knows it (see ``INTRODUCTION_DELAY``): its slash commands,
        how full its context is and what it has cost so far. Sent before the client named the session, it is
        sent again when it does (its first prompt at the latest), in case the client dropped it."""
        # asyncio.timeout, not wait_for: on Python 3.11 wait_for swallows a cancel that arrives as the client
        # names the session (close_session does), and a closed session would be introduced.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(INTRODUCTION_DELAY):
                await session.known_to_client.wait()
        blind = not session.known_to_client.is_set()
        await self._tell(session)
        if blind:
            await session.known_to_client.wait()
            await self._tell(session)

    async def _tell(self, session: ServedSession) -> None:
        await self._advertise_commands(session.id)
        await self._warmed()  # counting the context's tokens needs the tools' schemas and the tokenizer
        from codling.acp.translate import translate

        try:
            for update in translate(session.brain.context.usage_event("")):
                await self.client.session_update(session_id=session.id, update=update)
        except Exception:  # the client may be gone already
            log.debug("could not send the context's usage", exc_info=True)

    async def _advertise_commands(self, session_id: str) -> None:
        from codling.brain.slash import COMMAND_HINTS, COMMANDS

        commands = []
        for name, description in COMMANDS.items():
            hint = COMMAND_HINTS.get(name)
            takes = AvailableCommandInput(root=UnstructuredCommandInput(hint=hint)) if hint else None
            commands.append(AvailableCommand(name=name, description=description, input=takes))
        try:
            await self.client.session_update(session_id=session_id, update=helpers.update_available_commands(commands))
        except Exception:  # the client may be gone already; commands are a convenience
            log.debug("could not advertise commands", exc_info=True)

    def _forwarder(self, session: ServedSession, paths: ClientPaths) -> Any:
        from codling.acp.translate import ToolCards
        from codling.brain.events import SettingsChanged
        from codling.brain.redaction import EventRedactor

        # Secret values stay out of the editor (which may keep its threads on disk) as out of the history;
        # a turn's last event lets out whatever a delta held back.
        redactor = EventRedactor(self._redact)
        cards = ToolCards(paths, extras=self.newer.extras)

        async def forward(event: Event) -> None:
            for redacted_event in redactor.feed(event):
                for update in cards.translate(redacted_event):
                    await self._send_update(session.id, update)
            if isinstance(event, SettingsChanged):  # /model or /mode: the editor's pickers follow
                await self._send_settings(session, event.mode)

        return forward

    async def _send_update(self, session_id: str, update: Update | NewerUpdate) -> None:
        """Send one session update: the SDK's through its connection, the newer protocol's raw (in order)."""
        if isinstance(update, NewerUpdate):
            await self.newer.session_update(session_id, wire(update))
        else:
            await self.client.session_update(session_id=session_id, update=update)

    async def _send_settings(self, session: ServedSession, mode: PermissionMode | None) -> None:
        """Tell the client the session's mode (if it changed) and every config option's current value."""
        if mode is not None:
            await self.client.session_update(session_id=session.id, update=helpers.update_current_mode(mode))
        update = ConfigOptionUpdate(session_update="config_option_update", config_options=self._options(session))
        await self.client.session_update(session_id=session.id, update=update)

    # -- modes and config options ---------------------------------------------------------------------------

    def _modes(self, session: ServedSession) -> Any:
        return mode_state(session.brain.state.mode)

    def _model_ids(self, current: str) -> list[str]:
        """The model picker's models: those with credentials here, and ``current``."""
        from codling.llm.providers import available_models

        settings, catalog = self._config()
        return available_models(catalog, settings.env, current)

    def _options(self, session: ServedSession) -> list[Any]:
        state = session.brain.state
        return self._options_for(state.model, state.mode, state.thinking)

    def _options_for(self, model: ModelInfo, mode: PermissionMode, thinking: Thinking) -> list[Any]:
        """The config options of a session on ``model`` in ``mode`` with ``thinking`` (live or not yet)."""
        _, catalog = self._config()
        return config_options(
            model,
            self._model_ids(model.id),
            mode,
            thinking,
            booleans=takes_booleans(self._client_capabilities),
            order=[m.id for m in catalog],
        )
