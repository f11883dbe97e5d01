"""How a model request the provider refused for a passing reason is retried: the policy and its arithmetic.

The provider SDKs' own retries are turned off (``max_retries=0`` on the clients codling builds, and in every
request's settings), because they wait silently, honouring a ``Retry-After`` of a minute or more. codling retries
instead (``brain/provider_retries.py``): a few attempts, each wait capped and shown to the user as a
``ProviderRetrying`` event, and cancellable like the rest of the turn. This module imports nothing heavy, so the
session options can hold a policy.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

RETRYABLE_STATUSES = frozenset({429, 500, 502, 503, 504, 529})
"""HTTP statuses worth another attempt: rate limited, server error, bad gateway, unavailable, gateway timeout,
overloaded (Anthropic's 529)."""


@dataclass(frozen=True)
class RetryPolicy:
    """At most ``max_attempts`` attempts per model request; between them the provider's ``Retry-After`` (never
    more than ``max_delay``) or else ``base_delay`` doubled per attempt. ``sleep`` waits (tests inject a fake)."""

    max_attempts: int = 3
    max_delay: float = 30.0
    base_delay: float = 1.0
    sleep: Callable[[float], Awaitable[None]] = field(default=asyncio.sleep, compare=False)

    def delay(self, failed_attempt: int, retry_after: float | None) -> float:
        """Seconds to wait after attempt ``failed_attempt`` (1-based) failed, the provider having asked for
        ``retry_after`` seconds (None: it did not say)."""
        wanted = self.base_delay * 2 ** (failed_attempt - 1) if retry_after is None else max(0.0, retry_after)
        return min(wanted, self.max_delay)
