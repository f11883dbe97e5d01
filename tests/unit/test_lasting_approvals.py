""" "Always" answers outlive the process (issue 35 item 3): recorded in the session, in force again after a
restore and in a fork; a destructive program's "always" stays the exact command."""

from __future__ import annotations

import io
from datetime import UTC, datetime
from pathlib import Path

from codling.acp.translate import translate
from codling.brain.events import ToolCallFinished, ToolCallStarted, TurnStarted
from codling.cli.render import TerminalRenderer
from codling.config import Settings, load_settings
from codling.llm.catalog import ModelInfo
from codling.store.header import SessionHeader
from codling.store.ids import new_session_id
from codling.store.index import SessionStore
from codling.store.live import start_session
from tests.fakes.approver import ScriptedApprover
from tests.fakes.scenarios import Call, Say, Script

MODEL = ModelInfo("test:model", context_limit=100_000, max_output_tokens=1_000)


def commands(*lines: str) -> Script:
    responses: list[list[object]] = []
    for index, line in enumerate(lines):
        responses += [[Call("run_command", {"command": line}, f"c{index}")], [Say("ran")]]
    return Script(responses)  # type: ignore[arg-type]


async def test_always_answers_are_in_force_after_a_restore_and_in_a_fork(project: Path, settings: Settings) -> None:
    store = SessionStore(settings.home)
    header = SessionHeader(new_session_id(), project, MODEL.id, "ask")
    first = ScriptedApprover("allow_always", "allow_always")
    live = start_session(
        store, settings, MODEL, header, approver=first, model_factory=commands("echo one", "rm -f x.txt").factory()
    )
    await live.brain.run("echo")
    await live.brain.run("remove")
    await live.close()
    assert [r.always for r in first.asked] == ["every `echo` command", "this exact command"]
    assert store.read(header.session_id).approvals == [("execute", "echo"), ("execute-exact", "rm -f x.txt")]

    # Restored in a new process: `echo` anything and that exact rm run without a question; another rm asks.
    later = ScriptedApprover("allow_once")
    script = commands("echo two", "rm -f x.txt", "rm -f y.txt")
    restored = start_session(
        store, settings, MODEL, header, store.read(header.session_id), approver=later, model_factory=script.factory()
    )
    results = [await restored.brain.run(prompt) for prompt in ("echo again", "remove again", "remove another")]
    await restored.close()
    assert [r.subject for r in later.asked] == ["rm -f y.txt"]
    # Each call says which "always" let it through (its card, its terminal line, its record); the asked one none.
    approved = [call.finished.approved_by for result in results for call in result.tool_calls if call.finished]
    assert approved == ["your “always” for every `echo` command", "your “always” for this exact command", None]
    records = [r for r in store.read(header.session_id).records if getattr(r, "kind", "") == "tool_result"]
    assert [getattr(r, "approved_by", None) for r in records][-3:] == approved

    # A fork inherits them.
    fork_id = new_session_id()
    forked = store.fork(header.session_id, fork_id)
    asked = ScriptedApprover()
    fork = start_session(
        store, settings, MODEL, forked.header, forked, approver=asked, model_factory=commands("echo three").factory()
    )
    await fork.brain.run("echo in the fork")
    await fork.close()
    assert asked.asked == []


async def test_the_always_that_let_a_call_through_is_on_its_card_and_its_terminal_line() -> None:
    started = ToolCallStarted("t", "c1", "run_command", "Run `pytest -q`", "execute", {"command": "pytest -q"})
    finished = ToolCallFinished(
        "t", "c1", "run_command", "completed", "exit 0\n\nok", approved_by="your “always” for every `pytest` command"
    )
    note = "Allowed without asking: your “always” for every `pytest` command"
    (update,) = translate(finished)
    assert note in str(update.model_dump())
    out = io.StringIO()
    renderer = TerminalRenderer(out, color=False, interactive=False)
    for event in (TurnStarted("t", "test", False, datetime(2026, 11, 27, tzinfo=UTC)), started, finished):
        await renderer(event)
    assert f"  {note}\n" in out.getvalue()


async def test_permissions_save_makes_the_sessions_always_for_programs_rules_everywhere(
    project: Path, settings: Settings
) -> None:
    store = SessionStore(settings.home)
    header = SessionHeader(new_session_id(), project, MODEL.id, "ask")
    asked = ScriptedApprover("allow_always", "allow_always")
    live = start_session(
        store, settings, MODEL, header, approver=asked, model_factory=commands("echo one", "rm -f x.txt").factory()
    )
    await live.brain.run("echo")
    await live.brain.run("remove")
    shown = await live.brain.run("/permissions")
    assert "- every `echo` command\n- this exact command: `rm -f x.txt`" in shown.text
    saved = await live.brain.run("/permissions save")
    await live.close()
    rules_file = settings.home / "permissions.toml"
    assert saved.text == f"Saved as rules in every session ({rules_file}): allow `echo`."
    assert rules_file.read_text().splitlines()[1:] == ["deny = []", "ask = []", 'allow = ["echo"]']

    # A new session (of any project) runs `echo` without asking: the rule is the user's now.
    fresh = load_settings({"CODLING_HOME": str(settings.home)})
    other = SessionHeader(new_session_id(), project, MODEL.id, "ask")
    nobody = ScriptedApprover()
    new = start_session(store, fresh, MODEL, other, approver=nobody, model_factory=commands("echo two").factory())
    result = await new.brain.run("echo again")
    await new.close()
    assert nobody.asked == []
    (call,) = result.tool_calls
    assert call.finished is not None
    assert call.finished.approved_by == 'your rule "allow echo" ($CODLING_HOME/permissions.toml)'


async def test_always_everywhere_in_the_question_makes_the_program_a_rule_at_once(
    project: Path, settings: Settings
) -> None:
    store = SessionStore(settings.home)
    header = SessionHeader(new_session_id(), project, MODEL.id, "ask")
    asked = ScriptedApprover("allow_everywhere", "allow_once")
    script = commands("echo one", "echo two", "echo a; echo b")
    live = start_session(store, settings, MODEL, header, approver=asked, model_factory=script.factory())
    for prompt in ("echo", "echo again", "chained"):
        await live.brain.run(prompt)
    await live.close()
    first, chained = asked.asked
    assert first.everywhere == "every `echo` command, in every session: an allow rule in $CODLING_HOME/permissions.toml"
    # A chain is never a program's: neither "always" nor "everywhere" can cover more than that line.
    assert (chained.subject, chained.always, chained.everywhere) == ("echo a; echo b", "this exact command", None)
    rules_file = settings.home / "permissions.toml"
    assert rules_file.read_text().splitlines()[1:] == ["deny = []", "ask = []", 'allow = ["echo"]']
    fresh = load_settings({"CODLING_HOME": str(settings.home)})
    nobody = ScriptedApprover()
    other = SessionHeader(new_session_id(), project, MODEL.id, "ask")
    new = start_session(store, fresh, MODEL, other, approver=nobody, model_factory=commands("echo three").factory())
    await new.brain.run("echo in a new session")
    await new.close()
    assert nobody.asked == []
