"""The session store of codling's data home, as the terminal commands open it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from codling.config import Settings

if TYPE_CHECKING:
    from codling.store.index import SessionStore


def open_store(settings: Settings) -> SessionStore:
    """The session store of the data home, redacting the environment's secrets from what it writes."""
    from codling.llm.providers import credential_names
    from codling.secrecy import Redactor
    from codling.store.index import SessionStore

    return SessionStore(settings.home, Redactor.from_env(settings.env, credential_names()))
