"""The files and directories git itself runs programs from, asked of git: hooks directories and config files.

git runs the programs in its hooks directory on commit, checkout, merge and push, and the programs its
configuration names (``core.fsmonitor`` on every ``git status``, ``core.hooksPath``…). Where those live is
the repository's and the user's to say, in files that may include others:

* the hooks directory of a repository, ``core.hooksPath`` resolved as git resolves it (``git rev-parse
  --git-path hooks``), and every other ``core.hooksPath`` any configuration file names (the global one's, for
  instance, which applies to every repository: ``~/.githooks``);
* every configuration file git reads there (``git config --list --show-origin --includes``), and every file
  an ``include.path`` or ``includeIf.*.path`` names, also one that does not exist yet or is empty;
* a git directory anywhere (a bare repository, a separate ``--git-dir``, ``~/.cfg`` of a dotfiles setup): a
  directory holding ``HEAD``, ``objects/`` and ``refs/`` is one, whatever its name.

Each question runs git without the repository's programs (``tools/git.py``) and within a time limit, and
not at all where its configuration includes a file that is not a regular one (``config_problem``); git that
cannot answer leaves only what the other protections cover.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from pathlib import Path, PurePath

from codling.tools.git import SAFE_CONFIG, config_problem, git_output

HOOKS_WHY = "git runs the programs in its hooks directory (core.hooksPath) on commit, checkout and push"
CONFIG_WHY = "git runs the programs its configuration names (core.fsmonitor, core.hooksPath…)"
GIT_DIR_WHY = "a git directory: git runs the programs its config and hooks name"

_ASKING = tuple(setting for setting in SAFE_CONFIG if not setting.startswith("core.hooksPath="))
"""git's safe settings but for the hooks directory, which is the question (rev-parse and config run no hook)."""


@dataclass(frozen=True)
class GitPlace:
    """A file or directory (and everything in it) git runs programs from, and why."""

    path: Path
    why: str


@dataclass(frozen=True)
class GitView:
    """What git says of a directory: the places it runs programs from, and the work tree holding the
    directory (None: in no repository)."""

    places: tuple[GitPlace, ...]
    top: Path | None


NESTED_REPOSITORIES = 32
"""The most repositories beside a path asked about (see :func:`nested_repositories`)."""


def nested_repositories(root: Path) -> list[Path]:
    """The repositories directly inside ``root`` (a folder of projects): their hooks may live beside them,
    outside any repository (``core.hooksPath = ../shared-hooks``). At most :data:`NESTED_REPOSITORIES`, in
    name order."""
    try:
        children = sorted(entry.path for entry in os.scandir(root) if entry.is_dir(follow_symlinks=False))
    except OSError:
        return []
    return [Path(child) for child in children if os.path.lexists(os.path.join(child, ".git"))][:NESTED_REPOSITORIES]


async def git_view(git: str, directory: Path) -> GitView:
    """The hooks directories and configuration files git uses for ``directory`` (in a repository or not:
    the global configuration counts everywhere)."""
    places: list[GitPlace] = []
    top: Path | None = None
    if await asyncio.to_thread(config_problem, directory, git) is not None:
        return GitView((), None)  # an include naming a pipe would hold git: only the other protections apply
    out = await git_output(
        git,
        "-C",
        str(directory),
        "rev-parse",
        "--path-format=absolute",
        "--git-path",
        "hooks",
        "--show-toplevel",
        settings=_ASKING,
    )
    lines = out.decode("utf-8", "surrogateescape").splitlines() if out is not None else []
    if lines and lines[0].startswith("/"):
        places.append(GitPlace(Path(lines[0]), HOOKS_WHY))
        if len(lines) > 1 and lines[1].startswith("/"):
            top = Path(lines[1])
    listing = await git_output(
        git, "-C", str(directory), "config", "--list", "--show-origin", "--includes", "-z", settings=_ASKING
    )
    if listing is not None:
        places.extend(_config_places(listing, top or directory))
    return GitView(tuple(places), top)


def _config_places(listing: bytes, top: Path) -> list[GitPlace]:
    """The files and hooks directories ``git config --list --show-origin -z`` output names (relative origins
    are the work tree's, where git runs)."""
    places: list[GitPlace] = []
    fields = listing.decode("utf-8", "surrogateescape").split("\0")
    for origin, entry in zip(fields[0::2], fields[1::2], strict=False):
        if not origin.startswith("file:"):
            continue  # "command line:": codling's own -c settings
        source = _absolute(top, origin.removeprefix("file:"))
        places.append(GitPlace(source, CONFIG_WHY))
        key, _, value = entry.partition("\n")
        key = key.lower()
        if not value:
            continue
        if key == "include.path" or (key.startswith("includeif.") and key.endswith(".path")):
            places.append(GitPlace(_absolute(source.parent, value), CONFIG_WHY))
        elif key == "core.hookspath":
            places.append(GitPlace(_absolute(top, value), HOOKS_WHY))
    return places


def _absolute(base: Path, name: str) -> Path:
    """``name`` as git reads it (``~/`` is the home directory, relative is from ``base``), normalized."""
    return Path(os.path.normpath(base / os.path.expanduser(name)))


def git_directory_above(path: PurePath) -> Path | None:
    """The git directory ``path`` is in (or is), judged by its contents rather than its name, or ``None``."""
    for candidate in (Path(path), *Path(path).parents):
        if (candidate / "HEAD").is_file() and (candidate / "objects").is_dir() and (candidate / "refs").is_dir():
            return candidate
    return None
