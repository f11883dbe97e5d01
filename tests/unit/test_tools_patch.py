"""apply_patch: several files changed by one patch, all or nothing, each change approved like an edit."""

from __future__ import annotations

import asyncio
import stat
from dataclasses import replace
from pathlib import Path

import pytest

from codling.errors import EditError, PathError, PermissionDenied
from codling.tools.local import LocalFileSystem
from codling.tools.patch import apply_patch
from codling.tools.patch_format import FileChange, Hunk, parse_patch
from codling.tools.specs import describe_call
from codling.vocabulary import FileDiff
from tests.fakes.approver import ScriptedApprover
from tests.unit.test_tools_files import ctx_for, ctx_in, make_deps

APP = 'def greet():\n    return "hi"\n\n\ndef main():\n    print(greet())\n'


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "app.py").write_text(APP)
    (root / "old.txt").write_text("bye\n")
    return root.resolve()


PATCH = """*** Begin Patch
*** Update File: app.py
@@ def greet():
-    return "hi"
+    return "hello"
@@ def main():
-    print(greet())
+    print(greet(), flush=True)
*** Add File: docs/NOTES.md
+# Notes
+greet says hello
*** Delete File: old.txt
*** End Patch"""


async def test_a_patch_updates_adds_and_deletes_files(proj: Path) -> None:
    out = await apply_patch(ctx_in(proj), PATCH)
    assert (proj / "app.py").read_text() == APP.replace('"hi"', '"hello"').replace(
        "print(greet())", "print(greet(), flush=True)"
    )
    assert (proj / "docs" / "NOTES.md").read_text() == "# Notes\ngreet says hello\n"
    assert not (proj / "old.txt").exists()
    assert out.text == "Applied the patch:\nM app.py (+2 −2)\nA docs/NOTES.md (+2 −0)\nD old.txt (+0 −1)"
    assert out.changed == (proj / "app.py", proj / "docs" / "NOTES.md", proj / "old.txt")
    assert '-    return "hi"\n+    return "hello"' in out.summary
    assert out.diff is None  # several files: no single diff to show


async def test_a_patch_that_does_not_apply_changes_nothing(proj: Path) -> None:
    broken = PATCH.replace("-    print(greet())", "-    print(welcome())")
    with pytest.raises(EditError, match=r"hunk 2 of app\.py does not match the file"):
        await apply_patch(ctx_in(proj), broken)
    assert (proj / "app.py").read_text() == APP and (proj / "old.txt").exists()
    assert not (proj / "docs").exists()


async def test_context_matches_despite_whitespace_and_a_move_renames(proj: Path) -> None:
    trailing = "   "  # the model's context line has trailing spaces the file does not
    patch = f"""*** Begin Patch
*** Update File: app.py
*** Move to: src/app.py
 def greet():{trailing}
-  return "hi"
+    return "hello"
*** End Patch"""
    out = await apply_patch(ctx_in(proj), patch)
    assert not (proj / "app.py").exists()
    assert (proj / "src" / "app.py").read_text() == APP.replace('"hi"', '"hello"')
    assert out.diff == FileDiff(proj / "src" / "app.py", APP, APP.replace('"hi"', '"hello"'))
    assert out.text == "Applied the patch:\nM app.py → src/app.py (+1 −1)"


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ("*** Update File: app.py\n*** End Patch", "must start with"),
        ("*** Begin Patch\n*** Add File: x.txt\nno plus\n*** End Patch", r"starts with '\+'"),
        ("*** Begin Patch\n*** Add File: app.py\n+x\n*** End Patch", r"app\.py already exists"),
        ("*** Begin Patch\n*** Delete File: nope.txt\n*** End Patch", r"nope\.txt does not exist"),
        ("*** Begin Patch\n*** Update File: ../outside.py\n-a\n+b\n*** End Patch", "outside the workspace"),
    ],
)
async def test_bad_patches_get_messages_the_model_can_act_on(proj: Path, patch: str, message: str) -> None:
    with pytest.raises(Exception, match=message):
        await apply_patch(ctx_in(proj), patch)
    assert (proj / "app.py").read_text() == APP


async def test_every_file_is_approved_before_any_is_written(proj: Path) -> None:
    approver = ScriptedApprover("allow_once", "reject")
    ctx = ctx_for(make_deps(proj, mode="ask", approver=approver), "apply_patch")
    with pytest.raises(PermissionDenied):
        await apply_patch(ctx, PATCH)
    assert [(r.kind, r.title) for r in approver.asked] == [("edit", "Patch app.py"), ("edit", "Patch docs/NOTES.md")]
    assert approver.asked[0].diff is not None and approver.asked[0].diff.path == proj / "app.py"
    assert (proj / "app.py").read_text() == APP and not (proj / "docs").exists()  # nothing was written


def test_the_call_is_titled_with_its_files(proj: Path) -> None:
    info = describe_call("apply_patch", {"patch": PATCH}, make_deps(proj).workspace)
    assert (info.title, info.kind) == ("Patch app.py, docs/NOTES.md, old.txt", "edit")
    assert [loc.path for loc in info.locations] == [proj / "app.py", proj / "docs" / "NOTES.md", proj / "old.txt"]


def patch_of(*body: str) -> str:
    return "\n".join(["*** Begin Patch", *body, "*** End Patch"])


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            ["*** Update File: app.py", "*** Move to: old.txt", "-def greet():", "+def hello():"],
            "old.txt already exists",
        ),
        (["*** Update File: app.py", "-def greet():", "+def a():", "*** Delete File: app.py"], "changes app.py twice"),
    ],
)
async def test_a_patch_never_overwrites_or_loses_a_file(proj: Path, body: list[str], message: str) -> None:
    with pytest.raises(EditError, match=message):
        await apply_patch(ctx_in(proj), patch_of(*body))
    assert (proj / "app.py").read_text() == APP and (proj / "old.txt").read_text() == "bye\n"


async def test_a_move_onto_itself_is_an_update(proj: Path) -> None:
    await apply_patch(
        ctx_in(proj), patch_of("*** Update File: app.py", "*** Move to: ./app.py", "-def greet():", "+def hello():")
    )
    assert (proj / "app.py").read_text().startswith("def hello():")


async def test_bytes_outside_the_hunks_stay_as_they_were(proj: Path) -> None:
    (proj / "crlf.txt").write_bytes(b"one\r\ntwo\x0cfeed\r\nthree")  # CRLF, a form feed, no final newline
    await apply_patch(ctx_in(proj), patch_of("*** Update File: crlf.txt", " one", "-two\x0cfeed", "+TWO"))
    assert (proj / "crlf.txt").read_bytes() == b"one\r\nTWO\r\nthree"


async def test_anchors_end_of_file_and_what_models_wrap_patches_in(proj: Path) -> None:
    (proj / "b.py").write_text("def a():\n    pass\n}\n\ndef main():\n    run()\n}\n")
    wrapped = "\n".join(
        [
            "```",
            "apply_patch <<'EOF'",
            "*** Begin Patch",
            "*** Update File: b.py",
            "@@ def main():",
            "+    setup()",
            "@@",
            "     run()",
            "-}",
            "+}  # end",
            "*** End of File",
            "",
            "*** End Patch",
            "EOF",
            "```",
        ]
    )
    await apply_patch(ctx_in(proj), wrapped)
    assert (proj / "b.py").read_text() == "def a():\n    pass\n}\n\ndef main():\n    setup()\n    run()\n}  # end\n"


async def test_deleting_a_link_deletes_the_link_not_its_target(proj: Path) -> None:
    (proj / "link.py").symlink_to(proj / "app.py")
    await apply_patch(ctx_in(proj), patch_of("*** Delete File: link.py"))
    assert not (proj / "link.py").is_symlink() and (proj / "app.py").read_text() == APP


# --- the parser: sections, hunks, and the first wrong line named ---------------------------------------------


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (["*** Add File: a.txt", "+a"], None),
        ([], "the patch changes no file"),
        (["+orphan", "*** Add File: a.txt"], r"line 2 comes before any '\*\*\* Add/Update/Delete File:' line"),
        (["*** Add File:  "], "line 2 names no file"),
        (["*** Delete File: old.txt", "stray"], "line 3: a deleted file takes no lines"),
        (["*** Update File: app.py", "", "*** End of File"], "the update of app.py has no changes"),
        # The first wrong line is named, whichever section it is in and whatever is wrong further on.
        (["*** Add File: a.txt", "no plus", "*** Add File:  "], "line 3: every line of an added file starts"),
        (["*** Update File: app.py", "*** Delete File: old.txt", "x", "*** Add File: b"], "line 4: a deleted file"),
        # A section with nothing to do is reported only once every line has been read.
        (["*** Update File: app.py", "*** Add File: a.txt", "oops"], "line 4: every line of an added file"),
    ],
)
def test_the_parser_names_the_first_thing_wrong(body: list[str], message: str | None) -> None:
    if message is None:
        assert parse_patch(patch_of(*body)) == [FileChange("add", "a.txt", lines=("a",))]
        return
    with pytest.raises(EditError, match=message):
        parse_patch(patch_of(*body))


def test_the_parser_reads_moves_anchors_and_unified_diff_leftovers() -> None:
    changes = parse_patch(
        patch_of(
            "*** Update File: a.py",
            "*** Move to: b.py",
            "@@ -1,2 +1,2 @@",
            " keep",
            "-old",
            "+new",
            "\\ No newline at end of file",
            "",
            "@@ def f():",
            "*** Move to: c.py",  # after a hunk: a line of context, not a move
            "+tail",
            "*** End of File",
            "*** Add File: n.txt",
            "+",
        )
    )
    assert changes == [
        FileChange(
            "update",
            "a.py",
            move_to="b.py",
            hunks=(
                Hunk(None, ((" ", "keep"), ("-", "old"), ("+", "new"))),  # the blank line before '@@' is dropped
                Hunk("def f():", ((" ", "*** Move to: c.py"), ("+", "tail")), at_end=True),
            ),
        ),
        FileChange("add", "n.txt", lines=("",)),
    ]


# --- all or nothing, even when a write fails part-way ---------------------------------------------------------


class FailingFs:
    """A file port like an editor's that writes each file anew (so modes are not kept) and fails the writes
    numbered in ``fail`` as a full disk would; a write numbered ``hang`` waits until it is cancelled."""

    def __init__(self, *fail: int, hang: int | None = None) -> None:
        self.fail = set(fail)
        self.hang = hang
        self.writes: list[Path] = []
        self.hanging = asyncio.Event()

    async def read_text(self, path: Path) -> str:
        return await LocalFileSystem().read_text(path)

    async def write_text(self, path: Path, content: str) -> None:
        self.writes.append(path)
        if len(self.writes) in self.fail:
            raise PathError(f"{path} cannot be written: No space left on device")
        if len(self.writes) == self.hang:
            self.hanging.set()
            await asyncio.Event().wait()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.unlink(missing_ok=True)
        path.write_text(content)


def snapshot(root: Path) -> dict[str, tuple[bytes | None, int, int]]:
    """Every file and directory under ``root``: bytes (None for a directory), mode and inode."""
    return {
        str(p.relative_to(root)): (None if p.is_dir() else p.read_bytes(), p.stat().st_mode, p.stat().st_ino)
        for p in sorted(root.rglob("*"))
    }


ALL_KINDS = patch_of(
    "*** Delete File: old.txt",
    "*** Update File: app.py",
    '-    return "hi"',
    '+    return "hello"',
    "*** Update File: m.py",
    "*** Move to: lib/n.py",
    "-m = 1",
    "+n = 1",
    "*** Add File: docs/NOTES.md",
    "+# Notes",
)


@pytest.fixture
def busy(proj: Path) -> Path:
    (proj / "app.py").chmod(0o755)
    (proj / "m.py").write_text("m = 1\n")
    (proj / "m.py").chmod(0o600)
    return proj


async def test_a_write_that_fails_part_way_undoes_every_change_already_made(busy: Path) -> None:
    before = snapshot(busy)
    fs = FailingFs(3)  # app.py, lib/n.py, then docs/NOTES.md fails
    with pytest.raises(PathError) as e:
        await apply_patch(ctx_for(replace(make_deps(busy), fs=fs)), ALL_KINDS)
    assert str(e.value) == (
        "the patch could not be applied: changing docs/NOTES.md failed: "
        f"{busy / 'docs' / 'NOTES.md'} cannot be written: No space left on device. "
        "Nothing was changed (the changes already made were undone)."
    )
    # Same content, modes, and (for the deleted and moved files) the very same inodes; no lib/ or docs/ left.
    assert snapshot(busy) == {**before, "app.py": (APP.encode(), before["app.py"][1], (busy / "app.py").stat().st_ino)}
    assert fs.writes == [busy / "app.py", busy / "lib" / "n.py", busy / "docs" / "NOTES.md", busy / "app.py"]


async def test_an_undo_that_fails_too_names_exactly_what_was_not_restored(busy: Path) -> None:
    before = snapshot(busy)
    fs = FailingFs(3, 4)  # the rollback's write of app.py fails as well
    with pytest.raises(PathError) as e:
        await apply_patch(ctx_for(replace(make_deps(busy), fs=fs)), ALL_KINDS)
    assert str(e.value) == (
        "the patch could not be applied: changing docs/NOTES.md failed: "
        f"{busy / 'docs' / 'NOTES.md'} cannot be written: No space left on device. Undoing the changes already "
        f"made failed for: app.py ({busy / 'app.py'} cannot be written: No space left on device). Every other "
        "file is as it was; tell the user which files to check."
    )
    after = snapshot(busy)
    assert after.pop("app.py")[0] == APP.replace('"hi"', '"hello"').encode()
    assert after == {k: v for k, v in before.items() if k != "app.py"}


async def test_a_patch_cancelled_while_writing_is_undone(busy: Path) -> None:
    before = snapshot(busy)
    fs = FailingFs(hang=2)
    task = asyncio.create_task(apply_patch(ctx_for(replace(make_deps(busy), fs=fs)), ALL_KINDS))
    await fs.hanging.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    after = snapshot(busy)
    assert after["app.py"][:2] == before["app.py"][:2]
    assert {**after, "app.py": before["app.py"]} == before


async def test_a_successful_patch_leaves_no_copies_of_deleted_files(busy: Path) -> None:
    await apply_patch(ctx_in(busy), ALL_KINDS)
    assert sorted(p.name for p in busy.rglob("*")) == ["NOTES.md", "app.py", "docs", "lib", "n.py"]
    assert stat.S_IMODE((busy / "app.py").stat().st_mode) == 0o755


async def test_a_big_patchs_summary_stays_small_and_says_how_much_changed(proj: Path) -> None:
    # What the history keeps of a patch across turns: every file with its change size, diffs within one budget.
    files = [f"pkg/mod{i}.py" for i in range(12)]
    body = "".join(f"value_{n} = {n}\n" for n in range(80))
    patch = "*** Begin Patch\n" + "".join(
        f"*** Add File: {f}\n" + "".join(f"+{line}\n" for line in body.splitlines()) for f in files
    )
    out = await apply_patch(ctx_in(proj), patch + "*** End Patch")
    assert len(out.summary) <= 1_400
    heads = [line for line in out.summary.splitlines() if line.startswith("A ")]
    assert heads == [f"A {f} (+80 −0)" for f in files]
    assert "+value_0 = 0" in out.summary
