"""File tools: read_file, edit_file and write_file (listing and searching are in ``tools/search.py``).

Reading and writing go through ``ctx.deps.fs``, so an editor's file port sees unsaved buffers and reviews
edits. A file with more than one hard link is neither read nor edited (:func:`read_content`): its other
names may be outside the workspace, where its content does not belong to the session.
"""

from __future__ import annotations

import asyncio
import os
import re
import stat
import threading
from dataclasses import dataclass
from pathlib import Path

from pydantic_ai import RunContext

from codling.errors import EditError, MissingPathError, PathError, ToolError
from codling.llm.tokens import count_tokens
from codling.tools.base import ToolOutput
from codling.tools.deps import ToolDeps
from codling.tools.diffs import SUMMARY_LINE_CHARS, change_size, summary_diff, unified_diff
from codling.tools.paging import WHOLE_FILE_MAX_BYTES, Page, page_of_text, read_page, refuse_too_large
from codling.tools.ports import PermissionRequest
from codling.tools.specs import describe_call
from codling.tools.workspace import Workspace
from codling.vocabulary import FileDiff, Location

READ_MAX_LINES = 2000
READ_MAX_CHARS = 100_000
READ_MAX_LINE_CHARS = 2000
PAGING_NOTE_TOKENS = 60
"""What the note saying how to read on costs."""


# --- reading a file for any tool ---------------------------------------------------------------------------


async def read_content(deps: ToolDeps, target: Path) -> str:
    """The whole text of ``target`` (resolved, inside the workspace) through the file port (the editor's when
    offered), after :func:`refuse_unsafe_file`; a file over ``paging.WHOLE_FILE_MAX_BYTES`` is refused."""
    size = await asyncio.to_thread(refuse_unsafe_file, target, deps.workspace)
    if size is not None:
        refuse_too_large(target, size, deps.workspace.display(target))
    return await deps.fs.read_text(target)


async def read_lines(deps: ToolDeps, target: Path, first: int, last: int | None) -> Page:
    """The page of ``target`` read_file shows from line ``first``: through the file port when the file is small
    enough to hold whole, else streamed from disk (``tools/paging.py``), holding only the page."""
    size = await asyncio.to_thread(refuse_unsafe_file, target, deps.workspace)
    if size is None or size <= WHOLE_FILE_MAX_BYTES:
        text = await deps.fs.read_text(target)
        return page_of_text(text, first, last, READ_MAX_LINES, READ_MAX_LINE_CHARS)
    stop = threading.Event()
    try:
        return await asyncio.to_thread(
            read_page,
            target,
            first,
            last,
            max_lines=READ_MAX_LINES,
            max_chars=READ_MAX_CHARS,
            max_line_chars=READ_MAX_LINE_CHARS,
            stop=stop,
        )
    finally:
        stop.set()  # a cancelled turn stops the read at its next block


def refuse_unsafe_file(target: Path, workspace: Workspace) -> int | None:
    """Raise ``PathError`` if ``target`` is not something a tool may read as a file: a named pipe, socket or
    device (reading one could block forever or never end), or a regular file with more than one hard link
    (another name of the same file may lie outside the workspace, so reading it could leak, and editing it
    change, a file the session may not touch). A missing path or a directory passes (the caller reports it).
    Returns a regular file's size."""
    try:
        st = os.stat(target)
    except OSError:
        return None
    shown = workspace.display(target)
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
        raise PathError(
            f"{shown} is not a regular file (a named pipe, socket or device), so codling does not read or "
            "write it; use a regular file"
        )
    if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
        raise PathError(
            f"{shown} has {st.st_nlink} hard links (other names for the same file, possibly outside the "
            "workspace), so codling does not read or change it. Tell the user; they can make it a file of its "
            f"own, for example with `cp -p {shown} {shown}.copy && mv {shown}.copy {shown}`."
        )
    return st.st_size if stat.S_ISREG(st.st_mode) else None


def lexical_path(workspace: Workspace, path: str) -> Path:
    """``path`` made absolute from the cwd without following symbolic links (what the model named)."""
    return Path(os.path.normpath(workspace.cwd / path))


# --- read_file ---------------------------------------------------------------------------------------------


async def read_file(
    ctx: RunContext[ToolDeps], path: str, start_line: int | None = None, end_line: int | None = None
) -> ToolOutput:
    """Read a text file and return its lines, each prefixed with its line number and a tab.

    At most 2000 lines come back per call, fewer when they would not fit the tool output cap for the model
    (its share of the context window); a note at the end then says how to read the rest. Lines longer than
    2000 characters are cut. Use start_line and end_line to read part of a long file.

    Args:
        path: The file, relative to the working directory (or absolute, inside the workspace).
        start_line: The first line to return, counting from 1. Defaults to the first line.
        end_line: The last line to return (inclusive). Defaults to the end of the file.
    """
    workspace = ctx.deps.workspace
    target = workspace.resolve(path)
    shown = workspace.display(target)
    _check_range(start_line, end_line)
    page = await read_lines(ctx.deps, target, start_line or 1, end_line)
    numbered = _numbered(page, start_line, end_line, shown, ctx.deps.output_tokens)
    of = f"{'' if numbered.exact else 'at least '}{numbered.total}"
    if numbered.total == 0:
        summary = f"Read {shown}: the file is empty"
    elif numbered.first == numbered.last:
        summary = f"Read {shown}: line {numbered.first} of {of}"
    else:
        summary = f"Read {shown}: lines {numbered.first}-{numbered.last} of {of}"
    if numbered.total:
        summary += "\n" + key_lines(numbered.text, markdown=target.suffix.lower() in (".md", ".markdown"))
    return ToolOutput(text=numbered.text, locations=(Location(target, start_line),), summary=summary)


SUMMARY_READ_CHARS = 800
"""Most characters of what was read that a read's summary keeps (what the history remembers of it)."""

_KEY_LINE = re.compile(
    r"^\s*(?:(?:export|pub|async|public|private|static|default)\s+)*"
    r"(?:def|class|function|fn|func|const|let|var|type|interface|struct|enum|impl|module|package)\b"
    r"|^\s*[A-Za-z_][\w.\-]*\s*(?::|=|:=)\s*\S"  # NAME = value, key: value
    r"|^\s*\[[^\]]+\]\s*$"  # [sections] of INI and TOML files
)
_HEADING = re.compile(r"^\s*#{1,3}\s+\S")
"""A Markdown heading (only in Markdown files: elsewhere it is a comment)."""


def key_lines(numbered: str, limit: int = SUMMARY_READ_CHARS, *, markdown: bool = False) -> str:
    """What a read's summary keeps of the numbered lines it returned: all of them when they are short, else
    the lines that define or set something (definitions, assignments, config keys, headings), top first,
    within ``limit`` characters."""
    lines = [line for line in numbered.split("\n") if "\t" in line]  # (not the paging note)
    if sum(len(line) + 1 for line in lines) <= limit:
        return "\n".join(lines)
    kept: list[str] = []
    size = 0
    for line in lines:
        content = line.split("\t", 1)[1]
        if not (_KEY_LINE.match(content) or (markdown and _HEADING.match(content))):
            continue
        entry = line if len(line) <= SUMMARY_LINE_CHARS else line[: SUMMARY_LINE_CHARS - 1] + "…"
        if size + len(entry) + 1 > limit:
            kept.append("  …")
            break
        kept.append(entry)
        size += len(entry) + 1
    return "\n".join(kept) if kept else "\n".join([*lines[:3], "  …"])


@dataclass(frozen=True)
class _Numbered:
    text: str
    first: int
    last: int
    """The last line actually shown (0 for an empty file)."""
    total: int
    exact: bool = True
    """False when the file has at least ``total`` lines (counting stopped)."""


def _check_range(start_line: int | None, end_line: int | None) -> None:
    if start_line is not None and start_line < 1:
        raise ToolError(f"start_line must be 1 or more (got {start_line})")
    if end_line is not None and end_line < (start_line or 1):
        raise ToolError(f"end_line ({end_line}) must not be before start_line ({start_line or 1})")


def _numbered(
    page: Page, start_line: int | None, end_line: int | None, shown: str, max_tokens: int | None = None
) -> _Numbered:
    _check_range(start_line, end_line)
    total = page.total
    if total == 0:
        return _Numbered(f"({shown} is empty)", 0, 0, 0)
    first = start_line or 1
    if first > total and page.exact:
        raise ToolError(f"start_line {first} is past the end of {shown}, which has {total} lines")
    last = min(end_line or total, total) if page.exact else (end_line or first + len(page.lines) + 1)
    out: list[str] = []
    size = 0
    # The paging note needs room too, so lines may take the cap less what it costs.
    room = None if max_tokens is None else max(1, max_tokens - PAGING_NOTE_TOKENS)
    tokens = 0
    number = first
    while number <= last and number - first < len(page.lines) and len(out) < READ_MAX_LINES and size < READ_MAX_CHARS:
        line = page.lines[number - first]
        text = line.text
        if line.more:
            text = f"{text} [… {'at least ' if line.more_at_least else ''}{line.more} more characters]"
        entry = f"{number:>6}\t{text}"
        if room is not None:
            tokens += count_tokens(entry) + 1
            if tokens > room and out:
                break
        out.append(entry)
        size += len(entry) + 1
        number += 1
    shown_last = number - 1
    if shown_last < last:
        why = f" (a tool result may hold about {max_tokens:,} tokens with this model)" if tokens > (room or 0) else ""
        of = str(total)
        if not page.exact:
            of = (
                f"at least {total} (counting stopped {page.counted_bytes:,} bytes past the page, in a file of "
                f"{page.size:,} bytes)"
            )
        out.append(
            f"[Showing lines {first}-{shown_last} of {of}{why}. To read more, call read_file with "
            f"start_line={shown_last + 1}.]"
        )
    return _Numbered("\n".join(out), first, shown_last, total, page.exact)


def count_noun(n: int, noun: str) -> str:
    """``1 line``, ``3 lines``, ``2 matches``."""
    plural = noun + ("es" if noun.endswith("ch") else "s")
    return f"{n} {noun if n == 1 else plural}"


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
    original = await read_content(ctx.deps, target)
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
        summary=f"Edited {shown} ({change_size(original, updated)}):\n{summary_diff(original, updated)}",
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
        original: str | None = await read_content(ctx.deps, target)
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
        summary = f"Created {shown} ({count_noun(lines, 'line')})"
        if lines:
            page = page_of_text(content, 1, None, READ_MAX_LINES, READ_MAX_LINE_CHARS)
            numbered = _numbered(page, None, None, shown, SUMMARY_READ_CHARS).text
            summary += "\n" + key_lines(numbered, markdown=target.suffix.lower() in (".md", ".markdown"))
    else:
        text = f"Overwrote {shown}.\n{unified_diff(original, content, shown)}"
        summary = f"Overwrote {shown} ({change_size(original, content)}):\n{summary_diff(original, content)}"
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
        paths=tuple(dict.fromkeys((lexical_path(ctx.deps.workspace, args["path"]), target))),
    )
    await ctx.deps.permissions.check(request)
