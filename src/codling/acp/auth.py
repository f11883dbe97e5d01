"""Authentication over ACP: one sign-in method, ``codling login`` in a terminal, and the auth_required error.

codling reads provider keys from the environment it is started in, else from what ``codling login`` stored
(``codling.credentials``). The one method an editor is offered runs ``codling login`` in a terminal: as ACP's
``terminal`` method (the client runs the agent's command with ``login`` appended) when the client says it can,
and always with the ``_meta["terminal-auth"]`` form (an explicit command line) that Zed reads without asking.
``authenticate`` then takes up what was stored and succeeds once some model has a key. A session/new with no
credentialed model, or a turn whose provider refused the key (HTTP 401/403) or whose key is missing, answers
with -32000 auth_required, which an editor turns into its sign-in prompt. ``logout`` (advertised as
``agentCapabilities.auth.logout``) removes what the login stored, so the sign-in is offered again.
"""

from __future__ import annotations

import sys
from collections.abc import Collection
from pathlib import Path
from typing import Any

from acp import RequestError
from acp.schema import AuthMethodAgent, ClientCapabilities, TerminalAuthMethod

LOGIN_METHOD = "codling-login"
"""The id of codling's one sign-in method."""

AUTH_REQUIRED = -32000
"""ACP's error code for "authenticate first"."""

_NAME = "Log in with a provider key"
_DESCRIPTION = (
    "Opens a terminal running `codling login`: pick a provider (Anthropic, OpenAI, Gemini, OpenRouter…) and paste "
    "its key, which codling stores for itself (a key set in the agent's env setting still wins)."
)


def auth_methods(capabilities: ClientCapabilities, home: Path) -> list[TerminalAuthMethod | AuthMethodAgent]:
    """The method ``initialize`` advertises, for a client with ``capabilities``; the login stores its key under
    ``home`` (the data home this agent reads)."""
    env = {"CODLING_HOME": str(home)}
    legacy: dict[str, Any] = {
        "terminal-auth": {
            "command": sys.executable,
            "args": ["-m", "codling", "login"],
            "env": env,
            "label": "codling login",
        }
    }
    auth = capabilities.auth
    if auth is not None and auth.terminal:
        return [
            TerminalAuthMethod(
                type="terminal",
                id=LOGIN_METHOD,
                name=_NAME,
                description=_DESCRIPTION,
                args=["login"],
                env=env,
                field_meta=legacy,
            )
        ]
    return [AuthMethodAgent(id=LOGIN_METHOD, name=_NAME, description=_DESCRIPTION, field_meta=legacy)]


def check_method(method_id: str) -> None:
    """-32602 for a method codling does not offer."""
    if method_id != LOGIN_METHOD:
        raise RequestError.invalid_params({"methodId": method_id[:200], "message": "not an auth method of codling"})


def auth_required(message: str, details: str = "") -> RequestError:
    """-32000 with ``message`` as the error's message (Zed shows it as the sign-in prompt's description)."""
    return RequestError(AUTH_REQUIRED, message, {"details": details or message, "authMethods": [LOGIN_METHOD]})


def keyed_by(model_id: str, variables: Collection[str]) -> bool:
    """Whether ``model_id``'s provider takes its key from one of ``variables`` (a model built with one of them
    holds that key until it is built again)."""
    from codling.llm.catalog import provider_of
    from codling.llm.providers import CREDENTIAL_VARIABLES

    return any(name in variables for name in CREDENTIAL_VARIABLES.get(provider_of(model_id), ()))
