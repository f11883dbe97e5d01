"""`codling run --resume/--continue` and `codling sessions …` in real subprocesses."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.test_cli import codling, model_env
from tests.fakes.openai_server import OpenAIServer, Reply, running_server
from tests.fakes.scenarios import user_prompt

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
GOLDEN_ID = "20261122-901de5e55e01"


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with running_server() as s:
        yield s


def sessions_json(env: dict[str, str], *args: str) -> list[dict[str, object]]:
    result = codling("sessions", "list", "--json", *args, env=env)
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_continue_and_resume_carry_the_conversation(home: Path, project: Path, server: OpenAIServer) -> None:
    env = model_env(home, server)
    server.enqueue(Reply(text=["Noted: the password hint is 'teal'."]))
    assert codling("run", "remember: the hint is teal", env=env, cwd=project).returncode == 0
    (listed,) = sessions_json(env)
    assert listed["title"] == "remember: the hint is teal" and listed["cwd"] == str(project)

    server.enqueue(Reply(text=["teal"]))
    second = codling("run", "--continue", "what was the hint?", env=env, cwd=project)
    assert second.returncode == 0, second.stderr
    contents = [m["content"] for m in server.requests[-1]["messages"]]
    assert "remember: the hint is teal" in contents and user_prompt(contents[-1]) == "what was the hint?"

    server.enqueue(Reply(text=["still teal"]))
    prefix = str(listed["session_id"])[9:14]  # the start of its random part
    third = codling("run", "--resume", prefix, "once more?", env=env, cwd=home)
    assert third.returncode == 0, third.stderr
    assert len(server.requests[-1]["messages"]) > len(server.requests[-2]["messages"])
    assert len(sessions_json(env)) == 1

    shown = codling("sessions", "show", prefix, env=env)
    assert shown.returncode == 0, shown.stderr
    for text in ("remember: the hint is teal", "what was the hint?", "once more?", "still teal"):
        assert text in shown.stdout
    assert "\x1b" not in shown.stdout


def test_continue_without_a_session_here_is_a_usage_error(home: Path, project: Path, server: OpenAIServer) -> None:
    result = codling("run", "--continue", "hello", env=model_env(home, server), cwd=project)
    assert result.returncode == 2
    assert "no session to continue" in result.stderr


def test_unknown_or_ambiguous_ids_are_usage_errors(home: Path, server: OpenAIServer) -> None:
    env = model_env(home, server)
    for sid in ("20261122-aaaa00000001", "20261122-aaaa00000002"):
        (home / "sessions" / sid).mkdir(parents=True)
        shutil.copy(GOLDEN / "history.jsonl", home / "sessions" / sid / "history.jsonl")
    ambiguous = codling("sessions", "show", "aaaa", env=env)
    assert ambiguous.returncode == 2
    assert (
        "codling: 'aaaa' matches 2 sessions: 20261122-aaaa00000002 (rename greet @app.py); "
        "20261122-aaaa00000001 (rename greet @app.py); give more of the id\n"
    ) in ambiguous.stderr
    unknown = codling("run", "--resume", "20991231", "hi", env=env)
    assert unknown.returncode == 2 and "no session matches" in unknown.stderr
    malformed = codling("run", "--resume", "nope", "hi", env=env)
    assert malformed.returncode == 2 and "is not a session id" in malformed.stderr


def test_a_piped_list_keeps_every_value_whole(home: Path, server: OpenAIServer) -> None:
    env = model_env(home, server)
    install_golden(home)
    long_cwd = "/" + "/".join(["a-rather-long-directory-name"] * 6)
    assert codling("sessions", "list", env=env).returncode == 0  # writes meta.json
    meta = home / "sessions" / GOLDEN_ID / "meta.json"
    data = json.loads(meta.read_text())
    data.update(cwd=long_cwd, title="A title long enough that a table eighty columns wide would have to cut it")
    meta.write_text(json.dumps(data))

    listed = codling("sessions", "list", env=env)

    assert listed.returncode == 0, listed.stderr
    (line,) = listed.stdout.splitlines()
    session_id, _updated, title, cwd = line.split("\t")
    assert (session_id, title, cwd) == (GOLDEN_ID, data["title"], long_cwd)


def install_golden(home: Path) -> None:
    target = home / "sessions" / GOLDEN_ID
    target.mkdir(parents=True)
    shutil.copy(GOLDEN / "history.jsonl", target / "history.jsonl")


def test_replay_matches_the_golden_stream(home: Path, server: OpenAIServer) -> None:
    install_golden(home)
    result = codling("sessions", "replay", GOLDEN_ID[:14], env=model_env(home, server))
    assert result.returncode == 0, result.stderr
    assert result.stdout == (GOLDEN / "replay.jsonl").read_text()


def test_show_marks_errors_and_interrupted_turns(home: Path, server: OpenAIServer) -> None:
    install_golden(home)
    result = codling("sessions", "show", GOLDEN_ID, env=model_env(home, server))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "rename greet" in out and "Renamed `greet` to `welcome`." in out
    assert "reasoning (1 tool call)" in out
    assert "Error: The model provider returned HTTP 500" in out
    assert "interrupted" in out
    assert result.stderr == ""
    # Lines no version of codling wrote are skipped, and the user is told (the transcript is the same).
    history = home / "sessions" / GOLDEN_ID / "history.jsonl"
    first, rest = history.read_text().split("\n", 1)
    history.write_text(f'{first}\n{{"v": 1, "kind": "mystery"}}\nnot json\n{rest}')
    damaged = codling("sessions", "show", GOLDEN_ID, env=model_env(home, server))
    assert (damaged.returncode, damaged.stdout) == (0, out)
    said = damaged.stderr.splitlines()
    assert [line.split(": ", 1)[1] for line in said[:2]] == [
        "skipping a corrupt record: a kind this version does not know ('mystery'; written by a newer codling?)",
        "skipping a corrupt record: not JSON",
    ]
    assert said[2:] == ["warning: 2 lines of its history.jsonl could not be read and are not shown"]


def test_fork_and_delete(home: Path, server: OpenAIServer) -> None:
    env = model_env(home, server)
    install_golden(home)
    forked = codling("sessions", "fork", GOLDEN_ID, env=env)
    assert forked.returncode == 0, forked.stderr
    fork_id = forked.stdout.strip()
    listed = {s["session_id"]: s for s in sessions_json(env)}
    assert set(listed) == {GOLDEN_ID, fork_id}
    assert listed[fork_id]["parent"] == GOLDEN_ID
    deleted = codling("sessions", "delete", fork_id, env=env)
    assert deleted.returncode == 0 and fork_id in deleted.stdout
    assert [s["session_id"] for s in sessions_json(env)] == [GOLDEN_ID]
    assert (home / "sessions" / GOLDEN_ID / "history.jsonl").exists()


def test_resuming_a_session_another_process_writes_is_a_usage_error(
    home: Path, project: Path, server: OpenAIServer
) -> None:
    from codling.store.index import SessionStore

    env = model_env(home, server)
    server.enqueue(Reply(text=["first"]))
    assert codling("run", "hello", env=env, cwd=project).returncode == 0
    (listed,) = sessions_json(env)
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
        timeout=60,
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
    assert complete(env, "codling run --model anthropic:claude-s") == ["anthropic:claude-sonnet-4-5"]
    assert complete(env, "codling run --mode a") == ["ask", "accept-edits"]
    assert "sessions" in complete(env, "codling s")
