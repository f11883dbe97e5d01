"""The agent's stdin and stdout as streams, and knowing when the client stopped reading stdout.

On pipes (what an editor gives) stdin and stdout are asyncio pipe transports, as the SDK's ``stdio_streams``
makes them, but stdout's writer notices when the client closes its end (:attr:`PipeWriter.gone`): the agent
then ends its turns as when stdin ends, instead of streaming into a closed pipe, each write logging a warning,
until the turn is over.

``codling acp < requests.jsonl > replies.jsonl`` is a fine way to script the agent, but asyncio's pipe
transports refuse regular files. Then stdin is read by a thread that feeds an ``asyncio.StreamReader`` and
stdout is written directly (:class:`FileWriter`): a file takes writes at once, and a pipe beside it (only one
of the two is a file) blocks only while the client is not reading.
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
        self.gone = asyncio.Event()
        """Set once a write finds no reader (a pipe beside a file, closed): later writes are dropped."""

    def write(self, data: bytes) -> None:
        """Write all of ``data``."""
        view = memoryview(data)
        while view and not self.gone.is_set():
            try:
                view = view[os.write(self._fd, view) :]
            except BrokenPipeError:
                self.gone.set()

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


class _StdoutProtocol(asyncio.BaseProtocol):
    """stdout's pipe protocol: flow control for ``drain``, and ``gone`` once the client closed its end."""

    def __init__(self) -> None:
        self.gone = asyncio.Event()
        self._resumed = asyncio.Event()
        self._resumed.set()

    def pause_writing(self) -> None:
        self._resumed.clear()

    def resume_writing(self) -> None:
        self._resumed.set()

    def connection_lost(self, exc: Exception | None) -> None:
        self.gone.set()
        self._resumed.set()  # nobody will read what waits: let a drain go

    async def writable(self) -> None:
        """Return once the transport's buffer is below its high-water mark again (or the client is gone)."""
        await self._resumed.wait()


class PipeWriter:
    """Writes the agent's messages to stdout's pipe transport (the part of ``asyncio.StreamWriter`` the SDK's
    message sender uses); once the client has closed its end (``gone``), writes are dropped."""

    def __init__(self, transport: asyncio.WriteTransport, protocol: _StdoutProtocol) -> None:
        self._transport = transport
        self._protocol = protocol
        self.gone = protocol.gone

    def write(self, data: bytes) -> None:
        """Queue ``data`` on the transport, unless nobody reads any more."""
        if not self.gone.is_set():
            self._transport.write(data)

    async def drain(self) -> None:
        """Wait while the client reads slower than the agent writes (never once it is gone)."""
        await self._protocol.writable()


async def pipe_streams(limit: int) -> tuple[asyncio.StreamReader, PipeWriter]:
    """stdin and stdout as asyncio pipe streams (``limit``: the longest line read)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=limit)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    transport, protocol = await loop.connect_write_pipe(_StdoutProtocol, sys.stdout)
    return reader, PipeWriter(transport, protocol)


def _is_file(fd: int) -> bool:
    try:
        return stat.S_ISREG(os.fstat(fd).st_mode)
    except OSError:
        return False
