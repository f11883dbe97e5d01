"""The session store against hostile ids, invalid records, damaged metadata and dead or live other writers."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from codling.brain.context.ledger_entries import TurnRecap, TurnStep
from codling.brain.events import (
    CompactionStarted,
    ContextCompacted,
    Event,
    PlanUpdated,
    SessionTitled,
    SpecialTurnPersisted,
    TextDelta,
    ThoughtDelta,
    ToolCallFinished,
    ToolCallStarted,
    TurnEnded,
    TurnFailed,
    TurnStarted,
    Usage,
)
from codling.brain.interactions import Interaction
from codling.brain.prompt import ImageBlock, ResourceBlock, TextBlock, describe_prompt
from codling.cli.home import open_store
from codling.config import Settings
from codling.errors import InvalidSessionIdError, SessionError, UnknownSessionError
from codling.store.header import SessionHeader
from codling.store.history import HistoryFile, HistoryRecorder, read_history
from codling.store.ids import new_session_id
from codling.store.index import SessionListing, SessionStore
from codling.store.records import RECORD, dump_record
from codling.vocabulary import FileDiff, Location, PlanStep
from tests.fakes.deadlines import deadline
from tests.fakes.processes import other_writer

STARTED = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
BAD_IDS = ["../../decoy", "..", ".", "", "a\x00b", "x" * 300, "20261122-0b9f3c2a41de/../../../decoy", "20261122-0B9F"]


def make_header(session_id: str, cwd: Path = Path("/p"), parent: str | None = None) -> SessionHeader:
    return SessionHeader(session_id, cwd, "openai-chat:m", "ask", parent=parent, created_at="2026-11-22T10:00:00.000Z")


@pytest.fixture
def store(tmp_path: Path) -> SessionStore:
    return SessionStore(tmp_path / "home")


@pytest.fixture
def decoy(tmp_path: Path) -> Path:
    """A history.jsonl outside the store that a traversal would reach as ``../../decoy``."""
    path = tmp_path / "decoy" / "history.jsonl"
    path.parent.mkdir()
    path.write_text(json.dumps(dump_record(make_header("20261122-0b9f3c2a41de", Path("/evil")).record())) + "\n")
    return path


# -- ids -------------------------------------------------------------------------------------------------------


def test_no_store_method_turns_a_malformed_id_into_a_path(store: SessionStore, decoy: Path) -> None:
    real = new_session_id()
    store.create(make_header(real)).close()
    before = decoy.read_bytes()
    attacks: list[Callable[[str], object]] = [
        store.history_path,
        store.open,
        store.read,
        store.delete,
        lambda bad: store.fork(bad, new_session_id()),
        lambda bad: store.fork(real, bad),
        lambda bad: store.create(make_header(bad)),
        lambda bad: store.create(make_header(new_session_id(), parent=bad)),
    ]
    for bad in [*BAD_IDS, str(decoy.parent)]:
        for attack in attacks:
            with pytest.raises(InvalidSessionIdError):
                attack(bad)
        with pytest.raises(InvalidSessionIdError):
            store.resolve(bad)
    assert decoy.read_bytes() == before
    assert sorted(p.name for p in store.root.iterdir()) == [real]  # nothing created by the attempts
    assert [s.session_id for s in store.list()] == [real]


def test_unknown_well_formed_ids_are_unknown_sessions(store: SessionStore) -> None:
    missing = new_session_id()
    for method in (store.open, store.read, store.delete, store.resolve):
        with pytest.raises(UnknownSessionError):
            method(missing)


def test_listing_ignores_directories_that_are_not_ids_and_metadata_naming_another_session(
    store: SessionStore, tmp_path: Path
) -> None:
    real, other = new_session_id(), new_session_id()
    store.create(make_header(real)).close()
    # A directory that is not an id, holding a perfectly good session, is not a session.
    impostor = store.root / "not-an-id"
    impostor.mkdir()
    (impostor / "history.jsonl").write_bytes(store.history_path(real).read_bytes())
    # meta.json claiming to be another session is rebuilt from the history of the directory it sits in.
    (store.root / real / "meta.json").write_text(
        json.dumps({"session_id": other, "cwd": "/evil", "created_at": "2026-11-22T10:00:00.000Z"})
    )
    (summary,) = store.list()
    assert summary == SessionListing(
        real, Path("/p"), None, "2026-11-22T10:00:00.000Z", summary.updated_at, None, "openai-chat:m"
    )
    assert json.loads((store.root / real / "meta.json").read_text())["session_id"] == real
    with pytest.raises(InvalidSessionIdError):
        store.read("not-an-id")


def test_a_header_that_names_another_session_or_a_parent_that_is_no_id(store: SessionStore) -> None:
    real, other = new_session_id(), new_session_id()
    directory = store.root / real
    directory.mkdir(parents=True)
    header = dump_record(make_header(other).record())
    header["parent"] = "../../decoy"
    (directory / "history.jsonl").write_text(json.dumps(header) + "\n")
    stored = store.read(real)
    assert (stored.header.session_id, stored.header.parent) == (real, None)
    (summary,) = store.list()
    assert (summary.session_id, summary.parent) == (real, None)


# -- records ---------------------------------------------------------------------------------------------------

T = "turn-1"
BLOCKS = (
    TextBlock("fix it"),
    ResourceBlock("file:///p/a.py", text="x = 1\n"),
    ResourceBlock("https://e/x", note="unreadable"),
    ImageBlock("aGk=", "image/png", "file:///p/shot.png"),
)
EVERY_KIND: list[Event] = [
    TurnStarted(T, describe_prompt(BLOCKS), True, STARTED, BLOCKS),
    ThoughtDelta(T, "thinking"),
    ToolCallStarted(
        T, "c1", "edit_file", "Edit a.py", "edit", {"path": "a.py", "n": [1, None]}, (Location(Path("/p/a.py"), 3),)
    ),
    ToolCallFinished(
        T, "c1", "edit_file", "failed", "Error: no", FileDiff(Path("/p/a.py"), None, "new\n"),
        (Location(Path("/p/a.py")),), "edit failed", changed=(Path("/p/b.py"),),
    ),
    PlanUpdated(T, (PlanStep("read", "completed", "high"), PlanStep("write", "in_progress", "low"))),
    CompactionStarted(T, "k1", 900, "overflow"),
    ContextCompacted(T, "k1", "summary text", ("first", "second"), 900, 120, True, "overflow"),
    TextDelta(T, "done"),
    TurnFailed(T, "provider down"),
    TurnEnded(
        T, "max_turn_requests", Usage(10, 20, 3), error=True,
        summary=TurnRecap(1, "fix it", (TurnStep("Edit a.py", "failed: no", (Path("/p/a.py"),)),),
                                     (Path("/p/a.py"),), ("`ls` → exit 0",), "done", "provider down"),
    ),
    SpecialTurnPersisted("summarize", "replace-above", (Interaction("summary", "s"),), {"n": 1}, 4, "sp-1"),
]  # fmt: skip


async def test_every_recorded_event_kind_round_trips_whole(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    sid = new_session_id()
    file = HistoryFile(path, sid)
    file.write(make_header(sid).record())
    recorder = HistoryRecorder(file, title="kept")
    for event in EVERY_KIND:
        await recorder(event)
    file.close()
    session = read_history(path)
    assert session.events == EVERY_KIND
    special = session.events[-1]
    assert isinstance(special, SpecialTurnPersisted) and special.special_id == "sp-1"  # not part of ==
    # The records themselves survive a second trip unchanged.
    lines = path.read_text().splitlines()
    assert [json.loads(line) for line in lines] == [dump_record(r) for r in session.records]
    assert session.skipped_lines == 0


INVALID_LINES = [
    '{"v":1,"ts":"2026-11-22T10:00:01.000Z","session_id":"s","turn_id":"t","kind":"tool_call","tool_name":"x","title":"x"}',
    '{"v":1,"ts":"2026-11-22T10:00:01.000Z","session_id":"s","turn_id":"t","kind":"tool_result","call_id":"c",'
    '"tool_name":"x","status":"exploded"}',
    '{"v":1,"ts":"2026-11-22T10:00:01.000Z","session_id":"s","turn_id":"t","kind":"message","text":5}',
    '{"v":1,"ts":"2026-11-22T10:00:01.000Z","session_id":"s","turn_id":"t","kind":"turn_end","stop_reason":"bored"}',
    '{"v":1,"ts":"not a time","session_id":"s","turn_id":"t","kind":"message","text":"x"}',
    '{"v":1,"ts":"2026-11-22T10:00:01.000Z","session_id":"s","kind":"settings","mode":"root"}',
    '{"v":1,"ts":"2026-11-22T10:00:01.000Z","session_id":"s","turn_id":"t","kind":"hologram","beam":true}',
    '{"v":2,"ts":"2026-11-22T10:00:01.000Z","session_id":"s","turn_id":"t","kind":"message","text":"from v2"}',
    '{"ts":"2026-11-22T10:00:01.000Z","session_id":"s"}',
    "[1, 2]",
    "{not json",
    '"\xff\xfe"',
]


async def test_valid_json_that_is_no_valid_record_is_skipped_and_counted(
    store: SessionStore, caplog: pytest.LogCaptureFixture
) -> None:
    sid = new_session_id()
    file = store.create(make_header(sid))
    recorder = store.recorder(make_header(sid), file)
    for event in EVERY_KIND:
        await recorder(event)
    file.close()
    path = store.history_path(sid)
    lines = path.read_text().splitlines()
    path.write_text("\n".join([lines[0], *INVALID_LINES, *lines[1:]]) + "\n")
    (store.root / sid / "meta.json").unlink()
    with caplog.at_level(logging.WARNING):
        session = store.read(sid)
        (summary,) = store.list()
    assert session.events == EVERY_KIND
    assert session.skipped_lines == len(INVALID_LINES)
    assert (session.mode, summary.title) == ("ask", "fix it @a.py @x @shot.png")
    assert "hologram" in caplog.text and "newer codling" in caplog.text
    assert "status" in caplog.text and "call_id" in caplog.text


def test_writing_an_invalid_record_is_refused(tmp_path: Path) -> None:
    sid = new_session_id()
    file = HistoryFile(tmp_path / "history.jsonl", sid)
    with pytest.raises(SessionError):
        file.append({"kind": "tool_result", "call_id": "c", "tool_name": "x", "status": "exploded"}, "t")
    with pytest.raises(SessionError):
        file.append({"kind": "hologram"})
    file.close()
    assert (tmp_path / "history.jsonl").read_bytes() == b""
    assert RECORD.validate_python({"session_id": sid, "kind": "settings", "title": "x"}).kind == "settings"


# -- meta.json --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("damage", [b"", b"{garbage", b'{"session_id": 5, "cwd": "/p"}', b"\xff\xfe", b"[]"])
def test_damaged_meta_is_rebuilt_and_writes_leave_no_temporary_files(store: SessionStore, damage: bytes) -> None:
    sid = new_session_id()
    file = store.create(make_header(sid))
    file.append({"kind": "settings", "title": "kept title"})
    file.close()
    meta = store.root / sid / "meta.json"
    meta.write_bytes(damage)
    (summary,) = store.list()
    assert summary.title == "kept title"
    assert json.loads(meta.read_text())["title"] == "kept title"
    assert sorted(p.name for p in (store.root / sid).iterdir()) == ["history.jsonl", "meta.json"]


def test_a_meta_json_that_cannot_be_replaced_still_lists_the_session(
    store: SessionStore, caplog: pytest.LogCaptureFixture
) -> None:
    sid = new_session_id()
    file = store.create(make_header(sid))
    file.append({"kind": "settings", "title": "kept title"})
    file.close()
    meta = store.root / sid / "meta.json"
    meta.unlink()
    meta.mkdir()  # neither readable as meta.json nor replaceable by a file
    with caplog.at_level(logging.WARNING, logger="codling.store.index"):
        (summary,) = store.list()
    assert summary == SessionListing(
        sid, Path("/p"), "kept title", "2026-11-22T10:00:00.000Z", summary.updated_at, None, "openai-chat:m"
    )
    assert "cannot rewrite meta.json ([Errno 21] Is a directory" in caplog.text
    assert sorted(p.name for p in (store.root / sid).iterdir()) == ["history.jsonl", "meta.json"]  # no temporary file


def test_a_session_whose_history_cannot_be_read_is_left_out_of_the_list(
    store: SessionStore, caplog: pytest.LogCaptureFixture
) -> None:
    good, bad = new_session_id(), new_session_id()
    store.create(make_header(good)).close()
    (store.root / bad).mkdir()
    (store.root / bad / "history.jsonl").write_text('{"kind": "message", "text": "no session record"}\n')
    with caplog.at_level(logging.WARNING, logger="codling.store.index"):
        listed = store.list()
    assert [s.session_id for s in listed] == [good]
    assert f"{store.root / bad}: not a readable session" in caplog.text


SECRET = "sk-live-0123456789abcdef"


async def test_secrets_in_a_title_never_reach_meta_json(home: Path) -> None:
    """The environment's secrets are redacted from meta.json as from history.jsonl: in the title taken from the
    first request, and in one the model gives later."""
    settings = Settings(home=home, env={"CODLING_HOME": str(home), "OPENAI_API_KEY": SECRET})
    store = open_store(settings)
    sid = new_session_id()
    header = make_header(sid)
    file = store.create(header)
    recorder = store.recorder(header, file)
    meta = store.root / sid / "meta.json"
    expected = {
        "session_id": sid,
        "cwd": "/p",
        "title": None,
        "created_at": "2026-11-22T10:00:00.000Z",
        "parent": None,
        "model": "openai-chat:m",
    }
    await recorder(TurnStarted("t1", f"deploy with {SECRET} now", False, STARTED))
    assert json.loads(meta.read_text()) == {**expected, "title": "deploy with [redacted] now"}
    await recorder(SessionTitled(f"Deploy using key {SECRET}", "model"))
    assert json.loads(meta.read_text()) == {**expected, "title": "Deploy using key [redacted]"}
    file.close()
    assert SECRET not in meta.read_text() and SECRET not in store.history_path(sid).read_text()
    # Rebuilt from the history (say after damage), it still holds only the redacted form.
    meta.write_text("{garbage")
    (summary,) = store.list()
    assert summary.title == "Deploy using key [redacted]"
    assert json.loads(meta.read_text()) == {**expected, "title": "Deploy using key [redacted]"}


# -- one writer, no descriptor held ------------------------------------------------------------------------------


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="needs /proc")
def test_open_sessions_hold_no_file_descriptor(store: SessionStore) -> None:
    before = open_fds()
    files = [store.create(make_header(new_session_id())) for _ in range(50)]
    for file in files:
        file.append({"kind": "settings", "mode": "yolo"})
    assert open_fds() == before
    for file in files:
        file.close()
    assert not list(store.root.glob("*/*.lock"))


def lock_of(store: SessionStore, sid: str) -> Path:
    return HistoryFile.lock_path(store.history_path(sid))


def dead_pid() -> int:
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, check=True)
    return int(child.stdout)


def own_start_time() -> str:
    stat = Path("/proc/self/stat").read_bytes()
    return stat[stat.rindex(b")") + 2 :].split()[19].decode()


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_stale_locks_are_taken_over(store: SessionStore) -> None:
    sid = new_session_id()
    store.create(make_header(sid)).close()
    lock = lock_of(store, sid)
    stale = [
        f"{dead_pid()} 12345\n",  # the owner died
        f"{os.getpid()} 1\n",  # the pid now belongs to another process (this one): a different start time
        "",  # the owner died between creating the lock and writing its name
        "9" * 300 + " 1\n",  # damaged: no process has such a pid
    ]
    for text in stale:
        lock.write_text(text)
        file = store.open(sid)
        assert lock.read_text() == f"{os.getpid()} {own_start_time()}\n"
        file.close()
        assert not lock.exists()


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_a_zombie_owner_is_dead(store: SessionStore) -> None:
    sid = new_session_id()
    store.create(make_header(sid)).close()
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # exited, not yet reaped
    stat = Path(f"/proc/{child.pid}/stat").read_bytes()
    started = stat[stat.rindex(b")") + 2 :].split()[19].decode()
    lock_of(store, sid).write_text(f"{child.pid} {started}\n")
    store.open(sid).close()
    child.wait()


@pytest.mark.parametrize("ending", ["close", "exit"])
def test_a_live_writer_in_another_process_excludes_others_until_it_closes_or_exits(
    store: SessionStore, ending: str
) -> None:
    sid = new_session_id()
    store.create(make_header(sid)).close()
    child = other_writer(store, sid)
    with pytest.raises(SessionError, match="open in another codling process"):
        store.open(sid)
    with pytest.raises(SessionError, match="open in another codling process"):
        store.delete(sid)
    child.communicate(f"{ending}\n", timeout=deadline(10))
    assert not lock_of(store, sid).exists()  # removed by close, or at interpreter exit
    store.open(sid).close()


def test_a_killed_writers_lock_is_taken_over(store: SessionStore) -> None:
    sid = new_session_id()
    store.create(make_header(sid)).close()
    child = other_writer(store, sid)
    child.kill()
    child.wait(deadline(10))
    assert lock_of(store, sid).exists()
    file = store.open(sid)
    file.append({"kind": "settings", "title": "after the crash"})
    file.close()
    assert store.read(sid).title == "after the crash"
