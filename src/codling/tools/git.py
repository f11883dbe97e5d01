"""How codling runs git: never letting the repository's own configuration start a program.

A repository controls its ``.git/config`` (a cloned one ships it; the model can write it), and several of its
settings make even read-only commands run a program: ``core.fsmonitor`` (run by ``ls-files``/``status`` to
learn what changed), hooks (``post-index-change`` fires when ``ls-files --others`` refreshes the index),
``core.sshCommand`` and friends (run by a lazy fetch in a partial clone), and an embedded bare repository
that brings a config of its own. Command-line ``-c`` settings take precedence over every configuration file,
so each git command codling runs gets :data:`SAFE_CONFIG`, through :func:`git_command` and :func:`git_env`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Mapping

SAFE_CONFIG: tuple[str, ...] = (
    "core.fsmonitor=false",  # no file-system monitor program (nor the builtin daemon)
    "core.hooksPath=/dev/null",  # no hooks: the directory holds none
    "core.untrackedCache=false",  # ls-files --others leaves the index alone
    "safe.bareRepository=explicit",  # a bare repository inside the tree is not used (with its config)
    "protocol.allow=never",  # no transport: a lazy fetch cannot run ssh or a remote helper
    "core.sshCommand=false",
    "core.askPass=",
    "credential.helper=",
)
"""``-c`` settings that keep git from running programs named by the repository's configuration."""

_SET_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_OPTIONAL_LOCKS": "0",  # a read must not take the index lock or rewrite the index
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_NO_LAZY_FETCH": "1",
}


def git_command(git: str, *args: str, settings: tuple[str, ...] = SAFE_CONFIG) -> list[str]:
    """The argument list that runs ``git`` (its path) with ``args`` under ``settings``, no pager."""
    overrides = [arg for setting in settings for arg in ("-c", setting)]
    return [git, "--no-pager", *overrides, *args]


def git_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a git command: ``base`` (default: this process's) without any ``GIT_*`` variable,
    which could point git at another repository, configuration or program, plus settings for a quiet read."""
    source = os.environ if base is None else base
    env = {name: value for name, value in source.items() if not name.upper().startswith("GIT_")}
    env.update(_SET_ENV)
    return env


async def git_output(
    git: str, *args: str, settings: tuple[str, ...] = SAFE_CONFIG, timeout: float = 5.0
) -> bytes | None:
    """What ``git args`` prints (under ``settings``, in :func:`git_env`), or ``None`` when it fails, cannot
    start or does not finish within ``timeout`` seconds (it is killed then, never left behind)."""
    try:
        proc = await asyncio.create_subprocess_exec(
            *git_command(git, *args, settings=settings),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            env=git_env(),
        )
    except OSError:
        return None
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        return None
    finally:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await asyncio.shield(proc.wait())
    return out if proc.returncode == 0 else None
