"""Bad input to `codling run` and `codling sessions`: prompts that are not UTF-8, an unusable $CODLING_HOME,
a mistyped or unreadable config.toml. Each is refused with one line saying what to change and exit 2, before
anything is recorded or sent."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes import warm
from tests.fakes.deadlines import deadline
from tests.fakes.openai_server import OpenAIServer, Reply, running_server
from tests.fakes.processes import measured
from tests.fakes.scenarios import user_prompt


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with running_server() as s:
        yield s


def env(home: Path, server: OpenAIServer, **extra: str) -> dict[str, str]:
    return measured(
        {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(home),
            "CODLING_HOME": str(home),
            "CODLING_MODEL": "openai-chat:fake-model",
            "OPENAI_BASE_URL": server.base_url,
            "OPENAI_API_KEY": "sk-cli-test",
            **extra,
        }
    )


def run(*args: str | bytes, env: dict[str, str], cwd: Path, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [*warm.codling(), "run", *args],
        env=env,
        cwd=cwd,
        input=stdin,
        capture_output=True,
        timeout=deadline(60),
        check=False,
    )


CASES: dict[str, tuple[tuple[str | bytes, ...], bytes, dict[str, str]]] = {
    "argv latin-1": ((b"caf\xe9 please",), b"", {}),
    "argv latin-1, C locale": ((b"caf\xe9 please",), b"", {"LC_ALL": "C"}),
    "argv encoded surrogate": ((b"x \xed\xa0\x80 y",), b"", {}),
    "stdin latin-1": (("-",), b"caf\xe9 please\n", {}),
    "stdin from a pipe": ((), b"\xff\xfe\x00p\x00", {}),
    "stdin encoded surrogate": (("-",), b"x \xed\xa0\x80 y", {}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_prompt_that_is_not_utf8_is_refused_before_anything_is_recorded(
    home: Path, project: Path, server: OpenAIServer, case: str
) -> None:
    args, stdin, extra = CASES[case]
    result = run(*args, env=env(home, server, **extra), cwd=project, stdin=stdin)
    stderr = result.stderr.decode("utf-8", "replace")
    assert result.returncode == 2, stderr
    assert "is not UTF-8 text" in stderr and "Traceback" not in stderr
    assert result.stdout == b""
    assert not (home / "sessions").exists()
    assert server.requests == []


def test_a_utf8_prompt_beyond_ascii_runs_and_is_recorded_as_is(home: Path, project: Path, server: OpenAIServer) -> None:
    server.enqueue(Reply(text=["ok"]))
    result = run("café ✓ 😀", env=env(home, server, LC_ALL="C"), cwd=project)
    assert result.returncode == 0, result.stderr
    assert user_prompt(server.requests[0]["messages"][-1]["content"]) == "café ✓ 😀"
    (history,) = (home / "sessions").glob("*/history.jsonl")
    assert "café ✓ 😀" in history.read_bytes().decode("utf-8")


def one_line_refusal(result: subprocess.CompletedProcess[bytes]) -> str:
    """The single stderr line of a refused command (exit 2, nothing on stdout, no traceback)."""
    stderr = result.stderr.decode("utf-8")
    assert (result.returncode, result.stdout) == (2, b""), stderr
    (line,) = stderr.splitlines()
    assert line.startswith("codling: ")
    return line


def test_a_home_that_is_a_file_is_named_with_what_to_change(
    tmp_path: Path, project: Path, server: OpenAIServer
) -> None:
    home = tmp_path / "home-file"
    home.write_text("")
    expected = (
        f"codling: the session store {home}/sessions cannot be {{}} (Not a directory); make $CODLING_HOME ({home}) "
        "a directory you can write, or point CODLING_HOME at one"
    )
    line = one_line_refusal(run("hi", env=env(home, server), cwd=project))
    assert line == expected.format("written")
    listed = subprocess.run(
        [*warm.codling(), "sessions", "list"], env=env(home, server), capture_output=True, check=False
    )
    assert one_line_refusal(listed) == expected.format("read")
    assert server.requests == []


@pytest.mark.parametrize(
    ("config", "problem"),
    [
        (b'modle = "openai:gpt-5"\n', "unknown setting 'modle' (did you mean 'mode' or 'model'?)"),
        (b"[mcp_servers.x]\ncomand = 'a'\n", "[mcp_servers.x]: unknown key 'comand' (did you mean 'command'?)"),
        (b'title_model = "caf\xe9"\n', "not UTF-8 text (byte 0xe9 at offset 18)"),
        (b"command_timeout = \n", "not valid TOML: "),
    ],
)
def test_a_bad_config_file_is_named_before_a_session_exists(
    home: Path, project: Path, server: OpenAIServer, config: bytes, problem: str
) -> None:
    (home / "config.toml").write_bytes(config)
    line = one_line_refusal(run("hi", env=env(home, server), cwd=project))
    assert line.startswith(f"codling: {home / 'config.toml'}") and problem in line
    assert not (home / "sessions").exists()
    assert server.requests == []
