from __future__ import annotations

import os
from pathlib import Path

import pytest

from codling.errors import PathError
from codling.tools.workspace import Workspace, read_plain_file


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "proj" / "src").mkdir(parents=True)
    (tmp_path / "proj" / "src" / "a.py").write_text("a\n")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.md").write_text("n\n")
    (tmp_path / "secret.txt").write_text("s\n")
    return tmp_path


def test_roots_are_resolved_and_deduplicated(tree: Path) -> None:
    ws = Workspace(tree / "proj" / "src" / "..", [tree / "other", tree / "proj"])
    assert ws.cwd == tree / "proj"
    assert ws.roots == (tree / "proj", tree / "other")


def test_relative_paths_resolve_from_cwd(tree: Path) -> None:
    ws = Workspace(tree / "proj")
    assert ws.resolve("src/a.py") == tree / "proj" / "src" / "a.py"
    assert ws.resolve("./src/../src/a.py") == tree / "proj" / "src" / "a.py"
    assert ws.resolve(".") == tree / "proj"
    assert ws.resolve("src/new/file.py") == tree / "proj" / "src" / "new" / "file.py"  # need not exist


def test_absolute_path_inside_is_accepted(tree: Path) -> None:
    ws = Workspace(tree / "proj")
    assert ws.resolve(str(tree / "proj" / "src" / "a.py")) == tree / "proj" / "src" / "a.py"


def test_path_outside_is_refused_with_actionable_message(tree: Path) -> None:
    ws = Workspace(tree / "proj")
    with pytest.raises(PathError) as e:
        ws.resolve("../secret.txt")
    assert str(e.value) == f"path '../secret.txt' is outside the workspace ({tree / 'proj'}); use a path inside it"
    with pytest.raises(PathError, match="outside the workspace"):
        ws.resolve(str(tree / "secret.txt"))
    with pytest.raises(PathError, match="outside the workspace"):
        ws.resolve("/etc/passwd")


def test_tilde_is_not_expanded(tree: Path) -> None:
    ws = Workspace(tree / "proj")
    assert ws.resolve("~/x") == tree / "proj" / "~" / "x"


def test_additional_directories_are_inside(tree: Path) -> None:
    ws = Workspace(tree / "proj", [tree / "other"])
    assert ws.resolve("../other/notes.md") == tree / "other" / "notes.md"
    assert ws.resolve(str(tree / "other")) == tree / "other"
    with pytest.raises(PathError) as e:
        ws.resolve("../secret.txt")
    assert f"({tree / 'proj'}, {tree / 'other'})" in str(e.value)


def test_symlink_escape_is_refused(tree: Path) -> None:
    os.symlink(tree / "secret.txt", tree / "proj" / "link.txt")
    os.symlink(tree, tree / "proj" / "up")
    ws = Workspace(tree / "proj")
    with pytest.raises(PathError) as e:
        ws.resolve("link.txt")
    assert str(e.value) == (
        f"path 'link.txt' leads outside the workspace through a symbolic link (to {tree / 'secret.txt'}); "
        "use a path inside the workspace"
    )
    with pytest.raises(PathError, match="symbolic link"):
        ws.resolve("up/secret.txt")


def test_symlink_inside_workspace_is_followed(tree: Path) -> None:
    os.symlink(tree / "proj" / "src" / "a.py", tree / "proj" / "alias.py")
    ws = Workspace(tree / "proj")
    assert ws.resolve("alias.py") == tree / "proj" / "src" / "a.py"


def test_symlink_loop_is_a_path_error(tree: Path) -> None:
    os.symlink(tree / "proj" / "loop", tree / "proj" / "loop")
    ws = Workspace(tree / "proj")
    with pytest.raises(PathError):
        ws.resolve("loop")


@pytest.mark.parametrize("bad", ["", "   ", "a\0b"])
def test_empty_or_nul_path_is_refused(tree: Path, bad: str) -> None:
    with pytest.raises(PathError):
        Workspace(tree / "proj").resolve(bad)


def test_display(tree: Path) -> None:
    ws = Workspace(tree / "proj", [tree / "other"])
    assert ws.display(tree / "proj") == "."
    assert ws.display(tree / "proj" / "src" / "a.py") == "src/a.py"
    assert ws.display(tree / "other" / "notes.md") == str(tree / "other" / "notes.md")


# -- a sibling whose name starts with the workspace's (ws and ws-secrets) ----------------------------------------


@pytest.fixture
def siblings(tmp_path: Path) -> tuple[Path, Path]:
    """tmp/ws (the workspace, with links into its sibling) and tmp/ws-secrets (whose name starts with "ws")."""
    ws, secrets = tmp_path / "ws", tmp_path / "ws-secrets"
    (ws / "sub").mkdir(parents=True)
    (ws / "a.py").write_text("a\n")
    secrets.mkdir()
    (secrets / "key.txt").write_text("sk-live-0123456789\n")
    (ws / "key-link.txt").symlink_to(secrets / "key.txt")
    (ws / "secrets-dir").symlink_to(secrets)
    return ws, secrets


def test_a_sibling_whose_name_extends_the_workspace_s_is_not_inside_it(siblings: tuple[Path, Path]) -> None:
    ws, secrets = siblings
    workspace = Workspace(ws)
    assert [workspace.contains(p) for p in (ws / "a.py", ws, secrets, secrets / "key.txt")] == [
        True,
        True,
        False,
        False,
    ]


@pytest.mark.parametrize(
    "typed", ["../ws-secrets/key.txt", "sub/../../ws-secrets/key.txt", "../ws-secrets", "{secrets}/key.txt"]
)
def test_a_path_into_a_sibling_whose_name_extends_the_workspace_s_is_refused(
    siblings: tuple[Path, Path], typed: str
) -> None:
    ws, secrets = siblings
    typed = typed.format(secrets=secrets)  # (the absolute form)
    with pytest.raises(PathError) as e:
        Workspace(ws).resolve(typed)
    assert str(e.value) == f"path '{typed}' is outside the workspace ({ws}); use a path inside it"


@pytest.mark.parametrize("typed", ["key-link.txt", "secrets-dir/key.txt"])
def test_a_symlink_into_a_sibling_whose_name_extends_the_workspace_s_is_refused(
    siblings: tuple[Path, Path], typed: str
) -> None:
    ws, secrets = siblings
    with pytest.raises(PathError) as e:
        Workspace(ws).resolve(typed)
    assert str(e.value) == (
        f"path '{typed}' leads outside the workspace through a symbolic link (to {secrets / 'key.txt'}); "
        "use a path inside the workspace"
    )


def test_a_granted_sibling_is_inside_and_displayed_absolute(siblings: tuple[Path, Path]) -> None:
    ws, secrets = siblings
    workspace = Workspace(ws, [secrets])
    assert workspace.resolve("../ws-secrets/key.txt") == secrets / "key.txt"
    assert [workspace.display(p) for p in (ws / "a.py", secrets, secrets / "key.txt")] == [
        "a.py",
        str(secrets),
        str(secrets / "key.txt"),
    ]


def test_a_plain_file_linked_into_a_sibling_whose_name_extends_the_top_s_is_not_read(
    siblings: tuple[Path, Path],
) -> None:
    ws, secrets = siblings
    (ws / "inside.md").write_text("inside\n")
    (ws / "AGENTS.md").symlink_to(ws / "inside.md")
    (ws / "LINKED.md").symlink_to(secrets / "key.txt")
    assert [read_plain_file(ws / name, 100, inside=ws) for name in ("AGENTS.md", "LINKED.md")] == [b"inside\n", None]
