"""`codling chat` (and plain `codling`) on a real pseudo-terminal, driven as a person would: type, wait for the
answer, press Ctrl-C or Ctrl-D. The model is the loopback OpenAI-compatible server; sessions are real files."""

from __future__ import annotations

import json
import os
import select
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from codling.brain.events import TurnEnded, TurnStarted
from codling.credentials import Stored, read
from codling.store.index import SessionStore
from tests.e2e.test_cli import base_env, codling, model_env
from tests.fakes import warm
from tests.fakes.deadlines import deadline
from tests.fakes.openai_server import OpenAIServer, Reply, ToolCall, last_user_text, running_server
from tests.fakes.processes import alive
from tests.fakes.pty_process import PtyProcess
from tests.fakes.scenarios import user_prompt

UP, ALT_ENTER, CTRL_C, CTRL_D, ESC = "\x1b[A", "\x1b\r", "\x03", "\x04", "\x1b"


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with running_server() as s:
        yield s


def chat(home: Path, project: Path, server: OpenAIServer, *args: str) -> PtyProcess:
    env = {
        **model_env(home, server),
        "TERM": "xterm",
        "NO_COLOR": "1",
        "PROMPT_TOOLKIT_NO_CPR": "1",  # the test's terminal does not answer cursor-position queries
    }
    return PtyProcess([*warm.codling(), *args], env=env, cwd=project)


def recorded_prompts(home: Path) -> list[list[str]]:
    store = SessionStore(home)
    return [[t.prompt for t in store.read(s.session_id).events if isinstance(t, TurnStarted)] for s in store.list()]


def test_plain_codling_opens_a_chat_with_mentions_multiline_input_and_history(
    home: Path, project: Path, server: OpenAIServer
) -> None:
    server.enqueue(
        Reply(text=["Two lines received."]),
        Reply(text=["It is a demo."]),
        Reply(text=["Again."]),
        Reply(text=["Never paste keys."]),
    )
    codling_ = chat(home, project, server)
    try:
        at = codling_.expect("/help lists the commands and keys; Ctrl-D leaves.")
        at = codling_.expect("›", after=at)
        codling_.send(f"first line{ALT_ENTER}second line\r")
        at = codling_.expect("Two lines received.", after=at)
        at = codling_.expect("›", after=codling_.expect("context: ", after=at))
        codling_.send("what is @README.md about?\r")
        at = codling_.expect("attached README.md (1 line)", after=at)
        at = codling_.expect("It is a demo.", after=at)
        at = codling_.expect("›", after=at)
        codling_.send(f"{UP}{UP}\r")  # the history: the input before the last, sent again
        at = codling_.expect("Again.", after=at)
        at = codling_.expect("›", after=at)
        codling_.send("my key is sk-cli-test\r")  # the value of OPENAI_API_KEY
        at = codling_.expect("Never paste keys.", after=at)
        at = codling_.expect("›", after=at)
        codling_.send(CTRL_D)
        assert codling_.wait() == 0
    finally:
        codling_.close()
    readme = (project / "README.md").as_uri()
    assert [user_prompt(last_user_text(body)) for body in server.requests] == [
        "first line\nsecond line",
        f"what is @README.md about?\n\n{readme}\n```\n# demo\n```",
        "first line\nsecond line",
        "my key is sk-cli-test",  # (the model is told what the user typed)
    ]
    [session] = recorded_prompts(home)
    assert session[:3] == ["first line\nsecond line", "what is @README.md about? @README.md", "first line\nsecond line"]
    assert "continue it with: codling chat --resume " in codling_.output
    typed = (home / "prompt_history").read_text()
    assert typed.count("+first line") == 2
    assert "+my key is " in typed and "sk-cli-test" not in typed  # redacted as history.jsonl has it
    assert "sk-cli-test" not in "".join(p.read_text() for p in home.rglob("history.jsonl"))


def test_ctrl_c_or_esc_cancels_the_running_turn_and_a_second_ctrl_c_leaves(
    home: Path, project: Path, server: OpenAIServer
) -> None:
    # The shell announces its pid through a named pipe the test holds open: the test waits on the pipe (an event),
    # then presses Ctrl-C (the first turn) or Esc (the second) while the command surely runs.
    os.mkfifo(project / "started")
    started = os.open(project / "started", os.O_RDWR | os.O_NONBLOCK)  # (read-write: never an early end)
    command = "echo $$ > started; until [ -f go ]; do sleep 0.05; done"
    server.enqueue(
        Reply(tool_calls=[ToolCall("run_command", {"command": command}, id="c1")]),
        Reply(tool_calls=[ToolCall("run_command", {"command": command}, id="c2")]),
    )
    codling_ = chat(home, project, server, "chat")
    shells: list[int] = []
    try:
        at = codling_.expect("›")
        codling_.send("wait for go\r")
        at = codling_.expect("Allow? [y]es", after=at)
        codling_.send("y\r")  # the approver reads the terminal the input line has just let go of
        assert select.select([started], [], [], deadline(30))[0], "the command did not start"
        shells.append(int(os.read(started, 64)))
        codling_.interrupt()
        at = codling_.expect("(cancelled)", after=at)
        at = codling_.expect("(Ctrl-C again or Ctrl-D to leave)", after=at)
        at = codling_.expect("›", after=at)
        codling_.send("wait again\r")
        at = codling_.expect("Allow? [y]es", after=at)
        codling_.send("y\r")  # the keys watched during the turn are paused while it asks
        assert select.select([started], [], [], 30)[0], "the second command did not start"
        shells.append(int(os.read(started, 64)))
        codling_.send("typed ahead")  # kept for the next prompt, not lost to the watch
        codling_.send(ESC)
        cancelled = codling_.expect("(cancelled)", after=at)
        at = codling_.expect("typed ahead", after=cancelled)  # on the next input line
        assert "(Ctrl-C again or Ctrl-D to leave)" not in codling_.output[cancelled:at]  # Esc arms nothing
        codling_.send(CTRL_C)  # clears the line
        codling_.send(CTRL_C)
        at = codling_.expect("(Ctrl-C again or Ctrl-D to leave)", after=at)
        at = codling_.expect("›", after=at)
        codling_.send(CTRL_C)
        assert codling_.wait() == 0
    finally:
        codling_.close()
        os.close(started)
    assert not any(alive(shell) for shell in shells)  # the cancelled commands were stopped, not left running
    # Each permission question rang the bell (notify = "bell", the default) before it was drawn (issue 32 item 7).
    before_each_question = codling_.output.split("Permission needed")[:-1]
    assert len(before_each_question) == 2 and all("\a" in text for text in before_each_question)
    store = SessionStore(home)
    [summary] = store.list()
    ends = [e for e in store.read(summary.session_id).events if isinstance(e, TurnEnded)]
    assert [e.stop_reason for e in ends] == ["cancelled", "cancelled"]


def test_chat_resume_with_no_id_offers_the_sessions_then_shows_where_it_left_off(
    home: Path, project: Path, server: OpenAIServer
) -> None:
    from tests.fakes.cli_runner import GOLDEN_ID, install_golden

    install_golden(home)
    stored = SessionStore(home).read(GOLDEN_ID).events
    turns = sum(isinstance(e, TurnStarted) for e in stored)
    assert turns > 1
    server.enqueue(Reply(text=["Carrying on."]))
    codling_ = chat(home, project, server, "chat", "--resume")
    try:
        at = codling_.expect("Resume which? [number, words to filter, Enter: 1, q: none] ")
        codling_.send("\r")
        at = codling_.expect("The last turn of this session:", after=at)
        at = codling_.expect(f"Turn {turns} · ", after=at)  # numbered as in the whole session
        at = codling_.expect(f"Resumed session {GOLDEN_ID} “rename greet @app.py”", after=at)
        at = codling_.expect("›", after=at)
        codling_.send("/exit\r")
        assert codling_.wait() == 0
    finally:
        codling_.close()
    assert server.requests == []  # nothing was asked, so nothing was added
    assert f"continue it with: codling chat --resume {GOLDEN_ID}" not in codling_.output


def test_chat_without_a_terminal_points_to_run_and_plain_codling_with_nothing_piped_says_so(home: Path) -> None:
    refused = codling("chat", env=base_env(home), stdin="hello\n")
    assert refused.returncode == 2
    assert refused.stderr.startswith("codling: chat needs a terminal") and "codling run" in refused.stderr
    # Plain `codling` without a terminal runs as `codling run` would: an empty stdin is no prompt.
    empty = codling(env=base_env(home))
    assert (empty.returncode, empty.stdout) == (2, "")
    assert empty.stderr.startswith("codling: the prompt is empty: nothing came on stdin;") and "--help" in empty.stderr
    assert SessionStore(home).list() == []


def test_sigterm_at_the_prompt_leaves_with_128_plus_its_number_and_the_session_recorded(
    home: Path, project: Path, server: OpenAIServer
) -> None:

    server.enqueue(Reply(text=["Hi."]))
    codling_ = chat(home, project, server, "chat")
    try:
        at = codling_.expect("›")
        codling_.send("hello\r")
        at = codling_.expect("›", after=codling_.expect("Hi.", after=at))
        codling_.process.send_signal(signal.SIGTERM)
        assert codling_.wait() == 128 + signal.SIGTERM
    finally:
        codling_.close()
    assert recorded_prompts(home) == [["hello"]]
    assert "is recorded; continue it with: codling chat --resume " in codling_.output


def test_a_model_that_cannot_be_built_is_said_and_the_chat_leaves_with_exit_2_before_any_turn(
    home: Path, project: Path, server: OpenAIServer
) -> None:
    """The input line opens while the model stack loads (cli/preload.py); the model's failure then ends it."""
    codling_ = chat(home, project, server, "chat", "--model", "nosuch:model")
    try:
        assert codling_.wait() == 2
    finally:
        codling_.close()
    assert codling_.output.rstrip().endswith("codling: cannot use model 'nosuch:model': Unknown provider: nosuch")
    assert SessionStore(home).list() == [] and server.requests == []


def test_the_chat_never_shows_a_secret_value_a_tool_or_the_model_echoes(
    home: Path, project: Path, server: OpenAIServer
) -> None:
    # (issue 29 D8) codling run's output was redacted; the chat printed what a file, a command or the model said.
    token = "ghp_" + "Ch4t" * 9
    (project / "notes.txt").write_text(f"deploy token: {token}\n")
    server.enqueue(
        Reply(tool_calls=[ToolCall("read_file", {"path": "notes.txt"}, id="r1")]),
        Reply(tool_calls=[ToolCall("run_command", {"command": "cat notes.txt; echo $CI_BOT"}, id="c1")]),
        Reply(text=["The token is ", token[:10], token[10:], " as noted."]),  # split across two deltas
    )
    codling_ = PtyProcess(
        [*warm.codling(), "chat", "--mode", "yolo", "-v"],
        env={
            **model_env(home, server),
            "CI_BOT": token,  # secret by its value's shape
            "TERM": "xterm",
            "NO_COLOR": "1",
            "PROMPT_TOOLKIT_NO_CPR": "1",
        },
        cwd=project,
    )
    try:
        at = codling_.expect("›")
        codling_.send("what is the deploy token?\r")
        at = codling_.expect("as noted.", after=at)
        codling_.expect("›", after=at)
        codling_.send(CTRL_D)
        assert codling_.wait() == 0
    finally:
        codling_.close()
    assert "deploy token: [redacted]" in codling_.output  # the tool output was shown…
    assert "The token is [redacted] as noted." in codling_.output
    assert token.encode() not in codling_.raw and token[:20] not in codling_.output  # …never the value
    # The model read it (what it reads is not redacted; what the user's terminal shows is).
    assert token in json.dumps(server.requests[1]["messages"])


def test_codling_login_on_a_terminal_asks_the_provider_and_reads_the_key_without_echo(home: Path) -> None:
    """What an editor's terminal sign-in runs (`codling acp login`): a numbered list, then the key unseen."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "CODLING_HOME": str(home)}
    login = PtyProcess([*warm.codling(), "acp", "login"], env=env, cwd=home)
    try:
        at = login.expect("1. Anthropic (Claude)")
        at = login.expect("Number or name:", after=at)
        login.send("1\r")
        at = login.expect("ANTHROPIC_API_KEY (input hidden):", after=at)
        login.send("sk-ant-typed-on-a-terminal\r")
        at = login.expect("Model: anthropic:claude-sonnet-5-5", after=at)
        assert login.wait() == 0
    finally:
        login.close()
    assert "sk-ant-typed-on-a-terminal" not in login.output  # never echoed
    assert read(home) == Stored({"ANTHROPIC_API_KEY": "sk-ant-typed-on-a-terminal"}, "anthropic:claude-sonnet-5-5")


BEFORE_THE_INPUT_LINE_NEVER = (
    "pydantic",
    "pydantic_ai",
    "openai",
    "rich",
    "codling.store.history",
    "codling.brain.events",
)
"""What the chat must not import before its input line is drawn (issue 32 D2: each is tens of milliseconds, up
to a second for pydantic-ai; the model stack loads while the user types)."""


def test_the_input_line_is_drawn_before_the_model_stack_the_store_or_rich_load(
    home: Path, project: Path, server: OpenAIServer
) -> None:
    """stdout and stderr share the terminal: the imports Python reports (PYTHONPROFILEIMPORTTIME, on stderr)
    before the input line's `›` are the ones the user waited for."""
    env = {**model_env(home, server), "TERM": "xterm", "PROMPT_TOOLKIT_NO_CPR": "1", "PYTHONPROFILEIMPORTTIME": "1"}
    codling_ = PtyProcess([*warm.cold(), "chat"], env=env, cwd=project)  # its imports are what is measured
    try:
        at = codling_.expect("›")
        before = codling_.output[:at]
        codling_.process.send_signal(signal.SIGTERM)
        codling_.wait()
    finally:
        codling_.close()
    imported = {line.rpartition("|")[2].strip() for line in before.splitlines() if line.startswith("import time:")}
    assert "prompt_toolkit" in imported  # the report is there…
    assert [name for name in BEFORE_THE_INPUT_LINE_NEVER if name in imported] == []  # …and none of these


def test_a_prompt_given_to_bare_codling_opens_the_chat_with_it_and_deleting_the_session_asks_first(
    home: Path, project: Path, server: OpenAIServer
) -> None:
    """(issue 32 items 3 and 6, on a real terminal) `codling "prompt"` is the chat, its first turn that prompt,
    each input line names the mode; `codling sessions delete PREFIX` asks before it deletes."""
    server.enqueue(Reply(text=["Hi there."]))
    codling_ = chat(home, project, server, "say hi")
    try:
        at = codling_.expect("Hi there.")
        codling_.expect("[ask] ›", after=at)
        codling_.send("/exit\r")
        assert codling_.wait() == 0
    finally:
        codling_.close()
    assert recorded_prompts(home) == [["say hi"]]
    [session] = SessionStore(home).list()
    deleting = PtyProcess(
        [*warm.codling(), "sessions", "delete", session.session_id[:13]],
        env={**model_env(home, server), "NO_COLOR": "1"},
        cwd=project,
    )
    try:
        deleting.expect(f"Delete session {session.session_id} (say hi")
        deleting.expect("for good? [y/N] ")
        deleting.send("\r")  # Enter: no
        deleting.expect(f"kept session {session.session_id}")
        assert deleting.wait() == 0
    finally:
        deleting.close()
    assert [s.session_id for s in SessionStore(home).list()] == [session.session_id]
