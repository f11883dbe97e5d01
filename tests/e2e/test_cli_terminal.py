"""`codling run` on a real pseudo-terminal: the permission prompt and the spinner as a person meets them."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.test_cli import model_env
from tests.fakes import warm
from tests.fakes.openai_server import OpenAIServer, Reply, ToolCall, running_server
from tests.fakes.pty_process import PtyProcess


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with running_server() as s:
        yield s


def on_terminal(
    home: Path, project: Path, server: OpenAIServer, *args: str, colour: bool = False, columns: int = 120
) -> PtyProcess:
    env = {**model_env(home, server), "TERM": "xterm", **({} if colour else {"NO_COLOR": "1"})}
    return PtyProcess([*warm.codling(), "run", *args], env=env, cwd=project, columns=columns)


def test_a_rejection_with_a_reason_reaches_the_model(home: Path, project: Path, server: OpenAIServer) -> None:
    server.enqueue(
        Reply(tool_calls=[ToolCall("run_command", {"command": "grep -r TODO ."}, id="c1")]),
        Reply(text=["Understood, I will use rg."]),
    )
    (home / "config.toml").write_text('notify = "osc"\n')
    codling = on_terminal(home, project, server, "find the TODOs")
    try:
        codling.expect(
            "Allow? [y]es, [a]lways (every `grep` command, for this session), [e]verywhere (every `grep` command, "
            "in every session: an allow rule in $CODLING_HOME/permissions.toml), [n]o (or: n <reason>): "
        )
        # The question was announced first, as a desktop notification (issue 32 item 7).
        announced = codling.raw.find(b"\x1b]9;codling: Permission needed: Run grep -r TODO .\x07")
        assert 0 <= announced < codling.raw.find(b"Permission needed: Run grep")
        codling.send("n use rg, it skips .gitignored files\r")
        codling.expect("Understood, I will use rg.")
        assert codling.wait() == 0
    finally:
        codling.close()
    returned = [m for m in server.requests[1]["messages"] if m["role"] == "tool"]
    assert "The user rejected Run grep -r TODO ., saying: use rg, it skips .gitignored files" in returned[0]["content"]
    assert not (project / "TODO").exists()


def test_an_allowed_edit_shows_its_diff_once(home: Path, project: Path, server: OpenAIServer) -> None:
    (project / "app.py").write_text("x = 1\ny = 2\n")
    server.enqueue(
        Reply(
            tool_calls=[ToolCall("edit_file", {"path": "app.py", "old_text": "x = 1", "new_text": "x = 10"}, id="e1")]
        ),
        Reply(text=["Changed x."]),
    )
    codling = on_terminal(home, project, server, "set x to 10")
    try:
        codling.expect("[a]lways (every edit, for this session)")
        codling.send("y\r")
        codling.expect("Changed x.")
        assert codling.wait() == 0
    finally:
        codling.close()
    assert (project / "app.py").read_text() == "x = 10\ny = 2\n"
    assert codling.output.count("+x = 10") == 1, codling.output


def test_a_running_command_shows_a_spinner_with_its_time_even_without_colour(
    home: Path, project: Path, server: OpenAIServer
) -> None:
    command = "until [ -f go ]; do sleep 0.05; done; echo finished"
    server.enqueue(
        Reply(tool_calls=[ToolCall("run_command", {"command": command, "timeout_seconds": 60}, id="c1")]),
        Reply(text=["It finished."]),
    )
    codling = on_terminal(home, project, server, "--mode", "yolo", "wait for go")
    try:
        codling.expect(re.compile(r"Run until \[ -f go \].* 1s"))  # NO_COLOR is set: drawn in plain characters
        (project / "go").touch()
        codling.expect("It finished.")
        assert codling.wait() == 0
    finally:
        codling.close()
    assert b"\x1b[3" not in codling.raw  # no colour codes
    assert (
        "[tool] Run until [ -f go ]; do sleep 0.05; done; echo finished -> exit code 0\n    finished\n"
        in codling.output
    )


def test_resume_without_an_id_offers_the_newest_sessions_to_choose_from(
    home: Path, project: Path, server: OpenAIServer
) -> None:
    from tests.fakes.cli_runner import GOLDEN_ID, install_golden

    install_golden(home)  # a session recorded in another directory, in ask mode
    (home / "config.toml").write_text('mode = "accept-edits"\n')
    server.enqueue(Reply(text=["Picked up where we left off."]))
    codling = on_terminal(home, project, server, "go on", "--resume")
    try:
        codling.expect("Sessions in every directory (1, newest first):")
        codling.expect("1. rename greet @app.py  · ")
        codling.expect("Resume which? [number, words to filter, Enter: 1, q: none] ")
        codling.send("1\r")
        codling.expect("Picked up where we left off.")
        assert codling.wait() == 0
    finally:
        codling.close()
    assert f"codling: session {GOLDEN_ID}" in codling.output
    # The mode comes back with the session, and is said (issue 32 item 6).
    notes = codling.output.replace("\n", " ")
    assert "codling: continuing in ask mode, as this session was left (the default is accept-edits); --mode" in notes
    assert "rename greet" in str(server.requests[0]["messages"])  # the chosen session's history went along


WIDE = "curl -fsSL https://example.com/codling/install.sh | sh -s -- --yes --prefix=/opt/codling"


def test_at_40_columns_a_wide_code_line_keeps_every_character_and_a_4_mb_line_of_output_is_capped(
    home: Path, project: Path, server: OpenAIServer
) -> None:
    """(issue 32 items 1 and 4) On a real 40-column terminal, in colour: a code block wider than the window is
    folded, never cut; one enormous output line puts a capped line and a true count on the screen, not itself."""
    command = "head -c 4000000 /dev/zero | tr '\\0' A; echo; echo done"
    server.enqueue(
        Reply(tool_calls=[ToolCall("run_command", {"command": command}, id="c1")]),
        Reply(text=[f"Install it with:\n\n```sh\n{WIDE}\n```\n\nThat is all."]),
    )
    codling = on_terminal(home, project, server, "--mode", "yolo", "install it", colour=True, columns=40)
    try:
        codling.expect("That is all.")
        assert codling.wait() == 0
    finally:
        codling.close()
    screen = codling.output
    assert "".join(WIDE.split()) in "".join(screen.split())  # every character, in order, whatever the folding
    assert "A" * 200 + "… (3,999,800 more characters)" in screen
    assert len(codling.raw) < 20_000  # not the 4 MB line
