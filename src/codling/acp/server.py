"""The ACP agent: session/* requests in, brain events out as session/update notifications.

Start-up is kept light: this module imports the ACP SDK and codling's foundation only. The brain, the store
(and with them pydantic-ai and the provider SDKs) are imported when the first session is opened, and warmed up
in a background thread right after ``initialize`` has been answered.
"""

from __future__ import annotations

import asyncio
import logging
import re
from typing import TYPE_CHECKING, Any

from acp import PROTOCOL_VERSION, RequestError, helpers
from acp.schema import (
    AgentAuthCapabilities,
    AgentCapabilities,
    AuthenticateResponse,
    ClientCapabilities,
    ConfigOptionUpdate,
    DeleteSessionRequest,
    ForkSessionResponse,
    Implementation,
    InitializeResponse,
    ListSessionsResponse,
    LoadSessionResponse,
    LogoutCapabilities,
    LogoutRequest,
    McpCapabilities,
    NewSessionResponse,
    PromptCapabilities,
    PromptResponse,
    ResumeSessionResponse,
    SessionAdditionalDirectoriesCapabilities,
    SessionCapabilities,
    SessionCloseCapabilities,
    SessionDeleteCapabilities,
    SessionForkCapabilities,
    SessionInfo,
    SessionListCapabilities,
    SessionResumeCapabilities,
    SetSessionConfigOptionResponse,
    SetSessionModeResponse,
)

from codling import __version__
from codling.acp.auth import auth_methods, auth_required, check_method, keyed_by
from codling.acp.client_paths import ClientPaths
from codling.acp.config_options import (
    OPTION_IDS,
    mode_state,
    mode_value,
    parse_mode,
    refused,
    thinking_value,
    thought_level_value,
)
from codling.acp.newer import RENAMED, newer_params
from codling.acp.rpc_errors import (
    absolute,
    busy,
    directory,
    failure,
    held,
    resolved,
    shown,
    turn_error,
)
from codling.acp.warmup import WarmUp
from codling.errors import (
    ConfigError,
    NoModelError,
    SessionError,
    SessionHeldError,
    StoreError,
)
from codling.store.ids import is_session_id

if TYPE_CHECKING:
    from codling.acp.content import ContentBlock
    from codling.acp.served import ServedSession
    from codling.brain.events import Usage
from codling.acp.agent_core import AgentCore

log = logging.getLogger(__name__)

LIST_PAGE_SIZE = 50
_CURSOR = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)@([0-9a-f-]{21})", re.ASCII)
"""A session/list cursor: the last listed session's ``updated_at`` and id."""

MAX_WAITING_PROMPTS = 16
"""How many prompts may wait behind a session's running turn; one more is refused as busy (a client sending
more is not waiting for answers)."""

SUPPORTED_PROTOCOL_VERSIONS = frozenset({PROTOCOL_VERSION})
"""The ACP protocol versions codling speaks (``PROTOCOL_VERSION`` is the latest)."""


class CodlingAgent(AgentCore):
    """codling's implementation of the ACP ``Agent`` protocol."""

    # -- lifecycle ------------------------------------------------------------------------------------------

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: ClientCapabilities | None = None,
        client_info: Implementation | None = None,
        **kwargs: Any,
    ) -> InitializeResponse:
        """Answer with what codling implements; then warm up the brain in the background."""
        self._client_capabilities = client_capabilities or ClientCapabilities()
        if self._warm_up:
            # Started after the reply is queued: the thread competes for the GIL only once the client has it.
            self._warming = WarmUp(self._likely_model)
            asyncio.get_running_loop().call_soon(self._warming.start)
        # ACP version negotiation: a version codling supports is echoed, any other gets codling's latest (the
        # client then decides whether it can speak that).
        # (A version that is not an integer reaches here as 1: the SDK maps it so, as ACP's Rust SDK maps the
        # date strings older clients send to 0, rather than refuse the connection.)
        supported = protocol_version in SUPPORTED_PROTOCOL_VERSIONS
        return InitializeResponse(
            protocol_version=protocol_version if supported else PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(
                load_session=True,
                prompt_capabilities=PromptCapabilities(embedded_context=True, image=True, audio=False),
                mcp_capabilities=McpCapabilities(http=True, sse=True),
                session_capabilities=SessionCapabilities(
                    list=SessionListCapabilities(),
                    resume=SessionResumeCapabilities(),
                    fork=SessionForkCapabilities(),
                    close=SessionCloseCapabilities(),
                    delete=SessionDeleteCapabilities(),
                    additional_directories=SessionAdditionalDirectoriesCapabilities(),
                ),
                auth=AgentAuthCapabilities(logout=LogoutCapabilities()),
            ),
            agent_info=Implementation(name="codling", title="codling", version=__version__),
            auth_methods=list(auth_methods(self._client_capabilities, self._home())),
        )

    async def authenticate(self, method_id: str, **kwargs: Any) -> AuthenticateResponse:
        """Take up the keys ``codling login`` stored (it ran in the editor's terminal) for the variables the
        environment does not set; succeed once a model has a key, auth_required saying what to do if not."""
        from codling.credentials import apply
        from codling.llm.providers import has_credentials, select_model
        from codling.secrecy import redact_in_logs

        check_method(method_id)
        _, catalog = self._config()
        try:
            added = apply(self._environ)
        except ConfigError as e:
            raise auth_required(str(e)) from e
        keys = [self._environ[name] for name in added]
        self._redact.add(keys)  # the store's and the editor's text lose them too: they share this redactor
        redact_in_logs(keys)
        try:
            self._settings = settings = self._settings_loader()  # with the keys and the model chosen at login
            choice = select_model(self._cli_model, settings, catalog)
        except ConfigError as e:
            raise auth_required(str(e)) from e
        if self._model_factory is None and not has_credentials(choice.info.id, settings.env):
            raise auth_required(
                f"the model {choice.info.id} (from {choice.source}) has no key yet: run `codling login` and paste "
                "its provider's key, or choose another model"
            )
        return AuthenticateResponse()

    async def logout(self) -> None:
        """Remove the keys ``codling login`` stored (``credentials.forget``, as ``codling logout`` does) and take
        them out of the agent's environment; a variable the environment set to another value stays and keeps
        working. Sessions and models chosen from then on need a key again (auth_required, so the editor offers
        its sign-in); an open session whose model was built with a removed key builds it again at its next turn,
        which fails with auth_required rather than go on with that key. Open sessions' model pickers are sent
        again without the models that lost their key."""
        from codling.credentials import forget

        try:
            removed = forget(self._home(), environ=self._environ)
        except (OSError, ConfigError) as e:
            raise RequestError.internal_error({"details": f"cannot remove the keys codling login stored: {e}"}) from e
        if self._settings is not None:  # the environment and the model chosen at login (gone now)
            try:
                self._settings = self._settings_loader()
            except ConfigError as e:
                details = f"the stored keys were removed, but the settings cannot be read again: {e}"
                raise RequestError.internal_error({"details": details}) from e
        for session in list(self._sessions.values()):
            try:
                await session.ready()  # one still opening is live in a moment
            except RequestError:
                continue  # one that could not be opened has no model
            if keyed_by(session.brain.state.model.id, removed):
                if session.brain.running:
                    session.stale_model = True  # its turn goes on; the next one builds the model afresh
                else:
                    session.brain.set_model(session.brain.state.model)  # built again when next needed
            try:  # its model picker keeps only the models that still have a key
                await self._send_settings(session, None)
            except Exception:  # the client may be gone already
                log.debug("could not send the options after logout", exc_info=True)

    async def new_session(
        self,
        cwd: str,
        additional_directories: list[str] | None = None,
        mcp_servers: list[Any] | None = None,
        **kwargs: Any,
    ) -> NewSessionResponse:
        """Create a session working in ``cwd`` (which must be an absolute, existing directory)."""
        settings, catalog = self._config()
        root = directory(cwd, "cwd")
        extra = tuple(directory(d, "additionalDirectories") for d in additional_directories or ())
        from codling.brain.thinking import Thinking
        from codling.llm.providers import has_credentials, local_server_url, select_model
        from codling.store.header import SessionHeader
        from codling.store.ids import new_session_id
        from codling.store.root import check_writable, sessions_root

        try:
            if local_server_url(settings.env) is not None:
                # Choosing may ask the server for its models: off the loop, so other requests are answered.
                choice = await asyncio.to_thread(select_model, self._cli_model, settings, catalog)
            else:
                choice = select_model(self._cli_model, settings, catalog)
        except NoModelError as e:
            raise auth_required(str(e)) from e
        except ConfigError as e:
            raise RequestError.internal_error({"details": str(e)}) from e
        if self._model_factory is None and not has_credentials(choice.info.id, settings.env):
            # An injected model factory builds models without the provider's credentials.
            raise auth_required(
                f"the model {choice.info.id} (from {choice.source}) has no credentials: run `codling login` in a "
                "terminal, set its provider's key in the environment codling starts in, or choose another model"
            )
        if choice.note is not None:
            log.warning("%s", choice.note)  # the model picker shows the model; the log says why it was chosen
        if not choice.info.known:
            log.warning(
                "model %s is in no catalog; assuming a %d-token context", choice.info.id, choice.info.context_limit
            )
        # What the user's setup can make fail is checked before the answer; the rest of opening comes after it.
        try:
            check_writable(sessions_root(settings.home))
        except StoreError as e:
            raise RequestError.internal_error({"details": f"cannot open the session history: {e}"}) from e
        header = SessionHeader(new_session_id(), root, choice.info.id, settings.mode, extra)
        session = self._open_later(header, [cwd, *(additional_directories or ())], mcp_servers)
        if settings.greeting:
            try:
                await session.ready()
            except RequestError:
                del self._sessions[session.id]  # never answered: the client does not know it
                raise
            await self._warmed()  # the greeting runs a model turn
            session.greet()  # shown after this response, before the first prompt's turn
        elif self._warming is not None:
            asyncio.get_running_loop().call_soon(self._warming.release)  # the model stack, once this is answered
        # Answered from the settings, as the session will start: its brain is made after this response.
        return NewSessionResponse(
            session_id=session.id,
            modes=mode_state(header.mode),
            config_options=self._options_for(catalog.get(header.model), header.mode, Thinking()),
        )

    async def load_session(
        self,
        cwd: str,
        session_id: str,
        mcp_servers: list[Any] | None = None,
        additional_directories: list[str] | None = None,
        **kwargs: Any,
    ) -> LoadSessionResponse:
        """Replay the whole conversation as session/update notifications, then continue it."""
        from codling.acp.replay import replay_updates

        stored = await self._stored(session_id)
        await self._warmed()  # restoring builds the model's messages
        session = await self._reopen(stored, cwd, additional_directories, mcp_servers)
        paths = ClientPaths([cwd, *(additional_directories or ())])
        for update in replay_updates(stored.events, paths, self.newer.extras):
            await self._send_update(session.id, update)
        return LoadSessionResponse(modes=self._modes(session), config_options=self._options(session))

    async def resume_session(
        self,
        session_id: str,
        cwd: str,
        additional_directories: list[str] | None = None,
        mcp_servers: list[Any] | None = None,
        **kwargs: Any,
    ) -> ResumeSessionResponse:
        """Continue a stored session without replaying it."""
        stored = await self._stored(session_id)
        await self._warmed()  # restoring builds the model's messages
        session = await self._reopen(stored, cwd, additional_directories, mcp_servers)
        return ResumeSessionResponse(modes=self._modes(session), config_options=self._options(session))

    async def fork_session(
        self,
        session_id: str,
        cwd: str,
        additional_directories: list[str] | None = None,
        mcp_servers: list[Any] | None = None,
        **kwargs: Any,
    ) -> ForkSessionResponse:
        """A new session holding the history so far of ``session_id`` (which records it as its parent)."""
        from codling.store.ids import new_session_id

        source = await self._stored(session_id)
        store = self._session_store()
        try:
            forked = store.fork(source.header.session_id, new_session_id(), directory(cwd, "cwd"))
        except SessionHeldError as e:
            raise held(session_id, str(e)) from e
        except SessionError as e:
            raise RequestError.invalid_params({"sessionId": session_id, "message": str(e)}) from e
        except (OSError, ConfigError) as e:  # ConfigError: a store that cannot be written (StoreError)
            raise RequestError.internal_error({"details": f"cannot fork session {session_id}: {e}"}) from e
        await self._warmed()  # restoring builds the model's messages
        session = await self._reopen(forked, cwd, additional_directories, mcp_servers)
        return ForkSessionResponse(
            session_id=session.id, modes=self._modes(session), config_options=self._options(session)
        )

    async def close_session(self, session_id: str, **kwargs: Any) -> None:
        """Cancel any running turn and free the session; later prompts on it are errors."""
        session = self._session(session_id)
        del self._sessions[session_id]
        await session.close()

    async def delete_session(self, session_id: str) -> None:
        """Delete a stored session for good, closing it first if it is open here (``acp/deletion.py``)."""
        from codling.acp.deletion import delete_session

        store = self._session_store()
        await delete_session(session_id, self._sessions, store)

    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None, **kwargs: Any
    ) -> ListSessionsResponse:
        """Sessions on disk (a fresh process sees every one), newest first, optionally only those in ``cwd``. The
        cursor names the last session of the page before (``updated_at@id``), so a page costs the same wherever
        it starts, and sessions made meanwhile shift nothing."""
        store = self._session_store()
        after = None
        if cursor:
            match = _CURSOR.fullmatch(cursor)
            if match is None or not is_session_id(match[2]):
                raise RequestError.invalid_params({"cursor": shown(cursor), "message": "not a cursor codling gave out"})
            after = (match[1], match[2])
        where = resolved(absolute(cwd, "cwd"), "cwd") if cwd else None
        page, following = store.page(where, after, LIST_PAGE_SIZE)
        return ListSessionsResponse(
            sessions=[
                SessionInfo(session_id=s.session_id, cwd=str(s.cwd), title=s.title, updated_at=s.updated_at)
                for s in page
            ],
            next_cursor=f"{following[0]}@{following[1]}" if following is not None else None,
        )

    # -- modes and config options ---------------------------------------------------------------------------

    async def set_session_mode(self, session_id: str, mode_id: str, **kwargs: Any) -> SetSessionModeResponse:
        """Switch the permission mode."""
        session = await self._live_session(session_id)
        self._set_mode(session, mode_id)
        # Clients that show the mode as a config option learn of the change too.
        update = ConfigOptionUpdate(session_update="config_option_update", config_options=self._options(session))
        await self.client.session_update(session_id=session_id, update=update)
        return SetSessionModeResponse()

    def _set_mode(self, session: ServedSession, mode_id: str) -> None:
        session.live.set_mode(parse_mode(mode_id))

    async def set_config_option(
        self, config_id: str, session_id: str, value: str | bool, **kwargs: Any
    ) -> SetSessionConfigOptionResponse:
        """Change the model, the mode, thinking (a boolean, or "on"/"off" from a client that got it as a select)
        or the thought level; answers with every option's current value. A value an option does not take is
        refused (-32602) saying what it takes."""
        from dataclasses import replace

        session = await self._live_session(session_id)
        state = session.brain.state
        match config_id:
            case "mode":
                mode = mode_value(value)
                self._set_mode(session, mode)
                await self.client.session_update(session_id=session_id, update=helpers.update_current_mode(mode))
            case "model":
                available = self._model_ids(state.model.id)
                if not isinstance(value, str) or value not in available:
                    raise refused(
                        config_id,
                        value,
                        "not an available model: choose a value of the model picker (models whose "
                        "provider has credentials in codling's environment)",
                    )
                _, catalog = self._config()
                session.live.set_model(catalog.get(value))
            case "thinking" | "thought_level" if not state.model.thinking:
                raise refused(
                    config_id,
                    value,
                    f"{state.model.id} is not a thinking model in codling's catalog: switch to one that is, or, if it "
                    'can think, give it "thinking": true in $CODLING_HOME/models.json',
                )
            case "thinking":
                session.live.set_thinking(replace(state.thinking, on=thinking_value(value)))
            case "thought_level":
                session.live.set_thinking(replace(state.thinking, level=thought_level_value(value)))
            case _:
                raise refused(config_id, value, f"unknown config option: codling's are {', '.join(OPTION_IDS)}")
        return SetSessionConfigOptionResponse(config_options=self._options(session))

    # -- prompts --------------------------------------------------------------------------------------------

    async def prompt(self, session_id: str, prompt: list[ContentBlock], **kwargs: Any) -> PromptResponse:
        """Run one turn; updates stream as session/update notifications while this request is pending. A prompt
        sent while another runs waits for it (and any sent before it), then runs: prompts are queued in arrival
        order, up to ``MAX_WAITING_PROMPTS``."""
        session = self._session(session_id)
        if session.waiting >= MAX_WAITING_PROMPTS:
            raise busy(session_id, session.waiting)
        async with session.turn_slot() as go:
            if not go or self._sessions.get(session_id) is not session:
                return PromptResponse(stop_reason="cancelled")  # cancelled, or closed, while it waited
            return await self._run_prompt(session, prompt)

    async def _run_prompt(self, session: ServedSession, prompt: list[ContentBlock]) -> PromptResponse:
        from codling.acp.content import to_prompt
        from codling.brain.events import TurnEnded, TurnFailed
        from codling.vocabulary import StopReason

        session_id = session.id
        session.preparing_prompt, session.cancel_pending = True, False
        if session.introduction is not None:  # the commands reach the client before the turn's updates
            await asyncio.wait([session.introduction])
        try:
            deps = session.brain.deps
            blocks, notes = await to_prompt(prompt, deps.workspace, deps.fs, model=session.brain.state.model)
            for note in notes:
                update = helpers.update_agent_message_text(note)
                await self.client.session_update(session_id=session_id, update=update)
            await session.greeted()  # the greeting comes first in the history and in the client
        finally:
            session.preparing_prompt = False
        if session.cancel_pending or self._sessions.get(session_id) is not session:
            return PromptResponse(stop_reason="cancelled")  # cancelled, or closed, while it was prepared
        stop_reason: StopReason = "end_turn"
        failed: TurnFailed | None = None
        spent: Usage | None = None
        await self._warmed()
        if session.stale_model:  # logout removed its model's key during the last turn
            session.stale_model = False
            session.brain.set_model(session.brain.state.model)
        async for event in session.brain.stream(blocks):
            if isinstance(event, TurnEnded):
                stop_reason, spent = event.stop_reason, event.usage
            elif isinstance(event, TurnFailed):
                failed = event
        if failed is not None and stop_reason != "cancelled":
            # Recorded in the history already; the editor shows this error (with a retry) instead of a reply.
            raise turn_error(failed, self._redact)
        if (problem := session.live.recorder.file.problem) is not None:  # e.g. the disk is full: the user must act
            raise failure(problem, problem)
        # ACP has no stop reason for a spending cap; it is a limit the agent set, as a request limit is.
        acp_stop = "max_turn_requests" if stop_reason == "max_cost" else stop_reason
        from codling.acp.translate import prompt_usage

        return PromptResponse(stop_reason=acp_stop, usage=prompt_usage(spent))

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        """Stop the session's running turn; its prompt request answers ``cancelled``. A notification: a
        malformed or unknown id is only logged."""
        self.cancel_prompt(session_id)

    def cancel_prompt(self, session_id: str) -> None:
        """session/cancel, or ``$/cancel_request`` naming a pending prompt of ``session_id``."""
        session = self._sessions.get(session_id)
        if session is not None:
            session.cancel()
        else:
            log.info("session/cancel for %r, which is not an open session", shown(session_id))

    async def shutdown(self) -> None:
        """Close every open session (the client is gone): running turns are cancelled, histories released."""
        sessions, self._sessions = list(self._sessions.values()), {}
        for session in sessions:
            await session.close()

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """The newer protocol's requests the SDK has no route for (``acp/newer.py``): ``session/delete`` and
        ``logout``, each answered ``{}``. No extension methods of codling's own are implemented."""
        if method == f"{RENAMED}session/delete":
            await self.delete_session(newer_params(DeleteSessionRequest, "session/delete", params).session_id)
            return {}
        if method == f"{RENAMED}logout":
            newer_params(LogoutRequest, "logout", params)
            await self.logout()
            return {}
        raise RequestError.method_not_found(f"_{method}")

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        """Extension notifications are ignored."""
