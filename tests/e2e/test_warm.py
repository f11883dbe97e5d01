"""The warm codling the e2e tests start (tests/fakes/warm.py) behaves as a cold one where the tests look: its
output and exit code, its arguments and working directory, a signal sent to the pid a test holds, the end of
its stdin, and a SIGKILL (its launcher gone, so is the codling)."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

from tests.fakes import warm
from tests.fakes.deadlines import deadline
from tests.fakes.processes import gone


def env_for(home: Path) -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "CODLING_HOME": str(home)}


def run(command: list[str], home: Path, cwd: Path, *args: str) -> tuple[int, str, str]:
    done = subprocess.run(
        [*command, *args], env=env_for(home), cwd=cwd, capture_output=True, text=True, timeout=deadline(60)
    )
    return done.returncode, done.stdout, done.stderr


def test_a_warm_codling_answers_as_a_cold_one(home: Path, project: Path) -> None:
    for args in (("run", "--no-such-option"), ("sessions", "list"), ("--version",), ("run", "--help")):
        assert run(warm.codling(), home, project, *args) == run(warm.cold(), home, project, *args), args


def children_of(pid: int) -> set[int]:
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        found |= {int(child) for child in (task / "children").read_text().split()}
    return found


def started(home: Path, project: Path) -> tuple[subprocess.Popen[bytes], int]:
    """A warm ``codling acp`` waiting on its stdin, and the pid of the codling behind its launcher."""
    server = warm.server_pid()
    before = children_of(server)
    launcher = subprocess.Popen(
        [*warm.codling(), "acp"], env=env_for(home), cwd=project, stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert launcher.stdin is not None and launcher.stdout is not None
    launcher.stdin.write(b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}\n')
    launcher.stdin.flush()
    assert b'"id":1' in launcher.stdout.readline().replace(b" ", b"")  # the codling is up and answering
    (codling,) = children_of(server) - before
    return launcher, codling


async def test_signals_stdin_and_sigkill_reach_the_codling_behind_the_launcher(home: Path, project: Path) -> None:
    launcher, codling = started(home, project)
    launcher.send_signal(signal.SIGTERM)
    assert launcher.wait(deadline(30)) == 128 + signal.SIGTERM  # codling acp's own exit on SIGTERM
    assert await gone(codling)

    launcher, codling = started(home, project)
    assert launcher.stdin is not None
    launcher.stdin.close()
    assert launcher.wait(deadline(30)) == 0
    assert await gone(codling)

    launcher, codling = started(home, project)
    launcher.kill()
    launcher.wait(deadline(30))
    assert await gone(codling)  # the server kills it as soon as the launcher's connection closes
