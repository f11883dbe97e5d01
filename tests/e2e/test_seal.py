"""codling's own environment holds no secrets a command could read (``codling.seal``), through a spawned
`codling run` and the loopback model server."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from codling.seal import SEALED_FD, seal
from tests.e2e.test_cli import base_env, codling, model_env
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

    result = codling("run", "--mode", "yolo", "look around", env=env, cwd=project)

    assert result.returncode == 0, result.stderr
    tool_output = json.dumps(server.requests[1]["messages"])
    for value in SECRETS.values():  # no process above the command holds the secrets…
        assert value not in tool_output and value not in result.stdout
    assert f"{SEALED_FD}=" in tool_output  # …codling's own start-up environment included
    # codling itself still has them: the provider got the key.
    assert set(server.authorizations) == {f"Bearer {SECRETS['OPENAI_API_KEY']}"}


def test_seal_restarts_only_with_secrets_and_hands_them_over_through_the_pipe(home: Path) -> None:
    calls: list[tuple[str, list[str], dict[str, str]]] = []
    handed: list[dict[str, str]] = []

    def execve(path: str, argv: list[str], env: dict[str, str]) -> None:
        calls.append((path, argv, env))
        handed.append(json.loads(os.read(int(env[SEALED_FD]), 65536)))

    plain = base_env(home)
    seal((), plain, ["codling", "acp"], execve)
    assert calls == []

    seal((), {**plain, **SECRETS}, ["codling", "acp"], execve)
    ((path, argv, env),) = calls
    assert (path, argv) == (sys.executable, ["codling", "acp"])
    assert env == {**plain, SEALED_FD: env[SEALED_FD]}
    assert handed == [SECRETS]
