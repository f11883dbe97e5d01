"""Listing and searching tools: list_files and search.

They need directory walks, which the ports do not offer: they walk the local disk directly (with
``git ls-files`` and ``rg`` when available), confined to the workspace like every other path.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pydantic_ai import RunContext

from codling.errors import PathError, ToolError
from codling.tools.base import ToolOutput
from codling.tools.files import count_noun
from codling.tools.ports import Location
from codling.tools.toolset import ToolDeps
from codling.tools.workspace import Workspace

LIST_DEFAULT_ENTRIES = 1000
LIST_MAX_ENTRIES = 5000
WALK_MAX_FILES = 100_000
"""A walk stops here so a huge tree (an unignored node_modules) cannot stall a call."""
SEARCH_MAX_MATCHES = 200
SEARCH_LINE_CHARS = 300
SEARCH_MAX_FILE_BYTES = 5_000_000
SUMMARY_SEARCH_PATHS = 5
"""How many matching files a search's summary names."""
SUMMARY_PATTERN_CHARS = 200
_SUBPROCESS_TIMEOUT = 60.0
_RG_LINE_LIMIT = 1 << 20


# --- list_files --------------------------------------------------------------------------------------------


async def list_files(ctx: RunContext[ToolDeps], path: str = ".", max_entries: int = LIST_DEFAULT_ENTRIES) -> ToolOutput:
    """List the files under a directory, recursively, sorted by path. Files .gitignore ignores are left out.

    Paths are shown relative to the working directory.

    Args:
        path: The directory to list, relative to the working directory. Defaults to the working directory.
        max_entries: The most files to return (at most 5000).
    """
    workspace = ctx.deps.workspace
    target = workspace.resolve(path)
    shown = workspace.display(target)
    if not target.exists():
        raise PathError(f"directory '{shown}' does not exist; list its parent to see what is there")
    if not target.is_dir():
        raise PathError(f"'{shown}' is a file, not a directory; use read_file to read it")
    limit = min(max(max_entries, 1), LIST_MAX_ENTRIES)
    listing = await collect_files(target, workspace, git=shutil.which("git"))
    if not listing.files:
        return ToolOutput(
            text=f"No files in {shown} (files ignored by .gitignore are not listed).",
            summary=f"Listed {shown}: no files",
        )
    lines = [workspace.display(f) for f in listing.files[:limit]]
    total = str(len(listing.files)) if listing.complete else f"more than {len(listing.files)}"
    if len(listing.files) > limit or not listing.complete:
        hint = "list a subdirectory"
        if limit < LIST_MAX_ENTRIES:
            hint += f" or pass a larger max_entries (up to {LIST_MAX_ENTRIES})"
        lines.append(f"[Showing {len(lines)} of {total} files; {hint}.]")
        summary = f"Listed {shown}: {total} files (the first {limit} shown)"
    else:
        summary = f"Listed {shown}: {count_noun(len(listing.files), 'file')}"
    return ToolOutput(text="\n".join(lines), locations=(Location(target),), summary=summary)


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
    args = ["-C", str(directory), "ls-files", "-z", "--cached", "--others", "--exclude-standard"]
    try:
        proc = await asyncio.create_subprocess_exec(
            git,
            *args,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"},
        )
    except OSError:
        return None
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), _SUBPROCESS_TIMEOUT)
    except TimeoutError:
        return None
    finally:
        _kill_if_running(proc)
    if proc.returncode != 0:  # not a work tree, or git refused (e.g. an unsafe directory owner)
        return None
    names = {name for name in out.decode("utf-8", "surrogateescape").split("\0") if name}
    files = []
    for name in names:
        file = directory / name
        # Tracked files may be deleted on disk; submodules show up as directories.
        if os.path.islink(file) or os.path.isfile(file):
            files.append(file)
    return sorted(files)


def _kill_if_running(proc: asyncio.subprocess.Process) -> None:
    """Stop a helper process we gave up on (timeout, cancellation); the event loop reaps it."""
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()


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
    regex: re.Pattern[str]
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
            if rule.regex.fullmatch(subject):
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
    try:
        text = file.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return
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
        yield _Rule(re.compile(glob_regex(line)), negate=negate, dir_only=dir_only, anchored=anchored)


def glob_regex(pattern: str) -> str:
    """A regular expression for a gitignore-style glob: ``*`` and ``?`` stay within one path segment,
    ``**`` crosses segments, ``[...]`` is a character class and a backslash escapes the next character.
    """
    out: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[" and (close := pattern.find("]", i + 2)) != -1:
            body = pattern[i + 1 : close]
            if body.startswith("!"):
                body = "^" + body[1:]
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = close + 1
        elif pattern[i] == "\\" and i + 1 < len(pattern):
            out.append(re.escape(pattern[i + 1]))
            i += 2
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return "".join(out)


# --- search ------------------------------------------------------------------------------------------------


async def search(
    ctx: RunContext[ToolDeps],
    pattern: str,
    path: str = ".",
    glob: str | None = None,
    ignore_case: bool = False,
) -> ToolOutput:
    """Search file contents for a regular expression; returns matching lines as "path:line: text".

    Files ignored by .gitignore are skipped, as are binary files. At most 200 matches come back; narrow the
    search with path or glob if there are more.

    Args:
        pattern: A regular expression (Rust/Python syntax), e.g. "def \\w+_file" or "TODO".
        path: A directory (searched recursively) or a file, relative to the working directory.
        glob: Only search files whose name matches this glob, e.g. "*.py"; a glob with a slash matches the
            path below the searched directory, e.g. "src/**/*.ts". A leading "!" excludes instead.
        ignore_case: Match letters regardless of case.
    """
    workspace = ctx.deps.workspace
    target = workspace.resolve(path)
    result = await find_matches(
        pattern,
        target,
        workspace,
        glob=glob,
        ignore_case=ignore_case,
        rg=shutil.which("rg"),
        git=shutil.which("git"),
    )
    shown = workspace.display(target)
    searched = _searched(pattern, shown, glob, ignore_case)
    if not result.matches:
        where = "" if target == workspace.cwd else f" in {shown}"
        return ToolOutput(
            text=f"No matches for /{pattern}/{where}.",
            locations=(Location(target),),
            summary=f"{searched}: no matches",
        )
    lines = list(result.matches)
    if result.more:
        lines.append(f"[Showing the first {len(result.matches)} matches; narrow it with path, glob or pattern.]")
    return ToolOutput(text="\n".join(lines), locations=(Location(target),), summary=f"{searched}: {_found(result)}")


def _searched(pattern: str, shown: str, glob: str | None, ignore_case: bool) -> str:
    if len(pattern) > SUMMARY_PATTERN_CHARS:
        pattern = pattern[:SUMMARY_PATTERN_CHARS] + "…"
    options = [f"files matching {glob}"] if glob else []
    if ignore_case:
        options.append("ignoring case")
    extra = f" ({', '.join(options)})" if options else ""
    return f"Searched /{pattern}/ in {shown}{extra}"


def _found(result: SearchResult) -> str:
    """How many matches in how many files, naming the first few files."""
    paths = list(dict.fromkeys(_match_path(m) for m in result.matches))
    matches = f"{len(result.matches)}+ matches (capped)" if result.more else count_noun(len(result.matches), "match")
    files = count_noun(len(paths), "file") + ("+" if result.more else "")
    named = ", ".join(paths[:SUMMARY_SEARCH_PATHS])
    if len(paths) > SUMMARY_SEARCH_PATHS:
        named += f", … ({len(paths) - SUMMARY_SEARCH_PATHS} more)"
    return f"{matches} in {files}: {named}"


def _match_path(match: str) -> str:
    """The path of a ``path:line: text`` match line."""
    found = re.match(r"(.*?):\d+: ", match)
    return found.group(1) if found else match.partition(":")[0]


@dataclass(frozen=True)
class SearchResult:
    """Matching lines as ``path:line: text`` (paths as the workspace displays them), in path order."""

    matches: tuple[str, ...]
    more: bool = False
    """Whether matches beyond ``max_matches`` were left out."""


async def find_matches(
    pattern: str,
    target: Path,
    workspace: Workspace,
    *,
    glob: str | None = None,
    ignore_case: bool = False,
    max_matches: int = SEARCH_MAX_MATCHES,
    rg: str | None,
    git: str | None,
) -> SearchResult:
    """Search ``target`` (a file or directory) with ripgrep at path ``rg``, or in Python when ``rg`` is
    ``None`` or cannot handle the pattern (ripgrep has no look-around or back-references).

    Raises ``ToolError`` for an invalid pattern and ``PathError`` for a missing target.
    """
    if not pattern:
        raise ToolError("the search pattern is empty; give a regular expression to look for")
    if not target.exists():
        raise PathError(f"'{workspace.display(target)}' does not exist; use list_files to find the right path")
    if rg is not None:
        result = await _rg_search(rg, pattern, target, workspace, glob, ignore_case, max_matches)
        if result is not None:
            return result
    try:
        regex = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    except re.error as e:
        raise ToolError(f"invalid regular expression {pattern!r}: {e}") from e
    if target.is_dir():
        listing = await collect_files(target, workspace, git=git)
        files = [f for f in listing.files if glob is None or glob_matches(glob, f.relative_to(target))]
    else:
        files = [target]
    return await asyncio.to_thread(_python_search, regex, files, workspace, max_matches)


def glob_matches(glob: str, relative: Path) -> bool:
    """Whether a search glob selects the file at ``relative`` (below the searched directory), as ripgrep does:
    a glob without a slash matches the file name, one with a slash the whole relative path; ``!`` negates.
    """
    negate = glob.startswith("!")
    pattern = glob[1:] if negate else glob
    subject = relative.as_posix() if "/" in pattern else relative.name
    return bool(re.fullmatch(glob_regex(pattern.lstrip("/")), subject)) != negate


def _python_search(regex: re.Pattern[str], files: list[Path], workspace: Workspace, max_matches: int) -> SearchResult:
    matches: list[str] = []
    for file in files:
        try:
            if file.stat().st_size > SEARCH_MAX_FILE_BYTES:
                continue
            data = file.read_bytes()
        except OSError:
            continue
        if b"\0" in data[:8192]:  # binary, as ripgrep judges it
            continue
        shown = workspace.display(file)
        for number, line in enumerate(data.decode("utf-8", "replace").split("\n"), start=1):
            line = line.removesuffix("\r")
            if regex.search(line):
                if len(matches) == max_matches:
                    return SearchResult(tuple(matches), more=True)
                matches.append(f"{shown}:{number}: {_clip(line)}")
    return SearchResult(tuple(matches))


def _clip(line: str) -> str:
    return line if len(line) <= SEARCH_LINE_CHARS else line[:SEARCH_LINE_CHARS] + " […]"


async def _rg_search(
    rg: str,
    pattern: str,
    target: Path,
    workspace: Workspace,
    glob: str | None,
    ignore_case: bool,
    max_matches: int,
) -> SearchResult | None:
    """ripgrep's matches, or ``None`` when ripgrep could not parse the pattern (let Python try)."""
    # Run inside the target so ripgrep prints paths relative to it, which we map back to absolute.
    cwd, where = (target, []) if target.is_dir() else (target.parent, [target.name])
    args = ["--line-number", "--no-heading", "--with-filename", "--null", "--color=never", "--no-require-git"]
    args += ["--hidden", "--glob", "!.git", "--sort=path"]  # hidden files are listed by git too
    # A minified file can be one multi-megabyte line; only a preview of it is worth reading.
    args += [f"--max-columns={SEARCH_LINE_CHARS * 4}", "--max-columns-preview"]
    if glob:
        args += ["--glob", glob]
    if ignore_case:
        args.append("--ignore-case")
    args += ["--regexp", pattern, "--", *where]
    try:
        proc = await asyncio.create_subprocess_exec(
            rg,
            *args,
            cwd=cwd,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            limit=_RG_LINE_LIMIT,
        )
    except OSError:
        return None
    assert proc.stdout is not None and proc.stderr is not None
    matches: list[str] = []
    more = False
    stderr_task = asyncio.create_task(proc.stderr.read())
    try:
        async with asyncio.timeout(_SUBPROCESS_TIMEOUT):
            while raw := await proc.stdout.readline():
                if len(matches) == max_matches:
                    more = True
                    break
                matches.append(_rg_line(raw, cwd, workspace))
            if more:
                _kill_if_running(proc)
            stderr = (await stderr_task).decode("utf-8", "replace")
            await proc.wait()
    except TimeoutError:
        more = True
        stderr = ""
    finally:
        stderr_task.cancel()
        _kill_if_running(proc)
    if proc.returncode == 2 and not matches:
        if "regex parse error" in stderr or "error parsing regex" in stderr.lower():
            return None
        if "No files were searched" in stderr:  # every file was filtered out (glob, .gitignore)
            return SearchResult(())
        raise ToolError(f"search failed: {stderr.strip() or 'ripgrep exited with an error'}")
    return SearchResult(tuple(matches), more=more)


def _rg_line(raw: bytes, cwd: Path, workspace: Workspace) -> str:
    name, _, rest = raw.decode("utf-8", "replace").rstrip("\n").partition("\0")
    number, _, text = rest.partition(":")
    return f"{workspace.display(cwd / name)}:{number}: {_clip(text.removesuffix(chr(13)))}"
