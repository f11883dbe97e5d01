"""The ACP agent: session/* requests in, brain events out as session/update notifications.

Start-up is kept light: this module imports the ACP SDK and codling's foundation only. The brain (and with it
pydantic-ai and the provider SDKs) is imported when the first session is created, and warmed up in a
background thread right after ``initialize`` has been answered.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from acp import PROTOCOL_VERSION, RequestError, helpers
from acp.interfaces import Agent, Client
from acp.schema import (
    AgentCapabilities,
    AudioContentBlock,
    ClientCapabilities,
    ConfigOptionUpdate,
    EmbeddedResourceContentBlock,
    ImageContentBlock,
    Implementation,
    InitializeResponse,
    NewSessionResponse,
    PromptCapabilities,
    PromptResponse,
    ResourceContentBlock,
    SessionAdditionalDirectoriesCapabilities,
    SessionCapabilities,
    SessionConfigOptionSelect,
    SessionConfigSelectOption,
    SessionMode,
    SessionModeState,
    SetSessionConfigOptionResponse,
    SetSessionModeResponse,
    TextContentBlock,
    TextResourceContents,
)

from codling import __version__
from codling.acp.translate import translate
from codling.config import PERMISSION_MODES, PermissionMode, Settings, load_settings
from codling.errors import CodlingError, ConfigError
from codling.llm.catalog import Catalog, load_catalog
from codling.paths import user_catalog_file

if TYPE_CHECKING:
    from codling.brain.events import Event
    from codling.brain.prompt import PromptBlock
    from codling.brain.session import ConversationSession, ModelFactory

log = logging.getLogger(__name__)

MODE_DESCRIPTIONS: dict[PermissionMode, tuple[str, str]] = {
    "read-only": ("Read only", "Reads and searches; refuses edits and commands."),
    "ask": ("Ask", "Asks before every edit and command."),
    "accept-edits": ("Accept edits", "Edits files without asking; asks before commands."),
    "yolo": ("Yolo", "Edits and runs commands without asking."),
}

ContentBlock = (
    TextContentBlock | ImageContentBlock | AudioContentBlock | ResourceContentBlock | EmbeddedResourceContentBlock
)


@dataclass
class AcpSession:
    """One ACP session: the brain session behind it and the ACP-facing bits."""

    id: str
    brain: ConversationSession


def _warm_up() -> None:
    """Import the heavy modules a first prompt needs, off the event loop's critical path."""
    try:
        import codling.brain.session
        import codling.llm.providers  # noqa: F401
    except Exception:
        log.debug("warm-up import failed", exc_info=True)


class CodlingAgent:
    """codling's implementation of the ACP ``Agent`` protocol."""

    def __init__(
        self,
        *,
        settings_loader: Callable[[], Settings] = load_settings,
        model_factory: ModelFactory | None = None,
        cli_model: str | None = None,
        warm_up: bool = True,
    ) -> None:
        self._cli_model = cli_model
        self._settings_loader = settings_loader
        self._settings: Settings | None = None
        self._catalog: Catalog | None = None
        self._model_factory = model_factory
        self._warm_up = warm_up
        self._client: Client | None = None
        self._sessions: dict[str, AcpSession] = {}

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
        if self._settings is None or self._catalog is None:
            try:
                self._settings = self._settings_loader()
                self._catalog = load_catalog(user_catalog_file(self._settings.home))
            except ConfigError as e:
                raise RequestError.internal_error({"details": f"configuration error: {e}"}) from e
        return self._settings, self._catalog

    def _session(self, session_id: str) -> AcpSession:
        session = self._sessions.get(session_id)
        if session is None:
            raise RequestError.invalid_params({"sessionId": session_id, "message": "unknown session id"})
        return session

    # -- lifecycle ------------------------------------------------------------------------------------------

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: ClientCapabilities | None = None,
        client_info: Implementation | None = None,
        **kwargs: Any,
    ) -> InitializeResponse:
        """Answer with what codling implements; then warm up the brain in the background."""
        if self._warm_up:
            # Started after the reply is queued: the thread competes for the GIL only once the client has it.
            asyncio.get_running_loop().call_soon(
                threading.Thread(target=_warm_up, name="codling-warm-up", daemon=True).start
            )
        return InitializeResponse(
            protocol_version=min(protocol_version, PROTOCOL_VERSION),
            agent_capabilities=AgentCapabilities(
                load_session=False,
                prompt_capabilities=PromptCapabilities(embedded_context=True, image=False, audio=False),
                session_capabilities=SessionCapabilities(
                    additional_directories=SessionAdditionalDirectoriesCapabilities()
                ),
            ),
            agent_info=Implementation(name="codling", title="codling", version=__version__),
        )

    async def authenticate(self, method_id: str, **kwargs: Any) -> None:
        """codling advertises no auth methods: credentials come from the environment."""
        raise RequestError.invalid_params({"methodId": method_id, "message": "codling has no auth methods"})

    async def new_session(
        self,
        cwd: str,
        additional_directories: list[str] | None = None,
        mcp_servers: list[Any] | None = None,
        **kwargs: Any,
    ) -> NewSessionResponse:
        """Create a session working in ``cwd`` (which must be an absolute, existing directory)."""
        settings, catalog = self._config()
        root = _directory(cwd, "cwd")
        extra = tuple(_directory(d, "additionalDirectories") for d in additional_directories or ())
        from codling.acp.ports import AcpApprover
        from codling.brain.factory import open_session
        from codling.llm.providers import select_model

        try:
            choice = select_model(self._cli_model, settings, catalog)
        except ConfigError as e:
            raise RequestError.internal_error({"details": str(e)}) from e
        if not choice.info.known:
            log.warning(
                "model %s is in no catalog; assuming a %d-token context",
                choice.info.id,
                choice.info.context_limit,
            )
        session_id = _new_id()
        brain = open_session(
            settings,
            choice.info,
            root,
            approver=AcpApprover(self.client, session_id),
            additional_dirs=extra,
            model_factory=self._model_factory,
            session_id=session_id,
        )
        session = AcpSession(session_id, brain)
        brain.subscribe(self._forwarder(session_id))
        self._sessions[session_id] = session
        return NewSessionResponse(
            session_id=session_id, modes=self._modes(session), config_options=self._config_options(session)
        )

    def _forwarder(self, session_id: str) -> Callable[[Event], Any]:
        async def forward(event: Event) -> None:
            for update in translate(event):
                await self.client.session_update(session_id=session_id, update=update)

        return forward

    # -- modes and config options ---------------------------------------------------------------------------

    def _modes(self, session: AcpSession) -> SessionModeState:
        return SessionModeState(
            current_mode_id=session.brain.state.mode,
            available_modes=[
                SessionMode(id=mode, name=MODE_DESCRIPTIONS[mode][0], description=MODE_DESCRIPTIONS[mode][1])
                for mode in PERMISSION_MODES
            ],
        )

    def _model_ids(self, session: AcpSession) -> list[str]:
        from codling.llm.providers import has_credentials

        settings, catalog = self._config()
        current = session.brain.state.model.id
        ids = [current] + [m.id for m in catalog if m.id != current and has_credentials(m.id, settings.env)]
        return ids

    def _config_options(self, session: AcpSession) -> list[Any]:
        return [
            SessionConfigOptionSelect(
                type="select",
                id="model",
                name="Model",
                category="model",
                current_value=session.brain.state.model.id,
                options=[SessionConfigSelectOption(value=m, name=m) for m in self._model_ids(session)],
            ),
            SessionConfigOptionSelect(
                type="select",
                id="mode",
                name="Mode",
                category="mode",
                current_value=session.brain.state.mode,
                options=[
                    SessionConfigSelectOption(
                        value=m, name=MODE_DESCRIPTIONS[m][0], description=MODE_DESCRIPTIONS[m][1]
                    )
                    for m in PERMISSION_MODES
                ],
            ),
        ]

    async def set_session_mode(self, session_id: str, mode_id: str, **kwargs: Any) -> SetSessionModeResponse:
        """Switch the permission mode."""
        session = self._session(session_id)
        session.brain.set_mode(_mode(mode_id))
        # Clients that show the mode as a config option learn of the change too.
        update = ConfigOptionUpdate(session_update="config_option_update", config_options=self._config_options(session))
        await self.client.session_update(session_id=session_id, update=update)
        return SetSessionModeResponse()

    async def set_config_option(
        self, config_id: str, session_id: str, value: str | bool, **kwargs: Any
    ) -> SetSessionConfigOptionResponse:
        """Change the model or the mode; answers with every option's current value."""
        session = self._session(session_id)
        if config_id == "mode" and isinstance(value, str):
            session.brain.set_mode(_mode(value))
            await self.client.session_update(session_id=session_id, update=helpers.update_current_mode(value))
        elif config_id == "model" and isinstance(value, str):
            if value not in self._model_ids(session):
                raise RequestError.invalid_params({"value": value, "message": "not an available model"})
            _, catalog = self._config()
            session.brain.set_model(catalog.get(value))
        else:
            raise RequestError.invalid_params({"configId": config_id, "message": "unknown config option or value"})
        return SetSessionConfigOptionResponse(config_options=self._config_options(session))

    # -- prompts --------------------------------------------------------------------------------------------

    async def prompt(self, session_id: str, prompt: list[ContentBlock], **kwargs: Any) -> PromptResponse:
        """Run one turn; updates stream as session/update notifications while this request is pending."""
        session = self._session(session_id)
        if session.brain.running:
            raise RequestError.invalid_request({"message": "a prompt is already running in this session"})
        blocks, notes = await self._convert(session, prompt)
        for note in notes:
            await self.client.session_update(session_id=session_id, update=helpers.update_agent_message_text(note))
        from codling.brain.events import StopReason, TurnEnded

        stop_reason: StopReason = "end_turn"
        async for event in session.brain.stream(blocks):
            if isinstance(event, TurnEnded):
                stop_reason = event.stop_reason
        return PromptResponse(stop_reason=stop_reason)

    async def _convert(
        self, session: AcpSession, prompt: list[ContentBlock]
    ) -> tuple[tuple[PromptBlock, ...], list[str]]:
        """ACP content blocks → brain prompt blocks, plus notes for the user about anything not sent as is."""
        from codling.brain.prompt import ResourceBlock, TextBlock

        blocks: list[PromptBlock] = []
        notes: list[str] = []
        for block in prompt:
            if isinstance(block, TextContentBlock):
                blocks.append(TextBlock(block.text))
            elif isinstance(block, ResourceContentBlock):
                blocks.append(await self._read_link(session, block.uri))
            elif isinstance(block, EmbeddedResourceContentBlock):
                res = block.resource
                if isinstance(res, TextResourceContents):
                    blocks.append(ResourceBlock(res.uri, text=res.text))
                else:
                    note = "binary content is not supported; only its name was passed on"
                    blocks.append(ResourceBlock(res.uri, note=note))
                    notes.append(f"Note: {res.uri}: {note}.\n\n")
            else:
                kind = getattr(block, "type", "unknown")
                note = f"a {kind} attachment was not sent to the model: codling does not accept {kind} input yet"
                blocks.append(TextBlock(f"[The user attached {kind} content that could not be passed on.]"))
                notes.append(f"Note: {note}.\n\n")
        return tuple(blocks), notes

    async def _read_link(self, session: AcpSession, uri: str) -> PromptBlock:
        from codling.brain.prompt import ResourceBlock

        path = _path_from_uri(uri)
        if path is None:
            return ResourceBlock(uri, note="not a file; only its address was passed on")
        try:
            resolved = session.brain.deps.workspace.resolve(str(path))
            return ResourceBlock(uri, text=await session.brain.deps.fs.read_text(resolved))
        except CodlingError as e:
            return ResourceBlock(uri, note=f"could not be read: {e}")

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        """Stop the session's running turn; its prompt request answers ``cancelled``."""
        session = self._sessions.get(session_id)
        if session is not None:
            session.brain.cancel()

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """No extension methods are implemented."""
        raise RequestError.method_not_found(f"_{method}")

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        """Extension notifications are ignored."""


def _new_id() -> str:
    import uuid

    return uuid.uuid4().hex


def _mode(value: str) -> PermissionMode:
    if value not in PERMISSION_MODES:
        raise RequestError.invalid_params({"modeId": value, "message": f"choose one of {', '.join(PERMISSION_MODES)}"})
    return cast(PermissionMode, value)


def _directory(value: str, field: str) -> Path:
    path = Path(value)
    if not path.is_absolute():
        raise RequestError.invalid_params({field: value, "message": f"{field} must be an absolute path"})
    if not path.is_dir():
        raise RequestError.invalid_params({field: value, "message": f"{field} is not an existing directory"})
    return path.resolve()


def _path_from_uri(uri: str) -> Path | None:
    from urllib.parse import unquote, urlparse

    parsed = urlparse(uri)
    if parsed.scheme == "file":
        return Path(unquote(parsed.path))
    if parsed.scheme == "" and uri:
        return Path(uri)
    return None


async def serve(cli_model: str | None = None) -> None:
    """Serve ACP on stdin/stdout until the client closes the connection."""
    from acp import run_agent, stdio_streams
    from acp.core import DEFAULT_STDIO_BUFFER_LIMIT_BYTES
    from acp.task import MessageSender
    from acp.task.supervisor import TaskSupervisor

    from codling.acp.transport import TolerantTransport

    try:
        reader, writer = await stdio_streams(limit=DEFAULT_STDIO_BUFFER_LIMIT_BYTES)
    except ValueError:
        # stdin or stdout is a regular file (e.g. `codling acp < requests.jsonl > out.jsonl`), which asyncio's
        # pipe transports refuse; the SDK's thread-fed streams (its Windows path) work with any file.
        from acp.stdio import _windows_stdio_streams

        reader, writer = await _windows_stdio_streams(asyncio.get_running_loop(), DEFAULT_STDIO_BUFFER_LIMIT_BYTES)
    transport = TolerantTransport(reader, MessageSender(writer, TaskSupervisor(source="codling.acp")))
    # codling leaves out the Agent protocol methods it does not advertise (load, list, fork, resume, close);
    # the SDK router answers those with method-not-found.
    agent = cast(Agent, CodlingAgent(cli_model=cli_model))
    await run_agent(agent, transport, use_unstable_protocol=True)
