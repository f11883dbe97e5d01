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
* **The hooks directory git uses** (:func:`hooks_directory`): ``core.hooksPath`` names any directory of the
  repository (husky's ``.husky``, a ``tools/hooks``…); git runs the programs in it on commit, checkout, merge
  and push. It is asked of git itself, for each edit, so a setting changed during the session counts at once.

A symbolic link does not hide one: tools name each path both as the model wrote it and resolved.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from pathlib import Path, PurePath

from codling.tools.git import SAFE_CONFIG, git_command, git_env

SHELL_WHY = "your shell runs it when a terminal opens or you log in"
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
            ".pam_environment",
            ".config/fish/",
            ".config/environment.d/",
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
    (".config/zed/", "Zed runs the language servers and commands your settings name"),
    (".config/Code/User/", "VS Code runs the programs your settings and tasks name"),
)
"""Places in the user's home directory (a name ending in ``/``: that directory and everything in it)."""

CODLING_WHY = "codling's own settings, models and sessions (config.toml can switch the mode and add MCP commands)"
HOOKS_WHY = "git runs the programs in its hooks directory (core.hooksPath) on commit, checkout and push"
_ASKING = tuple(setting for setting in SAFE_CONFIG if not setting.startswith("core.hooksPath="))
"""git's safe settings but for the hooks directory, which is the question (rev-parse runs no hook)."""
GIT_TIMEOUT = 5.0
"""Seconds git gets to name its hooks directory; past it only the other protections apply."""


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
    ``codling_home``, and the hooks directory of the repository each path lies in (asked of ``git``, its
    executable; None: no git, so no hooks directory)."""

    home: Path | None = None
    codling_home: Path | None = None
    git: str | None = None

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
        if self.git is None:
            return None
        for directory in dict.fromkeys(_existing_parent(Path(path)) for path in paths):
            hooks = await hooks_directory(self.git, directory)
            if hooks is None:
                continue
            place = ProtectedPlace(hooks, HOOKS_WHY)
            resolved = ProtectedPlace(_resolved(hooks), HOOKS_WHY)
            if any(place.holds(path) or resolved.holds(path) for path in paths):
                return place
        return None


async def hooks_directory(git: str, directory: Path) -> Path | None:
    """The directory whose programs git runs as hooks for the repository holding ``directory``
    (``core.hooksPath`` resolved as git resolves it, else ``.git/hooks``), or ``None`` outside a repository
    or when git does not say within :data:`GIT_TIMEOUT` seconds."""
    args = git_command(
        git, "-C", str(directory), "rev-parse", "--path-format=absolute", "--git-path", "hooks", settings=_ASKING
    )
    try:
        proc = await asyncio.create_subprocess_exec(
            *args,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            env=git_env(),
        )
    except OSError:
        return None
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), GIT_TIMEOUT)
    except TimeoutError:
        return None
    finally:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await asyncio.shield(proc.wait())
    text = out.decode("utf-8", "surrogateescape").strip()
    return Path(text) if proc.returncode == 0 and text.startswith("/") else None


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
