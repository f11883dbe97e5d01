"""The apply_patch tool: several edits, in one or more files, as one patch in the format many models know.

::

    *** Begin Patch
    *** Update File: src/app.py
    @@ def greet():
    -    return "hi"
    +    return "hello"
    *** Add File: NOTES.md
    +# Notes
    *** Delete File: old.txt
    *** End Patch

An update's hunks are found in order, each after the previous one: their context and removed lines must match
the file (exactly, else ignoring trailing whitespace, else ignoring surrounding whitespace); an ``@@`` line
may name a line to find first; ``*** End of File`` matches a hunk at the end first. ``*** Move to: path``
after ``*** Update File`` renames the file. The whole patch is checked against the files, and every change
approved, before anything is written, so a patch that does not apply (or is not allowed) changes nothing.
A write or delete that fails part-way is undone with every change made before it (``tools/rollback.py``),
so a patch that fails changes nothing either; the error says so, or names exactly what could not be undone.
A Markdown fence or a shell heredoc around the patch is ignored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic_ai import RunContext

from codling.errors import EditError, MissingPathError, PathError
from codling.tools.base import ShownResult, ToolOutput
from codling.tools.deps import ToolDeps
from codling.tools.diffs import SUMMARY_DIFF_CHARS, change_size, summary_diff
from codling.tools.files import lexical_path, read_content
from codling.tools.ports import PermissionRequest
from codling.tools.rollback import ChangeGroup
from codling.tools.workspace import Workspace
from codling.vocabulary import FileDiff, Location, ToolKind

BEGIN, END = "*** Begin Patch", "*** End Patch"
ADD, DELETE, UPDATE, MOVE = "*** Add File: ", "*** Delete File: ", "*** Update File: ", "*** Move to: "
END_OF_FILE = "*** End of File"


@dataclass
class Hunk:
    """One change in an updated file: an optional line to find first, its lines, and whether it ends the file."""

    anchor: str | None
    lines: list[tuple[str, str]] = field(default_factory=list)
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


@dataclass
class FileChange:
    """What the patch does to one file."""

    action: PatchAction
    path: str
    move_to: str | None = None
    lines: list[str] = field(default_factory=list)
    """An added file's lines."""
    hunks: list[Hunk] = field(default_factory=list)


_NUMBERED_HUNK = re.compile(r"^@@ -\d+(,\d+)? \+\d+(,\d+)? @@")
_HEREDOC = re.compile(r"^(?:apply_patch\s+)?<<-?\s*['\"]?(\w+)['\"]?\s*$")


def _unwrap(lines: list[str]) -> list[str]:
    """The patch without a Markdown fence or a shell heredoc around it (models often add one)."""
    if len(lines) >= 2 and lines[0].startswith("```") and lines[-1].strip() == "```":
        lines = lines[1:-1]
    if len(lines) >= 2 and (match := _HEREDOC.match(lines[0].strip())) and lines[-1].strip() == match.group(1):
        lines = lines[1:-1]
    return lines


def parse_patch(text: str) -> list[FileChange]:
    """The file changes of a patch; ``EditError`` saying what is wrong with it, and where."""
    lines = _unwrap(text.strip().split("\n"))
    lines = [line.removesuffix("\r") for line in lines]
    if not lines or lines[0].strip() != BEGIN:
        raise EditError(f"the patch must start with '{BEGIN}'")
    if lines[-1].strip() != END:
        raise EditError(f"the patch must end with '{END}'")
    changes: list[FileChange] = []
    for number, line in enumerate(lines[1:-1], start=2):
        if line.startswith((ADD, DELETE, UPDATE)):
            action: PatchAction = "add" if line.startswith(ADD) else "delete" if line.startswith(DELETE) else "update"
            path = line.split(": ", 1)[1].strip()
            if not path:
                raise EditError(f"line {number} names no file: {line!r}")
            changes.append(FileChange(action, path))
            continue
        if not changes:
            raise EditError(f"line {number} comes before any '*** Add/Update/Delete File:' line: {line!r}")
        change = changes[-1]
        if change.action == "add":
            if not line.startswith("+"):
                raise EditError(f"line {number}: every line of an added file starts with '+': {line!r}")
            change.lines.append(line[1:])
        elif change.action == "delete":
            if line.strip():
                raise EditError(f"line {number}: a deleted file takes no lines: {line!r}")
        elif line.startswith(MOVE) and not change.hunks:
            change.move_to = line[len(MOVE) :].strip()
        elif line.startswith("@@"):
            anchor = None if _NUMBERED_HUNK.match(line) else line[2:].strip() or None
            change.hunks.append(Hunk(anchor))
        elif line.strip() == END_OF_FILE:
            if change.hunks:
                change.hunks[-1].at_end = True
        elif line.startswith("\\"):  # "\ No newline at end of file", from unified diffs
            continue
        else:
            if not change.hunks:
                change.hunks.append(Hunk(None))
            mark, body = (line[:1], line[1:]) if line[:1] in ("+", "-", " ") else (" ", line)
            change.hunks[-1].lines.append((mark, body))
    for change in changes:
        for hunk in change.hunks:
            while hunk.lines and hunk.lines[-1] == (" ", ""):  # a blank line before the next marker
                hunk.lines.pop()
        if change.action == "update" and not any(h.lines for h in change.hunks) and not change.move_to:
            raise EditError(f"the update of {change.path} has no changes")
    if not changes:
        raise EditError("the patch changes no file")
    return changes


def apply_hunks(text: str, hunks: list[Hunk], shown: str) -> str:
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


async def apply_patch(ctx: RunContext[ToolDeps], patch: str) -> ToolOutput:
    """Apply a patch that adds, deletes, updates or moves files, in the apply_patch format.

    The patch starts with '*** Begin Patch' and ends with '*** End Patch'. Each file starts with
    '*** Add File: <path>' (then every line prefixed with '+'), '*** Delete File: <path>', or
    '*** Update File: <path>' (optionally followed by '*** Move to: <new path>') and its hunks: an optional
    '@@ <a line to find first>' line, then the changed lines with a few lines of context, each prefixed with
    ' ' (context), '-' (removed) or '+' (added). Hunks apply in order; mark a hunk that ends the file with
    '*** End of File'. Nothing is written unless the whole patch applies and every file's change is approved
    (the user may be asked for each). A file may appear in one section only.

    Args:
        patch: The patch text, from '*** Begin Patch' to '*** End Patch'.
    """
    deps = ctx.deps
    workspace = deps.workspace
    planned: list[_Planned] = []
    named: set[Path] = set()
    for change in parse_patch(patch):
        target = workspace.resolve(change.path)
        shown = workspace.display(target)
        destination = workspace.resolve(change.move_to) if change.move_to else None
        if destination == target:
            destination = None  # a move onto itself is no move
        for path in (target, destination):
            if path is not None and path in named:
                raise EditError(
                    f"the patch changes {workspace.display(path)} twice; put all its changes in one section"
                )
            if path is not None:
                named.add(path)
        try:
            original: str | None = await read_content(deps, target)
        except MissingPathError:
            original = None
        if change.action == "add":
            if original is not None:
                raise EditError(f"{shown} already exists; update it instead of adding it")
            updated: str | None = "".join(f"{line}\n" for line in change.lines)
        elif original is None:
            raise EditError(f"{shown} does not exist, so it cannot be {change.action}d")
        elif change.action == "delete":
            updated = None
        else:
            updated = apply_hunks(original, change.hunks, shown)
        if destination is not None and destination.exists():
            raise EditError(f"{workspace.display(destination)} already exists; the patch would overwrite it")
        planned.append(
            _Planned(
                change,
                target,
                destination,
                original,
                updated,
                lexical_path(workspace, change.path),
                lexical_path(workspace, change.move_to) if destination is not None and change.move_to else None,
                _mode(target) if original is not None else None,
            )
        )
    # Every change is allowed before any is made, so a rejection leaves all the files as they were.
    for item in planned:
        await deps.permissions.check(item.request(ctx.tool_call_id or "", patch, workspace))
    changed: list[Path] = []
    group = ChangeGroup(deps.fs)
    for item in planned:
        try:
            if item.updated is not None:
                await group.write(item.final, item.updated, None if item.destination else item.original, item.mode)
                changed.append(item.final)
            if item.updated is None or item.destination is not None:
                # A symbolic link is deleted itself, never the file it points to.
                await group.delete(item.lexical if item.lexical.is_symlink() else item.target)
                changed.append(item.target)
        except BaseException as e:  # cancellation too: a patch is never left half applied
            failures = await group.undo()
            if not isinstance(e, (OSError, PathError)):
                raise
            reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
            stopped = f"the patch could not be applied: changing {workspace.display(item.target)} failed: {reason}."
            if not failures:
                raise PathError(f"{stopped} Nothing was changed (the changes already made were undone).") from e
            lost = "; ".join(f"{workspace.display(f.path)} ({f.reason})" for f in failures)
            raise PathError(
                f"{stopped} Undoing the changes already made failed for: {lost}. Every other file is as it was; "
                "tell the user which files to check."
            ) from e
    left = group.keep()
    # The diffs in the summary share one edit's budget, however many files the patch touches: each file gets
    # its share (at least _MIN_DIFF_CHARS, while the budget lasts); every file keeps its line and change size.
    share, budget, report = max(SUMMARY_DIFF_CHARS // len(planned), _MIN_DIFF_CHARS), SUMMARY_DIFF_CHARS, []
    for item in planned:
        chars = min(share, budget) if budget >= _MIN_DIFF_CHARS else 0
        budget -= chars
        report.append(item.report(workspace, chars))
    notes = "".join(f"\n(could not remove {workspace.display(p)}, the deleted file's copy)" for p in left)
    only = planned[0] if len(planned) == 1 else None
    # Every file's diff and a title saying what was done: an editor otherwise keeps the title of the last
    # permission request, which named one file.
    names = [workspace.display(item.final) for item in planned]
    title = "Patched " + (", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else names[0])
    diffs = tuple(FileDiff(item.final, item.original, item.updated or "") for item in planned) if not only else ()
    return ToolOutput(
        text="Applied the patch:\n" + "\n".join(r.splitlines()[0] for r in report) + notes,
        diff=FileDiff(only.final, only.original, only.updated) if only and only.updated is not None else None,
        locations=tuple(Location(p) for p in changed),
        summary="Applied a patch:\n" + "\n".join(report),
        changed=tuple(changed),
        shown=ShownResult(title=title, diffs=diffs),
    )


@dataclass(frozen=True)
class _Planned:
    """One file change, checked against the file and ready to ask for and to make."""

    change: FileChange
    target: Path
    destination: Path | None
    original: str | None
    updated: str | None
    """The new content (None: the file is deleted)."""
    lexical: Path
    """The path as the patch named it (not resolved): a symbolic link to delete is this one."""
    lexical_destination: Path | None
    mode: int | None
    """The file's mode now (``None``: it does not exist), restored if the patch is undone."""

    @property
    def final(self) -> Path:
        """Where the content ends up."""
        return self.destination or self.target

    def request(self, call_id: str, patch: str, workspace: Workspace) -> PermissionRequest:
        """What the user is asked for this file."""
        shown = workspace.display(self.target)
        kind: ToolKind = "move" if self.destination else "delete" if self.updated is None else "edit"
        verb = {"move": "Move", "delete": "Delete", "edit": "Patch"}[kind]
        moved = f" → {workspace.display(self.destination)}" if self.destination else ""
        return PermissionRequest(
            tool_call_id=call_id,
            tool_name="apply_patch",
            kind=kind,
            title=f"{verb} {shown}{moved}",
            subject=str(self.target),
            diff=FileDiff(self.final, self.original, self.updated) if self.updated is not None else None,
            raw_input={"patch": patch},
            paths=tuple(
                dict.fromkeys(p for p in (self.lexical, self.target, self.lexical_destination, self.destination) if p)
            ),
        )

    def report(self, workspace: Workspace, diff_chars: int = SUMMARY_DIFF_CHARS) -> str:
        """A line saying what was done to the file and its change size, then its diff within ``diff_chars``
        characters (for the summary)."""
        letter = {"add": "A", "delete": "D", "update": "M"}[self.change.action]
        moved = f" → {workspace.display(self.final)}" if self.destination else ""
        size = f" ({change_size(self.original or '', self.updated or '')})"
        shown = self.updated is not None and diff_chars > 0
        body = summary_diff(self.original or "", self.updated or "", max_chars=diff_chars) if shown else ""
        return f"{letter} {workspace.display(self.target)}{moved}{size}\n{body}".rstrip()


_MIN_DIFF_CHARS = 150
"""The smallest piece of diff worth keeping for a file in a patch's summary."""


def _mode(path: Path) -> int | None:
    try:
        return path.stat().st_mode
    except OSError:
        return None
