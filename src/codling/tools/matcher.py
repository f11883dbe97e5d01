"""Python's ``re`` over a list of files, run as a child process: ``python -m codling.tools.matcher``.

``search`` uses it when ripgrep cannot take the pattern. A pattern can backtrack for hours (``(a+)+$`` on a long
line of ``a``) while holding the GIL, which in a thread would freeze the whole agent; in a process of its own
the caller's event loop keeps running, and the caller kills it at its deadline or on cancellation.

Protocol: one JSON request on stdin (:class:`Request`'s fields), one JSON answer on stdout: ``{"matches":
[[file index, line number, text], …], "more": bool}`` or ``{"error": message}`` for an invalid pattern.
It imports only the standard library, so it starts fast.

:func:`searchable` is also the rule the caller applies to ripgrep's matches: only regular files with a
single hard link, never through a symbolic link.
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys
from typing import Any, TypedDict

BINARY_SNIFF_BYTES = 8192
"""How much of a file is looked at for a NUL byte (ripgrep's rule for binary)."""


def looks_binary(data: bytes) -> bool:
    """Whether ``data`` is binary as ripgrep judges it: a NUL byte early on (also the file tools' rule)."""
    return b"\0" in data[:BINARY_SNIFF_BYTES]


class Request(TypedDict):
    """What the caller sends."""

    pattern: str
    ignore_case: bool
    files: list[str]
    max_matches: int
    max_file_bytes: int
    line_chars: int


def searchable(st: os.stat_result) -> bool:
    """Whether a file with this ``lstat``/``fstat`` may be read by search: a regular file (not a symbolic
    link, device or FIFO) with one hard link; a second link may be a name for a file outside the workspace."""
    return stat.S_ISREG(st.st_mode) and st.st_nlink == 1


def read_searchable(path: str, max_bytes: int) -> bytes | None:
    """The contents of ``path``, or ``None`` if it is not :func:`searchable`, too big or unreadable. Opened
    without following a final symbolic link and checked on the open file, so a swap after listing is caught."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not searchable(st) or st.st_size > max_bytes:
            return None
        with os.fdopen(fd, "rb", closefd=False) as file:
            return file.read(max_bytes + 1)
    except OSError:
        return None
    finally:
        os.close(fd)


def run(request: Request) -> dict[str, Any]:
    """Search the request's files in order; the answer as described in the module docstring."""
    try:
        regex = re.compile(request["pattern"], re.IGNORECASE if request["ignore_case"] else 0)
    except re.error as e:
        return {"error": f"invalid regular expression {request['pattern']!r}: {e}"}
    limit, chars = request["max_matches"], request["line_chars"]
    matches: list[tuple[int, int, str]] = []
    for index, path in enumerate(request["files"]):
        data = read_searchable(path, request["max_file_bytes"])
        if data is None or looks_binary(data):
            continue
        for number, line in enumerate(data.decode("utf-8", "replace").split("\n"), start=1):
            line = line.removesuffix("\r")
            if regex.search(line):
                if len(matches) == limit:
                    return {"matches": matches, "more": True}
                matches.append((index, number, line[: chars + 1]))
    return {"matches": matches, "more": False}


def main() -> None:
    request: Request = json.loads(sys.stdin.buffer.read())
    json.dump(run(request), sys.stdout)


if __name__ == "__main__":
    main()
