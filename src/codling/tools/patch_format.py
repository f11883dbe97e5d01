"""The apply_patch format: reading a patch into file changes (``parse_patch``) and applying an update's hunks
to a file's text (``apply_hunks``); ``tools/patch.py`` is the tool that plans, approves, applies and reports.

An update's hunks are found in order, each after the previous one: their context and removed lines must match
the file (exactly, else ignoring trailing whitespace, else ignoring surrounding whitespace); an ``@@`` line
may name a line to find first; ``*** End of File`` matches a hunk at the end first. ``*** Move to: path``
after ``*** Update File`` renames the file. A Markdown fence or a shell heredoc around the patch is ignored.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Literal, assert_never

from codling.errors import EditError

BEGIN, END = "*** Begin Patch", "*** End Patch"
ADD, DELETE, UPDATE, MOVE = "*** Add File: ", "*** Delete File: ", "*** Update File: ", "*** Move to: "
END_OF_FILE = "*** End of File"


@dataclass(frozen=True)
class Hunk:
    """One change in an updated file: an optional line to find first, its lines, and whether it ends the file."""

    anchor: str | None
    lines: tuple[tuple[str, str], ...] = ()
    """Each line's mark (" " context, "-" removed, "+" added) and text."""
    at_end: bool = False
    """Marked ``*** End of File``: it matches the end of the file first."""

    @property
    def old(self) -> list[str]:
        """The lines the hunk replaces (context and removed)."""
        return [text for mark, text in self.lines if mark != "+"]

    @property
    def new(self) -> list[str]:
        """The lines it puts there (context and added)."""
        return [text for mark, text in self.lines if mark != "-"]


PatchAction = Literal["add", "delete", "update"]
"""What a patch does to one file."""


@dataclass(frozen=True)
class FileChange:
    """What the patch does to one file."""

    action: PatchAction
    path: str
    move_to: str | None = None
    lines: tuple[str, ...] = ()
    """An added file's lines."""
    hunks: tuple[Hunk, ...] = ()


_NUMBERED_HUNK = re.compile(r"^@@ -\d+(,\d+)? \+\d+(,\d+)? @@")
_HEREDOC = re.compile(r"^(?:apply_patch\s+)?<<-?\s*['\"]?(\w+)['\"]?\s*$")

_Line = tuple[int, str]
"""A line of the patch and its number (1-based), for the errors."""


def parse_patch(text: str) -> list[FileChange]:
    """The file changes of a patch; ``EditError`` saying what is wrong with it, and where.

    Phases: the patch's lines (unwrapped, framed by its begin and end markers), its sections (a file header and
    the lines under it), each section's body by its action; then the checks that need every section."""
    changes = [_section(action, path, body) for action, path, body in _sections(_patch_lines(text))]
    for change in changes:
        if change.action == "update" and not any(h.lines for h in change.hunks) and not change.move_to:
            raise EditError(f"the update of {change.path} has no changes")
    if not changes:
        raise EditError("the patch changes no file")
    return changes


def _patch_lines(text: str) -> list[str]:
    """The patch's lines from its begin marker to its end marker, without a wrapper or carriage returns."""
    lines = [line.removesuffix("\r") for line in _unwrap(text.strip().split("\n"))]
    if not lines or lines[0].strip() != BEGIN:
        raise EditError(f"the patch must start with '{BEGIN}'")
    if lines[-1].strip() != END:
        raise EditError(f"the patch must end with '{END}'")
    return lines


def _unwrap(lines: list[str]) -> list[str]:
    """The patch without a Markdown fence or a shell heredoc around it (models often add one)."""
    if len(lines) >= 2 and lines[0].startswith("```") and lines[-1].strip() == "```":
        lines = lines[1:-1]
    if len(lines) >= 2 and (match := _HEREDOC.match(lines[0].strip())) and lines[-1].strip() == match.group(1):
        lines = lines[1:-1]
    return lines


def _sections(lines: list[str]) -> Iterator[tuple[PatchAction, str, list[_Line]]]:
    """Each file section: its action, its path and the numbered lines under its header. A section is yielded
    before the next header is read, so errors are raised in the order of the lines that cause them."""
    header: tuple[PatchAction, str] | None = None
    body: list[_Line] = []
    for number, line in enumerate(lines[1:-1], start=2):
        if not line.startswith((ADD, DELETE, UPDATE)):
            if header is None:
                raise EditError(f"line {number} comes before any '*** Add/Update/Delete File:' line: {line!r}")
            body.append((number, line))
            continue
        if header is not None:
            yield *header, body
        header, body = _header(number, line), []
    if header is not None:
        yield *header, body


def _header(number: int, line: str) -> tuple[PatchAction, str]:
    """A file header's action and path."""
    action: PatchAction = "add" if line.startswith(ADD) else "delete" if line.startswith(DELETE) else "update"
    path = line.split(": ", 1)[1].strip()
    if not path:
        raise EditError(f"line {number} names no file: {line!r}")
    return action, path


def _section(action: PatchAction, path: str, body: list[_Line]) -> FileChange:
    """The change one section makes, its body read as its action wants."""
    match action:
        case "add":
            return FileChange("add", path, lines=tuple(_added(body)))
        case "delete":
            for number, line in body:
                if line.strip():
                    raise EditError(f"line {number}: a deleted file takes no lines: {line!r}")
            return FileChange("delete", path)
        case "update":
            return _update(path, body)
        case _:
            assert_never(action)


def _added(body: list[_Line]) -> Iterator[str]:
    """An added file's lines, each without its '+'."""
    for number, line in body:
        if not line.startswith("+"):
            raise EditError(f"line {number}: every line of an added file starts with '+': {line!r}")
        yield line[1:]


def _update(path: str, body: list[_Line]) -> FileChange:
    """An update: its move (a '*** Move to:' line before the first hunk) and its hunks. An '@@' line starts a
    hunk; lines before the first one start a hunk without an anchor."""
    move_to: str | None = None
    drafts: list[tuple[str | None, list[tuple[str, str]]]] = []
    at_end: set[int] = set()
    for _, line in body:
        if line.startswith(MOVE) and not drafts:
            move_to = line[len(MOVE) :].strip()
        elif line.startswith("@@"):
            drafts.append((None if _NUMBERED_HUNK.match(line) else line[2:].strip() or None, []))
        elif line.strip() == END_OF_FILE:
            if drafts:
                at_end.add(len(drafts) - 1)
        elif not line.startswith("\\"):  # "\ No newline at end of file", from unified diffs, is skipped
            if not drafts:
                drafts.append((None, []))
            drafts[-1][1].append((line[:1], line[1:]) if line[:1] in ("+", "-", " ") else (" ", line))
    hunks = tuple(Hunk(anchor, _trimmed(lines), i in at_end) for i, (anchor, lines) in enumerate(drafts))
    return FileChange("update", path, move_to=move_to, hunks=hunks)


def _trimmed(lines: list[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """A hunk's lines without the blank lines at its end (a blank line before the next marker)."""
    while lines and lines[-1] == (" ", ""):
        lines.pop()
    return tuple(lines)


def apply_hunks(text: str, hunks: Sequence[Hunk], shown: str) -> str:
    """``text`` with every hunk applied in order; ``EditError`` naming the hunk that does not match.

    Only ``\\n`` splits lines, so everything outside the hunks stays byte for byte (a CRLF line keeps its
    ``\\r``, which matching ignores; lines the patch adds to a CRLF file get one too)."""
    ends_with_newline = text.endswith("\n")
    lines = text.split("\n")
    if ends_with_newline:
        lines.pop()
    crlf = "\r\n" in text
    cursor = 0
    for number, hunk in enumerate(hunks, start=1):
        if hunk.anchor is not None:
            found = _find(lines, [hunk.anchor], cursor)
            if found is None:
                raise EditError(f"hunk {number} of {shown}: its '@@ {hunk.anchor}' line was not found")
            cursor = found + 1
        if not hunk.old:  # only additions: after the anchor, after the previous hunk, or at the end
            at = cursor if hunk.anchor is not None or number > 1 else len(lines)
            added = [line + "\r" if crlf else line for line in hunk.new]
            lines[at:at] = added
            cursor = at + len(added)
            continue
        found = _find(lines, hunk.old, cursor, at_end=hunk.at_end)
        if found is None:
            wanted = "\n".join(hunk.old[:6])
            raise EditError(
                f"hunk {number} of {shown} does not match the file: these lines were not found (after the previous "
                f"hunk):\n{wanted}\nRead the file again and make the context and '-' lines match it."
            )
        # Context lines stay as the file has them (they may have matched loosely); the rest is the patch's.
        replacement: list[str] = []
        at = found
        for mark, body in hunk.lines:
            if mark == " ":
                replacement.append(lines[at])
            elif mark == "+":
                replacement.append(body + "\r" if crlf else body)
            at += mark != "+"
        lines[found:at] = replacement
        cursor = found + len(replacement)
    return "\n".join(lines) + ("\n" if ends_with_newline or (not text and lines) else "")


def _find(lines: list[str], wanted: list[str], start: int, *, at_end: bool = False) -> int | None:
    """Where ``wanted`` starts in ``lines`` at or after ``start`` (a hunk at the file's end: there first):
    exactly (but for a CRLF line's ``\\r``), else ignoring trailing whitespace, else surrounding whitespace."""
    last = len(lines) - len(wanted)
    for normal in (lambda s: s.removesuffix("\r"), str.rstrip, str.strip):
        target = [normal(w) for w in wanted]
        starts = [last, *range(start, last + 1)] if at_end and last >= start else range(start, last + 1)
        for at in starts:
            if [normal(x) for x in lines[at : at + len(wanted)]] == target:
                return at
    return None
