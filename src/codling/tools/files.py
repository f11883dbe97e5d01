"""File tools: read_file, list_files, search, edit_file and write_file.

Reading and writing go through ``ctx.deps.fs``, so an editor's file port sees unsaved buffers and reviews
edits. Listing and searching need directory walks, which the ports do not offer: they walk the local disk
directly (with ``git ls-files`` and ``rg`` when available), confined to the workspace like every other path.
"""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import os
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pydantic_ai import RunContext

from codling.errors import EditError, MissingPathError, PathError, ToolError
from codling.tools.base import ToolOutput
from codling.tools.ports import FileDiff, Location, PermissionRequest
from codling.tools.toolset import ToolDeps, describe_call
from codling.tools.workspace import Workspace

READ_MAX_LINES = 2000
READ_MAX_CHARS = 100_000
READ_MAX_LINE_CHARS = 2000
LIST_DEFAULT_ENTRIES = 1000
LIST_MAX_ENTRIES = 5000
WALK_MAX_FILES = 100_000
"""A walk stops here so a huge tree (an unignored node_modules) cannot stall a call."""
SEARCH_MAX_MATCHES = 200
SEARCH_LINE_CHARS = 300
SEARCH_MAX_FILE_BYTES = 5_000_000
DIFF_MAX_LINES = 80
SUMMARY_DIFF_LINES = 40
"""Most diff lines an edit's summary keeps."""
SUMMARY_SEARCH_PATHS = 5
"""How many matching files a search's summary names."""
SUMMARY_PATTERN_CHARS = 200
_SUBPROCESS_TIMEOUT = 60.0
_RG_LINE_LIMIT = 1 << 20


# --- read_file ---------------------------------------------------------------------------------------------


async def read_file(
    ctx: RunContext[ToolDeps], path: str, start_line: int | None = None, end_line: int | None = None
) -> ToolOutput:
    """Read a text file and return its lines, each prefixed with its line number and a tab.

    At most 2000 lines (about 100 KB) come back per call; a note at the end then says how to read the rest.
    Lines longer than 2000 characters are cut. Use start_line and end_line to read part of a long file.

    Args:
        path: The file, relative to the working directory (or absolute, inside the workspace).
        start_line: The first line to return, counting from 1. Defaults to the first line.
        end_line: The last line to return (inclusive). Defaults to the end of the file.
    """
    workspace = ctx.deps.workspace
    target = workspace.resolve(path)
    shown = workspace.display(target)
    text = await ctx.deps.fs.read_text(target)
    numbered = _numbered(text, start_line, end_line, shown)
    if numbered.total == 0:
        summary = f"Read {shown}: the file is empty"
    elif numbered.first == numbered.last:
        summary = f"Read {shown}: line {numbered.first} of {numbered.total}"
    else:
        summary = f"Read {shown}: lines {numbered.first}-{numbered.last} of {numbered.total}"
    return ToolOutput(text=numbered.text, locations=(Location(target, start_line),), summary=summary)


def number_lines(text: str, start_line: int | None, end_line: int | None, shown: str) -> str:
    """The numbered lines ``start_line..end_line`` of ``text``, capped, with a note if more remain."""
    return _numbered(text, start_line, end_line, shown).text


@dataclass(frozen=True)
class _Numbered:
    text: str
    first: int
    last: int
    """The last line actually shown (0 for an empty file)."""
    total: int


def _numbered(text: str, start_line: int | None, end_line: int | None, shown: str) -> _Numbered:
    if start_line is not None and start_line < 1:
        raise ToolError(f"start_line must be 1 or more (got {start_line})")
    if end_line is not None and end_line < (start_line or 1):
        raise ToolError(f"end_line ({end_line}) must not be before start_line ({start_line or 1})")
    lines = text.split("\n")
    if lines[-1] == "":  # a final newline ends the last line; it does not start another
        lines.pop()
    total = len(lines)
    if total == 0:
        return _Numbered(f"({shown} is empty)", 0, 0, 0)
    first = start_line or 1
    if first > total:
        raise ToolError(f"start_line {first} is past the end of {shown}, which has {total} lines")
    last = min(end_line or total, total)
    out: list[str] = []
    size = 0
    number = first
    while number <= last and len(out) < READ_MAX_LINES and size < READ_MAX_CHARS:
        line = lines[number - 1].removesuffix("\r")
        if len(line) > READ_MAX_LINE_CHARS:
            line = f"{line[:READ_MAX_LINE_CHARS]} [… {len(line) - READ_MAX_LINE_CHARS} more characters]"
        entry = f"{number:>6}\t{line}"
        out.append(entry)
        size += len(entry) + 1
        number += 1
    shown_last = number - 1
    if shown_last < last:
        out.append(
            f"[Showing lines {first}-{shown_last} of {total}. To read more, call read_file with "
            f"start_line={shown_last + 1}.]"
        )
    return _Numbered("\n".join(out), first, shown_last, total)


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
        summary = f"Listed {shown}: {_count(len(listing.files), 'file')}"
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
    matches = f"{len(result.matches)}+ matches (capped)" if result.more else _count(len(result.matches), "match")
    files = _count(len(paths), "file") + ("+" if result.more else "")
    named = ", ".join(paths[:SUMMARY_SEARCH_PATHS])
    if len(paths) > SUMMARY_SEARCH_PATHS:
        named += f", … ({len(paths) - SUMMARY_SEARCH_PATHS} more)"
    return f"{matches} in {files}: {named}"


def _match_path(match: str) -> str:
    """The path of a ``path:line: text`` match line."""
    found = re.match(r"(.*?):\d+: ", match)
    return found.group(1) if found else match.partition(":")[0]


def _count(n: int, noun: str) -> str:
    plural = noun + ("es" if noun.endswith("ch") else "s")
    return f"{n} {noun if n == 1 else plural}"


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


# --- edit_file and write_file ------------------------------------------------------------------------------


async def edit_file(ctx: RunContext[ToolDeps], path: str, old_text: str, new_text: str) -> ToolOutput:
    """Replace one exact piece of text in an existing file with new text.

    old_text must occur exactly once in the file, matching it character for character (whitespace and
    indentation included): copy it from read_file output without the line numbers, with enough surrounding
    lines to be unique. The user may be asked to approve the change first.

    Args:
        path: The file to edit, relative to the working directory.
        old_text: The exact text to replace; it must occur exactly once in the file.
        new_text: The text to put in its place (may be empty to delete old_text).
    """
    workspace = ctx.deps.workspace
    target = workspace.resolve(path)
    shown = workspace.display(target)
    if not old_text:
        raise EditError("old_text is empty; give the exact text to replace, or use write_file to create a file")
    if old_text == new_text:
        raise EditError("old_text and new_text are the same, so there is nothing to change")
    original = await ctx.deps.fs.read_text(target)
    old, new = old_text, new_text
    count = original.count(old)
    if count == 0 and "\r\n" in original and "\n" in old and "\r\n" not in old:
        # The model writes "\n"; a CRLF file still matches and stays CRLF.
        old = old.replace("\n", "\r\n")
        new = new.replace("\r\n", "\n").replace("\n", "\r\n")
        count = original.count(old)
    if count == 0:
        raise EditError(
            f"old_text was not found in {shown}; it must match the file exactly, including whitespace and "
            "indentation. Use read_file to see the current text."
        )
    if count > 1:
        raise EditError(
            f"old_text matches {count} places in {shown}; include more surrounding lines in old_text so it "
            "matches exactly one."
        )
    index = original.index(old)
    updated = original[:index] + new + original[index + len(old) :]
    diff = FileDiff(target, original, updated)
    args = {"path": path, "old_text": old_text, "new_text": new_text}
    await _ask(ctx, "edit_file", args, target, diff)
    await ctx.deps.fs.write_text(target, updated)
    line = original.count("\n", 0, index) + 1
    return ToolOutput(
        text=f"Edited {shown}.\n{unified_diff(original, updated, shown)}",
        diff=diff,
        locations=(Location(target, line),),
        summary=f"Edited {shown}:\n{summary_diff(original, updated)}",
    )


async def write_file(ctx: RunContext[ToolDeps], path: str, content: str) -> ToolOutput:
    """Create a file, or replace an existing file's whole content. Parent directories are created.

    Prefer edit_file for changing part of an existing file. The user may be asked to approve the write first.

    Args:
        path: The file to write, relative to the working directory.
        content: The complete new content of the file.
    """
    workspace = ctx.deps.workspace
    target = workspace.resolve(path)
    shown = workspace.display(target)
    try:
        original: str | None = await ctx.deps.fs.read_text(target)
    except MissingPathError:
        original = None  # a new file
    if original == content:
        return ToolOutput(
            text=f"{shown} already has exactly this content; nothing was written.",
            summary=f"Wrote nothing to {shown}: it already had this content",
        )
    diff = FileDiff(target, original, content)
    await _ask(ctx, "write_file", {"path": path, "content": content}, target, diff)
    await ctx.deps.fs.write_text(target, content)
    if original is None:
        lines = content.count("\n") + (0 if content.endswith("\n") or not content else 1)
        text = f"Created {shown} ({lines} lines)."
        summary = f"Created {shown} ({_count(lines, 'line')})"
    else:
        text = f"Overwrote {shown}.\n{unified_diff(original, content, shown)}"
        summary = f"Overwrote {shown}:\n{summary_diff(original, content)}"
    return ToolOutput(text=text, diff=diff, locations=(Location(target, 1),), summary=summary)


async def _ask(ctx: RunContext[ToolDeps], tool_name: str, args: dict[str, str], target: Path, diff: FileDiff) -> None:
    info = describe_call(tool_name, args, ctx.deps.workspace)
    request = PermissionRequest(
        tool_call_id=ctx.tool_call_id or "",
        tool_name=tool_name,
        kind="edit",
        title=info.title,
        subject=str(target),
        diff=diff,
        raw_input=args,
    )
    await ctx.deps.permissions.check(request)


def summary_diff(old: str, new: str, max_lines: int = SUMMARY_DIFF_LINES) -> str:
    """The diff for an edit's summary: hunks only (the summary names the file), cut to ``max_lines`` lines."""
    lines = list(difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm=""))[2:]  # no ---/+++ header
    if len(lines) > max_lines:
        lines = [*lines[:max_lines], f"[… {len(lines) - max_lines} more diff lines cut]"]
    return "\n".join(lines)


def unified_diff(old: str, new: str, shown: str, max_lines: int = DIFF_MAX_LINES) -> str:
    """A unified diff of two texts, cut to ``max_lines`` lines with a note saying how many were left out."""
    lines = list(
        difflib.unified_diff(
            old.splitlines(), new.splitlines(), fromfile=f"a/{shown}", tofile=f"b/{shown}", lineterm=""
        )
    )
    if len(lines) > max_lines:
        lines = [*lines[:max_lines], f"[… {len(lines) - max_lines} more diff lines]"]
    return "\n".join(lines)
