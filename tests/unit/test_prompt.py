from __future__ import annotations

import os
import shutil
import subprocess
from importlib import resources
from pathlib import Path

import pytest

from codling.brain.context.layout import turn_context
from codling.brain.context.ledger_entries import TurnRecap, TurnStep
from codling.brain.prompt import InstructionFile, Instructions, find_project_instructions, system_prompt
from tests.fakes.deadlines import deadline

GIT = shutil.which("git")
BASE = resources.files("codling.brain").joinpath("prompts/system.md").read_text(encoding="utf-8").rstrip()


@pytest.fixture(autouse=True)
def codling_home(home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private, empty CODLING_HOME: the user's own AGENTS.md must not leak into these tests."""
    monkeypatch.setenv("CODLING_HOME", str(home))
    return home


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


def found(*files: tuple[Path, str], left_out: tuple[tuple[Path, str], ...] = ()) -> Instructions:
    """Project instructions as ``find_project_instructions`` returns them: (path, text) pairs, outermost first."""
    return Instructions(
        tuple(InstructionFile(path, text) for path, text in files),
        tuple(InstructionFile(path, text) for path, text in left_out),
    )


def test_instructions_from_the_repository_root_down_to_cwd(tree: Path) -> None:
    (tree / ".git").mkdir()
    (tree / "pkg" / "sub" / "AGENTS.md").write_text("Innermost.\n")
    assert find_project_instructions(tree / "pkg" / "sub") == found(
        (tree / "AGENTS.md", "Use tabs.\n"),
        (tree / "pkg" / "AGENTS.md", "Run make test in pkg.\n"),
        (tree / "pkg" / "sub" / "AGENTS.md", "Innermost.\n"),
    )
    assert find_project_instructions(tree) == found((tree / "AGENTS.md", "Use tabs.\n"))


@pytest.mark.skipif(GIT is None, reason="git is not installed")
def test_instructions_in_a_real_git_repository(tree: Path) -> None:
    assert GIT is not None
    subprocess.run([GIT, "init", "-q", str(tree)], check=True, timeout=deadline(30))
    assert find_project_instructions(tree / "pkg" / "sub") == found(
        (tree / "AGENTS.md", "Use tabs.\n"),
        (tree / "pkg" / "AGENTS.md", "Run make test in pkg.\n"),
    )


def test_a_git_file_marks_the_root_too(tree: Path) -> None:
    # Worktrees and submodules have a .git file, not a directory.
    (tree / "pkg" / ".git").write_text("gitdir: ../.git/modules/pkg\n")
    (tree / ".git").mkdir()
    assert find_project_instructions(tree / "pkg" / "sub") == found(
        (tree / "pkg" / "AGENTS.md", "Run make test in pkg.\n")
    )


def test_outside_a_repository_only_cwd_counts(tree: Path) -> None:
    assert find_project_instructions(tree / "pkg") == found((tree / "pkg" / "AGENTS.md", "Run make test in pkg.\n"))
    assert find_project_instructions(tree / "pkg" / "sub") == found()


def test_empty_and_unreadable_instructions_are_skipped(tree: Path) -> None:
    (tree / ".git").mkdir()
    (tree / "AGENTS.md").write_text(" \n")
    (tree / "pkg" / "AGENTS.md").unlink()
    (tree / "pkg" / "AGENTS.md").mkdir()  # not a file
    (tree / "pkg" / "sub" / "AGENTS.md").symlink_to(tree / "missing.md")  # a dangling link
    assert find_project_instructions(tree / "pkg" / "sub") == found()


def test_long_instructions_are_cut_with_a_note(tree: Path) -> None:
    (tree / ".git").mkdir()
    line = "x" * 99 + "\n"
    (tree / "AGENTS.md").write_text(line * 250)  # 25,000 bytes
    assert find_project_instructions(tree) == found(
        (tree / "AGENTS.md", line * 199 + "x" * 99 + "\n[… cut: only the first 20,000 bytes are shown]")
    )
    (tree / "AGENTS.md").write_bytes(b"y" * 19_999 + "é".encode() + b"z" * 100)  # é is cut in half
    assert find_project_instructions(tree) == found(
        (tree / "AGENTS.md", "y" * 19_999 + "\n[… cut: only the first 20,000 bytes are shown]")
    )


def test_system_prompt_includes_the_instructions(tree: Path) -> None:
    (tree / ".git").mkdir()
    prompt = system_prompt(tree / "pkg")
    head, environment = prompt.split("\n\n# Environment\n")
    assert head == (
        f"{BASE}\n\n"
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


def summary(n: int, request: str, **kwargs: object) -> TurnRecap:
    return TurnRecap(n, request, **kwargs)  # type: ignore[arg-type]


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
    assert find_project_instructions(tree / "pkg" / "sub") == found()


def test_instructions_may_link_within_the_repository_but_not_through_a_hard_link(tree: Path, tmp_path: Path) -> None:
    (tree / ".git").mkdir()
    (tree / "CLAUDE.md").write_text("Use tabs.\n")
    (tree / "AGENTS.md").unlink()
    (tree / "AGENTS.md").symlink_to("CLAUDE.md")  # the common case: one file for several agents
    (tree / "pkg" / "AGENTS.md").unlink()
    outside = tmp_path / "elsewhere.md"
    outside.write_text("from outside\n")
    os.link(outside, tree / "pkg" / "AGENTS.md")
    assert find_project_instructions(tree / "pkg") == found((tree / "AGENTS.md", "Use tabs.\n"))


def test_instructions_linked_into_a_sibling_whose_name_extends_the_repository_s_are_not_read(tmp_path: Path) -> None:
    repo, secrets = tmp_path / "ws", tmp_path / "ws-secrets"
    (repo / ".git").mkdir(parents=True)
    secrets.mkdir()
    (secrets / "AGENTS.md").write_text("OPENAI_API_KEY=sk-live-0123456789\n")
    (repo / "AGENTS.md").symlink_to(secrets / "AGENTS.md")
    assert find_project_instructions(repo) == found()


# --- other agents' instruction files, the user's own, the total cap ------------------------------------------


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """An empty repository: root/ (with .git), root/pkg/ and root/pkg/sub/."""
    root = tmp_path.resolve() / "root"
    (root / ".git").mkdir(parents=True)
    (root / "pkg" / "sub").mkdir(parents=True)
    return root


@pytest.mark.parametrize("name", ["AGENTS.md", "CLAUDE.md", "GEMINI.md"])
def test_each_kind_of_instruction_file_is_found_in_every_directory(repo: Path, name: str) -> None:
    for directory, text in ((repo, "root\n"), (repo / "pkg", "pkg\n"), (repo / "pkg" / "sub", "sub\n")):
        (directory / name).write_text(text)
    found_files = find_project_instructions(repo / "pkg" / "sub")
    assert found_files == found(
        (repo / name, "root\n"), (repo / "pkg" / name, "pkg\n"), (repo / "pkg" / "sub" / name, "sub\n")
    )
    assert [(f.kind, f.size, f.user) for f in found_files.files] == [
        (name, 5, False),
        (name, 4, False),
        (name, 4, False),
    ]


def test_the_copilot_file_is_found_at_the_repository_root(repo: Path) -> None:
    (repo / ".github").mkdir()
    (repo / ".github" / "copilot-instructions.md").write_text("Prefer small functions.\n")
    found_files = find_project_instructions(repo / "pkg")
    assert found_files == found((repo / ".github" / "copilot-instructions.md", "Prefer small functions.\n"))
    assert found_files.files[0].kind == ".github/copilot-instructions.md"


def test_the_copilot_file_counts_at_the_repository_root_only(repo: Path) -> None:
    (repo / "pkg" / ".github").mkdir()
    (repo / "pkg" / ".github" / "copilot-instructions.md").write_text("not the root's\n")
    assert find_project_instructions(repo / "pkg") == found()


def test_the_first_file_found_in_a_directory_wins(repo: Path) -> None:
    names = ["AGENTS.md", "CLAUDE.md", "GEMINI.md", ".github/copilot-instructions.md"]
    for directory in (repo, repo / "pkg"):
        (directory / ".github").mkdir()
        for name in names:
            (directory / name).write_text(f"{'pkg' if directory != repo else 'root'}'s {name}\n")
    seen = []
    for name in names:  # take away the winner each time
        seen.append(find_project_instructions(repo / "pkg"))
        (repo / name).unlink()
        (repo / "pkg" / name).unlink()
    pkg = repo / "pkg"
    assert seen == [
        found((repo / "AGENTS.md", "root's AGENTS.md\n"), (pkg / "AGENTS.md", "pkg's AGENTS.md\n")),
        found((repo / "CLAUDE.md", "root's CLAUDE.md\n"), (pkg / "CLAUDE.md", "pkg's CLAUDE.md\n")),
        found((repo / "GEMINI.md", "root's GEMINI.md\n"), (pkg / "GEMINI.md", "pkg's GEMINI.md\n")),
        # pkg's own .github/copilot-instructions.md is not looked for
        found((repo / ".github" / "copilot-instructions.md", "root's .github/copilot-instructions.md\n")),
    ]


def test_nested_directories_of_different_kinds_come_outermost_first(repo: Path) -> None:
    (repo / "CLAUDE.md").write_text("root\n")
    (repo / "pkg" / "GEMINI.md").write_text("pkg\n")
    (repo / "pkg" / "CLAUDE.md").write_bytes(b"")  # empty: the directory's next name is looked for
    (repo / "pkg" / "sub" / "AGENTS.md").write_text("sub\n")
    assert find_project_instructions(repo / "pkg" / "sub") == found(
        (repo / "CLAUDE.md", "root\n"),
        (repo / "pkg" / "GEMINI.md", "pkg\n"),
        (repo / "pkg" / "sub" / "AGENTS.md", "sub\n"),
    )


def test_the_user_s_own_file_comes_first(repo: Path, codling_home: Path) -> None:
    (codling_home / "AGENTS.md").write_text("Answer in British English.\n")
    (codling_home / "CLAUDE.md").write_text("only AGENTS.md is looked for in CODLING_HOME\n")
    (repo / "CLAUDE.md").write_text("Use tabs.\n")
    assert find_project_instructions(repo / "pkg") == Instructions(
        (
            InstructionFile(codling_home / "AGENTS.md", "Answer in British English.\n", user=True),
            InstructionFile(repo / "CLAUDE.md", "Use tabs.\n"),
        )
    )
    head, _ = system_prompt(repo / "pkg").split("\n\n# Environment\n")
    assert head == (
        f"{BASE}\n\n"
        "# Project instructions (AGENTS.md, CLAUDE.md)\n"
        "The user's own instructions for every project first, then the project's, outermost directory first "
        "(nearer ones take precedence). Follow them unless the user says otherwise.\n\n"
        f"## {codling_home / 'AGENTS.md'}\n\nAnswer in British English.\n\n"
        f"## {repo / 'CLAUDE.md'}\n\nUse tabs."
    )


def test_the_user_s_own_file_alone(tmp_path: Path, codling_home: Path) -> None:
    (codling_home / "AGENTS.md").write_text("Be brief.\n")
    head, _ = system_prompt(tmp_path).split("\n\n# Environment\n")
    assert head == (
        f"{BASE}\n\n"
        "# Project instructions (AGENTS.md)\n"
        "The user's own instructions for agents, for every project. Follow them unless the user says otherwise.\n\n"
        f"## {codling_home / 'AGENTS.md'}\n\nBe brief."
    )


def test_the_user_s_own_file_is_read_only_as_a_plain_file_in_codling_home(
    repo: Path, codling_home: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "dotfiles.md"
    elsewhere.write_text("outside CODLING_HOME\n")
    (codling_home / "AGENTS.md").symlink_to(elsewhere)
    assert find_project_instructions(repo) == found()
    (codling_home / "AGENTS.md").unlink()
    (codling_home / "shared.md").write_text("Be brief.\n")
    (codling_home / "AGENTS.md").symlink_to("shared.md")
    assert find_project_instructions(repo) == Instructions(
        (InstructionFile(codling_home / "AGENTS.md", "Be brief.\n", user=True),)
    )


def test_agents_md_linked_to_claude_md_is_read_once(repo: Path) -> None:
    (repo / "CLAUDE.md").write_text("Use tabs.\n")
    (repo / "AGENTS.md").symlink_to("CLAUDE.md")
    (repo / "pkg" / "AGENTS.md").symlink_to("../CLAUDE.md")  # the root's file again: taken once
    (repo / "pkg" / "CLAUDE.md").write_text("not read: pkg's AGENTS.md came first\n")
    (repo / "pkg" / "sub" / "CLAUDE.md").write_text("Run make in sub.\n")
    (repo / "pkg" / "sub" / "AGENTS.md").symlink_to("CLAUDE.md")
    assert find_project_instructions(repo / "pkg" / "sub") == found(
        (repo / "AGENTS.md", "Use tabs.\n"), (repo / "pkg" / "sub" / "AGENTS.md", "Run make in sub.\n")
    )


def test_a_link_out_of_the_repository_is_ignored(repo: Path, tmp_path: Path) -> None:
    secret = tmp_path / "notes.md"
    secret.write_text("private notes\n")
    (repo / "CLAUDE.md").symlink_to(secret)
    (repo / "GEMINI.md").write_text("Use tabs.\n")  # the directory's next name
    (repo / "pkg" / "GEMINI.md").symlink_to(secret)
    assert find_project_instructions(repo / "pkg") == found((repo / "GEMINI.md", "Use tabs.\n"))


@pytest.mark.timeout(deadline(15))
def test_a_pipe_or_proc_named_claude_md_is_ignored(repo: Path) -> None:
    # A FIFO would block an ordinary open until a writer came; /proc/self/environ holds codling's keys.
    os.mkfifo(repo / "CLAUDE.md")
    (repo / "pkg" / "CLAUDE.md").symlink_to("/proc/self/environ")
    (repo / "pkg" / "GEMINI.md").write_text("Run make test in pkg.\n")
    assert find_project_instructions(repo / "pkg") == found((repo / "pkg" / "GEMINI.md", "Run make test in pkg.\n"))


def test_the_total_cap_keeps_the_nearest_files_and_names_what_it_left_out(repo: Path, codling_home: Path) -> None:
    user, root, pkg, sub = "u" * 5_000, "r" * 15_000, "p" * 10_000, "s" * 10_000
    (codling_home / "AGENTS.md").write_text(user)
    (repo / "AGENTS.md").write_text(root)
    (repo / "pkg" / "CLAUDE.md").write_text(pkg)
    (repo / "pkg" / "sub" / "GEMINI.md").write_text(sub)
    # Innermost first: sub and pkg fit (20,000 bytes), the root's does not (35,000), the user's still does.
    assert find_project_instructions(repo / "pkg" / "sub") == Instructions(
        (
            InstructionFile(codling_home / "AGENTS.md", user, user=True),
            InstructionFile(repo / "pkg" / "CLAUDE.md", pkg),
            InstructionFile(repo / "pkg" / "sub" / "GEMINI.md", sub),
        ),
        left_out=(InstructionFile(repo / "AGENTS.md", root),),
    )
    head, _ = system_prompt(repo / "pkg" / "sub").split("\n\n# Environment\n")
    assert head == (
        f"{BASE}\n\n"
        "# Project instructions (AGENTS.md, CLAUDE.md, GEMINI.md)\n"
        "The user's own instructions for every project first, then the project's, outermost directory first "
        "(nearer ones take precedence). Follow them unless the user says otherwise.\n\n"
        f"## {codling_home / 'AGENTS.md'}\n\n{user}\n\n"
        f"## {repo / 'pkg' / 'CLAUDE.md'}\n\n{pkg}\n\n"
        f"## {repo / 'pkg' / 'sub' / 'GEMINI.md'}\n\n{sub}\n\n"
        "[Left out, to keep all instructions under 32,000 bytes (the nearest directories' files come first): "
        f"{repo / 'AGENTS.md'}]"
    )
