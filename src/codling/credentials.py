"""Provider keys stored by ``codling login``: ``$CODLING_HOME/credentials.json``, readable by its owner only.

The file holds ``{"keys": {"ANTHROPIC_API_KEY": "…", …}, "model": "anthropic:…"}``: each key under the name of the
variable it stands for, and the model chosen at login. When codling starts, :func:`apply` sets every stored key
whose variable the environment does not set, so a key set in the environment wins and everything that treats
credential variables as secrets (sealing, redaction, the environment commands get) treats stored keys the same
way. ``config.load_settings`` uses the stored model after config.toml's. :func:`forget` (``codling logout``, ACP's
``logout``) removes keys, and takes them out of the environment they were applied to. A file others can read is
refused with the command that fixes it: a key must not be left readable.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Collection, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path

from codling.errors import ConfigError
from codling.paths import codling_home

FILE_NAME = "credentials.json"


@dataclass(frozen=True)
class Stored:
    """What ``codling login`` stored."""

    keys: dict[str, str] = field(default_factory=dict)
    """Variable name → key."""
    model: str | None = None
    """The model chosen at login (None: none)."""


def credentials_file(home: Path) -> Path:
    """Where ``codling login`` stores keys inside the data home."""
    return home / FILE_NAME


def read(home: Path) -> Stored:
    """The stored keys and model (nothing stored: empty). A malformed file, or one others may read, is a
    ``ConfigError`` saying what to do."""
    path = credentials_file(home)
    try:
        info = path.stat()
        if info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise ConfigError(f"{path} can be read by others, so its keys are not used: run `chmod 600 {path}`")
        data = json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, NotADirectoryError):  # (a home that is no directory is said where it is used)
        return Stored()
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ConfigError(f"{path} cannot be read ({e}): run `codling login` again, or delete it") from e
    keys = data.get("keys") if isinstance(data, dict) else None
    model = data.get("model") if isinstance(data, dict) else None
    if not isinstance(keys, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in keys.items()):
        raise ConfigError(f"{path} is not what `codling login` writes: run `codling login` again, or delete it")
    return Stored(dict(keys), model if isinstance(model, str) and model else None)


def _write(home: Path, stored: Stored) -> Path:
    """Replace the file atomically, created 0600 (never readable by others, not even for a moment)."""
    path = credentials_file(home)
    home.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{FILE_NAME}.{os.getpid()}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump({"keys": stored.keys, "model": stored.model}, out, indent=2)
            out.write("\n")
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return path


def store(home: Path, variable: str, key: str, model: str | None) -> Path:
    """Store ``key`` as ``variable``'s value (and ``model`` as the one to use, if given); returns the file."""
    try:
        current = read(home)
    except ConfigError:  # unreadable, or readable by others: what is stored now starts it afresh
        current = Stored()
    return _write(home, Stored({**current.keys, variable: key}, model or current.model))


def forget(
    home: Path, variables: Collection[str] | None = None, environ: MutableMapping[str, str] | None = None
) -> list[str]:
    """Remove the stored keys of ``variables`` (None: all of them, and the model); the names removed. Each
    removed key is taken out of ``environ`` too where its variable holds exactly that key (:func:`apply` put it
    there); a variable holding another value was set by the environment, and stays."""
    path = credentials_file(home)
    if not path.exists():
        return []
    if variables is None:
        try:
            removed = read(home).keys
        except ConfigError:  # unusable or readable by others (so never applied): removed all the same
            path.unlink()
            return [FILE_NAME]
        path.unlink()
    else:
        current = read(home)
        removed = {name: key for name, key in current.keys.items() if name in variables}
        if removed:
            _write(home, Stored({k: v for k, v in current.keys.items() if k not in removed}, current.model))
    for name, key in removed.items():
        if environ is not None and key and environ.get(name) == key:
            del environ[name]
    return list(removed)


def apply(environ: MutableMapping[str, str]) -> list[str]:
    """Set in ``environ`` every stored key whose variable it does not set (the environment wins); the names set."""
    stored = read(codling_home(environ))
    added = [name for name, key in stored.keys.items() if key and not environ.get(name)]
    for name in added:
        environ[name] = stored.keys[name]
    return added
