"""How codling runs git: never letting the repository's own configuration start a program.

A repository controls its ``.git/config`` (a cloned one ships it; the model can write it), and several of its
settings make even read-only commands run a program: ``core.fsmonitor`` (run by ``ls-files``/``status`` to
learn what changed), hooks (``post-index-change`` fires when ``ls-files --others`` refreshes the index),
``core.sshCommand`` and friends (run by a lazy fetch in a partial clone), and an embedded bare repository
that brings a config of its own. Command-line ``-c`` settings take precedence over every configuration file,
so each git command codling runs gets :data:`SAFE_CONFIG`, through :func:`git_command` and :func:`git_env`.

Includes cannot be turned off that way: git opens a ``[include] path`` (or ``[includeIf …]``) whole and
blocking, so one naming a named pipe holds every command. :func:`config_problem` checks, before git runs,
every configuration file it would read and everything they include (git itself lists the includes, reading
one file outside any repository); a caller told of a problem does without git.
"""

from __future__ import annotations

import os
import stat
import subprocess
from collections.abc import Mapping
from pathlib import Path

from codling.tools.processes import captured

SAFE_CONFIG: tuple[str, ...] = (
    "core.fsmonitor=false",  # no file-system monitor program (nor the builtin daemon)
    "core.hooksPath=/dev/null",  # no hooks: the directory holds none
    "core.untrackedCache=false",  # ls-files --others leaves the index alone
    "safe.bareRepository=explicit",  # a bare repository inside the tree is not used (with its config)
    "protocol.allow=never",  # no transport: a lazy fetch cannot run ssh or a remote helper
    "core.sshCommand=false",
    "core.askPass=",
    "credential.helper=",
)
"""``-c`` settings that keep git from running programs named by the repository's configuration."""

_SET_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_OPTIONAL_LOCKS": "0",  # a read must not take the index lock or rewrite the index
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_NO_LAZY_FETCH": "1",
}


def git_command(git: str, *args: str, settings: tuple[str, ...] = SAFE_CONFIG) -> list[str]:
    """The argument list that runs ``git`` (its path) with ``args`` under ``settings``, no pager."""
    overrides = [arg for setting in settings for arg in ("-c", setting)]
    return [git, "--no-pager", *overrides, *args]


def git_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a git command: ``base`` (default: this process's) without any ``GIT_*`` variable,
    which could point git at another repository, configuration or program, plus settings for a quiet read."""
    source = os.environ if base is None else base
    env = {name: value for name, value in source.items() if not name.upper().startswith("GIT_")}
    env.update(_SET_ENV)
    return env


async def git_output(
    git: str, *args: str, settings: tuple[str, ...] = SAFE_CONFIG, timeout: float = 5.0
) -> bytes | None:
    """What ``git args`` prints (under ``settings``, in :func:`git_env`), or ``None`` when it fails, cannot
    start or does not finish within ``timeout`` seconds (it is killed then, never left behind)."""
    return await captured(git_command(git, *args, settings=settings), timeout=timeout, env=git_env())


# --- configuration files git would read ------------------------------------------------------------------------

CONFIG_SCAN_BYTES = 1_000_000
"""How much of a configuration file is looked at for ``include`` before git is asked for its includes."""
CONFIG_PROBE_TIMEOUT = 10.0
_INCLUDE_DEPTH = 10
"""git's own limit on nested includes."""
_INCLUDES = r"^include(if\..*)?\.path$"


def config_problem(directory: Path, git: str) -> str | None:
    """Why git must not be run in ``directory``, or ``None``: a configuration file it would read there (the
    repository's, the user's global ones, every file they include, conditional includes counted as taken) that
    is not a regular file. git reads includes whole and blocking, and no switch turns them off for a
    repository's configuration, so a ``[include] path`` naming a named pipe would hold every git command.
    """
    todo = [(path, "") for path in _config_files(directory)]
    seen: set[Path] = set()
    while todo:
        path, included_by = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        try:
            st = path.stat()
        except OSError:
            continue  # missing (git skips a missing include too) or unreachable
        if not stat.S_ISREG(st.st_mode):
            by = f" (included by {included_by})" if included_by else ""
            return f"{path}{by} {_kind(st.st_mode)}, which git would wait on or read without end"
        if len(seen) > _INCLUDE_DEPTH * 10:
            return f"{path} has more nested includes than git follows"
        try:
            targets = _includes(path, git)
        except (OSError, subprocess.SubprocessError) as e:
            return f"git could not read {path}'s includes ({e})"
        todo.extend((target, str(path)) for target in targets)
    return None


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "is a named pipe, not a file"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "is a device, not a file"
    if stat.S_ISDIR(mode):
        return "is a directory, not a file"
    return "is not a regular file"


def _config_files(directory: Path) -> list[Path]:
    """The configuration files git reads for a command run in ``directory`` under :func:`git_env`: the
    repository's (``config``, ``config.worktree``; a ``.git`` file and ``commondir`` followed as git does) and
    the user's global ones (no system file: ``GIT_CONFIG_NOSYSTEM``)."""
    home = Path.home()
    xdg = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config")
    files = [home / ".gitconfig", xdg / "git" / "config"]
    for above in (directory, *directory.parents):
        dot_git = above / ".git"
        try:
            is_dir = dot_git.is_dir()
            is_file = not is_dir and dot_git.is_file()
        except OSError:
            continue
        if not (is_dir or is_file):
            continue
        git_dir = dot_git
        if is_file:  # "gitdir: <path>" (a worktree, a submodule)
            pointer = _small_text(dot_git)
            if not pointer.startswith("gitdir:"):
                break
            git_dir = above / pointer.removeprefix("gitdir:").strip()
        common = git_dir
        if (git_dir / "commondir").is_file():
            common = git_dir / _small_text(git_dir / "commondir").strip()
        files += [common / "config", git_dir / "config.worktree"]
        break
    return files


def _small_text(path: Path) -> str:
    """The first line of a small pointer file (``.git``, ``commondir``); opened non-blocking, so a named pipe put
    there in the meantime holds nothing up."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return ""
    try:
        data = os.read(fd, 4096) if stat.S_ISREG(os.fstat(fd).st_mode) else b""
    except OSError:
        data = b""
    finally:
        os.close(fd)
    lines = data.decode("utf-8", "replace").splitlines()
    return lines[0] if lines else ""


def _includes(path: Path, git: str) -> list[Path]:
    """The files ``path`` (a regular configuration file) includes, as git resolves them: ``~/`` from the home
    directory, relative paths from the including file's directory. git itself parses the file, without
    following its includes, and outside any repository (whose configuration it would read)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # checked to be a regular file; a swap must not block
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is no longer a regular file")
        head = os.read(fd, CONFIG_SCAN_BYTES + 1)
    finally:
        os.close(fd)
    if b"include" not in head.lower() and len(head) <= CONFIG_SCAN_BYTES:
        return []
    env = git_env()
    env["GIT_DIR"] = str(Path(os.sep) / "nonexistent" / "codling-no-repository")
    out = subprocess.run(
        [*git_command(git, "config", "--file", str(path), "--no-includes", "-z", "--get-regexp", _INCLUDES)],
        cwd=os.sep,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=CONFIG_PROBE_TIMEOUT,
        check=False,
    )
    targets = []
    for item in out.stdout.decode("utf-8", "surrogateescape").split("\0"):
        _, _, value = item.partition("\n")
        if not value:
            continue
        target = Path(value).expanduser() if value.startswith("~") else Path(value)
        targets.append(target if target.is_absolute() else path.parent / target)
    return targets
