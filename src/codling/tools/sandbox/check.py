"""``codling sandbox check``: what the sandbox enforces on this machine, tried for real.

Each probe runs a command confined exactly as run_command's are (``LocalTerminal`` under the reaper) and looks
at what happened from outside: a file that must not appear, a listener that must not be reached, a directory
that must read as empty. A probe that cannot be tried here says so rather than pass.
"""

from __future__ import annotations

import contextlib
import os
import platform
import shlex
import socket
import sys
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from codling.errors import SandboxUnavailable
from codling.tools.local import LocalTerminal
from codling.tools.sandbox.confine import landlock_abi
from codling.tools.sandbox.policy import Sandbox, linked_git_directories

Runner = Callable[[str], Awaitable[tuple[int | None, str]]]
"""Runs a command line confined; its exit code and output."""


@dataclass(frozen=True)
class Probe:
    """One thing the sandbox should enforce, and whether it did here (None: it could not be tried)."""

    what: str
    enforced: bool | None
    detail: str = ""


@dataclass(frozen=True)
class Report:
    """What ``codling sandbox check`` found."""

    kernel: str
    landlock: int
    unavailable: str | None
    """Why the sandbox cannot run here (commands that need it are refused); None when it runs."""
    probes: tuple[Probe, ...]

    @property
    def ok(self) -> bool:
        """Whether every probe that could be tried was enforced."""
        return self.unavailable is None and all(p.enforced is not False for p in self.probes)


async def check(sandbox: Sandbox, cwd: Path, home: Path, codling_home: Path) -> Report:
    """Try each probe in ``cwd`` under ``sandbox`` (see the module docstring)."""
    kernel = f"{platform.system()} {platform.release()}"
    abi = landlock_abi()
    terminal = LocalTerminal()

    async def run(command: str) -> tuple[int | None, str]:
        result = await terminal.run(command, cwd=cwd, timeout=30, output_limit=4000, sandbox=sandbox.policy())
        return result.exit_code, result.output

    try:
        await run("true")
    except SandboxUnavailable as e:
        return Report(kernel, abi, e.reason, ())
    probes = [
        await _workspace_write(run, cwd),
        await _outside_write(run, sandbox, home),
        await _git_hooks(run, cwd),
        await _hidden(run, codling_home),
        await _network(run),
        await _environ(run),
    ]
    return Report(kernel, abi, None, tuple(probes))


async def _workspace_write(run: Runner, cwd: Path) -> Probe:
    fd, name = tempfile.mkstemp(prefix=".codling-sandbox-check-", dir=cwd)
    os.close(fd)
    path = Path(name)
    try:
        code, _ = await run(f"echo ok > {shlex.quote(path.name)}")
        works = code == 0 and path.read_text() == "ok\n"
        return Probe("commands can change files in the workspace", works)
    finally:
        path.unlink(missing_ok=True)


async def _outside_write(run: Runner, sandbox: Sandbox, home: Path) -> Probe:
    what = "writes outside the workspace, its additional directories and temp are refused"
    for place in (home / ".cache", home, Path("/var/lib"), Path("/opt")):
        if place.is_dir() and sandbox.blocked_write(place / "x") and not sandbox.hides(place):
            try:
                target = Path(tempfile.mkdtemp(prefix="codling-sandbox-check-", dir=place))
            except OSError:
                continue
            try:
                await run(f"echo escaped > {shlex.quote(str(target / 'f'))}")
                return Probe(what, not (target / "f").exists(), f"tried {target}")
            finally:
                with contextlib.suppress(OSError):
                    (target / "f").unlink(missing_ok=True)
                    target.rmdir()
    return Probe(what, None, "no directory outside them could be tried")


async def _git_hooks(run: Runner, cwd: Path) -> Probe:
    what = "git's own files (hooks, config) are read-only"
    # A worktree's .git is a file naming its git directory, whose hooks and config are the common one's.
    git = Path(os.path.realpath([cwd / ".git", *linked_git_directories(cwd / ".git")][-1]))
    if not (git / "config").is_file():
        return Probe(what, None, "not a git repository here")
    # New files only (beside the config, in the hooks): a sandbox that fails this leaves nothing changed.
    probes = [git / "hooks" / "codling-sandbox-check", git / "codling-sandbox-check"]
    try:
        await run("; ".join(f"echo escaped > {shlex.quote(str(probe))}" for probe in probes))
        return Probe(what, not any(probe.exists() for probe in probes), f"tried {git}")
    finally:
        for probe in probes:
            probe.unlink(missing_ok=True)


async def _hidden(run: Runner, codling_home: Path) -> Probe:
    what = "credentials (~/.ssh, ~/.aws, ~/.gnupg…) and $CODLING_HOME read as empty"
    if not codling_home.is_dir() or not any(codling_home.iterdir()):
        return Probe(what, None, f"{codling_home} is empty here")
    _, output = await run(f"ls -A {shlex.quote(str(codling_home))}")
    return Probe(what, not output.strip(), f"tried {codling_home}")


async def _network(run: Runner) -> Probe:
    what = "the network is off (not even the host's 127.0.0.1)"
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        listener.setblocking(False)
        port = listener.getsockname()[1]
        connect = f"import socket; socket.create_connection(('127.0.0.1', {port}), 5)"
        await run(f"{shlex.quote(sys.executable)} -c {shlex.quote(connect)}")
        try:
            listener.accept()[0].close()
        except BlockingIOError:
            return Probe(what, True, f"a listener on 127.0.0.1:{port} was not reached")
        return Probe(what, False, f"a listener on 127.0.0.1:{port} was reached")


async def _environ(run: Runner) -> Probe:
    what = "codling's own environment (/proc/PID/environ, which holds its keys) cannot be read"
    code, _ = await run(f"cat /proc/{os.getpid()}/environ > /dev/null")
    return Probe(what, code != 0)
