"""Ignore files: which of them may be read at all, and the .gitignore rules in force in each directory.

A repository controls its ignore files, and ripgrep and git open every one they meet in the tree and read it
whole: a named pipe makes them wait for ever, ``/dev/zero`` fills their memory. So an ignore file is read (by
codling, or left to ripgrep and git) only when it is a regular file, not a symbolic link, with one hard link,
within :data:`IGNORE_FILE_MAX_BYTES` and :data:`IGNORE_FILE_MAX_RULES`; anything else is :class:`Refused`, and
the tool's result says so.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from codling.tools.globs import Glob, GlobIndex
from codling.tools.workspace import read_plain_file

IGNORE_FILE_MAX_BYTES = 1_000_000
"""The largest ignore file honoured."""
IGNORE_FILE_MAX_RULES = 10_000
"""The most rules one ignore file may hold to be honoured."""


@dataclass(frozen=True)
class Refused:
    """An ignore file that was not read, and why (a sentence fragment: "it is a named pipe, not a file")."""

    path: Path
    why: str


def file_problem(path: Path, *, follow: bool = False) -> str | None:
    """Why the ignore file at ``path`` must not be opened (by anyone), or ``None`` when it may be (or is
    missing: nothing to read). ``follow``: the reader follows a symbolic link (git's global excludes file)."""
    try:
        st = os.stat(path) if follow else os.lstat(path)
    except OSError:
        return None
    mode = st.st_mode
    if stat.S_ISDIR(mode):
        return None  # a directory of that name holds no rules, and opening one blocks nobody
    if stat.S_ISLNK(mode):
        return "it is a symbolic link, which is not followed"
    if stat.S_ISFIFO(mode):
        return "it is a named pipe, not a file"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "it is a device, not a file"
    if not stat.S_ISREG(mode):
        return "it is a socket or another special file, not a file"
    if st.st_nlink > 1:
        return "it has more than one hard link (it may be another name for a file outside the workspace)"
    if st.st_size > IGNORE_FILE_MAX_BYTES:
        return f"it is larger than {IGNORE_FILE_MAX_BYTES // 1_000_000} MB"
    return None


@dataclass(frozen=True)
class Rule:
    """One .gitignore line."""

    glob: Glob
    negate: bool
    dir_only: bool
    anchored: bool


class RuleSet:
    """One .gitignore file's rules, asked which of them decides for a path (the last that matches)."""

    def __init__(self, rules: list[Rule]) -> None:
        self.rules = rules
        # (anchored, is_dir) -> the rules that apply, indexed, with their numbers in the file
        self._indexes: dict[tuple[bool, bool], tuple[GlobIndex, list[int]]] = {}
        for anchored in (False, True):
            for is_dir in (False, True):
                numbers = [n for n, r in enumerate(rules) if r.anchored == anchored and (is_dir or not r.dir_only)]
                self._indexes[anchored, is_dir] = (GlobIndex([rules[n].glob for n in numbers]), numbers)

    def verdict(self, name: str, relative: str, *, is_dir: bool) -> bool | None:
        """Whether the rules ignore the path (``relative`` to the file's directory, ending in ``name``), or
        ``None`` when no rule matches it."""
        best = -1
        for anchored, subject in ((False, name), (True, relative)):
            index, numbers = self._indexes[anchored, is_dir]
            found = index.last_match(subject)
            if found >= 0:
                best = max(best, numbers[found])
        return None if best < 0 else not self.rules[best].negate


def read_rules(path: Path) -> RuleSet | Refused | None:
    """The rules of the .gitignore at ``path``; ``None`` when there is none; :class:`Refused` when it may not
    be read. As git does, a .gitignore that is a symbolic link is not followed."""
    problem = file_problem(path)
    if problem is not None:
        return Refused(path, problem)
    data = read_plain_file(path, IGNORE_FILE_MAX_BYTES)
    if data is None:  # missing, a directory, or swapped since it was looked at
        return None
    if len(data) > IGNORE_FILE_MAX_BYTES:  # grew since it was looked at
        return Refused(path, f"it is larger than {IGNORE_FILE_MAX_BYTES // 1_000_000} MB")
    rules = list(_parse(data.decode("utf-8", "replace")))
    if len(rules) > IGNORE_FILE_MAX_RULES:
        return Refused(path, f"it has more than {IGNORE_FILE_MAX_RULES:,} rules")
    return RuleSet(rules)


def _parse(text: str) -> list[Rule]:
    rules = []
    for raw in text.splitlines():
        line = raw.rstrip()
        if raw.endswith("\\ "):  # an escaped trailing space is part of the pattern
            line = raw[: len(raw.rstrip()) + 1]
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        if negate:
            line = line[1:]
        dir_only = line.endswith("/")
        line = line.rstrip("/")
        if not line:
            continue
        anchored = "/" in line
        line = line.lstrip("/")
        rules.append(Rule(Glob(line), negate=negate, dir_only=dir_only, anchored=anchored))
        if len(rules) > IGNORE_FILE_MAX_RULES:
            break
    return rules


class IgnoreRules:
    """The .gitignore rules in force in each directory under ``top`` (its own and those of the directories
    between), loaded once per directory; the files refused on the way are kept in :attr:`refused`.

    Paths are given as ``/``-separated strings relative to ``top`` ("" is ``top``), which keeps the per-file
    work of a walk small.
    """

    def __init__(self, top: Path) -> None:
        self.top = top
        self.refused: list[Refused] = []
        self._cache: dict[str, tuple[tuple[str, RuleSet], ...]] = {}

    def ignored(self, relative: str, *, is_dir: bool) -> bool:
        """Whether git would ignore the path (its parent directories are assumed not ignored)."""
        parent, _, name = relative.rpartition("/")
        for base, rules in reversed(self._rules_in(parent)):
            verdict = rules.verdict(name, relative[len(base) + 1 :] if base else relative, is_dir=is_dir)
            if verdict is not None:  # a deeper file's match beats a shallower one's
                return verdict
        return False

    def _rules_in(self, directory: str) -> tuple[tuple[str, RuleSet], ...]:
        cached = self._cache.get(directory)
        if cached is not None:
            return cached
        inherited = self._rules_in(directory.rpartition("/")[0]) if directory else ()
        read = read_rules(self.top / directory / ".gitignore")
        if isinstance(read, Refused):
            self.refused.append(read)
        rules = (*inherited, (directory, read)) if isinstance(read, RuleSet) else inherited
        self._cache[directory] = rules
        return rules
