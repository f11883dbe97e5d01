"""``codling sandbox check`` and failing closed, through real processes (issue 35).

A machine without user namespaces is made for real: codling runs inside a user namespace whose limit of
nested ones is 0 (``/proc/sys/user/max_user_namespaces``, which the namespace's owner may lower), so the
reaper's ``unshare`` is refused by the kernel exactly as on a host that forbids them. Such a codling must refuse
every command that should run confined, saying why in one message, and run none of it; yolo, which is
unconfined, still runs commands there."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.test_cli import base_env, codling, model_env
from tests.fakes import warm
from tests.fakes.deadlines import deadline
from tests.fakes.openai_server import OpenAIServer, Reply, ToolCall, running_server, text_of


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with running_server() as s:
        yield s


def git_project(project: Path) -> Path:
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    return project


def without_user_namespaces(*argv: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``argv`` (a cold codling: a warm one would be forked outside) where no user namespace can be made."""
    unshare = shutil.which("unshare")
    assert unshare is not None, "util-linux's unshare is needed to make a machine without user namespaces"
    return subprocess.run(
        [
            unshare,
            "--user",
            "--map-root-user",
            "sh",
            "-c",
            'echo 0 > /proc/sys/user/max_user_namespaces && exec "$@"',
            "sh",
            *argv,
        ],
        env=env,
        cwd=cwd,
        input="",
        capture_output=True,
        text=True,
        timeout=deadline(60),
        check=False,
    )


def test_sandbox_check_tries_each_rule_and_says_it_holds(home: Path, project: Path) -> None:
    (home / "config.toml").write_text('mode = "auto"\n')  # $CODLING_HOME has something to hide
    result = codling("sandbox", "check", env=base_env(home), cwd=git_project(project))
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == (
        "Sandbox: on — commands are confined in read-only, ask, accept-edits and auto mode; yolo runs commands "
        "unconfined."
    )
    # Each line as said, less what varies (the directory and the port tried).
    tried = [re.sub(r" \((tried|a listener on) [^)]*\)$", "", line.strip()) for line in lines if line.startswith("  ")]
    assert tried == [
        "✓ commands can change files in the workspace",
        "✓ writes outside the workspace, its additional directories and temp are refused",
        "✓ git's own files (hooks, config) are read-only",
        "✓ credentials (~/.ssh, ~/.aws, ~/.gnupg…) and $CODLING_HOME read as empty",
        "✓ the network is off (not even the host's 127.0.0.1)",
        "✓ codling's own environment (/proc/PID/environ, which holds its keys) cannot be read",
    ]
    hooks = [p.name for p in (project / ".git" / "hooks").iterdir()]
    assert list(project.glob(".codling-sandbox-check-*")) == [] and all(h.endswith(".sample") for h in hooks)


def test_sandbox_check_says_when_the_kernel_refuses_it(home: Path, project: Path) -> None:
    result = without_user_namespaces(*warm.cold(), "sandbox", "check", env=base_env(home), cwd=project)
    assert result.returncode == 1
    assert (
        "✗ The sandbox cannot run here: user namespaces are not available to this user (the limit "
        "/proc/sys/user/max_user_namespaces is reached, or 0); they hide secrets and cut the network."
    ) in result.stdout


@pytest.mark.parametrize(
    ("mode", "sandbox", "runs"), [("auto", "on", False), ("yolo", "always", False), ("yolo", "on", True)]
)
def test_without_the_sandbox_a_confined_command_is_refused_never_run_unconfined(
    home: Path, project: Path, server: OpenAIServer, mode: str, sandbox: str, runs: bool
) -> None:
    (home / "config.toml").write_text(f'sandbox = "{sandbox}"\n')
    marker = project / "ran.txt"
    server.enqueue(
        Reply(tool_calls=[ToolCall("run_command", {"command": f"touch {marker}"})]),
        Reply(text=["done"]),
    )
    result = without_user_namespaces(
        *warm.cold(), "run", "--mode", mode, "touch it", env=model_env(home, server), cwd=project
    )
    assert result.returncode == 0, result.stderr
    assert marker.exists() is runs
    told = text_of(server.requests[1]["messages"][-1]["content"])
    if runs:
        assert told.startswith("exit code 0")
    else:
        assert told.startswith("Error: the command was not run: the sandbox cannot run here (user namespaces are ")
        assert "`codling sandbox check` says what this machine lacks" in told
