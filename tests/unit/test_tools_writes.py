"""Local writes never corrupt: a failed write (a real full-file-size error) leaves the old file and no temporary
file, the mode and owner survive, a symbolic link keeps its file, and a hard link is never written through."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from codling.errors import PathError
from codling.tools.atomic import put_back, set_aside
from codling.tools.local import LocalFileSystem
from tests.fakes.deadlines import deadline

FSIZE_LIMIT = 4096

# The child imports everything first, then lowers its (soft) file-size limit, so the write itself gets EFBIG (with
# SIGXFSZ ignored), just as a full disk gives ENOSPC part-way through a write; it lifts the limit again before it
# exits, or coverage (under scripts/coverage) could not save what it measured there.
CHILD = f"""
import asyncio, resource, signal, sys
sys.dont_write_bytecode = True  # a module first imported under the limit would leave a cut .pyc for everyone
from pathlib import Path
from codling.errors import ToolError
from codling.tools.local import LocalFileSystem
from tests.unit.test_tools_writes import run_in_child
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
_, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
resource.setrlimit(resource.RLIMIT_FSIZE, ({FSIZE_LIMIT}, hard))
try:
    print(asyncio.run(run_in_child(sys.argv[1], sys.argv[2])))
except ToolError as e:
    print("error:", e)
finally:
    resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))  # coverage, when it measures, saves its data at exit
"""


async def run_in_child(what: str, where: str) -> str:
    """Run in the child process: write a file bigger than the limit, or apply a patch that adds one."""
    big = "x" * (FSIZE_LIMIT * 4)
    if what == "write":
        await LocalFileSystem().write_text(Path(where), big)
        return "written"
    # Only here: the patch needs a tool context, whose helpers import pydantic-ai (1.5 CPU-s the writes skip).
    from codling.tools.patch import apply_patch
    from tests.unit.test_tools_files import ctx_in

    patch = "\n".join(
        [
            "*** Begin Patch",
            "*** Update File: a.py",
            "-a = 1",
            "+a = 2",
            "*** Delete File: gone.txt",
            "*** Add File: big.txt",
            f"+{big}",
            "*** End Patch",
        ]
    )
    return (await apply_patch(ctx_in(Path(where)), patch)).text


def in_child(what: str, where: Path) -> str:
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", CHILD, what, str(where)],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=deadline(60),
        check=True,
    )
    return done.stdout.strip()


def tree(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under ``root``: its bytes and mode."""
    return {
        str(p.relative_to(root)): (p.read_bytes(), stat.S_IMODE(p.stat().st_mode))
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_a_write_that_fails_part_way_leaves_the_old_file_and_no_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "notes.txt"
    target.write_text("precious\n")
    target.chmod(0o640)
    before = tree(tmp_path)
    assert in_child("write", target) == f"error: {target} cannot be written: File too large; the file was not changed"
    assert tree(tmp_path) == before  # the old content and mode, and nothing else in the directory


def test_a_new_file_that_cannot_be_written_is_not_created(tmp_path: Path) -> None:
    target = tmp_path / "new.txt"
    assert in_child("write", target).startswith(f"error: {target} cannot be written: File too large")
    assert os.listdir(tmp_path) == []


def test_a_patch_that_fills_the_disk_changes_nothing(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("a = 1\n")
    (tmp_path / "gone.txt").write_text("still here\n")
    (tmp_path / "gone.txt").chmod(0o600)
    before = tree(tmp_path)
    assert in_child("patch", tmp_path) == (
        "error: the patch could not be applied: changing big.txt failed: "
        f"{tmp_path / 'big.txt'} cannot be written: File too large; the file was not changed. "
        "Nothing was changed (the changes already made were undone)."
    )
    assert tree(tmp_path) == before


async def test_a_write_keeps_the_mode_and_owner(tmp_path: Path) -> None:
    target = tmp_path / "run.sh"
    target.write_text("echo hi\n")
    target.chmod(0o751)
    # Only root may give a file away; anyone else checks that the owner stays theirs.
    owner = (4242, 4343) if os.geteuid() == 0 else (os.getuid(), os.getgid())
    os.chown(target, *owner)
    await LocalFileSystem().write_text(target, "echo bye\n")
    st = target.stat()
    assert (target.read_text(), stat.S_IMODE(st.st_mode), (st.st_uid, st.st_gid)) == ("echo bye\n", 0o751, owner)
    assert os.listdir(tmp_path) == ["run.sh"]


async def test_a_new_file_gets_the_usual_mode(tmp_path: Path) -> None:
    (tmp_path / "usual").touch()  # created as any program creates a file (0o666 less the umask)
    await LocalFileSystem().write_text(tmp_path / "new.txt", "x")
    assert stat.S_IMODE((tmp_path / "new.txt").stat().st_mode) == stat.S_IMODE((tmp_path / "usual").stat().st_mode)


async def test_a_write_replaces_the_file_a_symbolic_link_points_at(tmp_path: Path) -> None:
    (tmp_path / "real.txt").write_text("old\n")
    (tmp_path / "link.txt").symlink_to("real.txt")
    await LocalFileSystem().write_text(tmp_path / "link.txt", "new\n")
    assert os.readlink(tmp_path / "link.txt") == "real.txt"
    assert (tmp_path / "real.txt").read_text() == "new\n"


async def test_a_write_never_reaches_another_name_of_a_hard_linked_file(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("not yours\n")
    inside = tmp_path / "inside.txt"
    os.link(outside, inside)
    await LocalFileSystem().write_text(inside, "changed\n")
    assert (outside.read_text(), inside.read_text()) == ("not yours\n", "changed\n")
    assert (outside.stat().st_nlink, inside.stat().st_nlink) == (1, 1)


async def test_a_write_onto_a_directory_leaves_no_temporary_file(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    with pytest.raises(PathError, match="is a directory"):
        await LocalFileSystem().write_text(tmp_path / "d", "y")
    assert os.listdir(tmp_path) == ["d"] and os.listdir(tmp_path / "d") == []


async def test_text_that_has_no_utf8_form_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    target = tmp_path / "a.txt"
    target.write_text("ok\n")
    with pytest.raises(PathError, match=r"cannot be written as UTF-8 \('\\ud800' at index 1\)"):
        await LocalFileSystem().write_text(target, "x\ud800")
    assert target.read_text() == "ok\n"


def test_a_deletion_set_aside_is_undone_but_never_over_what_is_there_now(tmp_path: Path) -> None:
    path = tmp_path / "a.txt"
    path.write_text("old\n")
    aside = set_aside(path)
    assert (os.path.lexists(path), aside.parent, aside.read_text()) == (False, tmp_path, "old\n")
    path.write_text("new\n")  # a file came back meanwhile
    with pytest.raises(FileExistsError):
        put_back(aside, path)
    assert (path.read_text(), aside.read_text()) == ("new\n", "old\n")  # both kept
    path.unlink()
    path.symlink_to(tmp_path / "nowhere")  # a dangling link counts too
    with pytest.raises(FileExistsError):
        put_back(aside, path)
    assert path.is_symlink() and aside.read_text() == "old\n"
    path.unlink()
    put_back(aside, path)
    assert os.listdir(tmp_path) == ["a.txt"] and path.read_text() == "old\n"
