"""Authentication over ACP: one method per provider credential variable, and the auth_required error.

codling reads its credentials from the environment it is started in, so a method says which variable to set
(in Zed: the agent server's ``env`` setting) and ``authenticate`` checks that it is set. A session/new with no
credentialed model, or a turn whose provider refused the key (HTTP 401/403) or whose key is missing, answers
with -32000 auth_required, which an editor turns into its sign-in prompt.
"""

from __future__ import annotations

from collections.abc import Mapping

from acp import RequestError
from acp.schema import AuthMethodAgent

from codling.llm.providers import CREDENTIAL_VARIABLES

AUTH_REQUIRED = -32000
"""ACP's error code for "authenticate first"."""


def _providers_of(variable: str) -> list[str]:
    return [p for p, names in CREDENTIAL_VARIABLES.items() if variable in names and p != "google-gla"]


def variables() -> list[str]:
    """Every provider credential variable, each once, in the order providers are listed."""
    return list(dict.fromkeys(name for names in CREDENTIAL_VARIABLES.values() for name in names))


def auth_methods() -> list[AuthMethodAgent]:
    """The methods ``initialize`` advertises: one per credential variable, its id the variable's name."""
    return [
        AuthMethodAgent(
            id=name,
            name=f"{name} ({', '.join(_providers_of(name))})",
            description=(
                f'Set {name} in the environment codling starts in (in Zed: the agent server\'s "env" setting in '
                "settings.json), restart the agent, then retry."
            ),
        )
        for name in variables()
    ]


def check_method(method_id: str, env: Mapping[str, str]) -> None:
    """Succeed if ``method_id`` names a credential variable that ``env`` sets; -32602 for an unknown method,
    auth_required (saying what to do) for a variable that is not set."""
    if method_id not in variables():
        raise RequestError.invalid_params({"methodId": method_id[:200], "message": "not an auth method of codling"})
    if not env.get(method_id):
        raise auth_required(
            f"{method_id} is not set in codling's environment: set it in the environment codling starts in (in "
            'Zed: the agent server\'s "env" setting), then restart the agent',
        )


def auth_required(message: str, details: str = "") -> RequestError:
    """-32000 with ``message`` as the error's message (Zed shows it as the sign-in prompt's description)."""
    return RequestError(AUTH_REQUIRED, message, {"details": details or message, "authMethods": variables()})
