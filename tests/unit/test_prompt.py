from __future__ import annotations

import os
import shutil
import subprocess
from importlib import resources
from pathlib import Path

import pytest

from codling.brain.context.layout import turn_context
from codling.brain.context.turns import TurnExecutionSummary, TurnStep
from codling.brain.prompt import find_project_instructions, system_prompt

GIT = shutil.which("git")


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """outside/AGENTS.md above the repository; repo/ (the root), repo/pkg/ and repo/pkg/sub/ below it."""
    outside = tmp_path.resolve() / "outside"
    sub = outside / "repo" / "pkg" / "sub"
    sub.mkdir(parents=True)
    (outside / "AGENTS.md").write_text("not part of the repository\n")
    (outside / "repo" / "AGENTS.md").write_text("Use tabs.\n")
    (outside / "repo" / "pkg" / "AGENTS.md").write_text("Run make test in pkg.\n")
    return outside / "repo"


def test_instructions_from_the_repository_root_down_to_cwd(tree: Path) -> None:
    (tree / ".git").mkdir()
    (tree / "pkg" / "sub" / "AGENTS.md").write_text("Innermost.\n")
    assert find_project_instructions(tree / "pkg" / "sub") == [
        (tree / "AGENTS.md", "Use tabs.\n"),
        (tree / "pkg" / "AGENTS.md", "Run make test in pkg.\n"),
        (tree / "pkg" / "sub" / "AGENTS.md", "Innermost.\n"),
    ]
    assert find_project_instructions(tree) == [(tree / "AGENTS.md", "Use tabs.\n")]


@pytest.mark.skipif(GIT is None, reason="git is not installed")
def test_instructions_in_a_real_git_repository(tree: Path) -> None:
    assert GIT is not None
    subprocess.run([GIT, "init", "-q", str(tree)], check=True, timeout=30)
    assert find_project_instructions(tree / "pkg" / "sub") == [
        (tree / "AGENTS.md", "Use tabs.\n"),
        (tree / "pkg" / "AGENTS.md", "Run make test in pkg.\n"),
    ]


def test_a_git_file_marks_the_root_too(tree: Path) -> None:
    # Worktrees and submodules have a .git file, not a directory.
    (tree / "pkg" / ".git").write_text("gitdir: ../.git/modules/pkg\n")
    (tree / ".git").mkdir()
    assert find_project_instructions(tree / "pkg" / "sub") == [(tree / "pkg" / "AGENTS.md", "Run make test in pkg.\n")]


def test_outside_a_repository_only_cwd_counts(tree: Path) -> None:
    assert find_project_instructions(tree / "pkg") == [(tree / "pkg" / "AGENTS.md", "Run make test in pkg.\n")]
    assert find_project_instructions(tree / "pkg" / "sub") == []


def test_empty_and_unreadable_instructions_are_skipped(tree: Path) -> None:
    (tree / ".git").mkdir()
    (tree / "AGENTS.md").write_text(" \n")
    (tree / "pkg" / "AGENTS.md").unlink()
    (tree / "pkg" / "AGENTS.md").mkdir()  # not a file
    (tree / "pkg" / "sub" / "AGENTS.md").symlink_to(tree / "missing.md")  # a dangling link
    assert find_project_instructions(tree / "pkg" / "sub") == []


def test_long_instructions_are_cut_with_a_note(tree: Path) -> None:
    (tree / ".git").mkdir()
    line = "x" * 99 + "\n"
    (tree / "AGENTS.md").write_text(line * 250)  # 25,000 bytes
    (tree / "pkg" / "AGENTS.md").write_bytes(b"y" * 19_999 + "é".encode() + b"z" * 100)  # é is cut in half
    assert find_project_instructions(tree / "pkg") == [
        (tree / "AGENTS.md", line * 199 + "x" * 99 + "\n[… cut: only the first 20,000 bytes are shown]"),
        (tree / "pkg" / "AGENTS.md", "y" * 19_999 + "\n[… cut: only the first 20,000 bytes are shown]"),
    ]


def test_system_prompt_includes_the_instructions(tree: Path) -> None:
    (tree / ".git").mkdir()
    prompt = system_prompt(tree / "pkg")
    base = resources.files("codling.brain").joinpath("prompts/system.md").read_text(encoding="utf-8").rstrip()
    head, environment = prompt.split("\n\n# Environment\n")
    assert head == (
        f"{base}\n\n"
        "# Project instructions (AGENTS.md)\n"
        "The project's own instructions for agents, outermost directory first (nearer ones take precedence). "
        "Follow them unless the user says otherwise.\n\n"
        f"## {tree / 'AGENTS.md'}\n\nUse tabs.\n\n"
        f"## {tree / 'pkg' / 'AGENTS.md'}\n\nRun make test in pkg."
    )
    assert environment.startswith(f"- Working directory: {tree / 'pkg'}\n")


def test_system_prompt_without_instructions(tmp_path: Path) -> None:
    prompt = system_prompt(tmp_path)
    assert "# Project instructions" not in prompt
    assert f"\n\n# Environment\n- Working directory: {tmp_path}\n" in prompt


# --- turn_context ------------------------------------------------------------------------------------------

CWD = Path("/p")


def summary(n: int, request: str, **kwargs: object) -> TurnExecutionSummary:
    return TurnExecutionSummary(n, request, **kwargs)  # type: ignore[arg-type]


def test_turn_context_is_empty_with_nothing_to_say() -> None:
    assert turn_context((), (), CWD) == ""


def test_turn_context_with_recent_files_and_summaries() -> None:
    summaries = [
        summary(1, "look around", steps=(TurnStep("List .", "done", (CWD,)),), reply="It is a small project."),
        summary(
            2,
            "fix the test",
            steps=(TurnStep("Edit src/b.py", "done", (CWD / "src/b.py",)), TurnStep("Run `pytest -q`", "exit 1")),
            files_changed=(CWD / "src/b.py",),
            commands=("`pytest -q` → exit 1",),
            reply="Fixed; one test still fails.",
        ),
        summary(3, "split it", error="The model provider failed (m): timeout"),
    ]
    recent = (CWD / "a.py", Path("/elsewhere/c.py"), CWD / "src/b.py")
    assert turn_context(recent, summaries, CWD) == (
        "Recently edited files (most recent last): a.py, /elsewhere/c.py, src/b.py\n\n"
        "# Earlier turns (one line each)\n"
        "Turn 1: look around — It is a small project.\n\n"
        "# Prior turn summary\n"
        "Turn 2 — request: fix the test\n"
        "Steps:\n"
        "- Edit src/b.py (done)\n"
        "- Run `pytest -q` (exit 1)\n"
        "Files changed: src/b.py\n"
        "Reply: Fixed; one test still fails.\n\n"
        "# Last turn summary\n"
        "Turn 3 — request: split it\n"
        "Error: The model provider failed (m): timeout"
    )


def test_turn_context_with_one_summary_only() -> None:
    assert turn_context((), [summary(1, "hi", reply="Hello.")], CWD) == (
        "# Last turn summary\nTurn 1 — request: hi\nReply: Hello."
    )
    assert turn_context([CWD / "x.py"], (), CWD) == "Recently edited files (most recent last): x.py"


def test_instructions_never_come_from_outside_the_repository(tree: Path, tmp_path: Path) -> None:
    # A cloned repository can ship AGENTS.md as a symbolic link: to codling's own environment (its API keys),
    # to a private key, to a device or a pipe. None of it may reach the system prompt, nor block it.
    (tree / ".git").mkdir()
    secret = tmp_path / "id_rsa"
    secret.write_text("PRIVATE KEY\n")
    (tree / "AGENTS.md").unlink()
    (tree / "AGENTS.md").symlink_to("/proc/self/environ")
    (tree / "pkg" / "AGENTS.md").unlink()
    (tree / "pkg" / "AGENTS.md").symlink_to(secret)
    os.mkfifo(tree / "pkg" / "sub" / "AGENTS.md")
    assert find_project_instructions(tree / "pkg" / "sub") == []


def test_instructions_may_link_within_the_repository_but_not_through_a_hard_link(tree: Path, tmp_path: Path) -> None:
    (tree / ".git").mkdir()
    (tree / "CLAUDE.md").write_text("Use tabs.\n")
    (tree / "AGENTS.md").unlink()
    (tree / "AGENTS.md").symlink_to("CLAUDE.md")  # the common case: one file for several agents
    (tree / "pkg" / "AGENTS.md").unlink()
    outside = tmp_path / "elsewhere.md"
    outside.write_text("from outside\n")
    os.link(outside, tree / "pkg" / "AGENTS.md")
    assert find_project_instructions(tree / "pkg") == [(tree / "AGENTS.md", "Use tabs.\n")]


def test_instructions_linked_into_a_sibling_whose_name_extends_the_repository_s_are_not_read(tmp_path: Path) -> None:
    repo, secrets = tmp_path / "ws", tmp_path / "ws-secrets"
    (repo / ".git").mkdir(parents=True)
    secrets.mkdir()
    (secrets / "AGENTS.md").write_text("OPENAI_API_KEY=sk-live-0123456789\n")
    (repo / "AGENTS.md").symlink_to(secrets / "AGENTS.md")
    assert find_project_instructions(repo) == []
