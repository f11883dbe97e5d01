"""A failed turn in words: what failed and what to fix, why (for the ACP client and the history), and the
``TurnFailed`` event that carries it."""

from __future__ import annotations

from codling.brain.events import FailureReason, TurnFailed
from codling.llm.providers import Endpoint


def is_expected_failure(e: Exception) -> bool:
    """Provider and model failures are expected (no traceback in the log); anything else is a bug."""
    from pydantic_ai.exceptions import AgentRunError

    from codling.errors import CodlingError

    return isinstance(e, AgentRunError | CodlingError)


def describe_failure(e: Exception, endpoint: Endpoint | None = None) -> str:
    """A message for the user: what failed, in words, without a traceback; with ``endpoint`` (where the
    model's requests go), a provider failure also says what to fix (the URL, the variable to check)."""
    from pydantic_ai.exceptions import ModelAPIError, ModelConnectionError, ModelHTTPError, UnexpectedModelBehavior

    from codling.errors import CodlingError

    advice = ""
    if isinstance(e, ModelHTTPError):
        message = f"The model provider returned HTTP {e.status_code} for {e.model_name}: {_body_message(e.body)}"
        advice = endpoint.advice(_auth_status(e.status_code, e.body)) if endpoint else ""
    elif isinstance(e, ModelConnectionError):
        message = f"Could not connect to the model provider for {e.model_name} ({e.message.rstrip('.')})"
        advice = endpoint.advice(None) if endpoint else ""
    elif isinstance(e, ModelAPIError):
        message = f"The model provider failed ({e.model_name}): {e.message}"
    elif isinstance(e, UnexpectedModelBehavior):
        message = f"The model's response could not be used: {e.message}"
    elif isinstance(e, CodlingError):
        message = str(e)
    else:
        message = f"Internal error: {type(e).__name__}: {e}"
    return f"{message}; {advice}" if advice else message


def _auth_status(status: int, body: object) -> int:
    """``status``, or 401 for a refused key that comes as a 400: Gemini answers a wrong key with
    ``400 INVALID_ARGUMENT`` and reason ``API_KEY_INVALID``, and the fix is the key, not the request."""
    return 401 if status == 400 and ("API_KEY_INVALID" in str(body) or "API key not valid" in str(body)) else status


AUTH_STATUSES = frozenset({401, 403})
"""HTTP statuses that mean the provider refused the credentials."""


def failure_reason(e: Exception) -> FailureReason:
    """What kind of failure ``e`` is, for the client (an editor offers a login for ``auth``)."""
    from pydantic_ai.exceptions import ModelAPIError, ModelHTTPError, UnexpectedModelBehavior

    from codling.errors import ConfigError, MissingCredentialsError, ModelError, NoModelError

    cause = e.__cause__ if isinstance(e, ModelError) and isinstance(e.__cause__, Exception) else e
    if isinstance(cause, MissingCredentialsError | NoModelError) or (
        isinstance(cause, ModelHTTPError) and _auth_status(cause.status_code, cause.body) in AUTH_STATUSES
    ):
        return "auth"
    if isinstance(e, ModelError | ModelAPIError):  # ModelError: codling gave up on the provider
        return "provider"
    if isinstance(e, UnexpectedModelBehavior):
        return "model_output"
    if isinstance(e, ConfigError):
        return "config"
    return "internal"


def failure_details(e: Exception) -> str:
    """What a client may show under the message: the exception chain's types and texts, and a provider's
    HTTP status and response body."""
    from pydantic_ai.exceptions import ModelHTTPError

    lines: list[str] = []
    seen: Exception | None = e
    while seen is not None and len(lines) < 4:
        lines.append(f"{type(seen).__name__}: {seen}")
        if isinstance(seen, ModelHTTPError) and seen.body:
            lines.append(f"HTTP {seen.status_code} response body: {str(seen.body)[:2000]}")
        seen = seen.__cause__ if isinstance(seen.__cause__, Exception) else None
    return "\n".join(lines)


def turn_failed(turn_id: str, e: Exception, endpoint: Endpoint | None = None) -> TurnFailed:
    """The event saying the turn failed with ``e`` (a request to ``endpoint``, if it was the provider's)."""
    return TurnFailed(turn_id, describe_failure(e, endpoint), failure_reason(e), failure_details(e))


def _body_message(body: object) -> str:
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
    return str(body)[:500] if body else "no details"
