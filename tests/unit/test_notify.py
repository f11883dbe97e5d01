"""Notifications (issue 32 item 7): the chat, in process, with a fake clock and a StringIO terminal, announces a
permission question at once and a turn's end only when it took longer than the threshold; the exact bytes of the
bell and the OSC 9/777 sequences; model-made text cannot break out of them; only a terminal is notified; the
notify_command runs for real, with the title and body in its argv and environment, without secrets, in the
background, its failure logged."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from codling.brain.events import TurnEnded, TurnStarted
from codling.cli.chat import Chat
from codling.cli.notify import Notice, Notifier, NotifyingApprover, sequence, terminal_notifier
from codling.cli.oneshot import Output, run_notifier
from codling.config import NotifyStyle, Settings, load_settings
from codling.errors import ConfigError
from codling.tools.ports import Answer, PermissionRequest
from codling.vocabulary import PermissionMode
from tests.fakes.approver import ScriptedApprover
from tests.fakes.deadlines import deadline
from tests.fakes.scenarios import Call, Say, Script
from tests.unit.test_chat import Typed, chat_in

BEL = "\a"
ESC = "\x1b"


class Clock:
    """A clock the model script and the approver move: no sleeping."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Terminal(io.StringIO):
    """A StringIO that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def taking(clock: Clock, seconds: float, reply: str = "Done.") -> Script:
    """A script whose one reply takes ``seconds`` of ``clock``."""

    def answer(messages: object) -> list[Say]:
        clock.now += seconds
        return [Say(reply)]

    return Script([], fallback=answer)


def chat(
    settings: Settings,
    project: Path,
    script: Script,
    notifier: Notifier,
    out: io.StringIO,
    *,
    mode: PermissionMode = "yolo",
    approver: ScriptedApprover | None = None,
    typed: tuple[str, ...] = ("go",),
) -> Chat:
    """A chat whose notices go to ``notifier`` (and its terminal to ``out``)."""
    made, _ = chat_in(
        settings, project, Typed(*typed), script, mode=mode, out=out, approver=approver, notifier=notifier
    )
    return made


async def test_a_turn_longer_than_the_threshold_rings_the_bell_once_its_reply_is_shown(
    settings: Settings, project: Path
) -> None:
    clock, out = Clock(), io.StringIO()
    notifier = Notifier("bell", out, clock=clock, after=5)
    assert await asyncio.wait_for(chat(settings, project, taking(clock, 30), notifier, out).run(), deadline(10)) == 0
    text = out.getvalue()
    assert text.count(BEL) == 1
    assert text.index("Done.") < text.index(BEL)


async def test_a_quick_turn_rings_nothing(settings: Settings, project: Path) -> None:
    clock, out = Clock(), io.StringIO()
    notifier = Notifier("bell", out, clock=clock, after=5)
    script = taking(clock, 4)
    assert (
        await asyncio.wait_for(chat(settings, project, script, notifier, out, typed=("a", "b")).run(), deadline(10))
        == 0
    )
    assert out.getvalue().count("Done.") == 2  # both turns ran, 4 s each: neither is announced
    assert BEL not in out.getvalue()


async def test_a_permission_question_is_announced_before_it_is_asked_and_the_answer_restarts_the_clock(
    settings: Settings, project: Path
) -> None:
    clock, out = Clock(), io.StringIO()
    seen: list[str] = []

    class Slow(ScriptedApprover):
        async def ask(self, request: PermissionRequest) -> Answer:
            seen.append(out.getvalue())  # what the terminal showed when the question came
            clock.now += 60  # the user came back after a minute
            return await super().ask(request)

    notifier = Notifier("osc", out, clock=clock, env={"TERM": "xterm-256color"}, after=5)
    script = Script([[Call("run_command", {"command": "echo hi"}, "c1")], [Say("Done.")]])
    approver = Slow("allow_once")
    run = chat(settings, project, script, notifier, out, mode="ask", approver=approver)
    assert await asyncio.wait_for(run.run(), deadline(10)) == 0
    [request] = approver.asked
    announced = f"{ESC}]9;codling: Permission needed: {request.title}{BEL}"
    assert seen == [seen[0]] and seen[0].endswith(announced)
    # The turn ended at once after the answer: the user is back, so its end is not announced too.
    assert out.getvalue().count(f"{ESC}]9;") == 1


@pytest.mark.parametrize(
    ("style", "term", "expected"),
    [
        ("bell", "xterm-256color", BEL),
        ("osc", "xterm-256color", f"{ESC}]9;codling: The reply is ready.{BEL}"),
        ("osc", "foot", f"{ESC}]777;notify;codling;The reply is ready.{BEL}"),
        ("osc", "rxvt-unicode-256color", f"{ESC}]777;notify;codling;The reply is ready.{BEL}"),
        ("off", "xterm-256color", ""),
    ],
)
def test_the_bytes_each_style_writes(style: NotifyStyle, term: str, expected: str) -> None:
    assert sequence(style, Notice("turn_ended", "The reply is ready."), {"TERM": term}) == expected


@pytest.mark.parametrize("term", ["xterm", "foot"])
def test_model_made_text_cannot_end_the_sequence_or_add_fields(term: str) -> None:
    hostile = Notice("question", f"Permission needed: rm x{BEL}{ESC}]0;owned{BEL}{ESC}\\\x9c; evil\nline")
    written = sequence("osc", hostile, {"TERM": term})
    assert written.count(ESC) == 1 and written.startswith(f"{ESC}]") and written.count(BEL) == 1
    assert written.endswith(BEL) and "\x9c" not in written and "\n" not in written
    fields = written.removeprefix(f"{ESC}]").removesuffix(BEL).split(";")
    assert len(fields) == (4 if term == "foot" else 2)


@pytest.mark.parametrize(
    ("stop_reason", "error", "body"),
    [
        ("end_turn", False, "The reply is ready."),
        ("end_turn", True, "The turn failed: the terminal says why."),
        ("max_turn_requests", False, "The turn stopped (max turn requests)."),
        ("cancelled", False, None),  # the user cancelled it: they are there
    ],
)
async def test_what_a_long_turn_s_end_says(stop_reason: str, error: bool, body: str | None) -> None:
    clock, out = Clock(), io.StringIO()
    notifier = Notifier("osc", out, clock=clock, env={"TERM": "xterm"}, after=5)
    await notifier(TurnStarted("t1", "go", False, datetime.now(UTC)))
    clock.now += 6
    await notifier(TurnEnded("t1", stop_reason, error=error))  # type: ignore[arg-type]
    assert out.getvalue() == ("" if body is None else f"{ESC}]9;codling: {body}{BEL}")


def test_only_a_terminal_is_notified_and_never_json(settings: Settings) -> None:
    env = {"TERM": "xterm"}
    assert isinstance(terminal_notifier(settings, Terminal(), env), Notifier)
    assert terminal_notifier(settings, io.StringIO(), env) is None  # piped or redirected
    off = Settings(home=settings.home, notify="off")
    assert terminal_notifier(off, Terminal(), env) is None
    assert isinstance(
        terminal_notifier(Settings(home=settings.home, notify="off", notify_command=("x",)), Terminal(), env), Notifier
    )
    assert isinstance(run_notifier(settings, Output(json=False, last_message=None), Terminal(), env), Notifier)
    assert run_notifier(settings, Output(json=True, last_message=None), Terminal(), env) is None
    assert run_notifier(settings, Output(json=False, last_message=None), io.StringIO(), env) is None


def test_config_reads_and_checks_notify(home: Path) -> None:
    env = {"CODLING_HOME": str(home)}
    assert load_settings(env).notify == "bell"
    (home / "config.toml").write_text('notify = "osc"\nnotify_command = ["notify-send", "-u", "low"]\n')
    loaded = load_settings(env)
    assert (loaded.notify, loaded.notify_command) == ("osc", ("notify-send", "-u", "low"))
    (home / "config.toml").write_text('notify = "desktop"\n')
    with pytest.raises(ConfigError, match="notify must be one of 'bell', 'osc', 'off', not 'desktop'"):
        load_settings(env)
    (home / "config.toml").write_text('notify_command = "notify-send $TITLE"\n')
    with pytest.raises(
        ConfigError, match=r"notify_command must be a program and its arguments, like \[\"notify-send\"\]"
    ):
        load_settings(env)


async def test_notify_command_runs_with_title_and_body_in_argv_and_env_without_secrets(
    settings: Settings, tmp_path: Path
) -> None:
    record = tmp_path / "notified.json"
    script = tmp_path / "notifier.py"
    script.write_text(
        "import json, os, sys\n"
        f"open({str(record)!r}, 'w').write(json.dumps({{'argv': sys.argv[1:], 'env': dict(os.environ)}}))\n"
    )
    configured = Settings(home=settings.home, notify="off", notify_command=(sys.executable, str(script), "--flag"))
    env = {"PATH": "/usr/bin:/bin", "OPENAI_API_KEY": "sk-notify-secret-123456", "LANG": "C.UTF-8"}
    notifier = terminal_notifier(configured, Terminal(), env)
    assert notifier is not None
    title = f'rm -rf "$HOME"; $(touch {tmp_path}/pwned) `id`'
    asking = NotifyingApprover(ScriptedApprover("allow_once"), notifier)
    request = PermissionRequest("c1", "run_command", "execute", title, "rm")
    assert await asking.ask(request) == "allow_once"
    assert not record.exists()  # started in the background: the question was not held up by it
    await asyncio.wait_for(notifier.wait(), deadline(30))
    seen = json.loads(record.read_text())
    body = f'Permission needed: rm -rf "$HOME", $(touch {tmp_path}/pwned) `id`'  # ';' is OSC 777's separator
    assert seen["argv"] == ["--flag", "codling", body]
    assert seen["env"]["CODLING_NOTIFY_EVENT"] == "question"
    assert (seen["env"]["CODLING_NOTIFY_TITLE"], seen["env"]["CODLING_NOTIFY_BODY"]) == ("codling", body)
    assert "OPENAI_API_KEY" not in seen["env"] and seen["env"]["LANG"] == "C.UTF-8"
    assert not (tmp_path / "pwned").exists()  # no shell ran the text


async def test_a_failing_notify_command_is_logged_and_the_chat_goes_on(
    settings: Settings, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="codling.cli.notify")
    out = Terminal()
    missing = Notifier("bell", out, command=(str(tmp_path / "no-such-notifier"),))
    failing = Notifier("bell", out, command=(sys.executable, "-c", "import sys; sys.exit('no display')"))
    for notifier in (missing, failing):
        notifier.notify(Notice("turn_ended", "The reply is ready."))
        await asyncio.wait_for(notifier.wait(), deadline(30))
    assert out.getvalue() == BEL * 2  # the terminal was told all the same
    messages = [r.getMessage() for r in caplog.records]
    assert any("no-such-notifier could not start" in m and "fix notify_command in config.toml" in m for m in messages)
    assert any("exited with 1: no display" in m for m in messages)
