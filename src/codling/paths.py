"""Where codling keeps its data: ``$CODLING_HOME`` (default ``~/.codling``)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path


def codling_home(env: Mapping[str, str] | None = None) -> Path:
    """The data home: ``$CODLING_HOME`` if set, else ``~/.codling``."""
    env = os.environ if env is None else env
    value = env.get("CODLING_HOME")
    return Path(value).expanduser() if value else Path.home() / ".codling"


def user_home(env: Mapping[str, str] | None = None) -> Path:
    """The user's home directory: ``$HOME`` if set, else what the system says."""
    env = os.environ if env is None else env
    value = env.get("HOME")
    return Path(value) if value else Path.home()


def config_file(home: Path) -> Path:
    """The user's settings file inside the data home."""
    return home / "config.toml"


def user_catalog_file(home: Path) -> Path:
    """The user's model catalog, which adds to or overrides the bundled one."""
    return home / "models.json"
