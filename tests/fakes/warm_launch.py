"""The command a test starts a warm codling with (``python -S warm_launch.py SOCKET MODULE ARGS…``, ``MODULE``
being ``codling``, or the fake MCP server's): it hands its module and argv, environment, working directory,
resource limits and its stdin, stdout and stderr to the warm server at ``SOCKET`` (``tests/fakes/warm.py``),
which forks a codling that has its imports done, then stands in for that codling until it ends: a signal sent
to this process reaches the codling, and this process ends as the codling did (its exit code, or killed by the
same signal).

It imports the standard library alone (``-S``: no site-packages), so it starts in a few milliseconds. A SIGKILL
cannot be passed on: the server kills the codling when this process's connection closes, an instant later.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import socket
import struct
import sys

LIMITS = ("RLIMIT_NOFILE", "RLIMIT_FSIZE", "RLIMIT_AS", "RLIMIT_CPU")
"""The resource limits the codling gets from this process, as a process started in its place would."""

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
"""The signals passed on to the codling (SIGWINCH too: a terminal resized)."""


def _raw(text: str) -> str:
    """``text`` as the bytes the system gave (surrogate escapes undone), carried through JSON as latin-1."""
    return os.fsencode(text).decode("latin-1")


def main() -> None:
    path, module, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    child: list[int] = []
    pending: list[int] = []

    def forward(number: int, _frame: object) -> None:
        if child:
            os.kill(child[0], number)
        else:
            pending.append(number)

    for number in (*FORWARDED, signal.SIGWINCH):
        signal.signal(number, forward)
    request = json.dumps(
        {
            "module": module,
            "argv": [_raw(arg) for arg in args],
            "env": [[k.decode("latin-1"), v.decode("latin-1")] for k, v in os.environb.items()],
            "cwd": os.getcwdb().decode("latin-1"),
            "limits": {name: resource.getrlimit(getattr(resource, name)) for name in LIMITS},
        }
    ).encode()
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.connect(path)
    socket.send_fds(server, [struct.pack("!I", len(request))], [0, 1, 2])
    server.sendall(request)
    # The codling holds the streams now: this process lets go of its copies, so that an end of file or a broken
    # pipe reaches the codling as it would a codling started directly.
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
    replies = server.makefile("r")
    for line in replies:
        word, value = line.split()
        if word == "pid":
            child.append(int(value))
            for waiting in pending:
                os.kill(child[0], waiting)
        elif word == "status":
            status = int(value)
            if os.WIFSIGNALED(status):
                killed_by = os.WTERMSIG(status)
                signal.signal(killed_by, signal.SIG_DFL)
                os.kill(os.getpid(), killed_by)
            sys.exit(os.waitstatus_to_exitcode(status))
    sys.exit(70)  # the warm server went away


if __name__ == "__main__":
    main()
