"""The newer protocol at the edge: what the newest ACP schema has that the SDK (agent-client-protocol 0.12.1)
cannot carry.

* **Requests its router does not know** (``NEWER_REQUESTS``: ``session/delete``, ``logout``): the SDK answers
  any method it has no route for with method-not-found, and routes only ``_``-prefixed names to the agent's
  ``ext_method``. :class:`NewerEdge` renames these requests on the way in to ``_newer/<method>``, so the SDK
  runs them as it runs every request (concurrently, its errors as JSON-RPC errors) and the agent's
  ``ext_method`` receives ``newer/<method>``. Responses carry no method, so the client sees its own request
  answered.
* **Client capabilities its models drop** (``session.notices``, ``session.compaction``): read from the raw
  ``initialize`` params into :class:`ClientExtras`.
* **Session updates its models do not have** (``notice``, ``compaction_update``): codling's own typed values
  (:class:`Notice`, :class:`CompactionUpdate`), turned into the schema's JSON here alone (:func:`wire`) and sent
  raw through the same transport, in order with the SDK's own messages.

Only a connection whose transport :meth:`NewerEdge.wrap` wrapped learns the client's extras; any other
connection is treated as a client that advertised none of them.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar, assert_never

from acp import RequestError
from pydantic import BaseModel, ValidationError

log = logging.getLogger(__name__)

Params = TypeVar("Params", bound=BaseModel)

NEWER_REQUESTS = frozenset({"session/delete", "logout"})
"""Requests of the newest schema that the SDK's router has no route for."""

RENAMED = "newer/"
"""The extension name (after the SDK strips the leading ``_``) a renamed request reaches ``ext_method`` as."""


def newer_params(model: type[Params], method: str, params: Any) -> Params:
    """A renamed request's ``params`` as the SDK's ``model`` of them; -32602 saying what is wrong otherwise (the
    SDK router does the same check for the requests it routes, but answers with pydantic's raw error list)."""
    try:
        return model.model_validate(params)
    except ValidationError as e:
        said = "; ".join(
            f"{'.'.join(str(part) for part in error['loc']) or 'params'}: {error['msg']}" for error in e.errors()
        )
        raise RequestError.invalid_params({"message": f"{method}: {said}"[:500]}) from e


class Transport(Protocol):
    """What the SDK's connection reads and writes JSON-RPC messages through (its own protocol is private)."""

    async def send(self, message: dict[str, Any]) -> None: ...

    async def receive(self) -> dict[str, Any] | None: ...

    async def close(self) -> None: ...


@dataclass(frozen=True)
class ClientExtras:
    """What the client advertised at ``initialize`` beyond what the SDK's models keep."""

    notices: bool = False
    """``clientCapabilities.session.notices``: it presents ``notice`` updates."""
    compaction: bool = False
    """``clientCapabilities.session.compaction``: it presents ``compaction_update`` entries."""

    @classmethod
    def from_initialize(cls, params: Any) -> ClientExtras:
        """The extras in an ``initialize`` request's raw params (nothing for any shape it cannot read)."""
        capabilities = params.get("clientCapabilities") if isinstance(params, dict) else None
        session = capabilities.get("session") if isinstance(capabilities, dict) else None
        if not isinstance(session, dict):
            return cls()
        return cls(
            notices=isinstance(session.get("notices"), dict), compaction=isinstance(session.get("compaction"), dict)
        )


NoticeSeverity = Literal["info", "warning", "error"]
CompactionStatus = Literal["in_progress", "completed", "failed", "cancelled"]


@dataclass(frozen=True)
class Notice:
    """A ``notice`` update: something the user should know that is neither a message nor a tool call. Live
    only (not history: a replay sends none), and only to a client that advertised ``session.notices``."""

    severity: NoticeSeverity
    title: str
    """Plain text that stands alone (never empty)."""
    description: str | None = None
    """Plain-text detail or what to do about it."""
    session_update: Literal["notice"] = "notice"


@dataclass(frozen=True)
class CompactionUpdate:
    """A ``compaction_update``: the compaction ``compaction_id`` started, or ended as ``status`` says (an upsert
    by id: a later update patches the earlier one). Only to a client that advertised ``session.compaction``."""

    compaction_id: str
    status: CompactionStatus
    summary: tuple[str, ...] | None = None
    """The summary the history keeps, as text blocks (None: left as it was)."""
    error: str | None = None
    """What went wrong, or why it stopped (None: left as it was)."""
    tokens_before: int | None = None
    tokens_after: int | None = None
    fallback: bool | None = None
    """True: codling assembled the summary itself, without the model."""
    session_update: Literal["compaction_update"] = "compaction_update"


NewerUpdate = Notice | CompactionUpdate
"""A session update the SDK's models cannot hold."""


def wire(update: NewerUpdate) -> dict[str, Any]:
    """``update`` as the newest schema's ``SessionUpdate`` JSON (absent fields left out: for a compaction,
    absent means unchanged)."""
    match update:
        case Notice():
            notice: dict[str, Any] = {"sessionUpdate": "notice", "severity": update.severity, "title": update.title}
            if update.description:
                notice["description"] = update.description
            return notice
        case CompactionUpdate():
            compaction: dict[str, Any] = {
                "sessionUpdate": "compaction_update",
                "compactionId": update.compaction_id,
                "status": update.status,
            }
            if update.summary is not None:
                compaction["summary"] = [{"type": "text", "text": text} for text in update.summary]
            if update.error is not None:
                compaction["error"] = update.error
            counts = {
                "tokensBefore": update.tokens_before,
                "tokensAfter": update.tokens_after,
                "fallback": update.fallback,
            }
            if any(value is not None for value in counts.values()):
                compaction["_meta"] = {"codling": {k: v for k, v in counts.items() if v is not None}}
            return compaction
        case _:
            assert_never(update)


class NewerEdge:
    """One connection's edge for the newer protocol: it wraps the transport, learns the client's extras and
    sends the updates the SDK cannot."""

    def __init__(self) -> None:
        self.extras = ClientExtras()
        """What the client advertised (nothing until a wrapped transport carried its ``initialize``)."""
        self._transport: Transport | None = None

    def wrap(self, transport: Transport) -> Transport:
        """``transport`` as the SDK's connection should use it."""
        self._transport = transport
        return _Wrapped(transport, self)

    async def session_update(self, session_id: str, update: dict[str, Any]) -> None:
        """Send a ``session/update`` notification the SDK's models cannot hold (nothing without a transport)."""
        if self._transport is None:
            log.debug("no transport for a raw %s update", update.get("sessionUpdate"))
            return
        params = {"sessionId": session_id, "update": update}
        await self._transport.send({"jsonrpc": "2.0", "method": "session/update", "params": params})

    def _received(self, message: dict[str, Any]) -> dict[str, Any]:
        method = message.get("method")
        if method == "initialize":
            self.extras = ClientExtras.from_initialize(message.get("params"))
        elif method in NEWER_REQUESTS and "id" in message:
            return {**message, "method": f"_{RENAMED}{method}"}
        return message


class _Wrapped:
    """The transport the SDK's connection reads and writes: the inner one, with incoming messages passed
    through the edge."""

    def __init__(self, inner: Transport, edge: NewerEdge) -> None:
        self._inner = inner
        self._edge = edge

    async def send(self, message: dict[str, Any]) -> None:
        await self._inner.send(message)

    async def receive(self) -> dict[str, Any] | None:
        message = await self._inner.receive()
        return None if message is None else self._edge._received(message)

    async def close(self) -> None:
        await self._inner.close()
