"""Everything a command started, found and stopped, including what left its process group.

A command runs in its own process group, but a process it starts with ``setsid`` (``nohup`` and daemons that
fork twice do the same) has left that group, so killing the group misses it. Each command's environment
therefore carries ``CODLING_COMMAND_ID=<uuid>``, which every descendant inherits unless it clears its
environment on purpose; on Linux, ``/proc`` tells which processes of this user carry it, or belong to the
group, or descend from one that does. Where there is no ``/proc`` (macOS) only the group can be stopped, and
:data:`CANNOT_FIND_STRAYS` says so. On Linux a local command also runs under its own subreaper
(``tools/reaper.py``), which keeps even a process that clears its environment and leaves the tree; this scan
is then the second net (for a reaper killed by its own command, and for the editor's terminals).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path

COMMAND_ID_VARIABLE = "CODLING_COMMAND_ID"
"""The environment variable that marks every process of one command."""

PLAIN_OUTPUT_VARIABLES = {"NO_COLOR": "1", "TERM": "dumb", "PAGER": "cat", "GIT_PAGER": "cat"}
"""Set for every command: programs that honour them print no colours or cursor moves and start no pager (which
would wait for a key nobody presses). Output is cleaned in any case (``text.plain_terminal_text``); these save
the program the work and the user the wait."""

CANNOT_FIND_STRAYS = (
    "[note: this system has no /proc, so processes the command started in a new session (setsid, nohup, "
    "daemons) could not be found and may still run]"
)

_PROC = Path("/proc")
_POLL_SECONDS = 0.05
_KILL_PASSES = 5
"""SIGKILL sweeps at most: a process may fork between one scan and its kill."""


def new_command_id() -> str:
    """A fresh id for one command's environment."""
    return uuid.uuid4().hex


def can_find_strays(proc: Path = _PROC) -> bool:
    """Whether processes can be found by their environment here (Linux's /proc)."""
    return (proc / "self" / "environ").exists()


def members(command_id: str, pgid: int | None = None, proc: Path = _PROC) -> set[int]:
    """The live processes of this user that belong to the command: in process group ``pgid``, carrying
    ``command_id`` in their environment, or descended from one of those. Empty where there is no /proc."""
    marker = f"{COMMAND_ID_VARIABLE}={command_id}".encode()
    me, uid = os.getpid(), os.getuid()
    found: set[int] = set()
    parents: dict[int, int] = {}
    try:
        entries = list(proc.iterdir())
    except OSError:
        return found
    for entry in entries:
        if not entry.name.isdigit() or (pid := int(entry.name)) == me:
            continue
        try:
            if entry.stat().st_uid != uid:
                continue
            # The command name (in parentheses) may hold spaces and parentheses: split after the last one.
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if fields[0] in ("Z", "X"):  # dead, waiting to be reaped: nothing to stop
                continue
            parents[pid] = int(fields[1])
            if (pgid is not None and int(fields[2]) == pgid) or marker in (entry / "environ").read_bytes().split(b"\0"):
                found.add(pid)
        except (OSError, IndexError, ValueError):  # gone meanwhile, or not ours to read
            continue
    grew = True
    while grew:  # descendants that cleared their environment and left the group
        children = {pid for pid, parent in parents.items() if parent in found and pid not in found}
        found |= children
        grew = bool(children)
    return found


def signal_all(pgid: int | None, pids: set[int], sig: signal.Signals) -> None:
    """Send ``sig`` to the process group and to each process (those already gone are skipped)."""
    if pgid is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


async def stop_command(
    command_id: str, pgid: int | None, grace: float, settled: Callable[[], bool] = lambda: True
) -> None:
    """Stop everything of the command: SIGTERM, up to ``grace`` seconds for it to go (and for ``settled``, e.g.
    the shell reaped and its pipe closed), then SIGKILL sweeps until nothing is left. Returns at once when
    nothing is left to stop."""
    scan = can_find_strays()
    left = await asyncio.to_thread(members, command_id, pgid) if scan else set()
    if scan and not left and settled():
        return
    done = False
    try:
        signal_all(pgid, left, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            if scan:
                left = await asyncio.to_thread(members, command_id, pgid)
            if settled() and (not left if scan else not _group_alive(pgid)):
                done = True
                return
            await asyncio.sleep(_POLL_SECONDS)
    finally:
        # Also reached when our caller is cancelled meanwhile: nothing of the command may survive it.
        for _ in range(_KILL_PASSES if not done else 0):
            signal_all(pgid, left, signal.SIGKILL)
            left = members(command_id, pgid) if scan else set()
            if not left:
                break


def _group_alive(pgid: int | None) -> bool:
    if pgid is None:
        return False
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


async def captured(
    args: list[str], *, timeout: float, cwd: Path | None = None, env: Mapping[str, str] | None = None
) -> bytes | None:
    """What the program ``args`` prints on stdout (stdin empty, stderr dropped), or None when it cannot start,
    exits with an error, or does not finish within ``timeout`` seconds (it is killed then, never left behind)."""
    try:
        proc = await asyncio.create_subprocess_exec(
            *args,
            cwd=cwd,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
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
