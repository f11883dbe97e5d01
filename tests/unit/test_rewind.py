"""/undo and /rewind in a recorded session: the code and the conversation go back, the history keeps what was
abandoned, and a restored session is sent exactly what the live one is (issue 34)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from codling.brain.branches import StepMark, TurnMark, live_turns, rewind_note
from codling.brain.events import Rewound, TurnStarted
from codling.brain.rewinding import Target, describe_preview, parse_target
from codling.config import Settings
from codling.llm.catalog import ModelInfo
from codling.store.header import SessionHeader
from codling.store.history import SessionLog
from codling.store.ids import new_session_id
from codling.store.index import SessionStore
from codling.store.live import LiveSession, start_session
from codling.tools.checkpoints.scan import Uncovered
from codling.tools.ports import Approver
from tests.fakes.approver import ScriptedApprover
from tests.fakes.cli_runner import codling
from tests.fakes.openai_server import OpenAIServer, Reply, ToolCall
from tests.fakes.scenarios import Call, Say, Script

MODEL = ModelInfo("test:model", context_limit=100_000, max_output_tokens=1_000)


def tree(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under ``root`` (but .git) with its content and permission bits."""
    return {
        p.relative_to(root).as_posix(): (p.read_bytes(), p.stat().st_mode & 0o777)
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(root).parts
    }


def turns_script() -> list[list[object]]:
    return [
        [[Call("edit_file", {"path": "src/app.py", "old_text": "hello", "new_text": "hi"}, "e1")], [Say("one")]],
        [
            [Call("run_command", {"command": "printf 'x\\n' > made.txt && chmod 755 made.txt && rm README.md"}, "r1")],
            [Say("two")],
        ],
        [[Call("write_file", {"path": "src/new.py", "content": "print(1)\n"}, "w1")], [Say("three")]],
    ]


def open_live(
    store: SessionStore,
    settings: Settings,
    header: SessionHeader,
    script: Script,
    *,
    stored: SessionLog | None = None,
    approver: Approver | None = None,
) -> LiveSession:
    return start_session(store, settings, MODEL, header, stored, approver=approver, model_factory=script.factory())


async def test_undo_puts_back_code_and_conversation_and_a_restore_sends_the_same(
    project: Path, settings: Settings
) -> None:
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    (project / ".gitignore").write_text("build/\n")
    (project / "build").mkdir()
    (project / "build" / "out.bin").write_bytes(b"\0built")
    store = SessionStore(settings.home)
    header = SessionHeader(new_session_id(), project, MODEL.id, "yolo")
    responses = [response for turn in turns_script() for response in turn]
    script = Script([*responses, [Say("four")], [Say("four")]])  # type: ignore[list-item]
    live = open_live(store, settings, header, script)
    hashes = [tree(project)]
    for prompt in ("rename greet's word", "make a file", "add new.py"):
        await live.brain.run(prompt)
        hashes.append(tree(project))
    assert hashes[1] != hashes[0] and hashes[2] != hashes[1] and hashes[3] != hashes[2]

    listing = await live.brain.run("/rewind")  # what a command changed is named too, from the checkpoints
    assert "2. make a file — changed `README.md`, `made.txt`\n   2.1 " in listing.text
    assert "3. add new.py — changed `src/new.py`" in listing.text

    result = await live.brain.run("/undo")
    assert "Rewound the code and conversation to before turn 3" in result.text
    assert "Not covered by checkpoints, left as they are: `build/` (ignored)." in result.text
    assert tree(project) == hashes[2]
    assert live.brain.state.turn_count == 2
    assert [e.text for e in live.brain.state.entries if e.role == "user"][-1].endswith("make a file")

    result = await live.brain.run("/rewind 1 code")
    assert tree(project) == hashes[0]
    assert live.brain.state.turn_count == 2  # the conversation stays

    # The next turn is sent the same conversation live and after a restore.
    await live.brain.run("go on")
    live_request = script.requests[-1]
    # The files and the conversation disagree now: the next request says so, once.
    note = "The user put files back as they were before turn 1 (README.md, made.txt, src/app.py)"
    assert note in live.brain.state.entries[-2].context
    await live.close()
    stored = store.read(header.session_id)
    assert [type(e) for e in stored.events if isinstance(e, Rewound)] == [Rewound, Rewound]
    restored = open_live(store, settings, header, Script([[Say("four")]]), stored=stored)
    assert restored.brain.state.entries == live.brain.state.entries
    assert restored.brain.state.turn_count == 3
    assert restored.brain.state.spent == live.brain.state.spent
    await restored.close()
    assert live_request  # the live request was made

    # Turn 3 is abandoned: the live branch numbers turns 1, 2 and the new 3.
    marks = live_turns(stored.events, project)
    assert [m.prompt for m in marks] == ["rename greet's word", "make a file", "go on"]
    started = [e.prompt for e in stored.events if isinstance(e, TurnStarted)]
    assert "add new.py" in started


async def test_a_rewind_over_files_changed_outside_asks_and_a_no_changes_nothing(
    project: Path, settings: Settings
) -> None:
    store = SessionStore(settings.home)
    header = SessionHeader(new_session_id(), project, MODEL.id, "yolo")
    script = Script(turns_script()[0])  # type: ignore[arg-type]
    approver = ScriptedApprover("reject", "allow_once")
    live = open_live(store, settings, header, script, approver=approver)
    before = tree(project)
    await live.brain.run("rename greet's word")
    (project / "README.md").write_text("# edited by the user\n")
    outside = tree(project)

    result = await live.brain.run("/undo")
    assert "README.md" in result.text and "Nothing was rewound" in result.text
    assert "overwriting 1 file(s) changed outside codling" in approver.asked[0].title
    assert tree(project) == outside
    assert live.brain.state.turn_count == 1

    await live.brain.run("/undo")
    assert tree(project) == before
    assert live.brain.state.turn_count == 0
    await live.close()


async def test_with_no_one_to_ask_a_rewind_over_outside_changes_is_refused(project: Path, settings: Settings) -> None:
    store = SessionStore(settings.home)
    header = SessionHeader(new_session_id(), project, MODEL.id, "yolo")
    live = open_live(store, settings, header, Script(turns_script()[0]))  # type: ignore[arg-type]
    await live.brain.run("rename greet's word")
    (project / "notes.txt").write_text("mine\n")
    outside = tree(project)
    result = await live.brain.run("/undo")
    assert "Not rewound: 1 file(s) changed outside codling" in result.text and "notes.txt" in result.text
    assert tree(project) == outside
    assert live.brain.state.turn_count == 1
    listing = await live.brain.run("/rewind")
    assert "1. rename greet's word — changed `src/app.py`" in listing.text
    assert "1.1 " in listing.text
    await live.close()


def session_id_of(home: Path) -> str:
    (listed,) = SessionStore(home).list()
    return listed.session_id


def test_sessions_rewind_lists_previews_asks_and_rewinds(
    served: dict[str, str | None], home: Path, project: Path, server: OpenAIServer
) -> None:
    before = tree(project)
    server.enqueue(
        Reply(tool_calls=[ToolCall("edit_file", {"path": "src/app.py", "old_text": "hello", "new_text": "hi"})]),
        Reply(text=["Done."]),
    )
    assert codling(served, "run", "--mode", "yolo", "say hi").exit_code == 0
    edited = tree(project)
    session = session_id_of(home)

    listing = codling(served, "sessions", "rewind", session)
    assert listing.exit_code == 0 and "1. say hi — changed `src/app.py`" in listing.stdout

    # No terminal and no --yes: the preview, then nothing done.
    asked = codling(served, "sessions", "rewind", session, "--to", "1", "--code")
    assert asked.exit_code == 1 and "- `src/app.py` restored (+1 −1)" in asked.stdout
    assert "add --yes" in asked.stderr and tree(project) == edited

    # Changed outside codling since: --yes does not overwrite it, --force does.
    (project / "README.md").write_text("# mine\n")
    mine = tree(project)
    refused = codling(served, "sessions", "rewind", session, "--to", "1", "--yes")
    assert refused.exit_code == 1 and "pass --force" in refused.stderr and tree(project) == mine
    done = codling(served, "sessions", "rewind", session, "--to", "1", "--yes", "--force")
    assert done.exit_code == 0, done.stderr
    assert tree(project) == before
    assert "Rewound the code and conversation to before turn 1" in done.stdout

    shown = codling(served, "sessions", "show", session)
    assert "(abandoned: a rewind took the conversation back to before it)" in shown.stdout
    assert codling(served, "sessions", "rewind", session, "--to", "1", "--code", "--both").exit_code == 2


async def test_a_fork_rewinds_with_its_own_copy_of_the_checkpoints(project: Path, settings: Settings) -> None:
    store = SessionStore(settings.home)
    header = SessionHeader(new_session_id(), project, MODEL.id, "yolo")
    live = open_live(store, settings, header, Script(turns_script()[0]))  # type: ignore[arg-type]
    before = tree(project)
    await live.brain.run("rename greet's word")
    await live.close()
    edited = tree(project)
    source_log = store.checkpoints_dir(header.session_id) / "log.jsonl"
    logged = source_log.read_bytes()

    fork_id = new_session_id()
    forked = store.fork(header.session_id, fork_id)
    fork = open_live(store, settings, forked.header, Script([]), stored=forked)
    result = await fork.brain.run("/rewind 1 code")
    await fork.close()
    assert "Rewound the code to before turn 1" in result.text
    assert tree(project) == before != edited
    assert source_log.read_bytes() == logged  # the fork's rewind logged in the fork's own log
    assert (store.checkpoints_dir(fork_id) / "log.jsonl").read_bytes() != logged


def test_abandoned_ranges_nest_and_a_rewind_outside_a_turn_ends_its_own_range() -> None:
    from datetime import UTC, datetime

    from codling.brain.branches import abandoned
    from codling.brain.events import Event, TextDelta, TurnEnded

    def turn(turn_id: str, prompt: str) -> list[Event]:
        return [
            TurnStarted(turn_id, prompt, False, datetime(2026, 11, 26, tzinfo=UTC)),
            TextDelta(turn_id, "ok"),
            TurnEnded(turn_id, "end_turn"),
        ]

    events: list[Event] = [
        *turn("t1", "one"),  # 0-2
        *turn("t2", "two"),  # 3-5
        *turn("t3", "three"),  # 6-8
        TurnStarted("u1", "/undo", False, datetime(2026, 11, 26, tzinfo=UTC)),  # 9
        Rewound("u1", "t3", 3, "both"),  # 10
        TurnEnded("u1", "end_turn"),  # 11
        *turn("t4", "four"),  # 12-14
        Rewound("cli", "t2", 2, "conversation"),  # 15: made outside any turn (sessions rewind)
        *turn("t5", "five"),  # 16-18
        Rewound("cli2", "t5", 3, "code"),  # 19: the code alone abandons nothing
    ]
    assert abandoned(events) == set(range(3, 15))
    assert [mark.prompt for mark in live_turns(events, Path("/p"))] == ["one", "five"]


def test_a_step_alone_rewinds_the_code_and_a_bad_target_says_why() -> None:
    turns = [TurnMark("t1", 1, "one", 1, (StepMark("c1", "Edit a.py", 2),)), TurnMark("t2", 2, "two", 3)]
    assert parse_target("rewind", "1.1", turns) == Target(turns[0], "code", 1)
    assert parse_target("rewind", "2", turns) == Target(turns[1], "both")
    assert parse_target("rewind", "2 chat", turns) == Target(turns[1], "conversation")
    assert parse_target("undo", "", turns) == Target(turns[1], "both")
    assert parse_target("rewind", "1.1 both", turns) == (
        "A step can only be rewound in the code (the conversation goes back by whole turns): add `code`."
    )
    assert str(parse_target("rewind", "3", turns)).startswith("There is no turn 3 to rewind to (turns 1 to 2).")
    assert parse_target("rewind", "2.1", turns) == "Turn 2 has no step 1 (no step that could change files)."
    assert str(parse_target("rewind", "x", turns)).startswith("Say which turn to rewind to")
    assert parse_target("undo", "", []) == "There is nothing to rewind: no turn of this conversation is left to undo."


def test_the_models_note_after_a_one_sided_rewind_says_what_it_must_know() -> None:
    step = rewind_note(Rewound("u", "t1", 1, "code", 2, 5, ("calc/format.py",), 2))
    assert step is not None and step.startswith(
        "The user put files back as they were before step 2 of turn 1 (calc/format.py)"
    )
    kept = rewind_note(Rewound("u", "t1", 2, "conversation", files=("CHANGELOG.md", "calc/__init__.py")))
    assert kept is not None and "kept the files as they are: CHANGELOG.md, calc/__init__.py may hold" in kept
    assert rewind_note(Rewound("u", "t1", 2, "conversation")) is None  # the files are as they were then too
    assert rewind_note(Rewound("u", "t1", 2, "both", files=("a.py",))) is None


async def test_read_only_changes_no_file_and_undo_takes_nothing_after_it(project: Path, settings: Settings) -> None:
    store = SessionStore(settings.home)
    header = SessionHeader(new_session_id(), project, MODEL.id, "yolo")
    live = open_live(store, settings, header, Script(turns_script()[0]))  # type: ignore[arg-type]
    await live.brain.run("rename greet's word")
    edited = tree(project)
    assert "/undo takes nothing after it" in (await live.brain.run("/undo please")).text
    live.set_mode("read-only")
    refused = await live.brain.run("/undo")
    assert refused.text.startswith("codling is in read-only mode, so no file is changed")
    assert tree(project) == edited and live.brain.state.turn_count == 1
    talk = await live.brain.run("/rewind 1 conversation")  # the conversation alone may go back
    assert "The files stay as they are: `src/app.py` keep what the abandoned turns changed." in talk.text
    assert tree(project) == edited and live.brain.state.turn_count == 0
    await live.close()


def test_the_preview_names_an_uncovered_directory_not_its_entries() -> None:

    target = Target(TurnMark("t1", 1, "one", 1), "code")
    uncovered = [Uncovered(".pytest_cache/", "ignored"), Uncovered(".pytest_cache/v/", "ignored")]
    uncovered += [Uncovered("big.bin", "larger than 10 MiB")]
    text = describe_preview(target, [], [], uncovered)
    assert "left as they are: `.pytest_cache/` (ignored), `big.bin` (larger than 10 MiB)." in text
