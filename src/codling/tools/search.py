"""Listing and searching tools: list_files and search.

They need directory walks, which the ports do not offer: they read the local disk directly, confined to the
workspace like every other path. Listing is in ``tools/listing.py`` (``git ls-files`` without the repository's
programs, or a .gitignore-aware walk), searching in ``tools/grep.py`` (ripgrep, or Python's ``re`` in a child
process, both time-limited).
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Sequence

from pydantic_ai import RunContext

from codling.errors import PathError
from codling.tools.base import ToolOutput
from codling.tools.deps import ToolDeps
from codling.tools.files import count_noun
from codling.tools.grep import SearchResult, find_matches, find_rg, glob_matches
from codling.tools.listing import LIST_TIME_LIMIT, FileListing, collect_files, listing_notes, walk_files
from codling.vocabulary import Location

LIST_DEFAULT_ENTRIES = 1000
LIST_MAX_ENTRIES = 5000
SUMMARY_SEARCH_PATHS = 5
"""How many matching files a search's summary names."""
SUMMARY_PATTERN_CHARS = 200
SUMMARY_MATCH_CHARS = 600
"""Most characters of the first matches a search's summary keeps (what the history remembers of it)."""
_SUMMARY_MATCH_LINE_CHARS = 200

__all__ = [
    "FileListing",
    "SearchResult",
    "collect_files",
    "find_matches",
    "glob_matches",
    "list_files",
    "search",
    "walk_files",
]


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
    listing = await collect_files(target, workspace, git=shutil.which("git"), max_files=limit)
    notes = listing_notes(listing, workspace)
    if listing.timed_out:
        notes.append(
            f"[Listing took over {LIST_TIME_LIMIT:g} s and was stopped after {count_noun(len(listing.files), 'file')}; "
            "more files are not shown. List a subdirectory to narrow it.]"
        )
    if not listing.files:
        return ToolOutput(
            text="\n".join([f"No files in {shown} (files ignored by .gitignore are not listed).", *notes]),
            summary=f"Listed {shown}: no files",
        )
    lines = [workspace.display(f) for f in listing.files]
    if listing.timed_out:
        summary = f"Listed {shown}: stopped after {LIST_TIME_LIMIT:g} s ({count_noun(len(lines), 'file')} shown)"
    elif not listing.complete:
        hint = "list a subdirectory"
        if limit < LIST_MAX_ENTRIES:
            hint += f" or pass a larger max_entries (up to {LIST_MAX_ENTRIES})"
        notes.append(f"[Showing the first {len(lines)} files; more files are not shown: {hint}.]")
        summary = f"Listed {shown}: more than {count_noun(limit, 'file')} (the first {limit} shown)"
    else:
        summary = f"Listed {shown}: {count_noun(len(lines), 'file')}"
    return ToolOutput(text="\n".join([*lines, *notes]), locations=(Location(target),), summary=summary)


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
        rg=find_rg(),
        git=shutil.which("git"),
    )
    shown = workspace.display(target)
    searched = _searched(pattern, shown, glob, ignore_case)
    if not result.matches:
        where = "" if target == workspace.cwd else f" in {shown}"
        return ToolOutput(
            text="\n".join([f"No matches for /{pattern}/{where}.", *result.notes]),
            locations=(Location(target),),
            summary=f"{searched}: no matches",
        )
    lines = list(result.matches)
    if result.more:
        lines.append(f"[Showing the first {len(result.matches)} matches; narrow it with path, glob or pattern.]")
    lines += result.notes
    summary = f"{searched}: {_found(result)}\n{first_matches(result.matches, more=result.more)}"
    return ToolOutput(text="\n".join(lines), locations=(Location(target),), summary=summary)


def first_matches(matches: Sequence[str], limit: int = SUMMARY_MATCH_CHARS, *, more: bool = False) -> str:
    """The first match lines, each clipped, within ``limit`` characters, with a note if more were found
    (``more``: beyond ``matches`` too)."""
    kept: list[str] = []
    size = 0
    for match in matches:
        entry = match if len(match) <= _SUMMARY_MATCH_LINE_CHARS else match[: _SUMMARY_MATCH_LINE_CHARS - 1] + "…"
        if kept and size + len(entry) + 1 > limit:
            break
        kept.append(entry)
        size += len(entry) + 1
    if len(kept) < len(matches) or more:
        kept.append(f"[… {len(matches) - len(kept)}{'+' if more else ''} more matches]")
    return "\n".join(kept)


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
