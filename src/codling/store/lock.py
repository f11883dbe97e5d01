"""One writer per session without a file descriptor held open: a lock file naming the process that writes.

``history.jsonl.lock`` is created with ``O_EXCL`` and holds the owner's pid and start time (from
``/proc/<pid>/stat``, so a pid the system reused for another process does not count as the owner). A lock whose
owner is gone (killed, crashed) is stale and taken over. The check-and-take is done while holding a short
``flock`` on the history file, so two processes taking over the same stale lock cannot both win. The lock is
removed on close and, for whatever is still held, when the interpreter exits.
"""

from __future__ import annotations

import atexit
import fcntl
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

from codling.errors import SessionError, SessionHeldError

log = logging.getLogger(__name__)

GUARD_TIMEOUT = 2.0
"""Seconds to wait for another process's check-and-take on the same session (it takes milliseconds)."""

_PROC = Path("/proc")
PID_LIMIT = 4_194_304
"""The largest pid Linux can give (``PID_MAX_LIMIT``); other systems stay below it too."""


def _start_time(pid: int) -> str | None:
    """The process's start time as /proc gives it (clock ticks since boot); None when there is no such
    process (or only its zombie); "" when this system has no /proc to ask."""
    try:
        data = (_PROC / str(pid) / "stat").read_bytes()
    except FileNotFoundError:
        if (_PROC / "self" / "stat").exists():
            return None
        return "" if _signal_reaches(pid) else None
    except OSError:
        return ""
    # The command name (field 2) may hold spaces and parentheses: count fields after its closing one.
    fields = data[data.rindex(b")") + 2 :].split()
    if fields[0] in (b"Z", b"X"):  # a zombie has exited; its parent just has not reaped it yet
        return None
    return fields[19].decode("ascii")


def _signal_reaches(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass(frozen=True)
class Owner:
    """A process that may hold a session's lock."""

    pid: int
    started: str

    @classmethod
    def current(cls) -> Owner:
        """This process."""
        return cls(os.getpid(), _start_time(os.getpid()) or "")

    @classmethod
    def parse(cls, text: str) -> Owner | None:
        """The owner a lock file names, or None when it names none (a write cut short by a crash)."""
        parts = text.split()
        if len(parts) not in (1, 2) or not parts[0].isdigit() or len(parts[0]) > len(str(PID_LIMIT)):
            return None  # a pid no process can have: a damaged file
        return cls(int(parts[0]), parts[1] if len(parts) == 2 else "")

    def text(self) -> str:
        """What the lock file holds."""
        return f"{self.pid} {self.started}\n"

    def alive(self) -> bool:
        """Whether this process still runs (the same process, not another that got its pid)."""
        started = _start_time(self.pid)
        if started is None:
            return False
        return not (self.started and started and started != self.started)


_held: set[Path] = set()


def acquire(lock: Path, guard: int, what: str) -> None:
    """Take ``lock`` for this process, holding ``flock`` on the open file ``guard`` meanwhile; raise
    ``SessionError`` if a live process holds it."""
    _guarded(guard, what)
    try:
        me = Owner.current()
        for _ in range(3):
            try:
                fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            except FileExistsError:
                holder = _holder(lock)
                if holder is not None and holder.alive():
                    mine = " (this process)" if holder.pid == me.pid else f" (pid {holder.pid})"
                    raise SessionHeldError(
                        f"{what} is open in another codling process{mine}; close it there first"
                    ) from None
                log.warning("%s: taking over a stale lock (%s)", lock, holder or "no owner recorded")
                lock.unlink(missing_ok=True)
                continue
            try:
                os.write(fd, me.text().encode("ascii"))
            finally:
                os.close(fd)
            _held.add(lock)
            return
        raise SessionError(f"{what} could not be locked for writing; try again")
    finally:
        fcntl.flock(guard, fcntl.LOCK_UN)


def release(lock: Path) -> None:
    """Remove ``lock`` if this process holds it."""
    _held.discard(lock)
    holder = _holder(lock)
    if holder is not None and holder == Owner.current():
        lock.unlink(missing_ok=True)


def held_elsewhere(lock: Path) -> bool:
    """Whether a live process other than this one holds ``lock``."""
    holder = _holder(lock)
    return holder is not None and holder.pid != os.getpid() and holder.alive()


def _holder(lock: Path) -> Owner | None:
    try:
        return Owner.parse(lock.read_text(encoding="ascii", errors="replace"))
    except OSError:
        return None


def _guarded(guard: int, what: str) -> None:
    deadline = time.monotonic() + GUARD_TIMEOUT
    while True:
        try:
            fcntl.flock(guard, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise SessionError(f"{what} is being opened by another process; try again") from None
            time.sleep(0.005)  # another process is between its check and its take: milliseconds


@atexit.register
def _release_all() -> None:
    for lock in list(_held):
        release(lock)
