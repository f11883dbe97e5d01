"""Listing and searching in repositories built to stall them (issue 29 D2, D4, D7, D11): very many untracked
files, thousands of wildcard ignore rules, ignore files and git includes that are named pipes or devices. Each
answers before a liveness deadline, says what it did not honour, and leaves no process or thread working."""

from __future__ import annotations

import asyncio
import os
import random
import re
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from codling.tools.globs import Glob, GlobIndex, _piece
from codling.tools.grep import SearchResult, find_matches, find_rg
from codling.tools.halt import Halt, off_loop
from codling.tools.listing import collect_files
from codling.tools.search import list_files
from codling.tools.workspace import Workspace
from tests.fakes.deadlines import deadline
from tests.fakes.processes import Fifo, gone
from tests.unit.test_tools_files import ctx_in, write

GIT = shutil.which("git")
RG = find_rg()
needs_git = pytest.mark.skipif(GIT is None, reason="git is not installed")
SECONDS = 30.0  # a liveness deadline; the fakes' helpers scale it themselves
LIVENESS = deadline(SECONDS)


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    return root


def git_init(root: Path) -> None:
    assert GIT is not None
    subprocess.run([GIT, "init", "-q", str(root)], check=True, timeout=deadline(30))


def walk_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "codling-walk"]


# --- D2: many untracked files -----------------------------------------------------------------------------------


async def test_git_is_read_as_it_streams_and_killed_once_enough_files_were_found(proj: Path, tmp_path: Path) -> None:
    # A git whose untracked listing never ends (it names 300 files, then keeps its output open): the listing
    # must stop reading one file past the cap and kill it, not wait for the end of a listing of every file.
    write(proj, {f"f{i:03d}.txt": "" for i in range(300)})
    (proj / ".git").mkdir()
    fake = tmp_path / "git"
    with Fifo(tmp_path / "started") as started:
        fake.write_text(
            "#!/bin/sh\n"
            'case "$*" in\n'
            f"  *--others*) printf 'f%03d.txt\\0' $(seq 0 299); echo $$ > {started.path}; exec sleep 300 ;;\n"
            "  *) exit 0 ;;\n"
            "esac\n"
        )
        fake.chmod(0o755)
        listing = await asyncio.wait_for(collect_files(proj, Workspace(proj), git=str(fake), max_files=100), LIVENESS)
        assert [f.name for f in listing.files] == [f"f{i:03d}.txt" for i in range(100)]
        assert listing.complete is False
        assert await gone(await started.pid(SECONDS), SECONDS)


@needs_git
async def test_list_files_in_a_git_tree_with_many_untracked_files_shows_the_first_and_says_more(proj: Path) -> None:
    git_init(proj)
    write(proj, {f"d{d:02d}/f{f:03d}.txt": "" for d in range(20) for f in range(500)})
    result = await asyncio.wait_for(list_files(ctx_in(proj), max_entries=50), LIVENESS)
    lines = result.text.split("\n")
    assert lines[:2] == ["d00/f000.txt", "d00/f001.txt"]
    assert lines[50:] == [
        "[Showing the first 50 files; more files are not shown: list a subdirectory or pass a larger max_entries "
        "(up to 5000).]"
    ]
    assert result.summary == "Listed .: more than 50 files (the first 50 shown)"


# --- D7: thousands of wildcard rules ------------------------------------------------------------------------


def many_rules(count: int) -> str:
    """Wildcard rules of every kind the index handles, and one rule it must find among them."""
    rules = [f"*foo{i}*bar*\n**/dir{i}/*.tmp\n[a-c]{i}?*\n" for i in range(count // 3)]
    return "".join(rules) + "*.log\n!keep.log\n"


async def test_four_thousand_wildcard_rules_are_honoured_in_time(proj: Path) -> None:
    write(proj, {".gitignore": many_rules(4000), "a.py": "", "x_foo7_y_bar_z.py": "", "dir9/n.tmp": "", "b12x": ""})
    write(proj, {"app.log": "", "keep.log": "", **{f"src/m{i}.py": "" for i in range(1500)}})
    listing = await asyncio.wait_for(collect_files(proj, Workspace(proj), git=None), LIVENESS)
    names = [f.relative_to(proj).as_posix() for f in listing.files]
    assert names[:3] == [".gitignore", "a.py", "keep.log"]
    assert len(names) == 1503 and listing.complete and not listing.refused


async def test_an_ignore_file_over_the_rule_cap_is_refused_with_a_note(proj: Path) -> None:
    write(proj, {".gitignore": "x\n" * 10_001 + "*.py\n", "a.py": ""})
    result = await list_files(ctx_in(proj))
    assert result.text == (
        ".gitignore\na.py\n[.gitignore was not read (it has more than 10,000 rules), so its rules were not applied.]"
    )


async def test_cancelling_a_walk_stops_its_thread(proj: Path) -> None:
    # Work that would run for ever unless its halt is set: cancelling its caller must stop it, not leave it.
    entered = asyncio.Event()
    loop = asyncio.get_running_loop()

    def endless(halt: Halt) -> None:
        loop.call_soon_threadsafe(entered.set)
        while not halt.reached():
            pass

    running = asyncio.create_task(off_loop(endless, 3600))
    await asyncio.wait_for(entered.wait(), LIVENESS)
    assert walk_threads()
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    assert walk_threads() == []


async def test_a_walk_past_its_time_limit_says_so(proj: Path) -> None:
    write(proj, {f"f{i}.txt": "" for i in range(20)})
    listing = await collect_files(proj, Workspace(proj), git=None, time_limit=0)
    assert listing.timed_out and not listing.complete


# --- D4: ignore files that are not files ---------------------------------------------------------------------


def hostile_ignore_files(root: Path) -> None:
    write(root, {"a.py": "hit = 1\n", "sub/b.py": "hit = 2\n", "skip.log": "hit\n", ".gitignore": "*.log\n"})
    os.mkfifo(root / "sub" / ".gitignore")
    os.mkfifo(root / "sub" / ".ignore")
    (root / "sub" / ".rgignore").symlink_to("/dev/zero")


@pytest.mark.skipif(RG is None, reason="ripgrep is not installed")
async def test_ripgrep_is_not_run_where_it_would_open_a_pipe_or_a_device(proj: Path) -> None:
    hostile_ignore_files(proj)
    result = await asyncio.wait_for(
        find_matches("hit", proj, Workspace(proj), rg=RG, git=None, time_limit=LIVENESS), LIVENESS
    )
    assert result.matches == ("a.py:1: hit = 1", "sub/b.py:1: hit = 2")
    assert result.notes == (
        "[ripgrep was not used, since it would open the ignore files named below; codling's own walk chose the "
        "files to search, honouring the other .gitignore files (not .ignore or .rgignore files).]",
        "[sub/.gitignore was not read (it is a named pipe, not a file), so its rules were not applied.]",
        "[sub/.ignore was not read (it is a named pipe, not a file), so its rules were not applied.]",
        "[sub/.rgignore was not read (it is a symbolic link, which is not followed), so its rules were not applied.]",
    )


@pytest.mark.skipif(RG is None, reason="ripgrep is not installed")
async def test_ripgrep_searching_a_file_reads_no_ignore_file(proj: Path) -> None:
    hostile_ignore_files(proj)
    result = await asyncio.wait_for(
        find_matches("hit", proj / "sub" / "b.py", Workspace(proj), rg=RG, git=None, time_limit=LIVENESS), LIVENESS
    )
    assert result == SearchResult(("sub/b.py:1: hit = 2",))


@needs_git
async def test_git_is_not_run_where_it_would_open_a_pipe_as_an_ignore_file(proj: Path) -> None:
    git_init(proj)
    hostile_ignore_files(proj)
    result = await asyncio.wait_for(list_files(ctx_in(proj)), LIVENESS)
    assert result.text.split("\n") == [
        ".gitignore",
        "a.py",
        "sub/.gitignore",
        "sub/.ignore",
        "sub/.rgignore",
        "sub/b.py",
        "[git was not used: git would open the ignore files named below; the directory was walked instead.]",
        "[sub/.gitignore was not read (it is a named pipe, not a file), so its rules were not applied.]",
    ]


# --- D11: a git configuration that includes a named pipe ---------------------------------------------------------


@needs_git
async def test_git_is_not_run_where_its_configuration_includes_a_pipe(proj: Path, tmp_path: Path) -> None:
    git_init(proj)
    write(proj, {"a.py": "", "b.log": "", ".gitignore": "*.log\n"})
    os.mkfifo(tmp_path / "fifo")
    with (proj / ".git" / "config").open("a") as config:
        config.write(f'[includeIf "gitdir:{proj}/"]\n\tpath = ../../fifo\n')
    result = await asyncio.wait_for(list_files(ctx_in(proj)), LIVENESS)
    assert result.text.split("\n") == [
        ".gitignore",
        "a.py",
        f"[git was not used: {proj / '.git' / '../../fifo'} (included by {proj / '.git' / 'config'}) is a named "
        "pipe, not a file, which git would wait on or read without end; the directory was walked instead.]",
    ]


def test_star_only_globs_match_as_plain_backtracking_would() -> None:
    # The atomic groups that keep many-star globs linear must not change what they match: checked against the
    # plain (backtracking) regex of the same glob on short names, where backtracking costs nothing.
    rng = random.Random(29)
    for _ in range(3000):
        pattern = "".join(rng.choice(["*", "a", "b", "?", "/", "[ab]"]) for _ in range(rng.randint(1, 7)))
        subject = "".join(rng.choice("ab/") for _ in range(rng.randint(0, 8)))
        glob = Glob(pattern)
        plain = re.compile(_piece(glob.tokens))
        assert glob.fullmatch(subject) == (plain.fullmatch(subject) is not None), (pattern, subject)


def test_the_index_finds_the_last_matching_glob() -> None:
    globs = [Glob(p) for p in ["*.log", "keep.log", "*e*p*", "abc*", "x", "*.log", "[k]eep.?og"]]
    index = GlobIndex(globs)
    for subject in ["keep.log", "a.log", "abcdef", "x", "y", "dir/a.log", "kep"]:
        expected = max((n for n, g in enumerate(globs) if g.fullmatch(subject)), default=-1)
        assert index.last_match(subject) == expected, subject


def test_the_index_agrees_with_trying_every_glob() -> None:
    rng = random.Random(7)
    pieces = ["*", "abc", "a", "b", ".log", "/", "?", "**/", "[ab]"]
    for _ in range(300):
        globs = [Glob("".join(rng.choice(pieces) for _ in range(rng.randint(1, 4)))) for _ in range(rng.randint(1, 12))]
        index = GlobIndex(globs)
        for _ in range(10):
            subject = "".join(rng.choice(["a", "b", "c", "abc", ".log", "/"]) for _ in range(rng.randint(1, 6)))
            expected = max((n for n, g in enumerate(globs) if g.fullmatch(subject)), default=-1)
            assert index.last_match(subject) == expected, ([g.pattern for g in globs], subject)
