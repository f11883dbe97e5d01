"""Delivery order: markers in a turn's event queue that resolve once everything before them reached the
observers, and an approver that waits for that before it asks (so a client hears of a tool call before it
is asked to allow it)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from codling.brain.events import Event, PlanUpdated, ToolCallNote, ToolCallRunning, ToolCallTerminal
from codling.tools.ports import Answer, Approver, PermissionRequest
from codling.vocabulary import PlanStep


@dataclass(frozen=True)
class Barrier:
    """A marker in the event queue: resolved once every event before it has reached the observers."""

    future: asyncio.Future[None]


class DeliveredFirst:
    """An approver that first lets every event so far reach the observers, so a client hears of a tool call
    (its title, its diff) before it is asked to allow it."""

    def __init__(self, inner: Approver, delivered: Callable[[], Awaitable[None]]) -> None:
        self._inner = inner
        self._delivered = delivered

    async def ask(self, request: PermissionRequest) -> Answer:
        """Wait for delivery, then ask the wrapped approver."""
        await self._delivered()
        return await self._inner.ask(request)


class TurnProgress:
    """Where the running turn's tools report progress (``ToolProgress``): as the turn's own events, in order
    with the rest. A terminal is reported only once the client has it, so it is shown before it is released."""

    def __init__(self, turn_id: str, send: Callable[[Event], None], delivered: Callable[[], Awaitable[None]]) -> None:
        self._turn_id = turn_id
        self._send = send
        self._delivered = delivered

    async def terminal(self, call_id: str, terminal_id: str) -> None:
        """The call's command runs in the editor's terminal."""
        self._send(ToolCallTerminal(self._turn_id, call_id, terminal_id))
        await self._delivered()

    def note(self, call_id: str, text: str) -> None:
        """What the call is doing now."""
        self._send(ToolCallNote(self._turn_id, call_id, text))

    def running(self, call_id: str) -> None:
        """The call started its work."""
        self._send(ToolCallRunning(self._turn_id, call_id))

    def plan(self, steps: tuple[PlanStep, ...]) -> None:
        """A plan a tool made, as the session's plan."""
        self._send(PlanUpdated(self._turn_id, steps))
