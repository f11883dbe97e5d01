"""Which files a directory holds, as git would list them: ``git ls-files`` (run through ``tools/git.py``, so the
repository's configuration starts no program) or a walk honouring ``.gitignore`` files; and the glob matching
both the walk and ``search``'s ``glob`` use, which runs in time linear in the name whatever the pattern.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from codling.tools.git import git_command, git_env
from codling.tools.workspace import Workspace, read_plain_file

WALK_MAX_FILES = 100_000
"""A walk stops here so a huge tree (an unignored node_modules) cannot stall a call."""
GIT_TIMEOUT = 60.0

GITIGNORE_MAX_BYTES = 1_000_000
"""The most of one .gitignore file that is read."""


@dataclass(frozen=True)
class FileListing:
    """Absolute paths of files, sorted; ``complete`` is false when the walk stopped at its cap."""

    files: list[Path]
    complete: bool = True


async def collect_files(directory: Path, workspace: Workspace, *, git: str | None) -> FileListing:
    """Every non-ignored file under ``directory``: by ``git ls-files`` when ``git`` (its path) is given and
    the directory is in a work tree, else by a walk that honours ``.gitignore`` files.
    """
    if git is not None:
        files = await _git_files(directory, git)
        if files is not None:
            return FileListing(files)
    top = _root_of(directory, workspace)
    return await asyncio.to_thread(walk_files, directory, top)


async def _git_files(directory: Path, git: str) -> list[Path] | None:
    """The files git would show (tracked and untracked-but-not-ignored), or ``None`` if git cannot say."""
    args = git_command(git, "-C", str(directory), "ls-files", "-z", "--cached", "--others", "--exclude-standard")
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
        await stop(proc)
    if proc.returncode != 0:  # not a work tree, or git refused (e.g. an unsafe directory owner)
        return None
    names = {name for name in out.decode("utf-8", "surrogateescape").split("\0") if name}
    files = []
    for name in names:
        if ".." in name.split("/"):  # ls-files names lie below the directory; anything else is not ours
            continue
        file = directory / name
        # Tracked files may be deleted on disk; submodules show up as directories.
        if os.path.islink(file) or os.path.isfile(file):
            files.append(file)
    return sorted(files)


async def stop(proc: asyncio.subprocess.Process) -> None:
    """Kill a helper process we gave up on (timeout, cancellation, enough output) and reap it, so none
    outlives its call; also when the caller is being cancelled."""
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
    with contextlib.suppress(ProcessLookupError):
        await asyncio.shield(proc.wait())


def _root_of(path: Path, workspace: Workspace) -> Path:
    """The innermost workspace root holding ``path``: where .gitignore files start to count."""
    holding = [root for root in workspace.roots if path.is_relative_to(root)]
    return max(holding, key=lambda root: len(root.parts)) if holding else path


def walk_files(directory: Path, top: Path, max_files: int = WALK_MAX_FILES) -> FileListing:
    """Walk ``directory`` (inside ``top``) for files, skipping ``.git`` and what ``.gitignore`` files ignore.

    Ignore files in ``top`` and every directory from it down count, as in git: patterns without a slash
    match a name at any depth, patterns with one are anchored to their file's directory, a trailing slash
    matches only directories, ``**`` spans directories and ``!`` re-includes (except under an ignored
    directory). Symbolic links to directories are not followed.
    """
    rules = _IgnoreRules(top)
    if directory != top and directory.is_relative_to(top):
        here = top
        for part in directory.relative_to(top).parts:
            here = here / part
            if part == ".git" or rules.ignored(here, is_dir=True):
                return FileListing([])
    files: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(directory):
        base = Path(dirpath)
        dirnames[:] = [
            d for d in dirnames if d != ".git" and not rules.ignored(base / d, is_dir=not os.path.islink(base / d))
        ]
        for name in filenames:
            file = base / name
            if not rules.ignored(file, is_dir=False):
                files.append(file)
                if len(files) >= max_files:
                    return FileListing(sorted(files), complete=False)
        for d in dirnames:  # symlinked directories are listed like files, not entered
            if os.path.islink(base / d):
                files.append(base / d)
    return FileListing(sorted(files))


@dataclass(frozen=True)
class _Rule:
    glob: Glob
    negate: bool
    dir_only: bool
    anchored: bool


class _IgnoreRules:
    """The .gitignore rules in force in each directory under ``top``, loaded lazily and cached."""

    def __init__(self, top: Path) -> None:
        self.top = top
        self._cache: dict[Path, tuple[tuple[Path, _Rule], ...]] = {}

    def ignored(self, path: Path, *, is_dir: bool) -> bool:
        """Whether git would ignore ``path`` (its parent directories are assumed not ignored)."""
        verdict = False
        for base, rule in self._rules_in(path.parent):
            if rule.dir_only and not is_dir:
                continue
            rel = path.relative_to(base).as_posix()
            subject = rel if rule.anchored else path.name
            if rule.glob.fullmatch(subject):
                verdict = not rule.negate
        return verdict

    def _rules_in(self, directory: Path) -> tuple[tuple[Path, _Rule], ...]:
        cached = self._cache.get(directory)
        if cached is not None:
            return cached
        inherited: tuple[tuple[Path, _Rule], ...] = ()
        if directory != self.top and directory.is_relative_to(self.top):
            inherited = self._rules_in(directory.parent)
        own = tuple((directory, rule) for rule in _read_gitignore(directory / ".gitignore"))
        rules = inherited + own
        self._cache[directory] = rules
        return rules


def _read_gitignore(file: Path) -> Iterator[_Rule]:
    # As git does, a .gitignore that is a symbolic link is not followed (it could name /dev/stdin or /dev/zero).
    data = read_plain_file(file, GITIGNORE_MAX_BYTES)
    if data is None:
        return
    text = data[:GITIGNORE_MAX_BYTES].decode("utf-8", "replace")
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
        yield _Rule(Glob(line), negate=negate, dir_only=dir_only, anchored=anchored)


_Token = tuple[str, str]
"""A glob's piece: ("lit", char), ("one", ""), ("class", regex of one character), ("star", ""): any run
within a segment, ("any", ""): any run at all, ("dirs", ""): empty or any run ending in a slash (``**/``)."""

_WILD = ("star", "any", "dirs")


@dataclass(frozen=True)
class Glob:
    """A gitignore-style glob: ``*`` and ``?`` stay within one path segment, ``**/`` spans directories, ``**``
    anything, ``[...]`` is a character class and a backslash escapes the next character.

    :meth:`fullmatch` takes time linear in the subject for any pattern (globs come from the repository's
    .gitignore files and the model's ``glob``): a pattern with at most one run wildcard uses ``re``, which
    cannot backtrack badly then; others are matched by simulating all their positions at once.
    """

    pattern: str
    tokens: tuple[_Token, ...] = field(init=False, repr=False, compare=False)
    regex: re.Pattern[str] | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        tokens = _glob_tokens(self.pattern)
        object.__setattr__(self, "tokens", tokens)
        wild = sum(kind in _WILD for kind, _ in tokens)
        object.__setattr__(self, "regex", re.compile(_tokens_regex(tokens)) if wild <= 1 else None)

    def fullmatch(self, subject: str) -> bool:
        """Whether the whole of ``subject`` matches."""
        if self.regex is not None:
            return self.regex.fullmatch(subject) is not None
        tokens = self.tokens
        end = len(tokens)
        states = self._closure({0})
        for char in subject:
            following: set[int] = set()
            for i in states:
                if i > end:  # inside the ``**/`` at i - end - 1: stay, or leave after a slash
                    following.add(i)
                    if char == "/":
                        following.add(i - end)
                    continue
                if i == end:
                    continue
                kind, value = tokens[i]
                if (
                    (kind == "lit" and char == value)
                    or (kind == "one" and char != "/")
                    or (kind == "class" and re.fullmatch(value, char))
                ):
                    following.add(i + 1)
                elif (kind == "star" and char != "/") or kind == "any":
                    following.add(i)
            states = self._closure(following)
            if not states:
                return False
        return end in states

    def _closure(self, states: set[int]) -> set[int]:
        """``states`` plus every position reachable without consuming a character. Position ``end + 1 + i``
        is the inside of the ``**/`` at ``i``, which has consumed something and must end in a slash."""
        tokens = self.tokens
        end = len(tokens)
        done: set[int] = set()
        todo = list(states)
        while todo:
            i = todo.pop()
            if i in done:
                continue
            done.add(i)
            if i < end and tokens[i][0] in _WILD:
                todo.append(i + 1)
                if tokens[i][0] == "dirs":
                    todo.append(end + 1 + i)
        return done


def _glob_tokens(pattern: str) -> tuple[_Token, ...]:
    tokens: list[_Token] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            token: _Token = ("dirs", "")
            i += 3
        elif pattern.startswith("**", i):
            token = ("any", "")
            i += 2
        elif pattern[i] == "*":
            token = ("star", "")
            i += 1
        elif pattern[i] == "?":
            token = ("one", "")
            i += 1
        elif pattern[i] == "[" and (close := pattern.find("]", i + 2)) != -1 and (cls := _char_class(pattern[i:close])):
            token = ("class", cls)
            i = close + 1
        elif pattern[i] == "\\" and i + 1 < len(pattern):
            token = ("lit", pattern[i + 1])
            i += 2
        else:
            token = ("lit", pattern[i])
            i += 1
        if token[0] in _WILD and tokens and tokens[-1] == token:
            continue  # "**/**/" is "**/": repeating it adds nothing but work
        tokens.append(token)
    return tuple(tokens)


def _char_class(opening: str) -> str | None:
    """The regex for a ``[...]`` class (``opening`` without its ``]``), or ``None`` if it is not a valid one."""
    body = opening[1:]
    if body.startswith("!"):
        body = "^" + body[1:]
    regex = "[" + body.replace("\\", "\\\\") + "]"
    try:
        re.compile(regex)
    except re.error:  # e.g. a reversed range: then "[" is an ordinary character
        return None
    return regex


def _tokens_regex(tokens: tuple[_Token, ...]) -> str:
    regex = {"one": "[^/]", "star": "[^/]*", "any": ".*", "dirs": "(?:.*/)?"}
    return "".join(
        re.escape(value) if kind == "lit" else value if kind == "class" else regex[kind] for kind, value in tokens
    )
