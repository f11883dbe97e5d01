from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import signal
import time
from pathlib import Path

import pytest

from codling.errors import CommandError, PathError
from codling.text import omission
from codling.tools.local import LocalFileSystem, LocalTerminal
from codling.tools.ports import CommandResult
from codling.tools.processes import COMMAND_ID_VARIABLE, can_find_strays, members, signal_all
from tests.fakes.deadlines import deadline
from tests.fakes.processes import Fifo, gone

# --- LocalFileSystem ---------------------------------------------------------------------------------------


async def test_read_and_write_round_trip_keeps_line_endings(tmp_path: Path) -> None:
    fs = LocalFileSystem()
    target = tmp_path / "deep" / "er" / "f.txt"
    await fs.write_text(target, "one\r\ntwo\nthré\n")
    assert target.read_bytes() == "one\r\ntwo\nthré\n".encode()
    assert await fs.read_text(target) == "one\r\ntwo\nthré\n"


async def test_read_missing_file(tmp_path: Path) -> None:
    with pytest.raises(PathError) as e:
        await LocalFileSystem().read_text(tmp_path / "nope.txt")
    assert str(e.value) == f"file {tmp_path / 'nope.txt'} does not exist; use list_files to find the right path"


async def test_read_directory(tmp_path: Path) -> None:
    with pytest.raises(PathError) as e:
        await LocalFileSystem().read_text(tmp_path)
    assert str(e.value) == f"{tmp_path} is a directory, not a file; use list_files to see what it contains"


async def test_refused_reads_leave_no_descriptor_open(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    before = set(os.listdir("/proc/self/fd"))
    for path in (tmp_path, tmp_path / "pipe") * 5:  # a directory, and what is not a regular file
        with pytest.raises(PathError):
            await LocalFileSystem().read_text(path)
    assert set(os.listdir("/proc/self/fd")) == before


async def test_read_binary(tmp_path: Path) -> None:
    (tmp_path / "x.bin").write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe\x00")
    with pytest.raises(PathError) as e:
        await LocalFileSystem().read_text(tmp_path / "x.bin")
    assert str(e.value) == f"{tmp_path / 'x.bin'} is a binary file (it holds NUL bytes), so it cannot be read as text"


LEGACY = "# Café crème – “quoted” €5\r\nnaïve = True\r\n"


@pytest.mark.parametrize("encoding", ["cp1252", "latin-1"])
async def test_a_legacy_8bit_text_file_is_read_and_edited_in_its_own_encoding(tmp_path: Path, encoding: str) -> None:
    path = tmp_path / "legacy.py"
    text = LEGACY if encoding == "cp1252" else LEGACY.replace("–", "-").replace("“", '"').replace("”", '"')
    text = text.replace("€", "\x81") if encoding == "latin-1" else text  # 0x81: undefined in Windows-1252
    original = text.encode(encoding)
    path.write_bytes(original)
    fs = LocalFileSystem()

    assert await fs.read_text(path) == text
    await fs.write_text(path, text.replace("True", "False"))

    assert path.read_bytes() == original.replace(b"True", b"False")  # every other byte unchanged


async def test_text_a_legacy_file_cannot_hold_is_refused_with_a_way_out(tmp_path: Path) -> None:
    path = tmp_path / "legacy.txt"
    path.write_bytes("café\n".encode("cp1252"))
    with pytest.raises(PathError) as e:
        await LocalFileSystem().write_text(path, "café 😀\n")
    assert str(e.value) == (
        f"{path} was not written: it is cp1252 text (not UTF-8), which cannot hold '😀' (at index 5); leave such "
        "characters out, or convert the file to UTF-8 first (iconv -f cp1252 -t utf-8)"
    )
    assert path.read_bytes() == "café\n".encode("cp1252")


async def test_new_files_and_utf8_files_are_written_as_utf8(tmp_path: Path) -> None:
    fs = LocalFileSystem()
    await fs.write_text(tmp_path / "new.txt", "café\n")
    (tmp_path / "old.txt").write_text("é\n", encoding="utf-8")
    await fs.write_text(tmp_path / "old.txt", "crème\n")
    assert (tmp_path / "new.txt").read_bytes() == "café\n".encode()
    assert (tmp_path / "old.txt").read_bytes() == "crème\n".encode()


async def test_write_under_a_file_fails(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(PathError, match="a parent of it is a file"):
        await LocalFileSystem().write_text(tmp_path / "f" / "g.txt", "y")


async def test_write_onto_a_directory_fails(tmp_path: Path) -> None:
    with pytest.raises(PathError, match="is a directory"):
        await LocalFileSystem().write_text(tmp_path, "y")


async def test_a_symbolic_link_loop_cannot_be_read(tmp_path: Path) -> None:
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    with pytest.raises(PathError) as e:
        await LocalFileSystem().read_text(tmp_path / "a")
    assert str(e.value) == f"{tmp_path / 'a'} cannot be read: Too many levels of symbolic links"


async def test_a_name_longer_than_the_file_system_allows_is_neither_read_nor_written(tmp_path: Path) -> None:
    path = tmp_path / ("x" * 300)
    fs = LocalFileSystem()
    with pytest.raises(PathError) as read:
        await fs.read_text(path)
    assert str(read.value) == f"{path} cannot be read: File name too long"
    with pytest.raises(PathError) as written:
        await fs.write_text(path, "hi\n")
    assert str(written.value) == f"{path} cannot be written: File name too long; the file was not changed"
    assert list(tmp_path.iterdir()) == []  # no temporary file left behind


# --- LocalTerminal -----------------------------------------------------------------------------------------


async def _run(
    command: str, cwd: Path, timeout: float = 10.0, limit: int = 10_000, kill_grace: float | None = None
) -> CommandResult:
    terminal = LocalTerminal() if kill_grace is None else LocalTerminal(kill_grace=kill_grace)
    return await asyncio.wait_for(terminal.run(command, cwd=cwd, timeout=timeout, output_limit=limit), 30)


async def test_runs_in_cwd_and_merges_output(tmp_path: Path) -> None:
    result = await _run("pwd; echo err >&2; echo out; exit 3", tmp_path)
    assert result == CommandResult(exit_code=3, output=f"{tmp_path}\nerr\nout\n")


async def test_stdin_is_empty(tmp_path: Path) -> None:
    assert await _run("cat; echo done", tmp_path) == CommandResult(exit_code=0, output="done\n")


async def test_output_cap_keeps_head_and_tail(tmp_path: Path) -> None:
    result = await _run("seq 1 100000", tmp_path, limit=1000)
    assert result.truncated
    assert result.exit_code == 0
    assert len(result.output) <= 1000
    assert result.output.startswith("1\n2\n3\n")
    assert result.output.endswith("99999\n100000\n")
    head, rest = result.output.split("\n[", 1)
    note, tail = rest.split("]\n", 1)
    # The note says how much of the original it stands for, line breaks included (the terminal counts lines by it).
    assert omission(f"[{note}]") == (
        len("".join(f"{i}\n" for i in range(1, 100001))) - len(head) - len(tail),
        100000 - head.count("\n") - tail.count("\n"),
    )


async def test_output_just_over_the_cap_keeps_the_true_tail(tmp_path: Path) -> None:
    text = "".join(f"{i:04d}\n" for i in range(30))  # 150 characters
    result = await _run(f"printf '{text}'", tmp_path, limit=140)
    assert result.truncated
    assert result.output.endswith("0028\n0029\n")
    head, _, _ = result.output.partition("\n[...")
    assert text.startswith(head)


async def test_a_cap_smaller_than_the_omission_note_keeps_only_the_head(tmp_path: Path) -> None:
    assert await _run("seq 1 100", tmp_path, limit=10) == CommandResult(
        exit_code=0, output="1\n2\n3\n4\n5\n", truncated=True
    )


async def test_huge_output_is_drained_without_blocking(tmp_path: Path) -> None:
    # Undrained, `yes` would block on the full pipe and the command never end (_run's liveness deadline).
    result = await _run("yes 0123456789 | head -n 1000000; echo end", tmp_path, limit=100)
    assert result.exit_code == 0
    assert result.truncated
    assert result.output.endswith("end\n")


async def test_timeout_kills_the_process_group(tmp_path: Path) -> None:
    # Not killed, the command would wait for its child for 300 s: _run's liveness deadline would fail the test.
    result = await _run("sleep 300 & echo $! > child.pid; echo started; wait", tmp_path, timeout=0.5)
    assert result == CommandResult(exit_code=None, output="started\n", timed_out=True)
    assert await gone(int((tmp_path / "child.pid").read_text()))


async def test_timeout_kills_children_that_ignore_sigterm(tmp_path: Path) -> None:
    command = "trap '' TERM; sleep 300 & echo $! > child.pid; wait"
    result = await _run(command, tmp_path, timeout=0.5, kill_grace=0.3)  # (300 s: past the liveness deadline)
    assert result.timed_out and result.exit_code is None
    assert await gone(int((tmp_path / "child.pid").read_text()))


async def test_cancellation_kills_the_process_group(tmp_path: Path) -> None:
    terminal = LocalTerminal()
    with Fifo(tmp_path / "child.pid") as started:  # the command says its child runs through a named pipe
        task = asyncio.create_task(
            terminal.run("sleep 300 & echo $! > child.pid; wait", cwd=tmp_path, timeout=deadline(60), output_limit=1000)
        )
        child = await started.pid()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, deadline(10))
    assert await gone(child)


async def test_background_child_holding_the_pipe_does_not_block_and_goes_with_the_command(tmp_path: Path) -> None:
    # Waiting for the pipe to close would take the child's 300 s: _run's liveness deadline would fail the test.
    result = await _run("sleep 300 & echo $! > child.pid; echo started", tmp_path)
    pid = int((tmp_path / "child.pid").read_text())
    try:
        assert result == CommandResult(exit_code=0, output="started\n")
        assert await gone(pid)
    finally:
        _kill(pid)


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


async def _pids_written(path: Path, count: int, within: float = 10.0) -> list[int]:
    """The pids a command writes to ``path``, one a line, once ``count`` are there."""
    ends = time.monotonic() + deadline(within)
    while time.monotonic() < ends:
        if path.exists() and len(lines := path.read_text().split()) >= count:
            return [int(p) for p in lines]
        await asyncio.sleep(0.025)
    raise AssertionError(f"{path} did not get {count} pids")


@pytest.mark.parametrize("code", ["exit 3", "kill -TERM $$", "kill -KILL $$", "kill -HUP $$"])
async def test_the_exit_status_is_the_shell_s_whatever_runs_it(tmp_path: Path, code: str) -> None:
    # Under the per-command subreaper too: an exit code stays that code, a signal stays that signal.
    expected = {"exit 3": 3, "kill -TERM $$": -15, "kill -KILL $$": -9, "kill -HUP $$": -1}[code]
    assert (await _run(code, tmp_path)).exit_code == expected


# Each starts a process that outlives the shell (outside its process group, but for nohup) and writes its pid
# to pids.txt; the command then waits until the pid is there.
STRAYS = {
    "setsid": "setsid sleep 300 & echo $! >> pids.txt",
    "nohup": "nohup sh -c 'echo $$ >> pids.txt; exec sleep 300' >/dev/null 2>&1 &",
    "double-fork": "(setsid sh -c 'echo $$ >> pids.txt; exec sleep 300' >/dev/null 2>&1 &)",
    # These also drop CODLING_COMMAND_ID and leave the tree: only the per-command subreaper keeps them.
    "env-cleared": "(env -i setsid sh -c 'echo $$ >> pids.txt; exec sleep 300' >/dev/null 2>&1 &)",
    "marker-unset": "(unset CODLING_COMMAND_ID; setsid sh -c 'echo $$ >> pids.txt; exec sleep 300' >/dev/null 2>&1 &)",
    "env-cleared-setsid": "env -i setsid sleep 300 >/dev/null 2>&1 & echo $! >> pids.txt",
    "env-cleared-double-fork": (
        "(env -i sh -c '(setsid sh -c \"echo \\$\\$ >> pids.txt; exec sleep 300\" >/dev/null 2>&1 &)' &)"
    ),
}
WAIT_FOR_PID = "\nuntil [ -s pids.txt ]; do sleep 0.01; done"


@pytest.mark.parametrize(
    ("kind", "reaper"),
    [(kind, True) for kind in sorted(STRAYS)]
    # Without the subreaper, those outside the process group that keep CODLING_COMMAND_ID are found by it.
    + [(kind, False) for kind in ("setsid", "nohup", "double-fork")],
)
async def test_what_a_command_started_in_a_new_session_goes_when_it_exits(
    tmp_path: Path, kind: str, reaper: bool
) -> None:
    terminal = LocalTerminal(reaper=reaper)
    run = terminal.run(STRAYS[kind] + WAIT_FOR_PID, cwd=tmp_path, timeout=deadline(10), output_limit=10_000)
    result = await asyncio.wait_for(run, deadline(30))
    pids = await _pids_written(tmp_path / "pids.txt", 1)
    try:
        assert result.exit_code == 0
        assert [await gone(pid) for pid in pids] == [True] * len(pids)
    finally:
        for pid in pids:
            _kill(pid)


@pytest.mark.parametrize("kind", sorted(STRAYS))
async def test_what_a_command_started_in_a_new_session_goes_on_timeout(tmp_path: Path, kind: str) -> None:
    result = await _run(STRAYS[kind] + WAIT_FOR_PID + "; sleep 60", tmp_path, timeout=1.0)
    pids = await _pids_written(tmp_path / "pids.txt", 1)
    try:
        assert result.timed_out
        assert [await gone(pid) for pid in pids] == [True] * len(pids)
    finally:
        for pid in pids:
            _kill(pid)


@pytest.mark.parametrize("kind", sorted(STRAYS))
async def test_what_a_command_started_in_a_new_session_goes_on_cancel(tmp_path: Path, kind: str) -> None:
    terminal = LocalTerminal()
    task = asyncio.create_task(
        terminal.run(STRAYS[kind] + WAIT_FOR_PID + "; sleep 60", cwd=tmp_path, timeout=deadline(60), output_limit=1000)
    )
    pids = await _pids_written(tmp_path / "pids.txt", 1)
    try:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, deadline(10))
        assert [await gone(pid) for pid in pids] == [True] * len(pids)
    finally:
        for pid in pids:
            _kill(pid)


SECRETS = {
    "OPENAI_API_KEY": "sk-openai-0123456789",
    "ANTHROPIC_API_KEY": "sk-ant-0123456789",
    "GITHUB_TOKEN": "ghp_github0123456789",
    "DB_PASS": "db-pass-0123456789",
    "MY_SECRET": "my-secret-0123456789",
    "OPENAI_BASE_URL": "https://user:pw@proxy.example/v1",
}


async def test_commands_see_no_secrets(tmp_path: Path) -> None:
    env = {**os.environ, **SECRETS}
    result = await asyncio.wait_for(
        LocalTerminal(env=env).run("env", cwd=tmp_path, timeout=deadline(10), output_limit=100_000), deadline(30)
    )
    seen = dict(line.split("=", 1) for line in result.output.splitlines() if "=" in line)
    assert [value for value in SECRETS.values() if value in result.output] == []
    assert seen["PATH"] == os.environ["PATH"] and seen["HOME"] == os.environ["HOME"]
    assert len(seen["CODLING_COMMAND_ID"]) == 32


async def test_an_allowed_secret_is_seen(tmp_path: Path) -> None:
    env = {**os.environ, **SECRETS}
    terminal = LocalTerminal(env=env, allow=["GITHUB_TOKEN"])
    result = await asyncio.wait_for(
        terminal.run("env", cwd=tmp_path, timeout=deadline(10), output_limit=100_000), deadline(30)
    )
    assert [value for value in SECRETS.values() if value in result.output] == [SECRETS["GITHUB_TOKEN"]]


async def test_command_that_cannot_start(tmp_path: Path) -> None:
    with pytest.raises(CommandError) as e:
        await _run("true", tmp_path / "missing")
    assert str(e.value).startswith(f"could not start the command in {tmp_path / 'missing'}: ")


async def test_undecodable_output_is_replaced(tmp_path: Path) -> None:
    result = await _run(r"printf 'a\377b\n'", tmp_path)
    assert result.output == "a\ufffdb\n"


# --- under the subreaper, commands run as they always did ----------------------------------------------


async def test_a_broken_pipe_ends_a_writer_quietly(tmp_path: Path) -> None:
    # SIGPIPE at its default (Python ignores it, and so would its child): `yes` dies, it does not complain.
    assert await _run("yes | head -n 1", tmp_path) == CommandResult(exit_code=0, output="y\n")


async def test_output_of_background_children_after_the_shell_exits_is_kept(tmp_path: Path) -> None:
    command = "(while kill -0 $$ 2>/dev/null; do sleep 0.01; done; echo late) & echo early"
    assert await _run(command, tmp_path) == CommandResult(exit_code=0, output="early\nlate\n")


async def test_the_environment_is_the_one_given(tmp_path: Path) -> None:
    # Python coerces a C locale by setting LC_CTYPE at start-up; the command must not see the reaper's.
    env = {k: v for k, v in os.environ.items() if not k.startswith("LC_") and k != "LANG"}
    terminal = LocalTerminal(env=env)
    # As base64: the model never gets a NUL (control characters are dropped from output).
    run = terminal.run("base64 -w0 /proc/$$/environ", cwd=tmp_path, timeout=deadline(10), output_limit=1_000_000)
    result = await asyncio.wait_for(run, deadline(30))
    environ = base64.b64decode(result.output).decode()
    seen = dict(item.split("=", 1) for item in environ.split("\0") if item)
    assert seen == terminal.environment(seen["CODLING_COMMAND_ID"])


async def test_a_shell_that_cannot_start(tmp_path: Path) -> None:
    terminal = LocalTerminal(shell=str(tmp_path / "no-shell"))
    with pytest.raises(CommandError) as e:
        await asyncio.wait_for(terminal.run("true", cwd=tmp_path, timeout=deadline(10), output_limit=100), deadline(30))
    assert str(e.value) == f"could not start the command in {tmp_path}: No such file or directory"


async def test_killing_its_own_process_group_lets_nothing_escape(tmp_path: Path) -> None:
    command = STRAYS["env-cleared"] + WAIT_FOR_PID + "; kill -KILL 0"
    result = await _run(command, tmp_path)
    pids = await _pids_written(tmp_path / "pids.txt", 1)
    try:
        assert result.exit_code == -signal.SIGKILL
        assert [await gone(pid) for pid in pids] == [True] * len(pids)
    finally:
        for pid in pids:
            _kill(pid)


# --- without the subreaper (where there is none, or it is turned off) ----------------------------------------


async def _run_plain(command: str, cwd: Path, timeout: float = 10.0, kill_grace: float = 2.0) -> CommandResult:
    terminal = LocalTerminal(kill_grace=kill_grace, reaper=False)
    return await asyncio.wait_for(terminal.run(command, cwd=cwd, timeout=timeout, output_limit=10_000), 30)


async def test_without_a_subreaper_commands_run_as_ever(tmp_path: Path) -> None:
    assert await _run_plain("pwd; echo err >&2; exit 3", tmp_path) == CommandResult(3, f"{tmp_path}\nerr\n")
    assert (await _run_plain("kill -TERM $$", tmp_path)).exit_code == -signal.SIGTERM


async def test_without_a_subreaper_what_ignores_sigterm_is_killed_after_the_grace(tmp_path: Path) -> None:
    # Shell and child ignore SIGTERM: only the SIGKILL after the grace ends them (300 s: past the deadline).
    command = "trap '' TERM; sleep 300 & echo $! > child.pid; echo started; wait"
    result = await _run_plain(command, tmp_path, timeout=0.5, kill_grace=0.3)
    assert result == CommandResult(exit_code=None, output="started\n", timed_out=True)
    assert await gone(int((tmp_path / "child.pid").read_text()))


# --- finding a command's processes (tools/processes.py) ------------------------------------------------------


def _fake_process(proc: Path, pid: int | str, stat: str, environ: dict[str, str] | None = None) -> Path:
    entry = proc / str(pid)
    entry.mkdir(parents=True)
    (entry / "stat").write_text(stat)
    if environ is not None:
        (entry / "environ").write_bytes(b"".join(f"{k}={v}".encode() + b"\0" for k, v in environ.items()))
    return entry


def test_a_commands_processes_are_found_by_group_id_and_descent(tmp_path: Path) -> None:
    proc = tmp_path / "proc"
    marked = {"PATH": "/bin", COMMAND_ID_VARIABLE: "c0ffee"}
    other = {"PATH": "/bin", COMMAND_ID_VARIABLE: "other"}
    _fake_process(proc, 100, "100 (odd) name (x)) S 1 100 100 0", marked)  # the name holds spaces and parentheses
    _fake_process(proc, 101, "101 (child) S 100 101 101 0", {})  # cleared its environment: found by descent
    _fake_process(proc, 102, "102 (grandchild) S 101 102 102 0", {})
    _fake_process(proc, 103, "103 (zombie) Z 1 103 103 0", marked)  # exited: nothing to stop
    _fake_process(proc, 104, "104 (in group) S 1 555 555 0", other)  # in the command's process group
    _fake_process(proc, 105, "105 (stranger) S 1 105 105 0", other)
    _fake_process(proc, 106, "106 (torn", marked)  # a stat without its fields: gone meanwhile
    _fake_process(proc, 107, "107 (no environ) S 1 107 107 0")  # its environment cannot be read
    _fake_process(proc, os.getpid(), f"{os.getpid()} (me) S 1 1 1 0", marked)  # never codling itself
    _fake_process(proc, "self", "1 (self) S 0 1 1 0", marked)
    assert members("c0ffee", 555, proc=proc) == {100, 101, 102, 104}
    assert members("c0ffee", None, proc=proc) == {100, 101, 102}


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give a file to another user")
def test_processes_of_other_users_are_not_the_commands(tmp_path: Path) -> None:
    proc = tmp_path / "proc"
    entry = _fake_process(proc, 100, "100 (theirs) S 1 100 100 0", {COMMAND_ID_VARIABLE: "c0ffee"})
    os.chown(entry, 12345, 12345)
    assert members("c0ffee", 100, proc=proc) == set()


def test_without_proc_no_process_is_found(tmp_path: Path) -> None:
    assert can_find_strays(tmp_path / "proc") is False
    assert members("c0ffee", 100, proc=tmp_path / "proc") == set()


async def test_signal_all_reaches_the_group_and_each_process_and_skips_the_gone(tmp_path: Path) -> None:
    group = await asyncio.create_subprocess_exec("sleep", "300", start_new_session=True)
    loner = await asyncio.create_subprocess_exec("sleep", "300", start_new_session=True)
    ended = await asyncio.create_subprocess_exec("true", start_new_session=True)
    await ended.wait()  # reaped: its pid and group are gone
    try:
        signal_all(ended.pid, {ended.pid}, signal.SIGKILL)  # nothing to reach: no error
        signal_all(group.pid, {loner.pid}, signal.SIGKILL)
        assert await asyncio.wait_for(asyncio.gather(group.wait(), loner.wait()), 10) == [-9, -9]
    finally:
        for process in (group, loner):
            if process.returncode is None:
                process.kill()
                await process.wait()
