"""The retry loop for model requests, as a pydantic-ai capability given to each run (see ``brain/retries.py``).

pydantic-ai calls ``on_model_request_error`` when an attempt fails before any of its output reached the turn
(a streamed request is primed: its first event is read before it is handed over), so a retry never repeats
text the user has already seen; a failure after that ends the turn. Imported only when a turn runs.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import (
    ModelAPIError,
    ModelConnectionError,
    ModelHTTPError,
    ModelQuotaExceededError,
    ModelTimeoutError,
    RetryModelRequest,
)
from pydantic_ai.messages import ModelResponse

from codling.brain.context.overflow import is_context_overflow
from codling.brain.events import Event, ProviderRetrying
from codling.brain.failures import describe_failure
from codling.brain.retries import RETRYABLE_STATUSES, RetryPolicy
from codling.errors import ModelError
from codling.llm.providers import Endpoint


def retry_reason(error: Exception) -> str | None:
    """Why ``error`` is worth another attempt, in a few words ("HTTP 429", "connection failed"); None if not.

    An exhausted quota is not (waiting will not help), nor is a timeout: the provider went silent for the
    whole idle timeout, and trying again would make the user wait that long once more."""
    if isinstance(error, ModelQuotaExceededError | ModelTimeoutError) or is_context_overflow(error):
        return None  # (some servers answer an overflow with 500: the same request would fail the same way)
    if isinstance(error, ModelHTTPError):
        return f"HTTP {error.status_code}" if error.status_code in RETRYABLE_STATUSES else None
    if isinstance(error, ModelConnectionError):
        return "connection failed"
    return None


@dataclass
class ProviderRetries(AbstractCapability[Any]):
    """Retries a model request the provider refused for a passing reason, per ``policy``, telling ``send``
    about each wait; gives up with a ``ModelError`` that says how often it tried."""

    policy: RetryPolicy
    turn_id: str
    send: Callable[[Event], None]
    endpoint: Endpoint | None = None
    """Where the requests go, named in the message when the retries run out."""

    async def on_model_request_error(self, ctx: Any, *, request_context: Any, error: Exception) -> ModelResponse:
        reason = retry_reason(error)
        if reason is None:
            raise error
        attempt: int = request_context.attempt
        if attempt >= self.policy.max_attempts:
            raise ModelError(
                f"{describe_failure(error, self.endpoint)} (gave up after {attempt} attempts; try again later, "
                "or choose another model)"
            ) from error
        retry_after = error.retry_after if isinstance(error, ModelAPIError) else None
        waiting = ProviderRetrying(
            turn_id=self.turn_id,
            call_id=f"retry-{uuid.uuid4().hex[:12]}",
            attempt=attempt + 1,
            max_attempts=self.policy.max_attempts,
            delay=self.policy.delay(attempt, retry_after),
            reason=reason,
        )
        self.send(waiting)
        try:
            await self.policy.sleep(waiting.delay)
        except asyncio.CancelledError:
            self.send(replace(waiting, status="cancelled"))
            raise
        self.send(replace(waiting, status="retrying"))
        raise RetryModelRequest()
