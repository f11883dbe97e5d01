"""Checkpoints of a workspace (tools/checkpoints): every kind of change taken back exactly, after a restart,
with only what changed stored; changes made outside codling refused; what is not covered said."""

from __future__ import annotations

import asyncio
import hashlib
import os
import shutil
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from codling.errors import CheckpointError, RewindRefused
from codling.tools.checkpoints.keeper import CheckpointKeeper
from codling.tools.checkpoints.objects import ObjectStore
from codling.tools.checkpoints.rewind import FileChange
from codling.tools.checkpoints.scan import Scan, Scanner, Uncovered
from tests.fakes.deadlines import deadline

GIT = shutil.which("git")


def tree_hash(root: Path, skip: Callable[[str], bool] = lambda _: False) -> str:
    """Content and mode of every file under ``root`` (links by their target), but .git and what ``skip`` says:
    computed here, independently of the code under test."""
    entries = []
    for directory, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git"]  # pruned as the walk goes
        for name in files + [d for d in dirs if os.path.islink(os.path.join(directory, d))]:
            full = os.path.join(directory, name)
            rel = os.path.relpath(full, root)
            if skip(rel):
                continue
            st = os.lstat(full)
            if stat.S_ISLNK(st.st_mode):
                body = b"link:" + os.fsencode(os.readlink(full))
            else:
                body = f"{stat.S_IMODE(st.st_mode):o}:".encode() + Path(full).read_bytes()
            entries.append(rel.encode() + b"\0" + hashlib.sha256(body).digest())
    return hashlib.sha256(b"".join(sorted(entries))).hexdigest()


def git_repo(root: Path) -> None:
    assert GIT is not None
    subprocess.run([GIT, "init", "-q", str(root)], check=True)


def commit(root: Path) -> None:
    assert GIT is not None
    for args in (["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c"]):
        subprocess.run([GIT, "-C", str(root), *args], check=True, capture_output=True)


Step = Callable[[Path], None]


def write(rel: str, text: str) -> Step:
    def step(root: Path) -> None:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)

    return step


def steps() -> list[Step]:
    """Every kind of change a turn can make, tools' and commands' alike."""

    def chmod_x(root: Path) -> None:
        (root / "run.sh").chmod(0o755)

    def chmod_private(root: Path) -> None:
        (root / "app.py").chmod(0o600)

    def rename(root: Path) -> None:
        (root / "lib" / "util.py").rename(root / "lib" / "helpers.py")

    def delete(root: Path) -> None:
        (root / "README.md").unlink()

    def link(root: Path) -> None:
        os.symlink("lib/helpers.py", root / "current.py")

    def generator(root: Path) -> None:  # a script creating untracked files, as a command would
        for i in range(5):
            write(f"gen/deep/out_{i}.txt", f"generated {i}\n" * (i + 1))(root)

    def sed_in_place(root: Path) -> None:
        path = root / "app.py"
        path.write_text(path.read_text().replace("print", "log"))

    def directory_becomes_file(root: Path) -> None:
        shutil.rmtree(root / "gen")
        (root / "gen").write_text("now a file\n")

    def empty_file(root: Path) -> None:
        (root / "lib" / "__init__.py").write_text("")

    return [
        write("app.py", "print('hello')\n" * 30),
        chmod_x,
        sed_in_place,
        chmod_private,
        rename,
        delete,
        link,
        generator,
        directory_becomes_file,
        empty_file,
    ]


def start(root: Path) -> None:
    write("README.md", "# project\n")(root)
    write("app.py", "print('hi')\n")(root)
    write("run.sh", "#!/bin/sh\necho run\n")(root)
    write("lib/util.py", "def f():\n    return 1\n")(root)


@pytest.mark.parametrize("lister", ["git", "walk"])
async def test_a_rewind_to_every_checkpoint_gives_back_its_exact_tree_after_a_restart(
    tmp_path: Path, lister: str
) -> None:
    root, store = tmp_path / "project", tmp_path / "session" / "checkpoints"
    root.mkdir()
    git = GIT if lister == "git" else None
    start(root)
    if git is not None:  # tracked files, as in a real repository: git then tells which may have changed
        git_repo(root)
        commit(root)
    keeper = CheckpointKeeper(store, root, git=git)
    hashes = {}
    for step in steps():
        taken = await keeper.take()
        hashes[taken.number] = tree_hash(root)
        step(root)
    final = await keeper.take()
    hashes[final.number] = tree_hash(root)
    assert len(set(hashes.values())) == len(hashes) == len(steps()) + 1  # every step changed the tree
    if git is not None:
        # A tracked file changed and then put back as git has it (so git no longer lists it): seen both times.
        (root / "run.sh").write_text("#!/bin/sh\necho changed\n")
        hashes[(await keeper.take()).number] = tree_hash(root)
        subprocess.run([git, "-C", str(root), "checkout", "-q", "--", "run.sh"], check=True)
        assert (await keeper.preview(1)).outside == ("run.sh",)  # a scan the log does not keep comes between
        hashes[(await keeper.take()).number] = tree_hash(root)
        commit(root)  # the index changes under the keeper
        (root / "lib" / "helpers.py").write_text("def g():\n    return 2\n")
        hashes[(await keeper.take()).number] = tree_hash(root)
        (root / "lib" / "__init__.py").write_text("VERSION = 2\n")  # changed and staged: git lists it no more
        subprocess.run([git, "-C", str(root), "add", "lib/__init__.py"], check=True)
        hashes[(await keeper.take()).number] = tree_hash(root)
        assert len(hashes) == len(steps()) + 5

    for target in [3, 1, len(hashes), 7, 2, 9, 5, *range(len(steps()) + 2, len(hashes) + 1)]:
        restarted = CheckpointKeeper(store, root, git=git)  # a new process: only the disk is shared
        await restarted.rewind(target)
        assert tree_hash(root) == hashes[target], f"checkpoint {target}"


async def test_only_what_changed_is_stored_and_a_scan_with_no_change_is_the_last_checkpoint(tmp_path: Path) -> None:
    root, store = tmp_path / "project", tmp_path / "checkpoints"
    for i in range(300):
        write(f"pkg{i // 20}/mod_{i}.py", f"VALUE = {i}\n" * 20)(root)
    keeper = CheckpointKeeper(store, root, git=None)
    first = await keeper.take()
    assert first.number == 1 and len(keeper.objects) == 300
    packs = {p for p in (store / "objects").iterdir()}
    assert len(packs) == 2  # one pack and its index, not a file per object

    for i in (3, 25, 99, 150, 299):
        write(f"pkg{i // 20}/mod_{i}.py", f"VALUE = {i} + 1\n" * 20)(root)
    second = await keeper.take()
    added = {p for p in (store / "objects").iterdir()} - packs
    assert second.number == 2 and len(keeper.objects) == 305 and len(added) == 2
    assert second.stored_bytes == sum(p.stat().st_size for p in added if p.suffix == ".pack")
    assert second.stored_bytes < 5 * len("VALUE = 1500 + 1\n" * 20)  # compressed

    log = (store / "log.jsonl").read_bytes()
    again = await keeper.take()
    assert (again.number, again.stored_bytes) == (2, 0)
    assert (store / "log.jsonl").read_bytes() == log


@pytest.mark.parametrize("lister", ["git", "walk"])
async def test_what_is_not_covered_is_listed_and_left_alone(tmp_path: Path, lister: str) -> None:
    root, store = tmp_path / "project", tmp_path / "checkpoints"
    root.mkdir()
    git = GIT if lister == "git" else None
    if git is not None:
        git_repo(root)
    write(".gitignore", "build/\n*.log\n")(root)
    write("src/main.py", "main = 1\n")(root)
    write("build/out.o", "object\n")(root)
    write("debug.log", "line\n")(root)
    with open(root / "data.bin", "wb") as big:
        big.truncate(11 * 1024 * 1024)  # over the size limit
    keeper = CheckpointKeeper(store, root, git=git)
    taken = await keeper.take()
    assert taken.uncovered == (
        Uncovered("build/", "ignored"),
        Uncovered("debug.log", "ignored"),
        Uncovered("data.bin", "larger than 10 MiB"),
    )

    write("src/main.py", "main = 2\n")(root)
    write("build/out.o", "object 2\n")(root)
    write("debug.log", "line 2\n")(root)
    await keeper.take()
    await keeper.rewind(1)
    assert (root / "src/main.py").read_text() == "main = 1\n"
    assert (root / "build/out.o").read_text() == "object 2\n"  # ignored: not taken back
    assert (root / "debug.log").read_text() == "line 2\n"
    assert (root / "data.bin").stat().st_size == 11 * 1024 * 1024


@pytest.mark.parametrize("lister", ["git", "walk"])
async def test_a_file_the_target_did_not_cover_is_never_deleted_by_a_rewind(tmp_path: Path, lister: str) -> None:
    """Rewinding an edit of .gitignore that stopped ignoring build/ (or a file that shrank under the size limit)
    leaves files that were there all along, uncovered then: only files made since are removed."""
    root, store = tmp_path / "project", tmp_path / "checkpoints"
    root.mkdir()
    git = GIT if lister == "git" else None
    if git is not None:
        git_repo(root)
    write(".gitignore", "build/\n")(root)
    write("build/keep.o", "the user's\n")(root)
    with open(root / "data.bin", "wb") as big:
        big.truncate(11 * 1024 * 1024)
    keeper = CheckpointKeeper(store, root, git=git)
    first = await keeper.take()
    write(".gitignore", "*.log\n")(root)  # build/ is covered from now on
    write("data.bin", "small now\n")(root)
    write("made.txt", "new\n")(root)
    await keeper.take()
    await keeper.rewind(first.number)
    assert (root / ".gitignore").read_text() == "build/\n"
    assert (root / "build/keep.o").read_text() == "the user's\n"
    assert (root / "data.bin").read_text() == "small now\n"  # not covered then: not put back, not deleted
    assert not (root / "made.txt").exists()


async def test_a_rewind_over_changes_made_outside_codling_is_refused_unless_confirmed_and_can_be_undone(
    tmp_path: Path,
) -> None:
    root, store = tmp_path / "project", tmp_path / "checkpoints"
    start(root)
    keeper = CheckpointKeeper(store, root, git=None)
    await keeper.take()
    write("app.py", "print('by the agent')\n")(root)
    await keeper.take()
    write("app.py", "print('by the user, unsaved elsewhere')\n")(root)  # behind codling's back
    write("notes.txt", "the user's new file\n")(root)
    by_the_user = tree_hash(root)

    preview = await keeper.preview(1)
    assert preview.outside == ("app.py", "notes.txt")
    assert preview.changes == (FileChange("app.py", "restore", 1, 1), FileChange("notes.txt", "remove", 0, 1))
    with pytest.raises(RewindRefused) as refused:
        await keeper.rewind(1)
    assert refused.value.paths == ("app.py", "notes.txt")
    assert str(refused.value).startswith(
        "2 file(s) changed outside codling since its last checkpoint: app.py, notes.txt."
    )
    assert tree_hash(root) == by_the_user  # nothing was touched

    await keeper.rewind(1, overwrite_outside=True)
    assert (root / "app.py").read_text() == "print('hi')\n" and not (root / "notes.txt").exists()
    # The state rewound from was checkpointed first: the user's edits can be had back.
    await keeper.rewind(3)
    assert tree_hash(root) == by_the_user


async def test_a_torn_last_log_line_is_ignored_and_a_damaged_object_is_named(tmp_path: Path) -> None:
    root, store = tmp_path / "project", tmp_path / "checkpoints"
    start(root)
    await CheckpointKeeper(store, root, git=None).take()
    with open(store / "log.jsonl", "ab") as log:
        log.write(b'{"id":2,"changed":{"app.py"')  # a crash mid-write
    keeper = CheckpointKeeper(store, root, git=None)
    assert keeper.log.count == 1
    write("app.py", "changed\n")(root)
    assert (await keeper.take()).number == 2
    assert CheckpointKeeper(store, root, git=None).log.count == 2  # the torn line was overwritten

    digest = keeper.log.at(1).files["app.py"].digest
    for pack in (store / "objects").glob("*.pack"):
        pack.write_bytes(b"\0" * pack.stat().st_size)  # damaged in place
    with pytest.raises(CheckpointError, match=f"the checkpoint object {digest} in .* cannot be read"):
        await CheckpointKeeper(store, root, git=None).rewind(1)


class CountingStore(ObjectStore):
    """An object store that counts what it is given to store (each file read and hashed is given)."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.given: list[int] = []

    def put(self, data: bytes, digest: str | None = None) -> tuple[str, int]:
        self.given.append(len(data))
        return super().put(data, digest)


def test_a_file_whose_stat_is_unchanged_is_not_read_again_and_any_stat_change_is_seen(tmp_path: Path) -> None:
    root = tmp_path / "project"
    for i in range(50):
        write(f"m{i}.py", f"x = {i}\n")(root)
    hour_ago = os.stat(root / "m0.py").st_mtime_ns - 3600 * 10**9
    for i in range(50):
        os.utime(root / f"m{i}.py", ns=(hour_ago, hour_ago))  # old enough not to be "racy"
    store = CountingStore(tmp_path / "objects")
    scanner = Scanner(root, store)
    paths = [f"m{i}.py" for i in range(50)]
    first = scanner.scan(paths)
    assert len(store.given) == 50
    assert scanner.scan(paths) == Scan(first.files, (), 0) and len(store.given) == 50  # nothing read

    (root / "m7.py").write_text("x = 8\n")  # same size; its old time stamps put back
    os.utime(root / "m7.py", ns=(hour_ago, hour_ago))
    (root / "m9.py").chmod(0o700)
    changed = scanner.scan(paths)
    assert len(store.given) == 52  # m7 (its change time moved) and m9 (its mode)
    assert {p for p in paths if changed.files[p] != first.files[p]} == {"m7.py", "m9.py"}


async def test_a_rewind_never_writes_or_deletes_through_a_link_leading_outside_the_workspace(tmp_path: Path) -> None:
    root, store, outside = tmp_path / "project", tmp_path / "checkpoints", tmp_path / "outside"
    write("data/x.txt", "checkpointed\n")(root)
    write("x.txt", "precious, not the workspace's\n")(outside)
    keeper = CheckpointKeeper(store, root, git=None)
    await keeper.take()
    shutil.rmtree(root / "data")
    os.symlink(outside, root / "data")
    write(".gitignore", "data\n")(root)  # the link is ignored: not covered, so a rewind would not remove it
    await keeper.take()
    before = tree_hash(root), tree_hash(outside)

    with pytest.raises(CheckpointError, match=r"data/x\.txt would be reached through a symbolic link leading outside"):
        await keeper.rewind(1)
    assert (tree_hash(root), tree_hash(outside)) == before  # nothing changed, here or there


@pytest.mark.skipif(GIT is None, reason="needs git")
@pytest.mark.parametrize("pipe", ["an ignore file", "a configuration include"])
async def test_a_repository_where_git_would_wait_on_a_pipe_is_walked_instead(tmp_path: Path, pipe: str) -> None:
    root, store = tmp_path / "project", tmp_path / "checkpoints"
    root.mkdir()
    git_repo(root)
    start(root)
    if pipe == "an ignore file":
        os.mkfifo(root / "lib" / ".gitignore")  # git would wait on it forever when listing untracked files
    else:
        os.mkfifo(tmp_path / "pipe")  # and on this, reading its configuration
        with open(root / ".git" / "config", "a") as config:
            config.write(f"[include]\n\tpath = {tmp_path / 'pipe'}\n")
    keeper = CheckpointKeeper(store, root, git=GIT)
    taken = await asyncio.wait_for(keeper.take(), deadline(4))  # liveness: below git's own time limits
    assert sorted(keeper.log.at(taken.number).files) == ["README.md", "app.py", "lib/util.py", "run.sh"]


@pytest.mark.parametrize(
    "setup, change",
    [
        ((), lambda root: (root / "README.md").chmod(0o444)),  # permission bits git does not track
        (("config", "core.fileMode", "false"), lambda root: (root / "run.sh").chmod(0o755)),
        (("update-index", "--assume-unchanged", "app.py"), lambda root: write("app.py", "lost\n")(root)),
        (("update-index", "--skip-worktree", "app.py"), lambda root: write("app.py", "lost\n")(root)),
    ],
    ids=["chmod 444", "core.fileMode false", "assume-unchanged", "skip-worktree"],
)
@pytest.mark.parametrize("restart", [False, True], ids=["same process", "restarted"])
async def test_in_git_a_change_git_does_not_call_modified_is_seen(
    tmp_path: Path, setup: tuple[str, ...], change: Step, restart: bool
) -> None:
    assert GIT is not None
    root, store = tmp_path / "project", tmp_path / "checkpoints"
    root.mkdir()
    start(root)
    git_repo(root)
    commit(root)
    if setup:
        subprocess.run([GIT, "-C", str(root), *setup], check=True)
    keeper = CheckpointKeeper(store, root, git=GIT)
    first = await keeper.take()
    before = tree_hash(root)
    if restart:
        await keeper.close()  # the scan cache is saved: the next process reads only what changed
        keeper = CheckpointKeeper(store, root, git=GIT)
    change(root)
    changed = tree_hash(root)
    assert (await keeper.take()).number == first.number + 1
    await keeper.rewind(first.number)
    assert tree_hash(root) == before != changed


@pytest.mark.parametrize("lister", ["git", "walk"])
async def test_a_directory_turned_into_a_link_to_outside_is_not_read_through(tmp_path: Path, lister: str) -> None:
    root, store, outside = tmp_path / "project", tmp_path / "checkpoints", tmp_path / "outside"
    root.mkdir()
    start(root)
    git = GIT if lister == "git" else None
    if git is not None:
        git_repo(root)
        commit(root)
    keeper = CheckpointKeeper(store, root, git=git)
    first = await keeper.take()
    write("util.py", "SECRET = 'from outside'\n")(outside)
    shutil.rmtree(root / "lib")
    os.symlink(outside, root / "lib")
    await keeper.take()
    latest = keeper.log.latest()
    assert "lib/util.py" not in latest.files
    assert "lib" in latest.files and latest.files["lib"].kind == "link"
    with pytest.raises(CheckpointError):  # putting lib/util.py back would write through the link: refused
        await keeper.rewind(first.number, overwrite_outside=True)
    assert (outside / "util.py").read_text() == "SECRET = 'from outside'\n"
