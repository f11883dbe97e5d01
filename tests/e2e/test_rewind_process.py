"""/undo and /rewind through real processes (issue 34): each turn a `codling run --resume` of its own against the
loopback model server, each rewind a new process (the checkpoints are read back from the session's folder, not
from a process's memory), on a terminal and without one, and `codling acp` (the SDK's client side,
tests/fakes/acp_client.py) answering the rewind's permission question.

What this battery found first, and now guards: git's blind spots (permission bits it does not track,
``core.fileMode=false``, assume-unchanged and skip-worktree files), a rewind of a ``.gitignore`` edit deleting what
it had ignored, a tracked file read through a directory turned into a link, the listing missing what commands
changed, and a file grown past the size limit overwritten unsaved.

The in-process side (what a rewind says, the conversation rebuilt) is tests/unit/test_rewind.py."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import signal
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from acp import PROTOCOL_VERSION, helpers

from tests.e2e.test_acp_process import spawned
from tests.e2e.test_cli import codling, model_env, on_a_terminal
from tests.fakes import warm
from tests.fakes.acp_client import RecordingClient
from tests.fakes.deadlines import deadline
from tests.fakes.openai_server import ErrorReply, OpenAIServer, Reply, ToolCall, running_server, text_of

IGNORED = "build/"


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with running_server() as s:
        yield s


def git(root: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", "-c", "commit.gpgsign=false", *args],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(root), "GIT_CONFIG_NOSYSTEM": "1"},
    )
    return done.stdout


def tree(root: Path) -> dict[str, tuple[str, str]]:
    """Every file and symlink under ``root`` but .git and the ignored build/: its kind with its permission bits,
    and its content's hash (a symlink's target)."""
    found: dict[str, tuple[str, str]] = {}
    for directory, dirs, files in os.walk(root):
        here = Path(directory)
        dirs[:] = [d for d in dirs if d != ".git" and not (here == root and f"{d}/" == IGNORED)]
        for name in [*files, *(d for d in dirs if (here / d).is_symlink())]:
            path = here / name
            info = path.lstat()
            if stat.S_ISLNK(info.st_mode):
                found[path.relative_to(root).as_posix()] = ("link", os.readlink(path))
            else:
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
                found[path.relative_to(root).as_posix()] = (f"file {info.st_mode & 0o777:o}", digest)
    return found


def directories(root: Path) -> list[str]:
    """The directories under ``root`` but .git (a rewind removes those it emptied)."""
    return sorted(
        p.relative_to(root).as_posix()
        for p in root.rglob("*")
        if p.is_dir() and not p.is_symlink() and ".git" not in p.relative_to(root).parts
    )


def tree_hash(root: Path) -> str:
    return hashlib.sha256(json.dumps(sorted(tree(root).items())).encode()).hexdigest()


def ignored(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted((root / "build").rglob("*")) if p.is_file()}


def history(home: Path, session_id: str) -> list[dict[str, Any]]:
    path = home / "sessions" / session_id / "history.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def run(env: dict[str, str], project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    result = codling("run", "--mode", "yolo", *args, env=env, cwd=project)
    assert result.returncode == 0, result.stderr
    return result


def said_hello(
    home: Path, project: Path, server: OpenAIServer
) -> tuple[dict[str, str], str, dict[str, tuple[str, str]]]:
    """A git project and a session of one turn that changed nothing: the environment, the session's id and the
    tree."""
    prepare(project, with_git=True)
    env = model_env(home, server)
    server.enqueue(Reply("hello"))
    session_id = first_run(env, project, "hi")
    return env, session_id, tree(project)


def first_run(env: dict[str, str], project: Path, prompt: str) -> str:
    """A new session's first turn; its id."""
    result = run(env, project, "--json", prompt)
    session = json.loads(result.stdout.splitlines()[0])
    assert session["type"] == "session"
    return str(session["session_id"])


PATCH = """*** Begin Patch
*** Update File: src/app.py
@@ def greet():
-    return 'hi'
+    return 'hi there'
*** Add File: docs/NOTES.md
+# Notes
+greet says hi there
*** End Patch"""

PACKAGE = "mkdir -p pkg/sub && printf 'x = 1\\n' > pkg/sub/mod.py && ln -s ../README.md pkg/readme"
MIXED = "chmod -x tools/run.sh && printf 'more\\n' >> one && rm gen_3.txt"
GENERATOR = "for i in 1 2 3; do printf 'generated %s\\n' $i > gen_$i.txt; done\n"


def turn_calls() -> list[tuple[str, list[ToolCall]]]:
    """Ten turns, each a prompt and the tool calls the model answers it with (then a closing text)."""
    return [
        ("edit app", [ToolCall("edit_file", {"path": "src/app.py", "old_text": "hello", "new_text": "hi"})]),
        ("patch app and add notes", [ToolCall("apply_patch", {"patch": PATCH})]),
        ("write new.py", [ToolCall("write_file", {"path": "src/new.py", "content": "print('new')\n"})]),
        ("sed the readme", [ToolCall("run_command", {"command": "sed -i 's/demo/DEMO/' README.md"})]),
        (
            "generate files",
            [
                ToolCall("write_file", {"path": "gen.sh", "content": GENERATOR}),
                ToolCall("run_command", {"command": "sh gen.sh && printf 'built\\n' > build/out.o"}),
            ],
        ),
        ("remove some", [ToolCall("run_command", {"command": "rm gen_2.txt src/new.py LICENSE"})]),
        ("make executable", [ToolCall("run_command", {"command": "chmod +x gen.sh tools/run.sh"})]),
        ("rename notes", [ToolCall("run_command", {"command": "mv docs/NOTES.md docs/GUIDE.md && mv gen_1.txt one"})]),
        (
            "new package",
            [
                ToolCall("run_command", {"command": PACKAGE}),
            ],
        ),
        (
            "several steps",
            [
                ToolCall("edit_file", {"path": "README.md", "old_text": "DEMO", "new_text": "Demo v2"}),
                ToolCall("run_command", {"command": MIXED}),
                ToolCall("write_file", {"path": "pkg/sub/mod.py", "content": "x = 2\n"}),
            ],
        ),
    ]


def enqueue_turn(server: OpenAIServer, calls: list[ToolCall], n: int) -> None:
    named = [ToolCall(c.name, c.arguments, id=f"t{n}_{i}") for i, c in enumerate(calls)]
    server.enqueue(*(Reply(tool_calls=[c]) for c in named), Reply(text=[f"done {n}"]))


def prepare(project: Path, *, with_git: bool) -> None:
    (project / ".gitignore").write_text(IGNORED + "\n")
    (project / "LICENSE").write_text("MIT\n")
    (project / "tools").mkdir()
    (project / "tools" / "run.sh").write_text("#!/bin/sh\necho run\n")
    (project / "build").mkdir()
    (project / "build" / "keep.o").write_bytes(b"\x00ignored\n")
    if with_git:
        git(project, "init", "-q")
        git(project, "add", "-A")
        git(project, "commit", "-q", "-m", "start")


@pytest.mark.timeout(deadline(240))
@pytest.mark.parametrize("with_git", [True, False], ids=["git", "no-git"])
def test_ten_turns_rewound_one_process_each(home: Path, project: Path, server: OpenAIServer, with_git: bool) -> None:
    prepare(project, with_git=with_git)
    env = model_env(home, server)
    hashes = [tree_hash(project)]
    trees = [tree(project)]
    folders = [directories(project)]
    session_id = ""
    for n, (prompt, calls) in enumerate(turn_calls(), 1):
        enqueue_turn(server, calls, n)
        if n == 1:
            session_id = first_run(env, project, prompt)
        else:
            run(env, project, "--resume", session_id, prompt)
        hashes.append(tree_hash(project))
        trees.append(tree(project))
        folders.append(directories(project))
        assert hashes[-1] != hashes[-2], f"turn {n} changed nothing: {trees[-1]}"
    assert server.pending == 0
    assert (project / "build" / "out.o").read_text() == "built\n"
    after_ignored = ignored(project)
    assert after_ignored == {"build/keep.o": b"\x00ignored\n", "build/out.o": b"built\n"}
    records = history(home, session_id)
    for kind, count in (("turn_start", 10), ("tool_result", 13), ("turn_end", 10)):
        numbered = [r.get("checkpoint") for r in records if r["kind"] == kind]
        assert len(numbered) == count and all(isinstance(n, int) for n in numbered), (kind, numbered)

    asked = len(server.requests)
    for k in [*range(10, 0, -1), 7, 3, 10]:
        result = run(env, project, "--resume", session_id, f"/rewind {k} code")
        assert f"to before turn {k}" in result.stdout, result.stdout + result.stderr
        assert tree(project) == trees[k - 1], f"/rewind {k} code: {result.stdout}"
        assert tree_hash(project) == hashes[k - 1]
        assert directories(project) == folders[k - 1]
        assert ignored(project) == after_ignored
    assert len(server.requests) == asked  # a rewind is a command: no model request
    rewinds = [r for r in history(home, session_id) if r["kind"] == "rewind"]
    assert len(rewinds) == 13


def test_a_step_of_a_turn_is_rewound_and_the_listing_names_turns_and_steps(
    home: Path, project: Path, server: OpenAIServer
) -> None:
    prepare(project, with_git=True)
    env = model_env(home, server)
    turns = turn_calls()
    enqueue_turn(server, turns[0][1], 1)
    session_id = first_run(env, project, turns[0][0])
    enqueue_turn(server, turns[9][1][1:], 2)  # chmod -x, append, rm; then write_file
    # What MIXED works on, made between the turns (the second turn's first checkpoint takes them in).
    (project / "tools" / "run.sh").chmod(0o755)
    (project / "one").write_text("one\n")
    (project / "gen_3.txt").write_text("three\n")
    before = tree(project)
    run(env, project, "--resume", session_id, "two steps")
    after = tree(project)
    assert after != before

    listing = run(env, project, "--resume", session_id, "/rewind").stdout
    assert "1. edit app — changed `src/app.py`" in listing, listing
    assert "2. two steps" in listing and "2.1 " in listing and "2.2 " in listing, listing

    run(env, project, "--resume", session_id, "/rewind 2.2 code")
    middle = tree(project)
    assert middle["tools/run.sh"][0] == "file 644" and "gen_3.txt" not in middle  # step 1 stays done
    assert "pkg/sub/mod.py" not in middle  # step 2 (the write) is undone
    run(env, project, "--resume", session_id, "/rewind 2.1 code")
    assert tree(project) == before


@pytest.mark.parametrize("with_git", [True, False], ids=["git", "no-git"])
def test_undo_without_a_terminal_refuses_over_files_changed_outside(
    home: Path, project: Path, server: OpenAIServer, with_git: bool
) -> None:
    prepare(project, with_git=with_git)
    env = model_env(home, server)
    before = tree(project)
    enqueue_turn(server, turn_calls()[0][1], 1)
    session_id = first_run(env, project, "edit app")
    edited = tree(project)
    # Behind codling's back: a file edited, one deleted, one made, one made executable.
    (project / "README.md").write_text("# edited behind codling's back\n")
    (project / "LICENSE").unlink()
    (project / "notes.txt").write_text("mine\n")
    (project / "tools" / "run.sh").chmod(0o755)
    outside = tree(project)
    records = len(history(home, session_id))

    result = run(env, project, "--resume", session_id, "/undo")
    said = result.stdout + result.stderr
    assert "Not rewound: 4 file(s) changed outside codling" in said, said
    for name in ("README.md", "LICENSE", "notes.txt", "tools/run.sh"):
        assert f"`{name}`" in said, said
    assert tree(project) == outside
    assert not [r for r in history(home, session_id)[records:] if r["kind"] == "rewind"]

    # Once the files are as codling last saw them, the same /undo goes through.
    (project / "README.md").write_text("# demo\n")
    (project / "LICENSE").write_text("MIT\n")
    (project / "notes.txt").unlink()
    (project / "tools" / "run.sh").chmod(0o644)
    assert tree(project) == edited
    result = run(env, project, "--resume", session_id, "/undo")
    assert "Rewound the code and conversation to before turn 1" in result.stdout, result.stdout + result.stderr
    assert tree(project) == before


def user_texts(body: dict[str, Any]) -> str:
    return "\n".join(text_of(m.get("content")) for m in body["messages"] if m.get("role") == "user")


def test_undo_takes_the_turn_out_of_what_the_model_is_sent_next(
    home: Path, project: Path, server: OpenAIServer
) -> None:
    env = model_env(home, server)
    server.enqueue(Reply(text=["first answer"]))
    session_id = first_run(env, project, "alpha prompt")
    server.enqueue(Reply(text=["second answer"]))
    run(env, project, "--resume", session_id, "bravo prompt")
    server.enqueue(
        Reply(tool_calls=[ToolCall("write_file", {"path": "charlie.txt", "content": "c\n"}, id="w1")]),
        Reply(text=["third answer"]),
    )
    run(env, project, "--resume", session_id, "charlie prompt")
    assert (project / "charlie.txt").exists()
    assert "charlie prompt" in user_texts(server.requests[-1])

    undone = run(env, project, "--resume", session_id, "/undo")
    assert "to before turn 3" in undone.stdout, undone.stdout + undone.stderr
    assert not (project / "charlie.txt").exists()
    [rewind] = [r for r in history(home, session_id) if r["kind"] == "rewind"]
    assert rewind["scope"] == "both"

    asked = len(server.requests)
    server.enqueue(Reply(text=["fourth answer"]))
    run(env, project, "--resume", session_id, "delta prompt")
    [sent] = server.requests[asked:]
    texts = user_texts(sent)
    assert "alpha prompt" in texts and "bravo prompt" in texts and "delta prompt" in texts, texts
    assert "charlie prompt" not in texts and "/undo" not in texts, texts
    assert "third answer" not in json.dumps(sent) and "charlie.txt" not in json.dumps(sent)

    shown = codling("sessions", "show", session_id, env=env, cwd=project)
    assert shown.returncode == 0, shown.stderr
    blocks = {block.split("\n> ", 1)[1].split("\n", 1)[0]: block for block in shown.stdout.split("\nTurn ")[1:]}
    assert "(abandoned: a rewind took the conversation back" in blocks["charlie prompt"], shown.stdout
    assert not any("(abandoned:" in blocks[p] for p in ("alpha prompt", "bravo prompt", "/undo", "delta prompt"))


async def test_undo_over_acp_asks_the_client_then_puts_the_file_back(
    home: Path, project: Path, server: OpenAIServer
) -> None:
    original = (project / "src" / "app.py").read_text()
    server.enqueue(
        Reply(
            tool_calls=[ToolCall("edit_file", {"path": "src/app.py", "old_text": "hello", "new_text": "hi"}, id="e1")]
        ),
        Reply(text=["Edited."]),
    )
    client = RecordingClient(answers=["allow_once", "reject", "allow_once"])  # the edit, the rewinds
    async with spawned(client, home, server) as conn:
        await asyncio.wait_for(conn.initialize(protocol_version=PROTOCOL_VERSION), deadline(30))
        session = await asyncio.wait_for(conn.new_session(cwd=str(project)), deadline(30))
        await client.wait_for("available_commands_update", timeout=30)
        names = {command.name for command in client.of_kind("available_commands_update")[-1].available_commands}
        assert {"undo", "rewind"} <= names, names

        edited = await asyncio.wait_for(
            conn.prompt(session_id=session.session_id, prompt=[helpers.text_block("edit app")]), deadline(30)
        )
        assert edited.stop_reason == "end_turn"
        assert (project / "src" / "app.py").read_text() != original
        assert len(client.permissions) == 1
        edited_text = (project / "src" / "app.py").read_text()

        refused = await asyncio.wait_for(
            conn.prompt(session_id=session.session_id, prompt=[helpers.text_block("/undo")]), deadline(30)
        )
        assert refused.stop_reason == "end_turn"
        assert "Nothing was rewound." in client.agent_text()
        assert (project / "src" / "app.py").read_text() == edited_text
        assert not [r for r in history(home, session.session_id) if r["kind"] == "rewind"]

        undone = await asyncio.wait_for(
            conn.prompt(session_id=session.session_id, prompt=[helpers.text_block("/undo")]), deadline(30)
        )
        assert undone.stop_reason == "end_turn"
        assert (project / "src" / "app.py").read_text() == original
        [_, _, asked] = client.permissions
        assert asked.tool_call.title is not None and "Rewind the code and conversation to before turn 1" in (
            asked.tool_call.title
        )
        assert "Rewound the code and conversation to before turn 1" in client.agent_text()
        cards = [u for u in client.of_kind("tool_call") if u.title.startswith("Rewind")]
        assert len(cards) == 2 and client.statuses[cards[-1].tool_call_id] == "completed"
        assert client.problems == []

        # The same live session (no restart) sends the model the conversation as it was before the edit turn.
        requests_before = len(server.requests)
        server.enqueue(Reply(text=["Fresh start."]))
        again = await asyncio.wait_for(
            conn.prompt(session_id=session.session_id, prompt=[helpers.text_block("what now")]), deadline(30)
        )
        assert again.stop_reason == "end_turn"
        [sent] = server.requests[requests_before:]
        assert "what now" in user_texts(sent) and "edit app" not in user_texts(sent), user_texts(sent)
        assert "Edited." not in json.dumps(sent)
    [rewind] = [r for r in history(home, session.session_id) if r["kind"] == "rewind"]
    assert rewind["scope"] == "both"


FIVE_CHANGES = (
    "sed -i 's/$/ changed/' d00/f0000.txt d50/f5000.txt && chmod +x d99/f9999.txt && rm d10/f1000.txt"
    " && mkdir -p fresh && printf 'new\\n' > fresh/made.txt"
)


def big_tree(root: Path, files: int = 10_000) -> None:
    """``files`` small files, dated an hour back: a workspace written just now would be "racy" for git and for
    the checkpoints' scan alike (each reads again a file modified within seconds of its last look), which no
    real workspace is at every turn."""
    then = time.time() - 3600
    for i in range(files):
        directory = root / f"d{i // 100:02d}"
        directory.mkdir(exist_ok=True)
        path = directory / f"f{i:04d}.txt"
        path.write_text(f"file {i}\n")
        os.utime(path, (then, then))


SECOND_CHANGES = "sed -i 's/$/ again/' d01/f0100.txt d02/f0200.txt d03/f0300.txt d04/f0400.txt d05/f0500.txt"


def two_turns(env: dict[str, str], project: Path, server: OpenAIServer) -> str:
    """A new session of two turns, each changing five files by a command; its id."""
    server.enqueue(Reply(tool_calls=[ToolCall("run_command", {"command": FIVE_CHANGES}, id="c1")]), Reply("changed"))
    session_id = first_run(env, project, "change five files")
    server.enqueue(Reply(tool_calls=[ToolCall("run_command", {"command": SECOND_CHANGES}, id="c2")]), Reply("again"))
    run(env, project, "--resume", session_id, "change five more")
    return session_id


@pytest.mark.timeout(deadline(180))
def test_ten_thousand_files_rewound_exactly(home: Path, tmp_path: Path, project: Path, server: OpenAIServer) -> None:
    """Correctness only: the time a checkpoint takes here, against the same workspace without, is
    scripts/bench.py's (section 14)."""
    prepare(project, with_git=False)
    big_tree(project)
    git(project, "init", "-q")
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "ten thousand files")
    before = tree(project)
    assert len(before) > 10_000

    env = model_env(home, server)
    session_id = two_turns(env, project, server)
    after = tree(project)
    changed = {p for p in before.keys() | after.keys() if before.get(p) != after.get(p)}
    assert len(changed) == 10
    assert {"d00/f0000.txt", "d50/f5000.txt", "d99/f9999.txt", "d10/f1000.txt", "fresh/made.txt"} < changed
    ends = [r for r in history(home, session_id) if r["kind"] == "turn_end"]
    assert len(ends) == 2 and all(isinstance(end.get("checkpoint"), int) for end in ends)

    result = run(env, project, "--resume", session_id, "/rewind 1 code")
    assert "10 file(s) changed back" in result.stdout, result.stdout + result.stderr
    assert tree(project) == before
    assert ignored(project) == {"build/keep.o": b"\x00ignored\n"}

    # With checkpoints off, nothing is kept and no turn names a checkpoint.
    other = tmp_path / "home-off"
    other.mkdir()
    (other / "config.toml").write_text("checkpoints = false\n")
    off_id = two_turns(model_env(other, server), project, server)
    assert not (other / "sessions" / off_id / "checkpoints").exists()
    assert not any("checkpoint" in r for r in history(other, off_id))


EDGES = (
    "printf 'x\\n' > 'naïve file \"q\".txt' && printf 'y\\n' > \"$(printf 'new\\nline')\" && printf z > 'tab\there'"
    " && rm LICENSE && mkdir LICENSE && printf 'inner\\n' > LICENSE/inner.txt"
    " && rm -r tools && printf 'now a file\\n' > tools"
    " && ln -s src srclink && ln -s missing dangling && rm src/app.py && ln -s ../README.md src/app.py"
    " && mkdir -p a/b/c && printf 1 > a/b/c/f"
    " && head -c 300000 /dev/urandom > blob.bin && printf '\\000\\377' > README.md"
    " && mkdir locked && printf 1 > locked/f && chmod 555 locked"
    " && printf 'changed\\n' > build/tracked.o"
)


@pytest.mark.parametrize("with_git", [True, False], ids=["git", "no-git"])
def test_odd_names_kinds_and_directories_come_back(
    home: Path, project: Path, server: OpenAIServer, with_git: bool
) -> None:
    """Names git would quote, a file made a directory and a directory a file, symbolic links (to a directory,
    dangling, replacing a file), binary content, a read-only directory made by the turn, a tracked file in an
    ignored directory (git only: without git the ignore rule is all there is)."""
    prepare(project, with_git=False)
    (project / "build" / "tracked.o").write_text("tracked\n")
    if with_git:
        git(project, "init", "-q")
        git(project, "add", "-A")
        git(project, "add", "-f", "build/tracked.o")
        git(project, "commit", "-q", "-m", "start")
    env = model_env(home, server)
    server.enqueue(Reply("hello"))
    session_id = first_run(env, project, "hi")
    before, folders = tree(project), directories(project)
    server.enqueue(Reply(tool_calls=[ToolCall("run_command", {"command": EDGES}, id="c1")]), Reply("done"))
    run(env, project, "--resume", session_id, "odd things")
    changed = tree(project)
    assert 'naïve file "q".txt' in changed and "new\nline" in changed and changed["tools"][0] == "file 644"
    assert changed["src/app.py"] == ("link", "../README.md") and "locked/f" in changed

    result = run(env, project, "--resume", session_id, "/rewind 2 code")
    assert "to before turn 2" in result.stdout, result.stdout + result.stderr
    assert tree(project) == before
    assert directories(project) == folders
    expected = b"tracked\n" if with_git else b"changed\n"
    assert (project / "build" / "tracked.o").read_bytes() == expected


GIT_BLIND_SPOTS = {
    # What `git ls-files -m` does not call modified, so the keeper's quick scan (keeper.py `_scan`: only what git
    # lists as modified, deleted or untracked is looked at while the index is unchanged) never looks at it.
    "permission bits git does not track (chmod 444)": ((), "chmod 444 README.md"),
    "core.fileMode false (chmod +x)": (("config", "core.fileMode", "false"), "chmod +x tools/run.sh"),
    "an assume-unchanged file's content": (("update-index", "--assume-unchanged", "LICENSE"), "echo lost > LICENSE"),
    "a skip-worktree file's content": (("update-index", "--skip-worktree", "LICENSE"), "echo lost > LICENSE"),
}


@pytest.mark.parametrize("setup, command", list(GIT_BLIND_SPOTS.values()), ids=list(GIT_BLIND_SPOTS))
def test_in_git_a_change_git_does_not_list_is_rewound_too(
    home: Path, project: Path, server: OpenAIServer, setup: tuple[str, ...], command: str
) -> None:
    prepare(project, with_git=True)
    if setup:
        git(project, *setup)
    env = model_env(home, server)
    server.enqueue(Reply("hello"))
    session_id = first_run(env, project, "hi")
    before = tree(project)
    server.enqueue(Reply(tool_calls=[ToolCall("run_command", {"command": command}, id="c1")]), Reply("done"))
    run(env, project, "--resume", session_id, "change it")
    assert tree(project) != before

    result = run(env, project, "--resume", session_id, "/rewind 2 code")
    assert "to before turn 2" in result.stdout, result.stdout + result.stderr
    assert tree(project) == before, result.stdout


def test_without_git_the_same_changes_are_rewound(home: Path, project: Path, server: OpenAIServer) -> None:
    """The control for the test above: the keeper walking the tree (no git) sees each of those changes."""
    prepare(project, with_git=False)
    env = model_env(home, server)
    server.enqueue(Reply("hello"))
    session_id = first_run(env, project, "hi")
    before = tree(project)
    command = "chmod 444 README.md && chmod +x tools/run.sh && echo lost > LICENSE"
    server.enqueue(Reply(tool_calls=[ToolCall("run_command", {"command": command}, id="c1")]), Reply("done"))
    run(env, project, "--resume", session_id, "change it")
    assert tree(project) != before
    result = run(env, project, "--resume", session_id, "/rewind 2 code")
    assert "3 file(s) changed back" in result.stdout, result.stdout + result.stderr
    assert tree(project) == before


def test_an_ignored_file_changed_outside_neither_blocks_nor_is_touched_and_a_conversation_rewind_ignores_code(
    home: Path, project: Path, server: OpenAIServer
) -> None:
    prepare(project, with_git=True)
    env = model_env(home, server)
    server.enqueue(
        Reply(tool_calls=[ToolCall("write_file", {"path": "x.txt", "content": "x\n"}, id="w1")]), Reply("ok")
    )
    session_id = first_run(env, project, "make x")
    (project / "build" / "keep.o").write_text("rebuilt\n")  # ignored: not codling's business
    result = run(env, project, "--resume", session_id, "/rewind 1 code")
    assert "1 file(s) changed back: `x.txt`" in result.stdout, result.stdout + result.stderr
    assert not (project / "x.txt").exists()
    assert (project / "build" / "keep.o").read_text() == "rebuilt\n"

    (project / "README.md").write_text("# mine\n")  # outside, but a conversation rewind leaves the code be
    result = run(env, project, "--resume", session_id, "/rewind 1 conversation")
    assert "Rewound the conversation to before turn 1" in result.stdout, result.stdout + result.stderr
    assert (project / "README.md").read_text() == "# mine\n"
    assert [r["scope"] for r in history(home, session_id) if r["kind"] == "rewind"] == ["code", "conversation"]


@pytest.mark.parametrize("with_git", [True, False], ids=["git", "no-git"])
def test_rewinding_a_gitignore_edit_keeps_the_files_it_had_ignored(
    home: Path, project: Path, server: OpenAIServer, with_git: bool
) -> None:
    prepare(project, with_git=with_git)  # .gitignore is "build/"; build/keep.o is the user's, made before codling
    env = model_env(home, server)
    server.enqueue(Reply("hello"))
    session_id = first_run(env, project, "hi")
    before = tree(project)
    server.enqueue(
        Reply(tool_calls=[ToolCall("write_file", {"path": ".gitignore", "content": "*.log\n"}, id="w1")]),
        Reply("build/ is no longer ignored"),
    )
    run(env, project, "--resume", session_id, "stop ignoring build/")
    assert (project / "build" / "keep.o").read_bytes() == b"\x00ignored\n"  # the turn did not touch it

    result = run(env, project, "--resume", session_id, "/undo")
    assert "to before turn 2" in result.stdout, result.stdout + result.stderr
    assert tree(project) == before
    assert (project / "build" / "keep.o").exists(), result.stdout
    assert (project / "build" / "keep.o").read_bytes() == b"\x00ignored\n"


def test_a_failed_and_a_stopped_turn_are_undone_and_a_bad_target_rewinds_nothing(
    home: Path, project: Path, server: OpenAIServer
) -> None:
    env, session_id, before = said_hello(home, project, server)
    server.enqueue(
        Reply(tool_calls=[ToolCall("write_file", {"path": "a.txt", "content": "a\n"}, id="w1")]),
        ErrorReply(401, "Incorrect API key provided", code="invalid_api_key"),
    )
    failed = codling("run", "--mode", "yolo", "--resume", session_id, "fails", env=env, cwd=project)
    assert failed.returncode == 1 and (project / "a.txt").exists(), failed.stderr
    server.enqueue(Reply(tool_calls=[ToolCall("write_file", {"path": "b.txt", "content": "b\n"}, id="w2")]))
    stopped = codling(
        "run", "--mode", "yolo", "--max-requests", "1", "--resume", session_id, "stopped", env=env, cwd=project
    )
    assert stopped.returncode == 3 and (project / "b.txt").exists(), stopped.stderr
    listing = run(env, project, "--resume", session_id, "/rewind").stdout
    assert "2. fails — changed `a.txt`" in listing and "3. stopped — changed `b.txt`" in listing, listing

    for bad, says in (("/rewind 9", "There is no turn 9"), ("/rewind 2.1 both", "A step can only be rewound")):
        assert says in run(env, project, "--resume", session_id, bad).stdout
    assert not [r for r in history(home, session_id) if r["kind"] == "rewind"]

    assert "before turn 3" in run(env, project, "--resume", session_id, "/undo").stdout
    assert not (project / "b.txt").exists() and (project / "a.txt").exists()
    assert "before turn 2" in run(env, project, "--resume", session_id, "/undo").stdout
    assert tree(project) == before


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_a_turn_ended_by_a_signal_is_undone_by_the_next_process(
    home: Path, project: Path, server: OpenAIServer, sig: signal.Signals
) -> None:
    env, session_id, before = said_hello(home, project, server)
    server.enqueue(
        Reply(tool_calls=[ToolCall("write_file", {"path": "a.txt", "content": "a\n"}, id="w1")]),
        Reply(text=["never ", "ends"], stall_after=1),  # the turn waits on the model after its write
    )
    process = subprocess.Popen(
        [*warm.codling(), "run", "--mode", "yolo", "--resume", session_id, "write then wait"],
        env=env,
        cwd=project,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        server.wait_for_requests(3, timeout=30)  # hi, the write, the request after it (stalled)
        assert (project / "a.txt").read_text() == "a\n"
        os.kill(warm.behind(process.pid), sig)
        process.wait(timeout=deadline(30))
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    [result_record] = [r for r in history(home, session_id) if r["kind"] == "tool_result"]
    assert isinstance(result_record.get("checkpoint"), int)  # the write's step is recorded, whatever came after

    result = run(env, project, "--resume", session_id, "/undo")
    if sig == signal.SIGKILL:
        # Killed, the turn took no checkpoint at its end: what it wrote after its last step's checkpoint cannot
        # be told from a change made outside codling since, so where no one can confirm, nothing is overwritten.
        assert "Not rewound: 1 file(s) changed outside codling" in result.stdout and "a.txt" in result.stdout
        assert (project / "a.txt").read_text() == "a\n"
        forced = subprocess.run(
            [*warm.codling(), "sessions", "rewind", session_id, "--to", "2", "--yes", "--force"],
            env=env,
            cwd=project,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=deadline(60),
        )
        assert forced.returncode == 0, forced.stdout + forced.stderr
        assert "Rewound the code and conversation to before turn 2" in forced.stdout
    else:
        assert "Rewound the code and conversation to before turn 2" in result.stdout, result.stdout + result.stderr
    assert tree(project) == before


def test_on_a_terminal_undo_asks_naming_the_outside_change_and_overwrites_it_once_allowed(
    home: Path, project: Path, server: OpenAIServer
) -> None:
    prepare(project, with_git=True)
    env = model_env(home, server)
    before = tree(project)
    enqueue_turn(server, turn_calls()[0][1], 1)
    session_id = first_run(env, project, "edit app")
    (project / "README.md").write_text("# mine\n")
    outside = tree(project)

    shown = on_a_terminal(env, project, b"n\n", "run", "--resume", session_id, "/undo")
    assert "overwriting 1 file(s) changed outside codling" in shown, shown
    assert "Nothing was rewound." in shown, shown
    assert tree(project) == outside

    shown = on_a_terminal(env, project, b"y\n", "run", "--resume", session_id, "/undo")
    assert "Rewound the code and conversation to before turn 1" in shown, shown
    assert tree(project) == before
    assert [r["scope"] for r in history(home, session_id) if r["kind"] == "rewind"] == ["both"]


def swap_src_for_a_link(home: Path, project: Path, server: OpenAIServer, elsewhere: Path) -> tuple[str, str]:
    """A session whose second turn replaces the directory src/ by a link to ``elsewhere`` (outside the
    workspace, holding an app.py of its own); the session's id and the outside file's content."""
    elsewhere.mkdir()
    secret = "outside the workspace\n"
    (elsewhere / "app.py").write_text(secret)
    env = model_env(home, server)
    server.enqueue(Reply("hello"))
    session_id = first_run(env, project, "hi")
    command = f"rm -r src && ln -s {elsewhere} src"
    server.enqueue(Reply(tool_calls=[ToolCall("run_command", {"command": command}, id="c1")]), Reply("done"))
    run(env, project, "--resume", session_id, "swap src for a link")
    return session_id, secret


@pytest.mark.parametrize("with_git", [True, False], ids=["git", "no-git"])
def test_a_rewind_through_a_link_leading_outside_is_refused_and_writes_nothing_there(
    home: Path, tmp_path: Path, project: Path, server: OpenAIServer, with_git: bool
) -> None:
    prepare(project, with_git=with_git)
    elsewhere = tmp_path / "elsewhere"
    session_id, secret = swap_src_for_a_link(home, project, server, elsewhere)
    swapped = tree(project)
    result = run(model_env(home, server), project, "--resume", session_id, "/rewind 2 code")
    assert "symbolic link leading outside the workspace" in result.stdout, result.stdout + result.stderr
    assert (elsewhere / "app.py").read_text() == secret and sorted(os.listdir(elsewhere)) == ["app.py"]
    assert tree(project) == swapped
    assert not [r for r in history(home, session_id) if r["kind"] == "rewind"]


def test_in_git_a_checkpoint_does_not_read_through_a_linked_directory(
    home: Path, tmp_path: Path, project: Path, server: OpenAIServer
) -> None:
    prepare(project, with_git=True)
    session_id, secret = swap_src_for_a_link(home, project, server, tmp_path / "elsewhere")
    log = (home / "sessions" / session_id / "checkpoints" / "log.jsonl").read_text()
    assert '"src":["link"' in log  # the link itself is checkpointed
    assert hashlib.sha256(secret.encode()).hexdigest() not in log


def test_a_file_grown_past_the_checkpoint_limit_outside_is_not_overwritten(
    home: Path, project: Path, server: OpenAIServer
) -> None:
    """Past 10 MiB a file is not covered: one the user grows past it is named as changed outside, not silently
    put back to its covered size."""
    (project / "data.bin").write_bytes(b"b" * (5 * 1024 * 1024))
    prepare(project, with_git=True)
    env = model_env(home, server)
    server.enqueue(
        Reply(tool_calls=[ToolCall("write_file", {"path": "x.txt", "content": "x\n"}, id="w1")]), Reply("ok")
    )
    session_id = first_run(env, project, "make x")
    with (project / "data.bin").open("ab") as data:
        data.write(b"user data " * 700_000)
    grown = hashlib.sha256((project / "data.bin").read_bytes()).hexdigest()

    result = run(env, project, "--resume", session_id, "/undo")
    assert "Not rewound: 1 file(s) changed outside codling" in result.stdout and "`data.bin`" in result.stdout
    assert hashlib.sha256((project / "data.bin").read_bytes()).hexdigest() == grown
    assert (project / "x.txt").exists()


def test_the_rewind_listing_names_what_a_command_changed(home: Path, project: Path, server: OpenAIServer) -> None:
    prepare(project, with_git=True)
    env = model_env(home, server)
    command = "sed -i s/demo/DEMO/ README.md && rm LICENSE && printf 'n\\n' > new.txt"
    server.enqueue(Reply(tool_calls=[ToolCall("run_command", {"command": command}, id="r1")]), Reply("ok"))
    session_id = first_run(env, project, "by a command")
    listing = run(env, project, "--resume", session_id, "/rewind").stdout
    assert "1.1 Run sed" in listing, listing  # the step is listed
    [turn] = [line for line in listing.splitlines() if line.startswith("1. by a command")]
    for name in ("README.md", "LICENSE", "new.txt"):
        assert f"`{name}`" in turn, listing


def test_a_delegate_is_a_step_whose_sub_agent_changes_are_rewound_together(
    home: Path, project: Path, server: OpenAIServer
) -> None:
    env, session_id, before = said_hello(home, project, server)
    server.enqueue(
        Reply(tool_calls=[ToolCall("write_file", {"path": "mine.txt", "content": "m\n"}, id="w0")]),
        Reply(tool_calls=[ToolCall("delegate", {"agent": "coder", "task": "write sub.txt"}, id="d1")]),
        Reply(tool_calls=[ToolCall("write_file", {"path": "sub.txt", "content": "s\n"}, id="w1")]),  # the coder's
        Reply(tool_calls=[ToolCall("run_command", {"command": "echo more >> sub.txt && rm LICENSE"}, id="r1")]),
        Reply("sub done"),
        Reply("main done"),
    )
    run(env, project, "--resume", session_id, "delegate it")
    after = tree(project)
    assert "mine.txt" in after and "sub.txt" in after and "LICENSE" not in after
    listing = run(env, project, "--resume", session_id, "/rewind").stdout
    assert "2.1 Write mine.txt" in listing and "2.2 Delegate to the coder" in listing, listing

    result = run(env, project, "--resume", session_id, "/rewind 2.2 code")
    assert "2 file(s) changed back: `LICENSE`, `sub.txt`" in result.stdout, result.stdout + result.stderr
    expected = dict(before)
    expected["mine.txt"] = after["mine.txt"]
    assert tree(project) == expected
    run(env, project, "--resume", session_id, "/undo")
    assert tree(project) == before


def test_a_rewind_names_a_changed_file_it_cannot_put_back(home: Path, project: Path, server: OpenAIServer) -> None:
    (project / "big.bin").write_bytes(b"a" * (11 * 1024 * 1024))
    prepare(project, with_git=True)
    env = model_env(home, server)
    server.enqueue(Reply("hello"))
    session_id = first_run(env, project, "hi")
    server.enqueue(
        Reply(tool_calls=[ToolCall("run_command", {"command": "printf x >> big.bin"}, id="c1")]), Reply("ok")
    )
    run(env, project, "--resume", session_id, "append to the data")
    log = (home / "sessions" / session_id / "checkpoints" / "log.jsonl").read_text()
    assert "big.bin" in log  # the keeper knows it is not covered

    result = run(env, project, "--resume", session_id, "/rewind 2 code")
    said = result.stdout + result.stderr
    assert "Rewound the code to before turn 2" in said, said
    assert (project / "big.bin").stat().st_size == 11 * 1024 * 1024 + 1  # as the turn left it (not covered)
    assert "big.bin" in said, said  # it says "No file will change: the code is as it was then."
