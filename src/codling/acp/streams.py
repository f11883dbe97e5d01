"""The agent's stdin and stdout as streams, when either is a regular file.

``codling acp < requests.jsonl > replies.jsonl`` is a fine way to script the agent, but asyncio's pipe
transports (which the SDK's ``stdio_streams`` uses) refuse regular files. Then stdin is read by a thread that
feeds an ``asyncio.StreamReader`` and stdout is written directly: a file takes writes at once, and a pipe
beside it (only one of the two is a file) blocks only while the client is not reading.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
import sys
import threading

READ_CHUNK = 64 * 1024


def either_is_a_file() -> bool:
    """Whether stdin or stdout is a regular file (asyncio's pipe transports would refuse it)."""
    return any(_is_file(stream.fileno()) for stream in (sys.stdin, sys.stdout))


class FileWriter:
    """Writes the agent's messages to a file descriptor, whole, as they are sent (the part of
    ``asyncio.StreamWriter`` the SDK's message sender uses)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def write(self, data: bytes) -> None:
        """Write all of ``data``."""
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]

    async def drain(self) -> None:
        """Nothing to wait for: every write is done when ``write`` returns."""


def file_streams(limit: int) -> tuple[asyncio.StreamReader, FileWriter]:
    """stdin as a reader fed by a thread (``limit``: the longest line it takes), and stdout as a writer."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=limit)
    fd = sys.stdin.fileno()

    def feed() -> None:
        try:
            while chunk := os.read(fd, READ_CHUNK):
                loop.call_soon_threadsafe(reader.feed_data, chunk)
        except OSError:
            pass  # a closed or unreadable stdin ends the input like its end does
        finally:
            with contextlib.suppress(RuntimeError):  # the loop closed: nobody reads any more
                loop.call_soon_threadsafe(reader.feed_eof)

    threading.Thread(target=feed, name="codling-stdin", daemon=True).start()
    return reader, FileWriter(sys.stdout.fileno())


def _is_file(fd: int) -> bool:
    try:
        return stat.S_ISREG(os.fstat(fd).st_mode)
    except OSError:
        return False
