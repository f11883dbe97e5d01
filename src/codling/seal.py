"""Keeping codling's own secrets out of reach of the commands it runs.

Commands get an environment without secret variables (``codling.secrecy``), but a command can read its parent:
``cat /proc/$PPID/environ`` shows the environment codling itself was started with, keys included, and
``ps eww`` shows the same. What ``/proc/<pid>/environ`` shows is the block of memory the environment was
handed over in when the program started; changing ``os.environ`` afterwards does not change it. So
:func:`seal` overwrites the secret values in that block itself (Linux: ``/proc/self/mem`` at the block's
bounds from ``/proc/self/stat``) and checks that ``/proc/self/environ`` no longer shows them; ``os.environ``
keeps them, where settings, providers and the redactors find them as before.

Where that cannot be done (not Linux, no ``/proc``), a command that may run tools starts codling again, at once
and before anything else runs, with those variables taken out of its environment and handed over through an
inherited pipe instead; the new process puts them back into ``os.environ``. That costs a second Python
start-up, which the in-place erasure saves.

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
    *,
    restart: bool = True,
    erase: Callable[[Mapping[str, str]], bool] | None = None,
) -> None:
    """Take this process's secret variables (``codling.secrecy``'s rule, plus the ``known`` names) out of what
    ``/proc`` shows of its environment: erased in place (``erase``, default :func:`erase_from_environ_block`),
    else, if ``restart``, by restarting without them. In a restarted process, take them back.

    Does nothing when there is nothing to hide. If neither can be done, codling goes on unsealed and says so on
    stderr (never stdout: ``codling acp`` keeps it for JSON-RPC).
    """
    environ = os.environ if env is None else env
    if SEALED_FD in environ:
        _unseal(environ)
        return
    from codling.secrecy import secret_names

    hidden = {name: environ[name] for name in secret_names(environ, known)}
    if not hidden or (erase or erase_from_environ_block)(hidden):
        return
    if restart:
        _restart(hidden, environ, argv, execve)


def erase_from_environ_block(hidden: Mapping[str, str]) -> bool:
    """Overwrite with NUL bytes the values of ``hidden``'s variables in the environment block this process was
    started with, which ``/proc/<pid>/environ`` and ``ps eww`` show (Linux); whether that block now shows none
    of the values. The C library's own copies are renewed (``putenv``), for programs started without an
    explicit environment."""
    try:
        with open("/proc/self/stat", "rb") as stat:
            fields = stat.read().rpartition(b")")[2].split()
        start, end = int(fields[47]), int(fields[48])  # env_start and env_end, fields 50 and 51 of proc(5)
        names = {os.fsencode(name) for name in hidden}
        with open("/proc/self/mem", "r+b", buffering=0) as mem:
            mem.seek(start)
            offset = 0
            for entry in mem.read(end - start).split(b"\0"):
                name, sep, value = entry.partition(b"=")
                if sep and value and name in names:
                    mem.seek(start + offset + len(name) + 1)
                    mem.write(bytes(len(value)))
                offset += len(entry) + 1
        with open("/proc/self/environ", "rb") as shown:
            left = shown.read()
    except (OSError, ValueError, IndexError):  # no /proc, or not Linux's
        return False
    for name, value in hidden.items():
        os.putenv(name, value)
    return not any(os.fsencode(value) in left for value in hidden.values() if value)


def _restart(
    hidden: dict[str, str],
    environ: Mapping[str, str],
    argv: list[str] | None,
    execve: Callable[[str, list[str], dict[str, str]], object],
) -> None:
    """Start this program again without ``hidden``, handed over through an inherited pipe."""
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
