"""Recognising a provider's "the context is too long" answer."""

from __future__ import annotations

_OVERFLOW_MARKERS = (
    "context length",
    "context_length",
    "context window",
    "maximum context",
    "too many tokens",
    "prompt is too long",
    "input is too long",
)


def is_context_overflow(e: Exception) -> bool:
    """Whether the provider rejected a request because the context was too long."""
    from pydantic_ai.exceptions import ModelContextWindowExceededError, ModelHTTPError

    if isinstance(e, ModelContextWindowExceededError):
        return True
    if isinstance(e, ModelHTTPError) and e.status_code in (400, 413, 422):
        text = str(e.body).lower() + " " + str(e.message).lower()
        return any(marker in text for marker in _OVERFLOW_MARKERS)
    return False
