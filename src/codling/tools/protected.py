"""Protected paths: files whose change can make a program run without anyone choosing to run it.

Every edit, move (either end) or delete of one is asked about in ask and accept-edits, each time, and refused
in read-only (:class:`~codling.tools.approval.Permissions`). Three kinds, checked in this order:

* **In any directory** (:data:`PROTECTED_PATHS`): git's own files, direnv's ``.envrc``, editors' project
  settings and tasks, git hook managers' hooks and configuration (husky, pre-commit, lefthook), and other
  coding agents' settings (``.claude/``, ``.codex/``, ``.gemini/``, MCP server lists), which name commands
  those agents run.
* **In the user's home and codling's** (:data:`HOME_PLACES`, ``$CODLING_HOME``): shell start-up files,
  ``~/.ssh``, autostart and systemd user units, git's global configuration, the user's own ``bin``
  directories, editors' user settings, and codling's own directory (config.toml can switch the mode to yolo
  and add an MCP server command; models.json names endpoints). They are protected wherever the workspace lies,
  also when it is the home directory itself or above it.
* **What git runs programs from** (``tools/git_places.py``): the hooks directory ``core.hooksPath`` names
  (husky's ``.husky``, a ``tools/hooks``, a global ``~/.githooks``…), every git configuration file in effect
  and every file one includes, and any git directory (a bare repository too). git runs the programs they name
  on commit, checkout, push or a mere ``git status``. They are asked of git itself, for each edit, for the
  repository the path lies in and the workspace's, so a setting changed during the session counts at once.

A symbolic link does not hide one: tools name each path both as the model wrote it and resolved.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path, PurePath

from codling.tools.git_places import (
    GIT_DIR_WHY,
    NESTED_REPOSITORIES,
    GitView,
    git_directory_above,
    git_view,
    nested_repositories,
)

SHELL_WHY = "your shell runs it when a terminal opens or you log in"
EDITOR_WHY = "the editor runs the code in its start-up files whenever it opens"
AGENT_WHY = "another coding agent runs the commands and servers its settings name"
HOOK_MANAGER_WHY = "git runs these hooks on commit, checkout and push, once the hook manager is installed"


@dataclass(frozen=True)
class ProtectedPath:
    """A path, in any directory, whose change can make programs run without anyone choosing to run them."""

    pattern: str
    """``name/``: a directory of that name anywhere in the path (and everything in it); otherwise the path's
    last components (``.vscode/settings.json`` in any directory). Compared case-insensitively, as macOS's and
    Windows' file systems do."""
    why: str
    """Shown to the user in the question."""

    def matches(self, path: PurePath) -> bool:
        """Whether ``path`` is (or, for a directory pattern, lies in) this protected path."""
        parts = [part.casefold() for part in path.parts]
        if self.pattern.endswith("/"):
            return self.pattern[:-1].casefold() in parts
        wanted = [part.casefold() for part in self.pattern.split("/")]
        return parts[-len(wanted) :] == wanted


PROTECTED_PATHS: tuple[ProtectedPath, ...] = (
    ProtectedPath(".git/", "git runs the programs its config and hooks name (core.fsmonitor, hooks/…)"),
    ProtectedPath(".envrc", "direnv runs it when a shell enters the directory"),
    ProtectedPath(".vscode/settings.json", "VS Code runs the programs its settings name when the folder opens"),
    ProtectedPath(".vscode/tasks.json", "VS Code can run its tasks when the folder opens"),
    ProtectedPath(".vscode/mcp.json", "VS Code starts the MCP server commands it names"),
    ProtectedPath(".zed/settings.json", "Zed runs the language servers and commands its settings name"),
    ProtectedPath(".zed/tasks.json", "Zed runs its tasks"),
    ProtectedPath(".husky/", HOOK_MANAGER_WHY),
    ProtectedPath(".pre-commit-config.yaml", HOOK_MANAGER_WHY),
    ProtectedPath("lefthook.yml", HOOK_MANAGER_WHY),
    ProtectedPath(".lefthook.yml", HOOK_MANAGER_WHY),
    ProtectedPath("lefthook-local.yml", HOOK_MANAGER_WHY),
    ProtectedPath(".claude/", AGENT_WHY),
    ProtectedPath(".claude.json", AGENT_WHY),
    ProtectedPath(".codex/", AGENT_WHY),
    ProtectedPath(".gemini/", AGENT_WHY),
    ProtectedPath(".cursor/mcp.json", AGENT_WHY),
    ProtectedPath(".mcp.json", AGENT_WHY),
)
"""The paths protected in any directory (see the module docstring).

Each one makes a program run code the next time the user (or codling) merely works in the project, with no
decision to run that code: git's config and hooks on any git command (``core.fsmonitor`` runs on
``git status``), a hook manager's hooks on ``git commit``, direnv's ``.envrc`` on ``cd``, VS Code's and Zed's
project settings and tasks on opening the folder, another agent's hooks and MCP servers when it starts.
Files that run only when the user chooses to run them (a Makefile, package.json scripts, tests, CI workflows)
are ordinary edits: asking about them would make accept-edits ask about everything. Other agents' instruction
files (``CLAUDE.md``, ``AGENTS.md``) are text, not programs, and stay ordinary too."""

HOME_PLACES: tuple[tuple[str, str], ...] = (
    *(
        (name, SHELL_WHY)
        for name in (
            ".bashrc",
            ".bash_profile",
            ".bash_login",
            ".bash_logout",
            ".profile",
            ".zshrc",
            ".zshenv",
            ".zprofile",
            ".zlogin",
            ".zlogout",
            ".kshrc",
            ".cshrc",
            ".tcshrc",
            ".xprofile",
            ".xsessionrc",
            ".xinitrc",
            ".xsession",
            ".bash_aliases",
            ".pam_environment",
            ".config/fish/",
            ".config/environment.d/",
            ".config/plasma-workspace/env/",
        )
    ),
    (".ssh/", "ssh trusts the keys and runs the commands (ProxyCommand, rc) named there"),
    (".config/autostart/", "the desktop starts these programs when you log in"),
    (".config/systemd/user/", "systemd starts these services for you"),
    ("Library/LaunchAgents/", "macOS starts these programs when you log in"),
    (".gitconfig", "git runs the programs its global config names (core.fsmonitor, hooks…) in every repository"),
    (".config/git/", "git runs the programs its global config names (core.fsmonitor, hooks…) in every repository"),
    (".local/bin/", "a program there runs whenever its name is typed (it is on PATH)"),
    ("bin/", "a program there runs whenever its name is typed (it is on PATH)"),
    (".cargo/bin/", "a program there runs whenever its name is typed (it is on PATH)"),
    (".config/zed/", "Zed runs the language servers and commands your settings name"),
    (".config/Code/User/", "VS Code runs the programs your settings and tasks name"),
    (".config/Cursor/User/", "Cursor runs the programs your settings and tasks name"),
    (".config/opencode/", AGENT_WHY),
    (".vimrc", EDITOR_WHY),
    (".vim/", EDITOR_WHY),
    (".config/nvim/", EDITOR_WHY),
    (".emacs", EDITOR_WHY),
    (".emacs.d/", EDITOR_WHY),
    (".tmux.conf", "tmux runs the commands its configuration names when it starts"),
    (".config/tmux/", "tmux runs the commands its configuration names when it starts"),
    (".gnupg/", "gpg runs the programs its configuration names (pinentry-program) and trusts its keys"),
    (".npmrc", "npm runs what its configuration names (node-options, script-shell) on every npm command"),
)
"""Places in the user's home directory (a name ending in ``/``: that directory and everything in it)."""

CODLING_WHY = "codling's own settings, models and sessions (config.toml can switch the mode and add MCP commands)"


@dataclass(frozen=True)
class ProtectedPlace:
    """An absolute file or directory (and everything in it) whose change can make programs run."""

    path: PurePath
    why: str

    def holds(self, path: PurePath) -> bool:
        """Whether ``path`` is this place or lies in it (compared case-insensitively, as :class:`ProtectedPath`)."""
        mine = [part.casefold() for part in self.path.parts]
        theirs = [part.casefold() for part in path.parts]
        return theirs[: len(mine)] == mine


Protected = ProtectedPath | ProtectedPlace


def protected(paths: tuple[PurePath, ...]) -> ProtectedPath | None:
    """The first path among ``paths`` protected in any directory (:data:`PROTECTED_PATHS`), or ``None``."""
    for path in paths:
        for entry in PROTECTED_PATHS:
            if entry.matches(path):
                return entry
    return None


@dataclass(frozen=True)
class Protection:
    """Every protected path of a session: :data:`PROTECTED_PATHS`, the places in ``home`` and
    ``codling_home``, git directories wherever they are, and the places git runs programs from
    (``tools/git_places.py``) for the repository each path lies in and for each of the workspace's ``roots``,
    asked of ``git``, its executable (None: no git to ask)."""

    home: Path | None = None
    codling_home: Path | None = None
    git: str | None = None
    roots: tuple[Path, ...] = ()

    def places(self) -> tuple[ProtectedPlace, ...]:
        """The places in the homes, each both as given and resolved (either can be how a path is named)."""
        wanted: list[tuple[Path, str]] = []
        if self.codling_home is not None:
            wanted.append((self.codling_home, CODLING_WHY))
        if self.home is not None:
            wanted.extend((self.home / name.rstrip("/"), why) for name, why in HOME_PLACES)
        places: dict[PurePath, ProtectedPlace] = {}
        for path, why in wanted:
            for form in (path, _resolved(path)):
                places.setdefault(form, ProtectedPlace(form, why))
        return tuple(places.values())

    async def find(self, paths: tuple[PurePath, ...]) -> Protected | None:
        """The first protection that covers one of ``paths`` (absolute), or ``None``."""
        if (entry := protected(paths)) is not None:
            return entry
        places = self.places()
        for path in paths:
            for place in places:
                if place.holds(path):
                    return place
        for path in paths:
            if (directory := git_directory_above(path)) is not None:
                return ProtectedPlace(directory, GIT_DIR_WHY)
        if self.git is None:
            return None
        outside = False  # a path in no repository: its hooks may be those of a repository beside it
        for directory in dict.fromkeys([*(_existing_parent(Path(path)) for path in paths), *self.roots]):
            view = await git_view(self.git, directory)
            outside = outside or (directory not in self.roots and view.top is None)
            if (covering := _covering(view, paths)) is not None:
                return covering
        if outside:
            nested = list(dict.fromkeys(repo for path in paths for repo in self._repositories_beside(Path(path))))
            for view in await asyncio.gather(*(git_view(self.git, repo) for repo in nested)):
                if (covering := _covering(view, paths)) is not None:
                    return covering
        return None

    def _repositories_beside(self, path: Path) -> list[Path]:
        """The repositories directly inside each directory from ``path`` up to its workspace root: one of
        them may name a hooks directory beside itself (``core.hooksPath = ../shared-hooks``)."""
        root = next((root for root in self.roots if path.is_relative_to(root)), None)
        if root is None:
            return []
        found: list[Path] = []
        for directory in path.parents:
            found += nested_repositories(directory)
            if directory == root or len(found) >= NESTED_REPOSITORIES:
                break
        return found[:NESTED_REPOSITORIES]


def _covering(view: GitView, paths: tuple[PurePath, ...]) -> ProtectedPlace | None:
    """The place of ``view`` that holds one of ``paths`` (named as git gives it, or resolved), or ``None``."""
    for found in view.places:
        place = ProtectedPlace(found.path, found.why)
        resolved = ProtectedPlace(_resolved(found.path), found.why)
        if any(place.holds(path) or resolved.holds(path) for path in paths):
            return place
    return None


def _existing_parent(path: Path) -> Path:
    """The nearest directory that exists at or above ``path`` (a new file's directory may not exist yet)."""
    for candidate in (path, *path.parents):
        if candidate.is_dir():
            return candidate
    return path


def _resolved(path: Path) -> Path:
    try:
        return path.resolve()
    except (OSError, RuntimeError):  # a link loop: the path as given is all there is
        return path
