"""A per-command subreaper: what a command starts cannot slip out of reach by leaving its process tree.

A process that starts a daemon (``setsid … &``, a double fork) and clears its environment leaves the command's
process group and loses ``CODLING_COMMAND_ID``; its parent exits and the kernel hands it to init, where
nothing ties it to the command any more. On Linux ``LocalTerminal`` therefore runs each command under this
small program (stdlib only, started as ``python -I -S -c REAPER``): it makes itself a *child subreaper*
(``prctl(PR_SET_CHILD_SUBREAPER)``), so such orphans are handed to it instead of init, starts the shell as
its child, and when the shell exits, or it is told to stop (SIGTERM, SIGHUP, SIGINT), stops every process
below it — SIGTERM, a grace, then SIGKILL until none is left — and exits as the shell did (same exit code,
or killed by the same signal). ``tools/processes.py`` still sweeps the group and the marked processes
afterwards, as a second net.
"""

from __future__ import annotations

import os
import sys

REAPER = r"""
import ctypes, os, signal, sys, time

class Stop(Exception):
    pass

def stop(signum, frame):
    raise Stop()

grace, argv = float(sys.argv[1]), sys.argv[2:]
for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
    signal.signal(sig, stop)
if ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) != 0:  # PR_SET_CHILD_SUBREAPER
    sys.exit(125)
shell = os.fork()
if shell == 0:
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, signal.SIG_DFL)
    try:
        os.execv(argv[0], argv)
    finally:
        os._exit(127)
null = os.open(os.devnull, os.O_RDWR)
for fd in (0, 1, 2):  # only the command's processes may hold its output pipe
    os.dup2(null, fd)
me = os.getpid()

def below():
    parents = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open("/proc/" + name + "/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if fields[0] not in ("Z", "X"):
                parents[int(name)] = int(fields[1])
    found, grew = {me}, True
    while grew:
        new = {pid for pid, parent in parents.items() if parent in found and pid not in found}
        found |= new
        grew = bool(new)
    found.discard(me)
    return found

def reap():
    global status
    while True:
        try:
            pid, code = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        if pid == shell:
            status = code

status = None
try:
    _, status = os.waitpid(shell, 0)
except Stop:
    pass
try:
    for sig, wait in [(signal.SIGTERM, grace)] + [(signal.SIGKILL, 1.0)] * 5:
        left = below()
        if not left:
            break
        for pid in left:
            try:
                os.kill(pid, sig)
            except OSError:
                pass
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and below():
            reap()
            time.sleep(0.02)
        reap()
except Stop:
    pass
if status is None:
    os._exit(128 + signal.SIGTERM)
if os.WIFSIGNALED(status):
    if os.WTERMSIG(status) != signal.SIGKILL:
        signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
    os.kill(me, os.WTERMSIG(status))
os._exit(os.waitstatus_to_exitcode(status))
"""
"""The reaper's program; its arguments are the grace in seconds, then the command's argv."""


def reaper_argv(grace: float, argv: list[str]) -> list[str] | None:
    """The argv that runs ``argv`` under the reaper, or None where there are no subreapers (not Linux)."""
    if not sys.platform.startswith("linux") or not os.path.isdir("/proc/self"):
        return None
    return [sys.executable, "-I", "-S", "-c", REAPER, repr(grace), *argv]
