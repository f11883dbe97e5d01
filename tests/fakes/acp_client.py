"""A recording ACP client, and an in-process harness connecting it to codling's agent through the real SDK."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from acp import CLIENT_METHODS, Agent, RequestError
from acp._transport import memory_transport_pair  # the SDK's own in-process pair (its HTTP server uses it)
from acp.agent.connection import AgentSideConnection
from acp.client.connection import ClientSideConnection
from acp.connection import StreamDirection, StreamEvent
from acp.schema import (
    AllowedOutcome,
    CreateElicitationResponse,
    CreateTerminalResponse,
    DeniedOutcome,
    ElicitationMode,
    EnvVariable,
    PermissionOption,
    ReadTextFileResponse,
    RequestPermissionResponse,
    TerminalOutputResponse,
    ToolCallUpdate,
    WaitForTerminalExitResponse,
)

from codling.acp.server import CodlingAgent
from tests.fakes.deadlines import deadline
from tests.fakes.editor import FakeEditor

METADATA_UPDATES = frozenset(
    {"session_info_update", "available_commands_update", "usage_update", "current_mode_update", "config_option_update"}
)


@dataclass
class PermissionCall:
    """One session/request_permission the client received."""

    session_id: str
    tool_call: ToolCallUpdate
    options: list[PermissionOption]
    updates_before: int = 0
    """How many session/update notifications the client had received when the request arrived."""


@dataclass
class RecordingClient:
    """Records session/update notifications; answers permission requests from a script of option ids.

    An answer of ``None`` leaves the request pending until ``release`` is set (to test cancellation).
    """

    answers: list[str | None] = field(default_factory=list)
    updates: list[tuple[str, Any]] = field(default_factory=list)
    permissions: list[PermissionCall] = field(default_factory=list)
    release: asyncio.Event = field(default_factory=asyncio.Event)
    asked: asyncio.Event = field(default_factory=asyncio.Event)
    """Set once a permission request has arrived (a test waits on it instead of polling ``permissions``)."""
    update_seen: asyncio.Event = field(default_factory=asyncio.Event)
    editor: FakeEditor | None = None
    """Serves fs/* and terminal/* when set (the client must also say so in its capabilities)."""
    problems: list[str] = field(default_factory=list)
    """Updates a real editor would reject (e.g. naming a released terminal)."""
    shown_before_release: dict[str, bool] = field(default_factory=dict)
    """Per terminal: whether a tool call update had shown it by the time the agent released it."""
    statuses: dict[str, str] = field(default_factory=dict)
    """Each tool call's status as the editor shows it: the agent's, or "rejected" and "cancelled", which Zed
    sets itself when the user rejects a call or cancels the turn."""
    started: set[tuple[str, str]] = field(default_factory=set)
    """The tool calls (session id, call id) whose ``tool_call`` arrived: Zed knows no others."""
    terminal_labels: dict[str, str] = field(default_factory=dict)
    """Each terminal's label as Zed shows it: the program and arguments it ran, then the title of a later
    update of an ``execute`` call showing it."""
    call_kinds: dict[tuple[str, str], str] = field(default_factory=dict)
    call_terminals: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    newer_updates: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    """The session updates of the newer protocol (``notice``, ``compaction_update``, …), raw as they came: the
    SDK's models cannot hold them, so ``session_update`` never sees them."""

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update))
        self.update_seen.set()
        for content in getattr(update, "content", None) or ():
            terminal_id = getattr(content, "terminal_id", None)
            if terminal_id is not None and (self.editor is None or not self.editor.showable(terminal_id)):
                # Zed drops such an update: it knows no released (or unknown) terminal.
                self.problems.append(f"update names terminal {terminal_id}, which the editor no longer has")
        self._check_tool_call(session_id, update)

    def _check_tool_call(self, session_id: str, update: Any) -> None:
        """What Zed's thread would make of a tool call update: unknown calls (Zed shows a "Tool call not found"
        error), overwritten user decisions, raw diffs shown as text, relative paths; and how it labels terminals."""
        kind = update.session_update
        if kind not in ("tool_call", "tool_call_update"):
            return
        call_id = update.tool_call_id
        if kind == "tool_call":
            self.started.add((session_id, call_id))
        elif (session_id, call_id) not in self.started:
            self.problems.append(f"update for tool call {call_id}, which the editor never saw start")
            return
        self._label_terminals((session_id, call_id), update)
        if kind == "tool_call_update" and update.status and self.statuses.get(call_id) in ("rejected", "cancelled"):
            self.problems.append(
                f"tool call {call_id} was {self.statuses[call_id]} by the user, then set to {update.status}"
            )
        decided = self.statuses.get(call_id) in ("rejected", "cancelled")
        if (update.status or kind == "tool_call") and not decided:
            self.statuses[call_id] = update.status or "pending"
        for content in update.content or ():
            if content.type == "diff" and not content.path.startswith("/"):
                self.problems.append(f"diff of {call_id} names the relative path {content.path}")
            text = getattr(getattr(content, "content", None), "text", "") or ""
            if content.type == "content" and text.startswith(("--- ", "diff --git")):
                self.problems.append(f"tool call {call_id} shows a raw unified diff as text")
        for location in update.locations or ():
            if not location.path.startswith("/") or (location.line is not None and location.line < 1):
                self.problems.append(f"tool call {call_id} has the location {location.path}:{location.line}")

    def _label_terminals(self, call: tuple[str, str], update: Any) -> None:
        """Zed's ``update_fields``: a title relabels the terminals the call shows already (it is applied
        before the update's own content)."""
        if update.kind is not None:
            self.call_kinds[call] = update.kind
        if update.title is not None and self.call_kinds.get(call) == "execute":
            for terminal_id in self.call_terminals.get(call, ()):
                self.terminal_labels[terminal_id] = update.title
        for content in update.content or ():
            if content.type == "terminal":
                self.call_terminals.setdefault(call, []).append(content.terminal_id)

    def cancelled(self) -> None:
        """The user cancelled the turn: the editor marks every call still pending or running as cancelled."""
        for call_id, status in self.statuses.items():
            if status in ("pending", "in_progress"):
                self.statuses[call_id] = "cancelled"

    async def request_permission(
        self, session_id: str, tool_call: ToolCallUpdate, options: list[PermissionOption], **kwargs: Any
    ) -> RequestPermissionResponse:
        self.permissions.append(PermissionCall(session_id, tool_call, options, len(self.updates)))
        self.asked.set()
        answer = self.answers.pop(0) if self.answers else "reject"
        if answer is None:
            await self.release.wait()
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        if answer == "reject":
            self.statuses[tool_call.tool_call_id] = "rejected"
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=answer))

    def _editor(self, method: str) -> FakeEditor:
        if self.editor is None:
            raise RequestError.method_not_found(method)
        return self.editor

    async def write_text_file(self, session_id: str, path: str, content: str, **kwargs: Any) -> None:
        await self._editor("fs/write_text_file").write_text_file(session_id, path, content, **kwargs)

    async def read_text_file(
        self, session_id: str, path: str, line: int | None = None, limit: int | None = None, **kwargs: Any
    ) -> ReadTextFileResponse:
        return await self._editor("fs/read_text_file").read_text_file(session_id, path, line, limit, **kwargs)

    async def create_terminal(
        self,
        session_id: str,
        command: str,
        args: list[str] | None = None,
        env: list[EnvVariable] | None = None,
        cwd: str | None = None,
        output_byte_limit: int | None = None,
        **kwargs: Any,
    ) -> CreateTerminalResponse:
        created = await self._editor("terminal/create").create_terminal(
            session_id, command, args=args, env=env, cwd=cwd, output_byte_limit=output_byte_limit, **kwargs
        )
        self.terminal_labels[created.terminal_id] = " ".join([command, *(args or [])])  # as Zed labels it
        return created

    def shown_terminal_labels(self) -> list[str]:
        """The labels of the terminals shown in tool calls, in order, as Zed heads their cards."""
        ids = [terminal_id for terminals in self.call_terminals.values() for terminal_id in terminals]
        return [self.terminal_labels[terminal_id] for terminal_id in ids if terminal_id in self.terminal_labels]

    async def terminal_output(self, session_id: str, terminal_id: str, **kwargs: Any) -> TerminalOutputResponse:
        return await self._editor("terminal/output").terminal_output(session_id, terminal_id, **kwargs)

    async def wait_for_terminal_exit(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> WaitForTerminalExitResponse:
        return await self._editor("terminal/wait_for_exit").wait_for_terminal_exit(session_id, terminal_id, **kwargs)

    async def kill_terminal(self, session_id: str, terminal_id: str, **kwargs: Any) -> None:
        await self._editor("terminal/kill").kill_terminal(session_id, terminal_id, **kwargs)

    async def release_terminal(self, session_id: str, terminal_id: str, **kwargs: Any) -> None:
        editor = self._editor("terminal/release")
        self.shown_before_release[terminal_id] = any(
            getattr(c, "terminal_id", None) == terminal_id
            for u in self.of_kind("tool_call_update")
            for c in u.content or ()
        )
        await editor.release_terminal(session_id, terminal_id, **kwargs)

    # Elicitation and extension methods: not offered, answered as the SDK answers a client without them.

    async def create_elicitation(self, message: str, mode: ElicitationMode, **kwargs: Any) -> CreateElicitationResponse:
        raise RequestError.method_not_found(CLIENT_METHODS["elicitation_create"])

    async def complete_elicitation(self, elicitation_id: str, **kwargs: Any) -> None:
        raise RequestError.method_not_found(CLIENT_METHODS["elicitation_complete"])

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise RequestError.method_not_found(f"_{method}")

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None

    async def wait_for(self, kind: str, count: int = 1, timeout: float = 10) -> None:
        """Wait until at least ``count`` updates of one kind have arrived."""
        async with asyncio.timeout(deadline(timeout)):
            while len(self.of_kind(kind)) < count:
                self.update_seen.clear()
                await self.update_seen.wait()

    def conversation(self) -> list[Any]:
        """The updates that make up the conversation itself (no session metadata such as titles, commands,
        usage or mode changes), in order."""
        return [u for _, u in self.updates if u.session_update not in METADATA_UPDATES]

    def of_kind(self, kind: str) -> list[Any]:
        """The updates of one sessionUpdate kind, in order (the newer protocol's as raw dicts)."""
        if kind not in SDK_UPDATES:
            return [u for _, u in self.newer_updates if u.get("sessionUpdate") == kind]
        return [u for _, u in self.updates if u.session_update == kind]

    def of_kind_raw(self, kind: str) -> list[tuple[str, dict[str, Any]]]:
        """The newer protocol's updates of one kind with their session ids, in order."""
        return [(s, u) for s, u in self.newer_updates if u.get("sessionUpdate") == kind]

    def agent_text(self) -> str:
        """All agent_message_chunk text joined."""
        return "".join(u.content.text for u in self.of_kind("agent_message_chunk"))

    def on_connect(self, conn: Agent) -> None:
        pass


@dataclass
class Arrivals:
    """The JSON-RPC methods that reached the agent, in order, as the SDK's stream observer reports them.

    The agent starts handling a message before anything that arrives after it, so once ``received`` returns, a
    test knows that whatever it sends next reaches the agent later (a cancel before an editor's late answer, a
    first prompt before a second).
    """

    methods: list[str] = field(default_factory=list)
    _arrived: asyncio.Event = field(default_factory=asyncio.Event)

    def __call__(self, event: StreamEvent) -> None:
        if event.direction is StreamDirection.INCOMING and "method" in event.message:
            self.methods.append(event.message["method"])
            self._arrived.set()

    async def received(self, method: str, count: int = 1, within: float = 10.0) -> None:
        """Wait until the agent has received ``method`` ``count`` times (within a liveness deadline)."""
        async with asyncio.timeout(deadline(within)):
            while self.methods.count(method) < count:
                self._arrived.clear()
                await self._arrived.wait()


SETTLED = frozenset({"completed", "failed"})


@dataclass
class ZedReading:
    """Watches the client's end of the stream, in wire order, for what Zed's code would show wrong: a
    session/load replay that leaves a tool call pending or running (nothing later settles it), and a failed
    ``session/prompt`` whose error ``data`` is not exactly ``{"details": …}`` (Zed shows any other shape as a
    raw chain of errors). What it finds goes to ``problems`` (the client's, checked when the harness ends)."""

    problems: list[str]
    _requests: dict[Any, tuple[str, str | None]] = field(default_factory=dict)
    _replays: dict[str, dict[str, str]] = field(default_factory=dict)
    """Per session being loaded: each replayed call's last status."""

    def __call__(self, event: StreamEvent) -> None:
        message = event.message
        given = message.get("params")
        params: dict[str, Any] = given if isinstance(given, dict) else {}
        if event.direction is StreamDirection.OUTGOING and "method" in message and "id" in message:
            session_id = params.get("sessionId")
            self._requests[message["id"]] = (message["method"], session_id)
            if message["method"] == "session/load" and isinstance(session_id, str):
                self._replays[session_id] = {}
        elif event.direction is StreamDirection.INCOMING and message.get("method") == "session/update":
            self._replayed(params.get("sessionId"), params.get("update") or {})
        elif event.direction is StreamDirection.INCOMING and "method" not in message and "id" in message:
            method, session_id = self._requests.pop(message["id"], ("", None))
            if method == "session/load" and session_id is not None:
                for call_id, status in self._replays.pop(session_id, {}).items():
                    if status not in SETTLED:
                        self.problems.append(f"the replay of {session_id} left tool call {call_id} {status}")
            error = message.get("error")
            if method == "session/prompt" and isinstance(error, dict) and error.get("code") == -32603:
                data = error.get("data")
                if not (isinstance(data, dict) and list(data) == ["details"] and isinstance(data["details"], str)):
                    self.problems.append(f"a failed prompt's error data is {data!r}, not exactly {{details}}")

    def _replayed(self, session_id: Any, update: dict[str, Any]) -> None:
        calls = self._replays.get(session_id) if isinstance(session_id, str) else None
        if calls is None:
            return
        if update.get("sessionUpdate") == "tool_call":
            calls[update["toolCallId"]] = update.get("status") or "pending"
        elif update.get("sessionUpdate") == "tool_call_update" and update.get("status"):
            calls[update["toolCallId"]] = update["status"]


SDK_UPDATES = frozenset(
    {
        "user_message_chunk",
        "agent_message_chunk",
        "agent_thought_chunk",
        "tool_call",
        "tool_call_update",
        "plan",
        "available_commands_update",
        "current_mode_update",
        "config_option_update",
        "session_info_update",
        "usage_update",
    }
)
"""The session updates the Python SDK's models hold."""

GATED_UPDATES = {"notice": "notices", "compaction_update": "compaction", "compaction_summary_chunk": "compaction"}
"""The newer protocol's session updates, each with the ``clientCapabilities.session`` entry it needs."""

WIRE = "wire/"
"""``client.ext_method(f"{WIRE}session/delete", …)`` sends a ``session/delete`` request: the SDK's client has no
method for the newer protocol's requests."""


class NewerClientEnd:
    """The client's end of the in-memory pair, speaking the newer protocol the SDK's client cannot: it adds
    ``session_capabilities`` (e.g. ``{"notices": {}}``) to the ``initialize`` it sends, sends
    ``_wire/<method>`` extension requests as ``<method>``, and keeps the session updates the SDK's models cannot
    hold in ``client.newer_updates``."""

    def __init__(self, inner: Any, client: RecordingClient, session_capabilities: dict[str, Any]) -> None:
        self._inner = inner
        self._client = client
        self._session_capabilities = session_capabilities

    async def send(self, message: dict[str, Any]) -> None:
        method = message.get("method")
        if method == "initialize" and self._session_capabilities:
            params = dict(message.get("params") or {})
            capabilities = dict(params.get("clientCapabilities") or {})
            capabilities["session"] = {**(capabilities.get("session") or {}), **self._session_capabilities}
            message = {**message, "params": {**params, "clientCapabilities": capabilities}}
        elif isinstance(method, str) and method.startswith(f"_{WIRE}"):
            message = {**message, "method": method.removeprefix(f"_{WIRE}")}
        await self._inner.send(message)

    async def receive(self) -> dict[str, Any] | None:
        message = await self._inner.receive()
        params = message.get("params") if message is not None and message.get("method") == "session/update" else None
        update = params.get("update") if isinstance(params, dict) else None
        if isinstance(update, dict) and update.get("sessionUpdate") not in SDK_UPDATES:
            kind = update.get("sessionUpdate")
            gate = GATED_UPDATES.get(kind) if isinstance(kind, str) else None
            if gate is not None and gate not in self._session_capabilities:
                # The schema: an agent MUST send these only to a client that advertised them.
                self._client.problems.append(f"a {kind} update, though the client never advertised {gate}")
            self._client.newer_updates.append((params["sessionId"], update))  # type: ignore[index]
            self._client.update_seen.set()
            return await self.receive()  # the SDK's client would only log it as invalid
        return message

    async def close(self) -> None:
        await self._inner.close()


@asynccontextmanager
async def connected(
    agent: CodlingAgent,
    client: RecordingClient,
    arrivals: Arrivals | None = None,
    session_capabilities: dict[str, Any] | None = None,
) -> AsyncIterator[ClientSideConnection]:
    """The agent and the client joined by the SDK's own connections over its in-memory transport pair (messages
    in order, as over `codling acp`'s stdio), the agent's end wrapped for the newer protocol as `codling acp`'s
    is. ``arrivals`` observes what reaches the agent; ``session_capabilities`` are the newer protocol's
    ``clientCapabilities.session`` entries the client advertises (see ``NewerClientEnd``)."""
    client_end, agent_end = memory_transport_pair()
    observers = [arrivals] if arrivals is not None else []
    agent_conn = AgentSideConnection(
        agent, agent.newer.wrap(agent_end), use_unstable_protocol=True, observers=observers
    )
    client_conn = ClientSideConnection(
        client,
        NewerClientEnd(client_end, client, session_capabilities or {}),
        use_unstable_protocol=True,
        observers=[ZedReading(client.problems)],
    )
    try:
        yield client_conn
    finally:
        await client_conn.close()
        await agent_conn.close()
        await agent.shutdown()  # as `codling acp` does when its client goes away
    client.problems.extend(
        f"a terminal card is headed {label!r}" for label in client.shown_terminal_labels() if "env -u" in label
    )
    compactions = {(s, u["compactionId"]): u["status"] for s, u in client.of_kind_raw("compaction_update")}
    client.problems.extend(
        f"compaction {compaction_id} was left {status}"
        for (_, compaction_id), status in compactions.items()
        if status == "in_progress"
    )
    assert client.problems == [], f"the client saw updates an editor would reject: {client.problems}"
