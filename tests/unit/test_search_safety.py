"""search and list_files under hostile input: a catastrophic pattern, a repository whose configuration names
programs, and links leading out of the workspace."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from codling.brain.prompt import system_prompt
from codling.errors import PathError, ToolError
from codling.tools.git import SAFE_CONFIG
from codling.tools.grep import SearchResult, find_matches, find_rg
from codling.tools.listing import Glob, collect_files, walk_files
from codling.tools.matcher import Request, run
from codling.tools.search import list_files, search
from codling.tools.workspace import Workspace, read_plain_file
from tests.fakes.deadlines import deadline
from tests.unit.test_tools_files import ctx_in, write

GIT = shutil.which("git")
RG = find_rg()
needs_git = pytest.mark.skipif(GIT is None, reason="git is not installed")
REDOS = "(a+)+$"
MATCHER = "codling.tools.matcher"


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    return root


def test_ripgrep_comes_with_codling() -> None:
    assert RG is not None
    assert Path(RG).parent in {Path(sysconfig.get_path("scripts")), Path(sys.executable).parent}


# --- a catastrophic pattern --------------------------------------------------------------------------------


def matcher_children() -> list[int]:
    """The pids of this process's Python-matcher children."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat.rpartition(")")[2].split()[1])
        if ppid == os.getpid() and MATCHER.encode() in cmdline:
            found.append(int(entry.name))
    return found


async def started_matcher() -> int:
    """Wait (a few seconds at most) for the matcher child to appear; its pid."""
    async with asyncio.timeout(deadline(10)):
        while not (children := matcher_children()):
            await asyncio.sleep(0.01)
    return children[0]


def redos_file(root: Path) -> None:
    write(root, {"a.txt": "a" * 5000 + "b\n"})


async def test_catastrophic_pattern_fails_in_time_and_the_loop_keeps_running(proj: Path) -> None:
    redos_file(proj)
    running = asyncio.create_task(find_matches(REDOS, proj, _ws(proj), rg=None, git=None, time_limit=1.5))
    await started_matcher()  # polling it needs the event loop too
    observed = asyncio.Event()
    asyncio.get_running_loop().call_soon(observed.set)
    await asyncio.wait_for(observed.wait(), 5)
    assert not running.done()  # the event was seen while the search was still running
    with pytest.raises(ToolError) as e:
        await asyncio.wait_for(running, deadline(10))
    assert str(e.value) == (
        "the search for '(a+)+$' took over 1.5 s and was stopped (the pattern may backtrack catastrophically: "
        "nested repetition such as (a+)+, or look-around over long lines; try a simpler one); search a narrower "
        "path or add a glob (e.g. '*.py') so it reads fewer files"
    )
    assert matcher_children() == []


async def test_a_plain_word_past_the_time_limit_is_a_time_out_not_a_pattern_problem(proj: Path) -> None:
    # (issue 29 D13: a search over very many files was reported as catastrophic backtracking)
    write(proj, {f"d{i}/f{j}.txt": "nothing here\n" * 50 for i in range(40) for j in range(50)})
    with pytest.raises(ToolError) as e:
        await asyncio.wait_for(find_matches("needle", proj, _ws(proj), rg=None, git=None, time_limit=0.001), 30)
    assert str(e.value) == (
        "the search for 'needle' took over 0.001 s and was stopped; search a narrower path or add a glob "
        "(e.g. '*.py') so it reads fewer files"
    )


async def test_cancelling_a_python_search_kills_its_process(proj: Path) -> None:
    redos_file(proj)
    running = asyncio.create_task(find_matches(REDOS, proj, _ws(proj), rg=None, git=None, time_limit=60))
    pid = await started_matcher()
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(running, deadline(10))
    assert not Path(f"/proc/{pid}").exists()  # killed and reaped: no orphan, no zombie


async def test_catastrophic_pattern_ripgrep_cannot_parse_hits_the_pcre2_limit(proj: Path) -> None:
    redos_file(proj)
    with pytest.raises(ToolError, match="hit its backtracking limit, most likely catastrophic backtracking"):
        await asyncio.wait_for(find_matches(f"(?=a){REDOS}", proj, _ws(proj), rg=RG, git=None), 30)


async def test_ripgrep_and_python_agree_on_look_around(proj: Path) -> None:
    write(proj, {"a.txt": "foobar\nfoobaz\n"})
    for rg in (RG, None):
        result = await find_matches(r"foo(?=baz)|(b)\1", proj, _ws(proj), rg=rg, git=None)
        assert result == SearchResult(("a.txt:2: foobaz",))


@pytest.mark.timeout(deadline(15))
async def test_hostile_globs_match_in_linear_time(proj: Path) -> None:
    name = "a" * 200
    write(proj, {name: "hit\n", ".gitignore": "*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b\n" + "**/" * 30 + "x\n"})
    assert [f.name for f in walk_files(proj, proj).files] == [".gitignore", name]
    glob = "*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*c"
    assert await find_matches("hit", proj, _ws(proj), glob=glob, rg=None, git=None) == SearchResult(())
    assert Glob("**/" * 30 + "*a*a*a*a*a*a*a*a*a*a*/x").fullmatch("a/" * 500 + "a" * 200 + "/x")


# --- a repository that names programs ----------------------------------------------------------------------


def hostile_repo(root: Path, marker: Path) -> None:
    """A repository with a commit on ``main`` whose configuration and hooks would create ``marker``."""
    assert GIT is not None
    write(root, {"a.py": "hit = 1\n", "notes.txt": "hit\n"})
    run = [GIT, "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(root)]
    subprocess.run([GIT, "init", "-q", "-b", "main", str(root)], check=True, timeout=deadline(30))
    subprocess.run([*run, "add", "a.py"], check=True, timeout=deadline(30))
    subprocess.run([*run, "commit", "-q", "-m", "init"], check=True, timeout=deadline(30))
    subprocess.run([GIT, "-C", str(root), "config", "core.fsmonitor", f"touch {marker}; false"], check=True)
    for hook in ("post-index-change", "post-checkout", "reference-transaction"):
        path = root / ".git" / "hooks" / hook
        path.write_text(f"#!/bin/sh\ntouch {marker}\n")
        path.chmod(0o755)


@needs_git
async def test_no_git_command_runs_the_repositorys_programs(proj: Path, tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    hostile_repo(proj, marker)
    assert GIT is not None

    listed = await list_files(ctx_in(proj))
    assert listed.text == "a.py\nnotes.txt"
    assert [f.name for f in (await collect_files(proj, _ws(proj), git=GIT)).files] == ["a.py", "notes.txt"]
    for rg in (RG, None):
        found = await find_matches("hit", proj, _ws(proj), rg=rg, git=GIT)
        assert found == SearchResult(("a.py:1: hit = 1", "notes.txt:1: hit"))
    assert (await search(ctx_in(proj), "hit")).text == "a.py:1: hit = 1\nnotes.txt:1: hit"
    assert "- Git branch: main\n" in system_prompt(proj)
    assert not marker.exists()

    # The repository is as hostile as it looks: git on its own runs the command.
    subprocess.run(
        [GIT, "-C", str(proj), "ls-files", "--others"], capture_output=True, check=False, timeout=deadline(30)
    )
    assert marker.exists()


# --- links leading out of the workspace --------------------------------------------------------------------


@pytest.fixture
def linked(tmp_path: Path, proj: Path) -> Path:
    """A workspace with one file of its own and links of every kind to files holding the same word."""
    outside = tmp_path / "outside"
    write(outside, {"secret.txt": "SECRET outside\n", "dir/deep.txt": "SECRET deep outside\n"})
    write(proj, {"inside.txt": "SECRET inside\n"})
    (proj / "to_file").symlink_to(outside / "secret.txt")
    (proj / "to_dir").symlink_to(outside / "dir", target_is_directory=True)
    (proj / "alias.txt").symlink_to("inside.txt")  # inside, but links met on the way are never followed
    os.link(outside / "secret.txt", proj / "hard.txt")
    return proj


ONLY_INSIDE = SearchResult(("inside.txt:1: SECRET inside",))


@pytest.mark.parametrize("rg", [pytest.param(RG, id="ripgrep"), pytest.param(None, id="python")])
async def test_search_reads_no_file_through_a_link(linked: Path, rg: str | None) -> None:
    assert await find_matches("SECRET", linked, _ws(linked), rg=rg, git=None) == ONLY_INSIDE
    assert await find_matches("SECRET", linked, _ws(linked), rg=rg, git=None, glob="*.txt") == ONLY_INSIDE


@needs_git
@pytest.mark.parametrize("rg", [pytest.param(RG, id="ripgrep"), pytest.param(None, id="python")])
async def test_search_reads_no_git_listed_link(linked: Path, rg: str | None) -> None:
    assert GIT is not None
    subprocess.run([GIT, "init", "-q", str(linked)], check=True, timeout=deadline(30))
    subprocess.run([GIT, "-C", str(linked), "add", "."], check=True, timeout=deadline(30))
    assert await find_matches("SECRET", linked, _ws(linked), rg=rg, git=GIT) == ONLY_INSIDE


@pytest.mark.parametrize("rg", [pytest.param(RG, id="ripgrep"), pytest.param(None, id="python")])
async def test_search_refuses_a_hard_linked_file_by_name(linked: Path, rg: str | None) -> None:
    with pytest.raises(PathError) as e:
        await find_matches("SECRET", linked / "hard.txt", _ws(linked), rg=rg, git=None)
    assert str(e.value) == (
        "'hard.txt' is not searched: it has more than one hard link (it may be another name for a file outside "
        "the workspace) or is not a regular file"
    )


async def test_search_tool_refuses_links_out_by_name(linked: Path) -> None:
    for path in ("to_file", "to_dir", "to_dir/deep.txt"):
        with pytest.raises(PathError, match="leads outside the workspace through a symbolic link"):
            await search(ctx_in(linked), "SECRET", path=path)
    inside = await search(ctx_in(linked), "SECRET", path="alias.txt")  # a path given is resolved, as read_file's
    assert inside.text == "inside.txt:1: SECRET inside"


async def test_list_files_names_links_without_entering_them(linked: Path) -> None:
    assert (await list_files(ctx_in(linked))).text == "alias.txt\nhard.txt\ninside.txt\nto_dir\nto_file"
    with pytest.raises(PathError, match="leads outside the workspace"):
        await list_files(ctx_in(linked), "to_dir")


def _ws(root: Path) -> Workspace:
    return Workspace(root)


@needs_git
def test_the_prompts_git_call_carries_the_safe_configuration(proj: Path, tmp_path: Path) -> None:
    # rev-parse runs no fsmonitor in today's git, so the marker above cannot tell; a git on PATH that logs its
    # arguments (then runs the real one) shows the call goes through tools/git.py.
    hostile_repo(proj, tmp_path / "marker")
    bin_dir, log = tmp_path / "bin", tmp_path / "git-args"
    bin_dir.mkdir()
    (bin_dir / "git").write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" >> {log}\nexec {GIT} "$@"\n')
    (bin_dir / "git").chmod(0o755)
    code = f"import pathlib, codling.brain.prompt as p; print(p.system_prompt(pathlib.Path({str(proj)!r})))"
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=deadline(60), check=True
    )
    assert "- Git branch: main\n" in out.stdout
    args = log.read_text().splitlines()
    assert args[: 1 + 2 * len(SAFE_CONFIG)] == ["--no-pager", *(a for s in SAFE_CONFIG for a in ("-c", s))]
    assert not (tmp_path / "marker").exists()


@pytest.mark.timeout(deadline(15))
@pytest.mark.parametrize("target", ["/dev/stdin", "/dev/zero", "fifo", "outside"])
async def test_a_gitignore_link_or_pipe_is_not_read(proj: Path, tmp_path: Path, target: str) -> None:
    # Outside a git work tree listing walks the tree itself: a .gitignore linked to codling's own stdin (the
    # JSON-RPC stream), to an endless device or to a pipe nobody writes must neither block nor exhaust it.
    write(proj, {"keep.py": "x\n", "skip.log": "y\n"})
    if target == "fifo":
        os.mkfifo(proj / ".gitignore")
    elif target == "outside":
        (tmp_path / "rules").write_text("*.py\n")
        (proj / ".gitignore").symlink_to(tmp_path / "rules")
    else:
        (proj / ".gitignore").symlink_to(target)
    listing = await asyncio.wait_for(collect_files(proj, _ws(proj), git=None), 10)
    assert [f.name for f in listing.files] == [".gitignore", "keep.py", "skip.log"]


async def test_a_plain_gitignore_still_counts(proj: Path) -> None:
    write(proj, {"keep.py": "x\n", "skip.log": "y\n", ".gitignore": "*.log\n"})
    assert [f.name for f in walk_files(proj, proj).files] == [".gitignore", "keep.py"]


# -- a granted directory beside the cwd whose name starts with the cwd's (ws and ws-secrets) ---------------------


async def test_a_granted_sibling_whose_name_extends_the_cwd_s_keeps_its_own_gitignore_rules(tmp_path: Path) -> None:
    ws, secrets = tmp_path / "ws", tmp_path / "ws-secrets"
    write(ws, {"a.py": "a\n"})
    write(secrets, {".gitignore": "*.log\n", "sub/debug.log": "noise\n", "sub/keep.py": "k\n"})
    listing = await collect_files(secrets, Workspace(ws, [secrets]), git=None)
    # ws-secrets is its own root, so its .gitignore counts in its subdirectories too.
    assert listing.files == [secrets / ".gitignore", secrets / "sub" / "keep.py"]


def test_walking_a_directory_beside_top_takes_no_rules_from_above_top(tmp_path: Path) -> None:
    """Ignore files count from ``top`` down: a directory beside it whose name starts with top's is not below it,
    and the .gitignore above both (tmp_path's) never counts."""
    ws, secrets = tmp_path / "ws", tmp_path / "ws-secrets"
    write(tmp_path, {".gitignore": "*.pem\n"})
    write(ws, {".gitignore": "*.txt\n"})
    write(secrets, {"key.pem": "k\n", "notes.txt": "n\n"})
    assert walk_files(secrets, ws).files == [secrets / "key.pem", secrets / "notes.txt"]


# --- the Python matcher checks each file again on the open file ----------------------------------------------


def test_the_matcher_reads_no_link_no_second_name_no_oversized_and_no_missing_file(linked: Path) -> None:
    (linked / "big.txt").write_text("SECRET but too big to read\n" + "x" * 100)
    request: Request = {
        "pattern": "SECRET",
        "ignore_case": False,
        "files": [
            str(linked / name) for name in ("to_file", "alias.txt", "hard.txt", "big.txt", "gone.txt", "inside.txt")
        ],
        "max_matches": 10,
        "max_file_bytes": 100,
        "line_chars": 300,
    }
    assert run(request) == {"matches": [(5, 1, "SECRET inside")], "more": False}


# --- files codling reads on its own accord (AGENTS.md, .gitignore) ---------------------------------------------


def test_a_plain_file_behind_a_link_loop_is_not_read(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").symlink_to(tmp_path / "loop")
    (tmp_path / "loop").symlink_to(tmp_path / "AGENTS.md")
    (tmp_path / "real.md").write_text("# rules\n")
    (tmp_path / "link.md").symlink_to("real.md")
    assert read_plain_file(tmp_path / "AGENTS.md", 1000, inside=tmp_path) is None
    assert read_plain_file(tmp_path / "link.md", 1000, inside=tmp_path) == b"# rules\n"
    assert read_plain_file(tmp_path / "link.md", 1000) is None  # without ``inside`` no link is followed


def test_a_workspace_shows_its_roots() -> None:
    workspace = Workspace(Path("/tmp/ws"), [Path("/tmp/extra"), Path("/tmp/ws")])
    assert repr(workspace) == "Workspace(cwd=/tmp/ws, roots=['/tmp/ws', '/tmp/extra'])"


# --- search's own failures, said so the model can act on them -------------------------------------------------


@pytest.mark.parametrize("rg", [pytest.param(RG, id="ripgrep"), pytest.param(None, id="python")])
async def test_an_empty_pattern_is_refused(proj: Path, rg: str | None) -> None:
    with pytest.raises(ToolError) as e:
        await find_matches("", proj, _ws(proj), rg=rg, git=None)
    assert str(e.value) == "the search pattern is empty; give a regular expression to look for"


async def test_a_ripgrep_that_cannot_run_leaves_the_search_to_python(proj: Path, tmp_path: Path) -> None:
    write(proj, {"a.py": "def hit():\n", "b.txt": "no\n"})
    missing = str(tmp_path / "no-such-rg")
    assert await find_matches("hit", proj, _ws(proj), rg=missing, git=None) == SearchResult(("a.py:1: def hit():",))


@pytest.mark.parametrize("rg", [pytest.param(RG, id="ripgrep"), pytest.param(None, id="python")])
async def test_a_pattern_nested_too_deep_for_every_engine_fails_with_the_matchers_last_words(
    proj: Path, rg: str | None
) -> None:
    # ripgrep and PCRE2 refuse the nesting; Python's parser recurses until it gives up.
    write(proj, {"a.txt": "a\n"})
    with pytest.raises(ToolError) as e:
        await find_matches("(" * 1000 + "a" + ")" * 1000, proj, _ws(proj), rg=rg, git=None)
    assert str(e.value).startswith(
        "search failed: the matcher process ended with 1 (RecursionError: maximum recursion depth exceeded"
    )


async def test_a_glob_ripgrep_cannot_parse_is_its_error(proj: Path) -> None:
    write(proj, {"a.txt": "hit\n"})
    with pytest.raises(ToolError) as e:
        await find_matches("hit", proj, _ws(proj), rg=RG, git=None, glob="{a")
    assert str(e.value) == (
        "search failed: rg: error parsing glob '{a': unclosed alternate group; missing '}' "
        "(maybe escape '{' with '[{]'?)"
    )


async def test_a_git_that_cannot_run_leaves_the_listing_to_the_walk(proj: Path, tmp_path: Path) -> None:
    write(proj, {"a.py": "a\n", "b.log": "b\n", ".gitignore": "*.log\n"})
    listing = await collect_files(proj, _ws(proj), git=str(tmp_path / "no-such-git"))
    assert listing == walk_files(proj, proj)
    assert [f.name for f in listing.files] == [".gitignore", "a.py"]
