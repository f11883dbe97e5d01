"""Walking a directory as git would list it, and checking the ignore files ripgrep and git would read there.

Both run off the event loop (``tools/halt.py``) and look at their :class:`Halt` between entries, so a cancelled
call or a passed deadline stops them at once. The walk visits entries in path order and stops one file past
its cap, so what it costs depends on what it returns, not on the size of the tree.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from codling.tools.halt import Halt
from codling.tools.ignores import IgnoreRules, Refused, file_problem

WALK_MAX_FILES = 100_000
"""The most files a walk returns (a huge tree, an unignored node_modules, cannot stall a call)."""

RG_IGNORE_NAMES = (".gitignore", ".ignore", ".rgignore")
"""The ignore files ripgrep reads in each directory."""
GIT_IGNORE_NAMES = (".gitignore",)


@dataclass(frozen=True)
class FileListing:
    """Absolute paths of files in path order; ``complete`` is false when files beyond them were left out (the
    cap) or not looked for (``timed_out``: the time limit); ``refused``: ignore files not honoured; ``notes``:
    anything else the caller should be told (git not used, and why)."""

    files: list[Path]
    complete: bool = True
    timed_out: bool = False
    refused: tuple[Refused, ...] = ()
    notes: tuple[str, ...] = field(default=())


def walk_files(
    directory: Path,
    top: Path,
    max_files: int = WALK_MAX_FILES,
    halt: Halt | None = None,
    *,
    ignored: list[str] | None = None,
) -> FileListing:
    """The files under ``directory`` (inside ``top``) in path order, skipping ``.git`` and what ``.gitignore``
    files ignore; at most ``max_files`` (``complete`` says whether there are more). What was skipped as
    ignored is added to ``ignored`` if given (relative to ``top``; an ignored directory once, with a ``/``).

    Ignore files in ``top`` and every directory from it down count, as in git: patterns without a slash
    match a name at any depth, patterns with one are anchored to their file's directory, a trailing slash
    matches only directories, ``**`` spans directories and ``!`` re-includes (except under an ignored
    directory). Symbolic links are listed, never entered. A directory beside ``top`` is its own top.
    """
    halt = halt or Halt(float("inf"))
    if not directory.is_relative_to(top):
        top = directory
    rules = IgnoreRules(top)
    start = "" if directory == top else directory.relative_to(top).as_posix()
    if _ignored_on_the_way(start, rules):
        return FileListing([], refused=tuple(rules.refused))
    files: list[Path] = []
    complete = True
    stack = [_entries(top, start)]
    while stack:
        if halt.reached():
            complete = False
            break
        entry = next(stack[-1], None)
        if entry is None:
            stack.pop()
            continue
        relative, is_dir = entry
        if rules.ignored(relative, is_dir=is_dir):
            if ignored is not None:
                ignored.append(relative + "/" if is_dir else relative)
            continue
        if is_dir:
            stack.append(_entries(top, relative))
        elif len(files) == max_files:  # one more exists: enough to say so
            complete = False
            break
        else:
            files.append(top / relative)
    return FileListing(files, complete, timed_out=halt.timed_out, refused=tuple(rules.refused))


def _ignored_on_the_way(start: str, rules: IgnoreRules) -> bool:
    """Whether the walk's directory, or one between it and the top, is ``.git`` or ignored."""
    so_far = ""
    for part in start.split("/") if start else ():
        so_far = f"{so_far}/{part}" if so_far else part
        if part == ".git" or rules.ignored(so_far, is_dir=True):
            return True
    return False


def _entries(top: Path, relative: str) -> Iterator[tuple[str, bool]]:
    """The entries of a directory as (path relative to ``top``, whether to enter it), in path order: a
    directory sorts as its name plus "/", which orders the whole walk as its paths' strings (git's order)."""
    prefix = f"{relative}/" if relative else ""
    found: list[tuple[str, str, bool]] = []
    try:
        with os.scandir(top / relative) as scan:
            for entry in scan:
                try:
                    real_dir = entry.is_dir(follow_symlinks=False)
                    if entry.name == ".git" and entry.is_dir():
                        continue
                except OSError:
                    real_dir = False
                found.append((entry.name + "/" if real_dir else entry.name, entry.name, real_dir))
    except OSError:  # unreadable or gone: nothing to list, as os.walk does
        return iter(())
    found.sort()
    return ((prefix + name, real_dir) for _, name, real_dir in found)


# --- the ignore files others would read ---------------------------------------------------------------------


@dataclass(frozen=True)
class Audit:
    """The ignore files ripgrep or git would read that may not be read; ``complete`` is false when the
    check was stopped (cancelled or out of time) before it had seen every directory."""

    refused: tuple[Refused, ...]
    complete: bool = True


def audit_ignore_files(directory: Path, top: Path, halt: Halt, names: tuple[str, ...] = RG_IGNORE_NAMES) -> Audit:
    """Check every ignore file ripgrep (``names``: the per-directory ones it reads) or git would read when
    listing or searching ``directory``: those in it and the directories above it, in each directory below it
    that is not ignored, each repository's ``.git/info/exclude`` and the user's global excludes file."""
    refused: dict[Path, Refused] = {}

    def check(path: Path, *, follow: bool = False) -> None:
        problem = file_problem(path, follow=follow)
        if problem is not None and path not in refused:
            refused[path] = Refused(path, problem)

    for above in (directory, *directory.parents):
        for name in names:
            check(above / name)
        check(above / ".git" / "info" / "exclude")
    config = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    check(config / "git" / "ignore", follow=True)

    if not directory.is_relative_to(top):
        top = directory
    rules = IgnoreRules(top)
    start = "" if directory == top else directory.relative_to(top).as_posix()
    complete = True
    pending = [] if _ignored_on_the_way(start, rules) else [start]
    while pending and complete:
        relative = pending.pop()
        prefix = f"{relative}/" if relative else ""
        try:
            with os.scandir(top / relative) as scan:
                for entry in scan:
                    if halt.reached():
                        complete = False
                        break
                    if entry.name in names:
                        check(Path(entry.path))
                    try:
                        if not entry.is_dir(follow_symlinks=False):
                            continue
                    except OSError:
                        continue
                    if entry.name == ".git":
                        check(Path(entry.path) / "info" / "exclude")
                    elif not rules.ignored(prefix + entry.name, is_dir=True):
                        pending.append(prefix + entry.name)
        except OSError:
            continue
    for problem in rules.refused:  # the .gitignore files the pruning itself refused (over the rule cap)
        refused.setdefault(problem.path, problem)
    return Audit(tuple(sorted(refused.values(), key=lambda r: str(r.path))), complete)
