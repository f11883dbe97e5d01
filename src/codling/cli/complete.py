"""Shell completion of codling's values: session ids, model ids and permission modes (``codling
--install-completion`` sets it up for bash, zsh, fish or PowerShell)."""

from __future__ import annotations

from codling.config import PERMISSION_MODES, load_settings
from codling.errors import CodlingError


def sessions(incomplete: str) -> list[tuple[str, str]]:
    """Session ids starting with ``incomplete``, newest first, each with its title as help. (Shells complete
    by prefix only; the part after the date alone is matched when the command runs.)"""
    from codling.cli.home import open_store

    try:
        listed = open_store(load_settings()).list()
    except CodlingError:
        return []  # a broken setup is said when the command runs, not in the middle of typing it
    return [(s.session_id, s.title or "") for s in listed if s.session_id.startswith(incomplete)]


def models(incomplete: str) -> list[str]:
    """Catalog model ids starting with ``incomplete``."""
    from codling.llm.catalog import load_catalog
    from codling.paths import user_catalog_file

    try:
        catalog = load_catalog(user_catalog_file(load_settings().home))
    except CodlingError:
        return []
    return [info.id for info in catalog if info.id.startswith(incomplete)]


def modes(incomplete: str) -> list[str]:
    """Permission modes starting with ``incomplete``."""
    return [mode for mode in PERMISSION_MODES if mode.startswith(incomplete)]
