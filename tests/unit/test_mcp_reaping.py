"""An MCP stdio server under codling's reaper (``tools/reaper.py`` serve mode), driven as the MCP SDK drives it:
its stdin and stdout are pipes, and what it leaves behind in sessions of its own ends with it or with codling."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from codling.tools.reaper import can_reap, server_argv
from tests.fakes.deadlines import deadline
from tests.fakes.mcp import pid_written
from tests.fakes.processes import alive, gone

pytestmark = pytest.mark.skipif(not can_reap(), reason="the reaper needs Linux's /proc and prctl")

DAEMON = "setsid sleep 600 </dev/null >/dev/null 2>&1 & echo $! > daemon.part && mv daemon.part daemon; "


@contextlib.contextmanager
def served(tmp_path: Path, script: str) -> Iterator[subprocess.Popen[bytes]]:
    """``sh -c script`` as an MCP server under the reaper, with pipes on stdin and stdout as the SDK spawns it."""
    argv = server_argv(0.5, None, "/bin/sh", ["sh", "-c", script])
    process = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=tmp_path, start_new_session=True
    )
    try:
        yield process
    finally:
        process.kill()
        process.wait()
        with contextlib.suppress(OSError, ValueError):
            os.kill(int((tmp_path / "daemon").read_text()), signal.SIGKILL)


async def test_a_server_ignoring_its_stdin_ends_with_its_daemon_once_codling_is_gone(tmp_path: Path) -> None:
    with served(tmp_path, DAEMON + "exec sleep 600") as process:
        daemon = await pid_written(tmp_path / "daemon", 20)
        assert process.stdin is not None and process.stdout is not None
        assert alive(daemon) and process.poll() is None
        # codling dying closes its end of the server's stdout (its stdin may stay open: another holder, or a
        # server that never reads it): the reaper sees the pipe has no reader and stops everything.
        process.stdout.close()
        assert await gone(daemon, 10)
        assert process.wait(deadline(10)) == -signal.SIGTERM  # the server was ended by SIGTERM, and so is it


async def test_a_server_that_ends_takes_its_daemon_along_and_its_exit_status_is_kept(tmp_path: Path) -> None:
    with served(tmp_path, DAEMON + "read line; exit 3") as process:
        daemon = await pid_written(tmp_path / "daemon", 20)
        assert process.stdin is not None
        process.stdin.close()  # what the SDK does first when it stops a server
        assert await gone(daemon, 10)
        assert process.wait(deadline(10)) == 3


async def test_a_program_that_cannot_start_says_so_on_stderr(tmp_path: Path) -> None:
    argv = server_argv(0.5, None, str(tmp_path / "missing"), ["missing"])
    done = subprocess.run(argv, stdin=subprocess.PIPE, capture_output=True, timeout=deadline(20), check=False)
    assert done.returncode == 127
    assert done.stderr.decode() == f"cannot start {tmp_path / 'missing'}: No such file or directory\n"
