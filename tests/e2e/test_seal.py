"""codling's own environment holds no secrets a command could read (``codling.seal``), through a spawned
`codling run` and the loopback model server."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from codling.seal import SEALED_FD, seal
from tests.e2e.test_cli import base_env, codling, model_env
from tests.fakes.deadlines import deadline
from tests.fakes.openai_server import OpenAIServer, Reply, ToolCall, running_server

SECRETS = {
    "OPENAI_API_KEY": "sk-seal-test-0123456789abcdef",
    "GITHUB_TOKEN": "ghp_sealtest0123456789",
    "DB_PASS": "hunter2-but-longer",
}

# Every ancestor's environment, from the command's shell up: codling is one of them.
ANCESTORS = (
    'p=$$; while [ "$p" -gt 1 ]; do echo "== $p"; tr "\\0" "\\n" < /proc/$p/environ 2>/dev/null; '
    "p=$(cut -d' ' -f4 /proc/$p/stat); done"
)


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with running_server() as s:
        yield s


def test_a_command_cannot_read_codling_s_secrets_from_its_parents(
    home: Path, project: Path, server: OpenAIServer
) -> None:
    env = {**model_env(home, server), **SECRETS}
    server.enqueue(Reply(tool_calls=[ToolCall("run_command", {"command": ANCESTORS})]))
    server.enqueue(Reply(text=["done"]))

    result = codling("run", "--mode", "yolo", "look around", env=env, cwd=project, cold=True)

    assert result.returncode == 0, result.stderr
    tool_output = json.dumps(server.requests[1]["messages"])
    for value in SECRETS.values():  # no process above the command holds the secrets…
        assert value not in tool_output and value not in result.stdout
    for name in SECRETS:  # …codling's own start-up environment included: the names are there, their values erased
        assert f"{name}=\\n" in tool_output
    # codling itself still has them: the provider got the key.
    assert set(server.authorizations) == {f"Bearer {SECRETS['OPENAI_API_KEY']}"}


def test_seal_restarts_only_with_secrets_and_hands_them_over_through_the_pipe(home: Path) -> None:
    """Where the values cannot be erased in place (not Linux), a command that may run tools restarts."""
    calls: list[tuple[str, list[str], dict[str, str]]] = []
    handed: list[dict[str, str]] = []

    def execve(path: str, argv: list[str], env: dict[str, str]) -> None:
        calls.append((path, argv, env))
        handed.append(json.loads(os.read(int(env[SEALED_FD]), 65536)))

    def cannot_erase(hidden: Mapping[str, str]) -> bool:
        return False

    plain = base_env(home)
    seal((), plain, ["codling", "acp"], execve, erase=cannot_erase)
    seal((), {**plain, **SECRETS}, ["codling", "sessions"], execve, restart=False, erase=cannot_erase)
    assert calls == []

    seal((), {**plain, **SECRETS}, ["codling", "acp"], execve, erase=cannot_erase)
    ((path, argv, env),) = calls
    assert (path, argv) == (sys.executable, ["codling", "acp"])
    assert env == {**plain, SEALED_FD: env[SEALED_FD]}
    assert handed == [SECRETS]


SHAPED = {  # (issue 29 D9) credentials whose names say nothing: secret by their values' shapes
    "CI_BOT": "ghp_" + "S3al" * 9,
    "DEPLOY_ID": "AKIAIOSFODNN7EXAMPLE",
    "HOOK": "xoxb-1234567890-0987654321-AbCdEfGhIj",
}


def test_variables_holding_well_known_credentials_are_scrubbed_and_redacted_whatever_their_names(
    home: Path, project: Path, server: OpenAIServer
) -> None:
    env = {**model_env(home, server), **SHAPED}
    server.enqueue(Reply(tool_calls=[ToolCall("run_command", {"command": "env"})]))
    server.enqueue(
        Reply(text=["Your bot token is ", SHAPED["CI_BOT"][:20], SHAPED["CI_BOT"][20:], " and ", SHAPED["HOOK"]])
    )

    result = codling("run", "--mode", "yolo", "-v", "show the environment", env=env, cwd=project, cold=True)

    assert result.returncode == 0, result.stderr
    tool_output = server.requests[1]["messages"][-1]["content"]
    assert "PATH=" in tool_output  # the command ran and printed its environment, without these:
    assert not [name for name in SHAPED if f"{name}=" in tool_output]
    (history,) = (home / "sessions").glob("*/history.jsonl")
    for value in SHAPED.values():  # nothing that leaves codling holds them
        assert value not in result.stdout and value not in result.stderr and value not in history.read_text()
    assert result.stdout.count("[redacted]") == 2


def test_a_command_cannot_read_codling_s_memory_or_environment(home: Path, project: Path, server: OpenAIServer) -> None:
    # (issue 29 D9) A process of the same user may open any process's /proc/<pid>/mem and environ that it could
    # trace; codling is not dumpable, so the command (run by codling's reaper: its parent's parent is codling)
    # cannot. Root may trace anything: as root, codling runs without CAP_SYS_PTRACE (nor can its commands get
    # it), which leaves root's files readable (environ is one) but takes /proc/<pid>/mem of a process that is
    # not dumpable away.
    root = os.getuid() == 0
    if root and not shutil.which("setpriv"):
        pytest.skip("as root this needs setpriv to drop CAP_SYS_PTRACE")
    probe = (
        "c=$(cut -d' ' -f4 /proc/$PPID/stat); echo codling=$c; "
        "if cat /proc/$c/environ >/dev/null 2>&1; then echo environ=read; else echo environ=denied; fi; "
        "if head -c 0 /proc/$c/mem 2>/dev/null; then echo mem=opened; else echo mem=denied; fi"
    )
    server.enqueue(Reply(tool_calls=[ToolCall("run_command", {"command": probe})]), Reply(text=["done"]))
    without_ptrace = ["setpriv", "--bounding-set", "-sys_ptrace", "--inh-caps", "-sys_ptrace"] if root else []
    process = subprocess.Popen(
        [*without_ptrace, sys.executable, "-m", "codling", "run", "--mode", "yolo", "probe"],
        env=model_env(home, server),
        cwd=project,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    stdout, stderr = process.communicate(timeout=deadline(60))
    assert process.returncode == 0, stderr  # codling works undumpable
    assert stdout.strip() == "done"
    tool_output = server.requests[1]["messages"][-1]["content"]
    assert f"codling={process.pid}" in tool_output  # (setpriv runs codling in its own place)
    assert "mem=denied" in tool_output, tool_output
    assert root or "environ=denied" in tool_output, tool_output


def test_no_command_pays_a_restart_where_the_values_can_be_erased_in_place(home: Path) -> None:
    """A restart costs a Python start-up: on Linux the values are erased in place instead, for every command."""
    env = {**base_env(home), **SECRETS, "PYTHONPROFILEIMPORTTIME": "1"}

    def starts(*args: str) -> int:  # every start of the process imports codling.seal once
        stderr = codling(*args, env=env, cold=True).stderr
        return sum(line.endswith(" codling.seal") for line in stderr.splitlines())

    assert (starts("--version"), starts("chat")) == (1, 1)
