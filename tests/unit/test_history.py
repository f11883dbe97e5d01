"""history.jsonl: records, the writer, the tolerant reader and the session store."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from pathlib import Path

import pytest

from codling.brain.events import (
    Event,
    TextDelta,
    ThoughtDelta,
    ToolCallFinished,
    ToolCallStarted,
    TurnEnded,
    TurnFailed,
    TurnStarted,
    Usage,
)
from codling.brain.prompt import ResourceBlock, TextBlock
from codling.errors import SessionError, StoreError, UnknownSessionError
from codling.secrecy import Redactor
from codling.store.header import SessionHeader
from codling.store.history import HistoryFile, HistoryRecorder, read_history
from codling.store.ids import new_session_id
from codling.store.index import SessionStore
from codling.vocabulary import FileDiff, Location

T = "turn-1"
STARTED = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
BLOCKS = (
    TextBlock("fix the bug"),
    ResourceBlock("file:///p/a.py", text="x = 1\n"),
    ResourceBlock("https://e/x", note="n"),
)

TURN: list[Event] = [
    TurnStarted(T, "fix the bug @a.py @x", True, STARTED, BLOCKS),
    ThoughtDelta(T, "Let me look."),
    ToolCallStarted(T, "c1", "edit_file", "Edit a.py", "edit", {"path": "a.py"}, (Location(Path("/p/a.py"), 1),)),
    ToolCallFinished(T, "c1", "edit_file", "completed", "Edited a.py", FileDiff(Path("/p/a.py"), "x = 1\n", "x = 2\n")),
    TextDelta(T, "Fixed."),
    TurnEnded(T, "end_turn", Usage(100, 20, 2)),
]


S1 = new_session_id()


def header(session_id: str = S1, cwd: Path = Path("/p")) -> SessionHeader:
    return SessionHeader(session_id, cwd, "openai-chat:m", "ask", created_at="2026-11-22T10:00:00.000Z")


async def record(path: Path, events: list[Event], redact: Redactor | None = None) -> None:
    file = HistoryFile(path, S1, redact)
    file.write(header().record())
    recorder = HistoryRecorder(file)
    for event in events:
        await recorder(event)
    file.close()


async def test_events_round_trip_through_records(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    await record(path, TURN)
    session = read_history(path)
    assert session.events == TURN
    assert session.header == header()
    assert (session.turns, session.title, session.skipped_lines) == (1, "fix the bug @a.py @x", 0)
    kinds = [json.loads(line)["kind"] for line in path.read_text().splitlines()]
    assert kinds == ["session", "turn_start", "settings", "thought", "tool_call", "tool_result", "message", "turn_end"]


async def test_deltas_are_merged_per_segment_and_every_turn_record_has_the_turn_id(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    events: list[Event] = [
        TurnStarted(T, "hi", False, STARTED, (TextBlock("hi"),)),
        TextDelta(T, "Hel"),
        TextDelta(T, "lo"),
        ThoughtDelta(T, "a"),
        ThoughtDelta(T, "b"),
        TextDelta(T, "!"),
        TurnFailed(T, "provider down"),
        TurnEnded(T, "end_turn", error=True),
    ]
    await record(path, events)
    records = [json.loads(line) for line in path.read_text().splitlines()]
    turn_records = [r for r in records if r["kind"] not in ("session", "settings")]
    assert [(r["kind"], r.get("text")) for r in turn_records] == [
        ("turn_start", None),
        ("message", "Hello"),
        ("thought", "ab"),
        ("message", "!"),
        ("turn_end", None),
    ]
    assert all(r["turn_id"] == T and r["v"] == 1 and r["ts"].endswith("Z") for r in turn_records)
    assert turn_records[-1]["error"] == "provider down"
    back = read_history(path).events
    assert back[-2:] == [TurnFailed(T, "provider down"), TurnEnded(T, "end_turn", error=True)]


async def test_torn_last_line_is_ignored_then_cut_before_the_next_append(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "history.jsonl"
    await record(path, TURN)
    with path.open("a") as f:
        f.write('{"v":1,"kind":"message","te')  # a crash in the middle of a write
    with caplog.at_level(logging.WARNING):
        assert read_history(path).events == TURN
    assert "torn" in caplog.text
    file = HistoryFile(path, S1)
    file.append({"kind": "settings", "mode": "yolo"})
    file.close()
    lines = path.read_text().splitlines()
    assert all(json.loads(line) for line in lines)
    assert json.loads(lines[-1])["mode"] == "yolo"
    assert read_history(path).mode == "yolo"


async def test_corrupt_middle_line_is_skipped_with_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "history.jsonl"
    await record(path, TURN)
    lines = path.read_text().splitlines()
    lines.insert(3, "{not json at all")
    lines.insert(4, "[1, 2]")
    path.write_text("\n".join(lines) + "\n")
    with caplog.at_level(logging.WARNING):
        session = read_history(path)
    assert session.events == TURN
    assert session.skipped_lines == 2
    assert "corrupt" in caplog.text


def test_a_file_without_a_session_record_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    path.write_text('{"kind": "message", "text": "orphan"}\n')
    with pytest.raises(SessionError):
        read_history(path)


async def test_secrets_never_reach_the_file(tmp_path: Path) -> None:
    secret = "sk-live-0123456789abcdef"
    redact = Redactor.from_env({"OPENAI_API_KEY": secret, "PATH": "/usr/bin:/bin", "SHORT_TOKEN": "abc"})
    path = tmp_path / "history.jsonl"
    events: list[Event] = [
        TurnStarted(T, "x", False, STARTED, (TextBlock(f"my key is {secret}"),)),
        TurnFailed(T, f"HTTP 401: Incorrect API key provided: {secret}"),
        TurnEnded(T, "end_turn", error=True),
    ]
    await record(path, events, redact)
    text = path.read_text()
    assert secret not in text
    assert "[redacted]" in text
    assert "/usr/bin:/bin" in Redactor.from_env({"PATH": "/usr/bin:/bin"})("/usr/bin:/bin")


def test_appending_a_record_is_one_flushed_line(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    file = HistoryFile(path, S1)
    file.append({"kind": "settings", "title": "t"})
    # Visible to another reader before close: flushed per record.
    assert json.loads(path.read_text())["title"] == "t"
    file.close()


# -- the store ---------------------------------------------------------------------------------------------------


def make_session(store: SessionStore, session_id: str, cwd: Path, title: str | None = None) -> None:
    file = store.create(header(session_id, cwd))
    if title:
        file.append({"kind": "settings", "title": title})
        store._write_meta(header(session_id, cwd), title)
    file.close()


def test_list_filters_by_cwd_newest_first_and_resolves_prefixes(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    first, other, second = "20261122-aaa111000000", "20261122-aab222000000", "20261122-bbb333000000"
    make_session(store, first, Path("/p"), "first")
    make_session(store, other, Path("/q"), "other dir")
    make_session(store, second, Path("/p"), "second")
    import os

    os.utime(store.history_path(first), (1, 1))
    listed = store.list(Path("/p"))
    assert [s.session_id for s in listed] == [second, first]
    assert listed[0].title == "second" and listed[0].cwd == Path("/p")
    assert len(store.list()) == 3
    assert store.resolve("20261122-bbb") == second
    assert store.resolve("bbb") == second  # the random part alone
    with pytest.raises(SessionError) as ambiguous:
        store.resolve("20261122-aa")
    assert str(ambiguous.value) == (
        f"'20261122-aa' matches 2 sessions: {other} (other dir); {first} (first); give more of the id"
    )
    with pytest.raises(SessionError) as ambiguous:
        store.resolve("aa")
    assert str(ambiguous.value).startswith("'aa' matches 2 sessions: ")
    with pytest.raises(UnknownSessionError):
        store.resolve("20261122-ccc")
    with pytest.raises(UnknownSessionError):
        store.resolve("ccc")


def test_an_unusable_home_is_a_store_error_saying_what_to_change(tmp_path: Path) -> None:
    home = tmp_path / "file"
    home.write_text("not a directory")
    store = SessionStore(home)
    message = (
        f"the session store {home / 'sessions'} cannot be {{}} (Not a directory); make $CODLING_HOME ({home}) a "
        "directory you can write, or point CODLING_HOME at one"
    )
    with pytest.raises(StoreError) as info:
        store.list()
    assert str(info.value) == message.format("read")
    with pytest.raises(StoreError) as info:
        store.create(header(S1, Path("/p")))
    assert str(info.value) == message.format("written")
    with pytest.raises(StoreError):
        store.check()
    SessionStore(tmp_path / "new" / "home").check()  # a home that does not exist yet is made
    assert (tmp_path / "new" / "home" / "sessions").is_dir()


def test_missing_or_corrupt_meta_is_rebuilt_from_history(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    make_session(store, S1, Path("/p"), "kept title")
    meta = store.root / S1 / "meta.json"
    meta.write_text("{garbage")
    (summary,) = store.list()
    assert summary.title == "kept title"
    assert json.loads(meta.read_text())["title"] == "kept title"


def test_fork_copies_history_and_records_parent(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    parent, child = new_session_id(), new_session_id()
    make_session(store, parent, Path("/p"), "the original")
    file = store.open(parent)
    file.append({"kind": "message", "text": "hello"}, "t1")
    file.close()
    fork = store.fork(parent, child)
    assert fork.header.parent == parent
    assert fork.header.session_id == child
    assert fork.title == "the original (fork)"
    assert fork.events == [TextDelta("t1", "hello")]
    assert all(r.session_id == child for r in fork.records)
    assert store.read(parent).title == "the original"


def test_delete_removes_only_that_session(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    s1, s2 = new_session_id(), new_session_id()
    make_session(store, s1, Path("/p"))
    make_session(store, s2, Path("/p"))
    removed = store.delete(s1)
    assert not removed.exists()
    assert [s.session_id for s in store.list()] == [s2]
    with pytest.raises(UnknownSessionError):
        store.delete(s1)


async def test_secrets_that_json_escapes_are_redacted_too(tmp_path: Path) -> None:
    secrets = ['pass"word\\with-quote', "tab\tseparated-secret"]
    redact = Redactor.from_env({"DB_PASSWORD": secrets[0], "API_TOKEN": secrets[1]})
    path = tmp_path / "history.jsonl"
    events: list[Event] = [
        TurnStarted(T, "x", False, STARTED, (TextBlock(f"{secrets[0]} and {secrets[1]}"),)),
        TurnEnded(T, "end_turn"),
    ]
    await record(path, events, redact)
    text = path.read_text()
    assert text.count("[redacted]") == 2
    for secret in secrets:
        assert json.dumps(secret)[1:-1] not in text and secret not in text


async def test_text_with_lone_surrogates_is_still_recorded(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    bad_name = "caf\udce9.txt"  # a file name that is not UTF-8, as os.listdir returns it
    events: list[Event] = [
        TurnStarted(T, "x", False, STARTED, (TextBlock("x"),)),
        TextDelta(T, bad_name),
        TurnEnded(T, "end_turn"),
    ]
    await record(path, events)
    assert [type(e) for e in read_history(path).events] == [TurnStarted, TextDelta, TurnEnded]


def test_a_session_has_one_writer_at_a_time(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    first = store.create(header(S1))
    with pytest.raises(SessionError) as info:
        store.open(S1)
    assert "open in another codling process" in str(info.value)
    first.close()
    store.open(S1).close()  # free again once the first writer is gone


class FullDisk:
    """``os.write`` on a disk with room for ``room`` more bytes (None: as much as it takes): a write past it
    writes what fits, then fails with ENOSPC, as a full file system does."""

    def __init__(self) -> None:
        self.room: int | None = None

    def __call__(self, fd: int, data: bytes) -> int:
        import errno
        import os

        if self.room is None:
            return os.write(fd, data)
        if self.room <= 0:
            raise OSError(errno.ENOSPC, "No space left on device")
        written = os.write(fd, data[: self.room])
        self.room -= written
        return written


async def test_a_full_disk_leaves_no_torn_line_and_loses_nothing_once_there_is_room(tmp_path: Path) -> None:
    # (issue 29 D10: a torn record, written again whole once space returned, left an unreadable line)
    path = tmp_path / "history.jsonl"
    disk = FullDisk()
    file = HistoryFile(path, "s1", write=disk)
    file.write(SessionHeader("s1", tmp_path, "test:model", "ask").record())
    recorder = HistoryRecorder(file)
    started = datetime(2026, 11, 26, tzinfo=UTC)
    await recorder(TurnStarted("t1", "hi", False, started, (TextBlock("hi"),)))
    disk.room = 10  # part of the next record fits
    await recorder(TextDelta("t1", "the reply, which the disk has no room for"))
    await recorder(TurnEnded("t1", "end_turn"))
    assert file.problem is not None and "No space left on device" in file.problem and "free some space" in file.problem
    lines = path.read_text().splitlines()
    assert [json.loads(line)["kind"] for line in lines] == ["session", "turn_start", "settings"]  # whole lines
    disk.room = None  # space returns
    await recorder(TurnStarted("t2", "again", False, started, (TextBlock("again"),)))
    assert file.problem is None
    kinds = [json.loads(line)["kind"] for line in path.read_text().splitlines()]
    assert kinds == ["session", "turn_start", "settings", "message", "turn_end", "turn_start"]
    file.close()
    assert [type(e).__name__ for e in read_history(path).events][:4] == [
        "TurnStarted",
        "TextDelta",
        "TurnEnded",
        "TurnStarted",
    ]


async def test_a_torn_last_line_is_not_a_skipped_record_while_a_damaged_middle_line_is(tmp_path: Path) -> None:
    """A crash mid-write tears only the last line: that is no damage to report. A bad line before it is."""
    path = tmp_path / "history.jsonl"
    await record(path, TURN)
    lines = path.read_text().splitlines()
    lines.insert(3, "{not json at all")
    path.write_text("\n".join(lines) + "\n" + '{"v":1,"kind":"message","te')  # and a crash mid-append
    session = read_history(path)
    assert session.events == TURN
    assert session.skipped_lines == 1
