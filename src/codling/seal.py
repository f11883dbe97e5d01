"""Keeping codling's own secrets out of reach of the commands it runs.

Commands get an environment without secret variables (``codling.secrecy``), but a command can read its parent:
``cat /proc/$PPID/environ`` shows the environment codling itself was started with, keys included, and
``ps eww`` shows the same. What ``/proc/<pid>/environ`` shows is fixed when the program starts; changing
``os.environ`` afterwards does not change it. So :func:`seal` starts codling again, at once and before
anything else runs, with those variables taken out of its environment and handed over through an inherited
pipe instead; the new process puts them back into ``os.environ`` (which writes fresh memory, not the block
``/proc`` shows), where settings, providers and the redactors find them as before.

Its memory holds them still, and a process of the same user may read ``/proc/<pid>/mem`` (and ``environ``,
``maps``…) of any process it could trace. :func:`undumpable` makes codling non-dumpable
(``prctl(PR_SET_DUMPABLE, 0)``, Linux), so those files belong to root and only codling itself (and root) may
read them; the programs codling starts are dumpable again (``execve`` resets the flag).

Not covered: the program that launched codling (an editor, a shell) may hold the same variables in its own
environment, and root can still read codling's memory.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable, Mapping

SEALED_FD = "CODLING_SEALED_FD"
"""The variable that tells a sealed codling which inherited descriptor holds its secrets."""

_PIPE_BYTES = 60_000
"""A pipe holds 64 KiB without a reader; more than that is not sealed (it would block)."""


def seal(
    known: Iterable[str] = (),
    env: Mapping[str, str] | None = None,
    argv: list[str] | None = None,
    execve: Callable[[str, list[str], dict[str, str]], object] = os.execve,
) -> None:
    """Restart this process without its secret variables (``codling.secrecy``'s rule, plus the ``known``
    names), or, in the restarted process, take them back.

    Does nothing when there is nothing to hide. If the restart cannot happen, codling goes on unsealed and
    says so on stderr (never stdout: ``codling acp`` keeps it for JSON-RPC).
    """
    environ = os.environ if env is None else env
    if SEALED_FD in environ:
        _unseal(environ)
        return
    from codling.secrecy import secret_names

    hidden = {name: environ[name] for name in secret_names(environ, known)}
    if not hidden:
        return
    payload = json.dumps(hidden).encode("utf-8", "surrogateescape")
    if len(payload) > _PIPE_BYTES:
        _warn("its secret variables are too large to hand over")
        return
    read_end, write_end = os.pipe()
    os.write(write_end, payload)
    os.close(write_end)
    os.set_inheritable(read_end, True)
    sealed = {name: value for name, value in environ.items() if name not in hidden}
    sealed[SEALED_FD] = str(read_end)
    command = list(sys.orig_argv) if argv is None else argv
    try:
        execve(sys.executable, command, sealed)
    except OSError as e:
        _warn(f"it could not restart itself ({e.strerror or e})")
    os.close(read_end)


_PR_SET_DUMPABLE = 4


def undumpable() -> bool:
    """Make this process non-dumpable (Linux), so that no other process of the same user can read its memory or
    environment through ``/proc`` (it still reads its own) and no core dump holds its secrets; whether that
    was done (False elsewhere)."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        return bool(ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) == 0)
    except (OSError, AttributeError):  # no prctl to be found
        return False


def _unseal(environ: Mapping[str, str]) -> None:
    fd = int(environ[SEALED_FD])
    os.environ.pop(SEALED_FD, None)
    chunks = []
    try:
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    finally:
        os.close(fd)
    for name, value in json.loads(b"".join(chunks).decode("utf-8", "surrogateescape")).items():
        os.environ[name] = value


def _warn(problem: str) -> None:
    print(f"codling: warning: {problem}, so commands could read its secret variables from /proc", file=sys.stderr)
