"""Real processes in tests: the environment a test starts codling with, whether a process still runs, waiting for
one to be gone, a named pipe another process writes to when something happened, and another process holding a
stored session open. Each wait is on an event (a pidfd, a pipe), bounded by a liveness deadline so that a test
fails rather than hangs."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Self

from tests.fakes.deadlines import deadline

if TYPE_CHECKING:
    from codling.store.index import SessionStore

COVERAGE_VARIABLES = ("COVERAGE_PROCESS_CONFIG", "COVERAGE_PROCESS_START")
"""What coverage's subprocess patch sets in the tests' environment so that the processes they start are measured."""

CARRIED_VARIABLES = (*COVERAGE_VARIABLES, "PYTHONPATH")
"""What a codling process a test starts keeps of the tests' environment: coverage's variables, and
``PYTHONPATH`` so that it runs the sources under test (a worktree's, not the virtualenv's editable install)."""


def measured(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` for a codling process a test starts, with coverage's variables when `scripts/coverage` runs the tests
    and the tests' ``PYTHONPATH`` (:data:`CARRIED_VARIABLES`).

    The e2e tests give codling a minimal environment so that no credentials leak in from the machine; without
    coverage's variables those processes would run unmeasured.
    """
    return {**{name: os.environ[name] for name in CARRIED_VARIABLES if name in os.environ}, **env}


def alive(pid: int) -> bool:
    """Whether ``pid`` runs; a zombie (killed, not yet reaped) counts as gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


async def readable(fd: int) -> None:
    """Wait until ``fd`` is readable, in the event loop."""
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_reader(fd, wake)
    try:
        await ready
    finally:
        loop.remove_reader(fd)


async def gone(pid: int, within: float = 10.0) -> bool:
    """Whether ``pid`` is gone within ``within`` seconds (a liveness deadline). Waits on a pidfd, which becomes
    readable once the process has ended: a zombie (ended, not yet reaped) counts as gone."""
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        async with asyncio.timeout(deadline(within)):
            await readable(pidfd)
    except TimeoutError:
        return False
    finally:
        os.close(pidfd)
    return True


class Fifo:
    """A named pipe at ``path`` on which another process says that something happened (``echo $$ > path``):
    the test waits on the pipe, not on a file it polls.

    The test holds it open for reading and writing, so a writer never blocks opening it and the test never
    reads an end of file, however many writers come and go.
    """

    def __init__(self, path: Path) -> None:
        os.mkfifo(path)
        self.path = path
        self._fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)
        self._received = ""

    async def receive(self, until: Callable[[str], bool], within: float = 10.0) -> str:
        """Everything written to the pipe so far, once ``until`` holds for it (within a liveness deadline)."""
        async with asyncio.timeout(deadline(within)):
            while not until(self._received):
                await readable(self._fd)
                try:
                    self._received += os.read(self._fd, 65536).decode()
                except BlockingIOError:
                    continue
        return self._received

    async def lines(self, count: int, within: float = 10.0) -> list[str]:
        """The first ``count`` lines written to the pipe, once they are all there."""
        text = await self.receive(lambda received: received.count("\n") >= count, within)
        return text.splitlines()[:count]

    async def pid(self, within: float = 10.0) -> int:
        """The pid written as the pipe's first line."""
        (line,) = await self.lines(1, within)
        return int(line)

    def close(self) -> None:
        os.close(self._fd)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


WRITER = """
import sys
from pathlib import Path
from codling.store.index import SessionStore
file = SessionStore(Path(sys.argv[1])).open(sys.argv[2])
print("open", flush=True)
if sys.stdin.readline().strip() == "close":
    file.close()
"""


def other_writer(store: SessionStore, sid: str) -> subprocess.Popen[str]:
    """Another process that holds the stored session ``sid`` open for writing, as another codling would, until
    it is sent "close" (or its stdin ends); it has taken the session's lock when this returns."""
    child = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(store.root.parent), sid],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None and child.stdout.readline() == "open\n"
    return child
