"""`codling run --resume/--continue` and `codling sessions …` in process (typer's runner): a conversation carried
across runs against the loopback OpenAI-compatible server over real HTTP, ids that match no session or several, and
`sessions list`, `show`, `replay`, `fork` and `delete` on a recorded session (the golden one in `tests/golden`). The
sessions are real files under a private CODLING_HOME; the runner keeps stdout and stderr apart, as pipes do. A
session another process holds and shell completion need a real process: `tests/e2e/test_cli_sessions.py`."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest

from codling.cli.sessions import confirm_delete
from tests.fakes.cli_runner import GOLDEN, GOLDEN_ID, MODEL, clean_env, codling, install_golden
from tests.fakes.openai_server import ErrorReply, OpenAIServer, Reply, ToolCall
from tests.fakes.scenarios import user_prompt


def sessions_json(env: dict[str, str | None], *args: str) -> list[dict[str, object]]:
    result = codling(env, "sessions", "list", "--json", *args)
    assert result.exit_code == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_continue_and_resume_carry_the_conversation(
    served: dict[str, str | None], home: Path, project: Path, server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.enqueue(Reply(text=["Noted: the password hint is 'teal'."]))
    assert codling(served, "run", "remember: the hint is teal").exit_code == 0
    (listed,) = sessions_json(served)
    assert listed["title"] == "remember: the hint is teal" and listed["cwd"] == str(project)

    server.enqueue(Reply(text=["teal"]))
    second = codling(served, "run", "--continue", "what was the hint?")
    assert second.exit_code == 0, second.stderr
    contents = [m["content"] for m in server.requests[-1]["messages"]]
    prompts = [user_prompt(c) for c in contents]
    assert "remember: the hint is teal" in prompts and prompts[-1] == "what was the hint?"

    server.enqueue(Reply(text=["still teal"]))
    prefix = str(listed["session_id"])[9:14]  # the start of its random part
    monkeypatch.chdir(home)  # an id resumes the session from any directory
    third = codling(served, "run", "--resume", prefix, "once more?")
    assert third.exit_code == 0, third.stderr
    assert len(server.requests[-1]["messages"]) > len(server.requests[-2]["messages"])
    assert len(sessions_json(served)) == 1

    shown = codling(served, "sessions", "show", prefix)
    assert shown.exit_code == 0, shown.stderr
    for text in ("remember: the hint is teal", "what was the hint?", "once more?", "still teal"):
        assert text in shown.stdout
    assert "\x1b" not in shown.stdout


def test_continue_without_a_session_here_is_a_usage_error(served: dict[str, str | None]) -> None:
    result = codling(served, "run", "--continue", "hello")
    assert result.exit_code == 2
    assert "no session to continue" in result.stderr


def test_unknown_or_ambiguous_ids_are_usage_errors(served: dict[str, str | None], home: Path) -> None:
    for sid in ("20261122-aaaa00000001", "20261122-aaaa00000002"):
        (home / "sessions" / sid).mkdir(parents=True)
        shutil.copy(GOLDEN / "history.jsonl", home / "sessions" / sid / "history.jsonl")
    ambiguous = codling(served, "sessions", "show", "aaaa")
    assert ambiguous.exit_code == 2
    assert (
        "codling: 'aaaa' matches 2 sessions: 20261122-aaaa00000002 (rename greet @app.py); "
        "20261122-aaaa00000001 (rename greet @app.py); give more of the id\n"
    ) in ambiguous.stderr
    unknown = codling(served, "run", "--resume", "20991231", "hi")
    assert unknown.exit_code == 2 and "no session matches" in unknown.stderr
    malformed = codling(served, "run", "--resume", "nope", "hi")
    assert malformed.exit_code == 2 and "is not a session id" in malformed.stderr


def test_a_piped_list_keeps_every_value_whole(served: dict[str, str | None], home: Path) -> None:
    install_golden(home)
    long_cwd = "/" + "/".join(["a-rather-long-directory-name"] * 6)
    assert codling(served, "sessions", "list").exit_code == 0  # writes meta.json
    meta = home / "sessions" / GOLDEN_ID / "meta.json"
    data = json.loads(meta.read_text())
    data.update(cwd=long_cwd, title="A title long enough that a table eighty columns wide would have to cut it")
    meta.write_text(json.dumps(data))

    listed = codling(served, "sessions", "list")

    assert listed.exit_code == 0, listed.stderr
    (line,) = listed.stdout.splitlines()
    session_id, _updated, title, cwd = line.split("\t")
    assert (session_id, title, cwd) == (GOLDEN_ID, data["title"], long_cwd)


def test_replay_matches_the_golden_stream(served: dict[str, str | None], home: Path) -> None:
    install_golden(home)
    result = codling(served, "sessions", "replay", GOLDEN_ID[:14])
    assert result.exit_code == 0, result.stderr
    assert result.stdout == (GOLDEN / "replay.jsonl").read_text()


def test_show_marks_errors_and_interrupted_turns(served: dict[str, str | None], home: Path) -> None:
    install_golden(home)
    result = codling(served, "sessions", "show", GOLDEN_ID)
    assert result.exit_code == 0, result.stderr
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
    damaged = codling(served, "sessions", "show", GOLDEN_ID)
    assert (damaged.exit_code, damaged.stdout) == (0, out)
    said = damaged.stderr.splitlines()
    assert [line.split(": ", 1)[1] for line in said[:2]] == [
        "skipping a corrupt record: a kind this version does not know ('mystery'; written by a newer codling?)",
        "skipping a corrupt record: not JSON",
    ]
    assert said[2:] == ["warning: 2 lines of its history.jsonl could not be read and are not shown"]


def test_fork_and_delete(served: dict[str, str | None], home: Path) -> None:
    install_golden(home)
    forked = codling(served, "sessions", "fork", GOLDEN_ID)
    assert forked.exit_code == 0, forked.stderr
    fork_id = forked.stdout.strip()
    listed = {s["session_id"]: s for s in sessions_json(served)}
    assert set(listed) == {GOLDEN_ID, fork_id}
    assert listed[fork_id]["parent"] == GOLDEN_ID
    refused = codling(served, "sessions", "delete", fork_id)  # no terminal to ask on
    assert (refused.exit_code, refused.stdout) == (2, "")
    assert refused.stderr == (
        f"codling: not deleting session {fork_id} (rename greet @app.py (fork), 3 turns) without asking, and "
        "there is no terminal to ask on: pass --yes to delete it\n"
    )
    assert {s["session_id"] for s in sessions_json(served)} == {GOLDEN_ID, fork_id}
    deleted = codling(served, "sessions", "delete", "--yes", fork_id)
    assert deleted.exit_code == 0 and fork_id in deleted.stdout
    assert [s["session_id"] for s in sessions_json(served)] == [GOLDEN_ID]
    assert (home / "sessions" / GOLDEN_ID / "history.jsonl").exists()


# -- hostile ids and invalid records ---------------------------------------------------------------------------


def test_malformed_ids_on_the_command_line_are_usage_errors_and_touch_nothing(
    served: dict[str, str | None], home: Path, tmp_path: Path, server: OpenAIServer
) -> None:
    install_golden(home)
    decoy = tmp_path / "decoy" / "history.jsonl"
    decoy.parent.mkdir()
    shutil.copy(GOLDEN / "history.jsonl", decoy)  # a loadable session, outside the store
    before = decoy.read_bytes()
    attacks = [
        ("sessions", "show", "../../decoy"),
        ("sessions", "replay", str(decoy.parent)),
        ("sessions", "fork", ".."),
        ("sessions", "delete", "--yes", "../../decoy"),
        ("sessions", "show", "x" * 300),
        ("run", "--resume", "../../decoy", "hi"),
    ]
    for args in attacks:
        result = codling(served, *args)
        assert (result.exit_code, result.stdout) == (2, ""), (args, result.stderr)
        assert "is not a session id" in result.stderr and "Traceback" not in result.stderr, args
    assert decoy.read_bytes() == before
    assert server.requests == []
    assert sorted(p.name for p in (home / "sessions").iterdir()) == [GOLDEN_ID]


def test_show_and_list_keep_working_on_a_history_with_invalid_records(
    served: dict[str, str | None], home: Path
) -> None:
    install_golden(home)
    path = home / "sessions" / GOLDEN_ID / "history.jsonl"
    lines = path.read_text().splitlines()
    bad = [
        '{"v":1,"ts":"2026-11-22T10:00:01.000Z","session_id":"s","turn_id":"t1","kind":"tool_call","tool_name":"x"}',
        '{"v":1,"ts":"2026-11-22T10:00:01.000Z","session_id":"s","turn_id":"t1","kind":"tool_result",'
        '"call_id":"c","tool_name":"x","status":"exploded"}',
        '{"v":1,"ts":"2026-11-22T10:00:01.000Z","session_id":"s","kind":"hologram"}',
    ]
    path.write_text("\n".join([*lines[:3], *bad, *lines[3:]]) + "\n")
    shown = codling(served, "sessions", "show", GOLDEN_ID)
    assert shown.exit_code == 0, shown.stderr
    assert "Renamed `greet` to `welcome`." in shown.stdout
    listed = codling(served, "sessions", "list", "--json")
    assert listed.exit_code == 0, listed.stderr
    assert [json.loads(line)["session_id"] for line in listed.stdout.splitlines()] == [GOLDEN_ID]
    replayed = codling(served, "sessions", "replay", GOLDEN_ID)
    assert replayed.exit_code == 0 and replayed.stdout == (GOLDEN / "replay.jsonl").read_text()


def test_an_unreachable_base_url_is_named_in_the_error(
    home: Path, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # (issue 29 D16: the base URL was redacted as a secret: "check that [redacted]/ is reachable")
    import socket

    with socket.socket() as closed:  # a port nothing listens on once it is closed
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    monkeypatch.chdir(project)
    url = f"http://127.0.0.1:{port}/v1"
    env = clean_env(home, CODLING_MODEL=MODEL, OPENAI_BASE_URL=url, OPENAI_API_KEY="sk-cli-test-0123456789")
    result = codling(env, "run", "hello")
    assert result.exit_code != 0
    assert f"check that the chat-completions API at {url}" in result.stderr + result.stdout
    # What is recorded is redacted: the URL is no secret (the key would be).
    (history,) = (home / "sessions").glob("*/history.jsonl")
    recorded = history.read_text()
    assert f"check that the chat-completions API at {url}" in recorded and "[redacted]" not in recorded


@pytest.mark.parametrize("flags", [(), ("-v",)], ids=["plain", "verbose"])
def test_a_refused_key_names_the_servers_url_and_never_shows_the_key(
    flags: tuple[str, ...], home: Path, project: Path, server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # (issue 31 item 7: the 401 message blanked the server's URL, "[redacted]/", as if it were the secret)
    key = "sk-cli-test-refused-0123456789abcdef"
    server.enqueue(ErrorReply(401, f"Incorrect API key provided: {key}.", type="invalid_request_error"))
    monkeypatch.chdir(project)
    env = clean_env(home, CODLING_MODEL=MODEL, OPENAI_BASE_URL=server.base_url, OPENAI_API_KEY=key)
    result = codling(env, "run", *flags, "hello")
    shown = result.stdout + result.stderr
    assert result.exit_code != 0
    url = server.base_url.rstrip("/") + "/"
    assert f"the chat-completions API at {url} refused the key in OPENAI_API_KEY" in shown
    assert "Incorrect API key provided: [redacted]." in shown
    (history,) = (home / "sessions").glob("*/history.jsonl")
    recorded = history.read_text()
    assert f"at {url} refused the key" in recorded
    assert key not in shown + recorded


TOKEN = "ghp_Secr3tTokenValue0123456789abcdefABCD"


@pytest.mark.parametrize("flags", [(), ("-v",), ("--json",)], ids=["plain", "verbose", "json"])
def test_a_run_s_output_has_the_environment_s_secrets_redacted(
    flags: tuple[str, ...],
    home: Path,
    project: Path,
    server: OpenAIServer,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    # (issue 29 D8: a file holding $GITHUB_TOKEN's value gave five copies on `codling run --json` stdout)
    monkeypatch.chdir(project)
    (project / "notes.txt").write_text(f"deploy token: {TOKEN}\n")
    server.enqueue(
        Reply(tool_calls=[ToolCall("read_file", {"path": "notes.txt"})]),
        Reply(text=["The token is ", TOKEN[:10], TOKEN[10:25], TOKEN[25:], " as written."]),  # split as it streams
    )
    env = clean_env(
        home, CODLING_MODEL=MODEL, OPENAI_BASE_URL=server.base_url, OPENAI_API_KEY="sk-cli-test", GITHUB_TOKEN=TOKEN
    )
    last = tmp_path / "last.txt"
    result = codling(env, "run", *flags, "-o", str(last), "--mode", "yolo", "what is in notes.txt?")
    assert result.exit_code == 0, result.stderr
    everything = result.stdout + result.stderr + last.read_text()
    assert TOKEN not in everything and TOKEN[:10] not in everything
    assert "The token is [redacted] as written." in result.stdout + last.read_text()


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(
    ("typed", "deletes"), [("y\n", True), ("YES\n", True), ("\n", False), ("no\n", False), ("", False)]
)
def test_delete_on_a_terminal_names_the_session_and_deletes_only_on_yes(typed: str, deletes: bool) -> None:
    shown = Terminal()
    assert confirm_delete("20261122-abc (fix the bug, 2 turns)", Terminal(typed), shown) is deletes
    question = "Delete session 20261122-abc (fix the bug, 2 turns) for good? [y/N] "
    assert shown.getvalue() == question + ("\n" if typed == "" else "")
