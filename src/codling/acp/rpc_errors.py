"""The JSON-RPC errors the agent raises itself, and the checks of what a client names (paths), so a bad value
is invalid params (-32602) naming its field, an unknown or closed session is resource not found (-32002), a
prompt to a session with too many prompts waiting for their turn is session busy (-32001), a session another
codling process has open is session held (-32003), and nothing a client sends ends as an internal error (-32603)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from acp import RequestError

from codling.acp.auth import auth_required
from codling.errors import InvalidSessionIdError

if TYPE_CHECKING:
    from codling.brain.events import TurnFailed

MAX_PATH_CHARS = 4096
"""The longest path a client may name (Linux's PATH_MAX); longer ones are invalid params, not OS errors."""

RESOURCE_NOT_FOUND = -32002
"""The JSON-RPC error code ACP uses for an unknown or closed session (clients treat closing one as done)."""


INTERNAL_ERROR = -32603

SESSION_BUSY = -32001
"""A ``session/prompt`` to a session where the most prompts that may wait for their turn already wait."""

SESSION_HELD = -32003
"""A session another codling process has open (load, resume, fork of it, or writing it): close it there."""


def busy(session_id: str, waiting: int) -> RequestError:
    """-32001 for a prompt to a session where ``waiting`` prompts already wait for their turn (too many)."""
    message = f"{waiting} prompts already wait for their turn in this session; wait for them, or cancel"
    return RequestError(SESSION_BUSY, "Session busy", {"sessionId": session_id, "message": message})


def held(session_id: str, message: str) -> RequestError:
    """-32003 for a session another codling process holds."""
    return RequestError(SESSION_HELD, "Session held by another process", {"sessionId": session_id, "message": message})


def turn_error(failed: TurnFailed, redact: Callable[[str], str]) -> RequestError:
    """The error a failed turn's session/prompt answers with: auth_required when the provider has no (or
    refused the) credentials, else -32603 with the readable message and ``data`` exactly ``{"details": …}``
    (Zed shows the details cleanly only in that shape, and a raw chain of errors otherwise). ``redact``
    removes secrets (a provider may echo the key it refused)."""
    message, details = redact(failed.message), redact(failed.details or failed.message)
    if failed.reason == "auth":
        return auth_required(message, details)
    return failure(message, details)


def failure(message: str, details: str) -> RequestError:
    """-32603 for a prompt that failed: ``message`` and ``data`` exactly ``{"details": details}``."""
    return RequestError(INTERNAL_ERROR, message, {"details": details})


CLIENT_DETAIL_CHARS = 500
"""The most of a client error's data kept in the message codling reports."""


def client_error(e: RequestError) -> str:
    """A client's JSON-RPC error as one readable line: its message and what its data says (``details`` or
    ``message``, else the whole data), so the model and the user learn why (e.g. "Internal error: the file is
    read-only")."""
    data = e.data
    if isinstance(data, dict):
        said = data.get("details") or data.get("message") or data.get("reason")
        detail = str(said) if said else json.dumps(data, default=str)
    else:
        detail = "" if data is None else str(data)
    detail = " ".join(detail.split())[:CLIENT_DETAIL_CHARS]
    return f"{e}: {detail}" if detail and detail != str(e) else str(e)


def invalid_session_id(session_id: object, e: InvalidSessionIdError) -> RequestError:
    """-32602 for a session id that is not of codling's form (never used as a path)."""
    return RequestError.invalid_params({"sessionId": shown(session_id), "message": str(e)})


def not_found(session_id: str, message: str) -> RequestError:
    """-32002 for a well-formed session id that is not open here (or not on disk)."""
    return RequestError(RESOURCE_NOT_FOUND, "Resource not found", {"sessionId": session_id, "message": message})


def shown(value: object) -> object:
    """A value as an error's data may echo it: long text is cut."""
    return value[:200] + "…" if isinstance(value, str) and len(value) > 200 else value


def absolute(value: str, field: str) -> Path:
    """``value`` as an absolute path; -32602 naming ``field`` if it holds NUL, is overlong or is relative."""

    def invalid(message: str) -> RequestError:
        return RequestError.invalid_params({field: shown(value), "message": f"{field} {message}"})

    if "\0" in value:
        raise invalid("contains a NUL character")
    if len(value) > MAX_PATH_CHARS:
        raise invalid(f"is longer than {MAX_PATH_CHARS} characters")
    path = Path(value)
    if not path.is_absolute():
        raise invalid("must be an absolute path")
    return path


def resolved(path: Path, field: str) -> Path:
    """``path`` with symbolic links resolved; -32602 if the system cannot (a link loop, an overlong name)."""
    try:
        return path.resolve()
    except (OSError, RuntimeError) as e:
        message = f"{field} cannot be resolved: {e}"
        raise RequestError.invalid_params({field: shown(str(path)), "message": message}) from e


def directory(value: str, field: str) -> Path:
    """``value`` as an existing absolute directory, resolved; -32602 naming ``field`` otherwise."""
    path = absolute(value, field)
    try:
        is_dir = path.is_dir()
    except OSError as e:  # e.g. a name longer than the file system allows
        raise RequestError.invalid_params({field: shown(value), "message": f"{field} cannot be used: {e}"}) from e
    if not is_dir:
        raise RequestError.invalid_params({field: shown(value), "message": f"{field} is not an existing directory"})
    return resolved(path, field)
