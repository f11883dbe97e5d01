"""Delivery order: markers in a turn's event queue that resolve once everything before them reached the
observers, and an approver that waits for that before it asks (so a client hears of a tool call before it
is asked to allow it)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from codling.tools.ports import Approver, Decision, PermissionRequest


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

    async def ask(self, request: PermissionRequest) -> Decision:
        """Wait for delivery, then ask the wrapped approver."""
        await self._delivered()
        return await self._inner.ask(request)
