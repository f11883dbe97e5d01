"""What `codling run --resume` and `codling sessions …` show only as real processes: a session another live process
holds (it has the session's lock) cannot be resumed, and shell completion (which keys on the name of the installed
script) offers sessions, models and modes. The conversation carried across runs and the `sessions` commands on a
recorded session are tested in process, in `tests/unit/test_cli_sessions.py`."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.test_cli import codling, model_env
from tests.fakes.cli_runner import GOLDEN_ID, clean_env, install_golden
from tests.fakes.cli_runner import codling as in_process
from tests.fakes.deadlines import deadline
from tests.fakes.openai_server import OpenAIServer, Reply, running_server


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with running_server() as s:
        yield s


MODEL_VARIABLES = ("CODLING_MODEL", "OPENAI_BASE_URL", "OPENAI_API_KEY")


def test_resuming_a_session_another_process_writes_is_a_usage_error(
    home: Path, project: Path, server: OpenAIServer
) -> None:
    from codling.store.index import SessionStore

    env = model_env(home, server)
    server.enqueue(Reply(text=["first"]))
    # The session is made and listed in process (two process starts fewer): only the refused resume needs one.
    made = in_process(clean_env(home, **{k: env[k] for k in MODEL_VARIABLES}), "run", "hello", "--cwd", str(project))
    assert made.exit_code == 0, made.stderr
    (listed,) = [
        json.loads(line) for line in in_process(clean_env(home), "sessions", "list", "--json").stdout.splitlines()
    ]
    history = home / "sessions" / str(listed["session_id"]) / "history.jsonl"
    before = history.read_bytes()
    writer = SessionStore(home).open(str(listed["session_id"]))  # this live process now holds the session
    try:
        result = codling("run", "--resume", str(listed["session_id"]), "again", env=env, cwd=project)
    finally:
        writer.close()
    assert result.returncode == 2
    assert "another codling process" in result.stderr and "Traceback" not in result.stderr
    assert history.read_bytes() == before


def complete(env: dict[str, str], words: str) -> list[str]:
    """What bash completion offers for the last of ``words`` (typer's protocol, as its installed script asks)."""
    cword = str(len(words.split()) - (0 if words.endswith(" ") else 1))
    result = subprocess.run(
        [str(Path(sys.executable).with_name("codling"))],  # the installed script: completion keys on its name
        env={**env, "_CODLING_COMPLETE": "complete_bash", "COMP_WORDS": words, "COMP_CWORD": cword},
        capture_output=True,
        text=True,
        timeout=deadline(60),
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.split()


def test_shell_completion_offers_sessions_models_and_modes(home: Path, server: OpenAIServer) -> None:
    env = model_env(home, server)
    install_golden(home)
    assert complete(env, "codling sessions show 2026") == [GOLDEN_ID]
    assert complete(env, "codling sessions show 7") == []
    assert complete(env, "codling run --resume 2026") == [GOLDEN_ID]
    assert complete(env, "codling run --model anthropic:claude-s") == [
        "anthropic:claude-sonnet-5-5",
        "anthropic:claude-sonnet-4-5",
    ]
    assert complete(env, "codling run --mode a") == ["ask", "accept-edits", "auto"]
    assert "sessions" in complete(env, "codling s")
