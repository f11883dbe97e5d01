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
may name a line to find first. ``*** Move to: path`` after ``*** Update File`` renames the file. The whole
patch is checked against the files before anything is written, so a patch that does not apply changes
nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pydantic_ai import RunContext

from codling.errors import EditError, MissingPathError, PathError
from codling.tools.base import ToolOutput
from codling.tools.files import summary_diff
from codling.tools.ports import FileDiff, Location, PermissionRequest, ToolKind
from codling.tools.toolset import ToolDeps

BEGIN, END = "*** Begin Patch", "*** End Patch"
ADD, DELETE, UPDATE, MOVE = "*** Add File: ", "*** Delete File: ", "*** Update File: ", "*** Move to: "
END_OF_FILE = "*** End of File"


@dataclass
class Hunk:
    """One change in an updated file: an optional line to find first, the lines it replaces, and with what."""

    anchor: str | None
    lines: list[tuple[str, str]] = field(default_factory=list)
    """Each line's mark (" " context, "-" removed, "+" added) and text."""

    @property
    def old(self) -> list[str]:
        """The lines the hunk replaces (context and removed)."""
        return [text for mark, text in self.lines if mark != "+"]

    @property
    def new(self) -> list[str]:
        """The lines it puts there (context and added)."""
        return [text for mark, text in self.lines if mark != "-"]


@dataclass
class FileChange:
    """What the patch does to one file."""

    action: str  # "add", "delete" or "update"
    path: str
    move_to: str | None = None
    lines: list[str] = field(default_factory=list)
    """An added file's lines."""
    hunks: list[Hunk] = field(default_factory=list)


def parse_patch(text: str) -> list[FileChange]:
    """The file changes of a patch; ``EditError`` saying what is wrong with it, and where."""
    lines = text.strip().splitlines()
    if not lines or lines[0].strip() != BEGIN:
        raise EditError(f"the patch must start with '{BEGIN}'")
    if lines[-1].strip() != END:
        raise EditError(f"the patch must end with '{END}'")
    changes: list[FileChange] = []
    for number, line in enumerate(lines[1:-1], start=2):
        if line.startswith((ADD, DELETE, UPDATE)):
            action = "add" if line.startswith(ADD) else "delete" if line.startswith(DELETE) else "update"
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
            raise EditError(f"line {number}: a deleted file takes no lines: {line!r}")
        elif line.startswith(MOVE) and not change.hunks:
            change.move_to = line[len(MOVE) :].strip()
        elif line.startswith("@@"):
            change.hunks.append(Hunk(line[2:].strip() or None))
        elif line.strip() == END_OF_FILE:
            continue
        else:
            if not change.hunks:
                change.hunks.append(Hunk(None))
            hunk = change.hunks[-1]
            mark, body = (line[:1], line[1:]) if line[:1] in ("+", "-", " ") else (" ", line)
            hunk.lines.append((mark, body))
    for change in changes:
        if change.action == "update" and not change.hunks and not change.move_to:
            raise EditError(f"the update of {change.path} has no changes")
    if not changes:
        raise EditError("the patch changes no file")
    return changes


def apply_hunks(text: str, hunks: list[Hunk], shown: str) -> str:
    """``text`` with every hunk applied in order; ``EditError`` naming the hunk that does not match."""
    newline = "\r\n" if "\r\n" in text else "\n"
    ends_with_newline = text.endswith(("\n", "\r\n")) or not text
    lines = text.splitlines()
    cursor = 0
    for number, hunk in enumerate(hunks, start=1):
        if hunk.anchor is not None:
            found = _find(lines, [hunk.anchor], cursor)
            if found is None:
                raise EditError(f"hunk {number} of {shown}: its '@@ {hunk.anchor}' line was not found")
            cursor = found + 1 if hunk.old else found
        if not hunk.old:  # only additions: they go where the anchor (or the previous hunk) left off
            at = cursor if hunk.anchor is not None or number > 1 else len(lines)
            lines[at:at] = hunk.new
            cursor = at + len(hunk.new)
            continue
        found = _find(lines, hunk.old, cursor)
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
                replacement.append(body)
            at += mark != "+"
        lines[found:at] = replacement
        cursor = found + len(replacement)
    return newline.join(lines) + (newline if ends_with_newline and lines else "")


def _find(lines: list[str], wanted: list[str], start: int) -> int | None:
    """Where ``wanted`` starts in ``lines`` at or after ``start``: exactly, else ignoring trailing whitespace,
    else ignoring surrounding whitespace."""
    for normal in (lambda s: s, str.rstrip, str.strip):
        target = [normal(w) for w in wanted]
        for at in range(start, len(lines) - len(wanted) + 1):
            if [normal(x) for x in lines[at : at + len(wanted)]] == target:
                return at
    return None


async def apply_patch(ctx: RunContext[ToolDeps], patch: str) -> ToolOutput:
    """Apply a patch that adds, deletes, updates or moves files, in the apply_patch format.

    The patch starts with '*** Begin Patch' and ends with '*** End Patch'. Each file starts with
    '*** Add File: <path>' (then every line prefixed with '+'), '*** Delete File: <path>', or
    '*** Update File: <path>' (optionally followed by '*** Move to: <new path>') and its hunks: an optional
    '@@ <a line to find first>' line, then the changed lines with a few lines of context, each prefixed with
    ' ' (context), '-' (removed) or '+' (added). Hunks apply in order. Nothing is written unless the whole
    patch applies. The user may be asked to approve each file's change.

    Args:
        patch: The patch text, from '*** Begin Patch' to '*** End Patch'.
    """
    deps = ctx.deps
    workspace = deps.workspace
    planned: list[tuple[FileChange, Path, Path | None, str | None, str | None]] = []
    for change in parse_patch(patch):
        target = workspace.resolve(change.path)
        shown = workspace.display(target)
        destination = workspace.resolve(change.move_to) if change.move_to else None
        try:
            original: str | None = await deps.fs.read_text(target)
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
        planned.append((change, target, destination, original, updated))
    changed: list[Path] = []
    report: list[str] = []
    for change, target, destination, original, updated in planned:
        shown = workspace.display(target)
        final = destination or target
        diff = FileDiff(final, original, updated or "")
        kind: ToolKind = "delete" if updated is None or destination is not None else "edit"
        request = PermissionRequest(
            tool_call_id=ctx.tool_call_id or "",
            tool_name="apply_patch",
            kind=kind,
            title=f"{'Delete' if updated is None else 'Patch'} {shown}"
            + (f" → {workspace.display(final)}" if destination else ""),
            subject=str(target),
            diff=diff if updated is not None else None,
            raw_input={"patch": patch},
        )
        await deps.permissions.check(request)
        if updated is not None:
            await deps.fs.write_text(final, updated)
            changed.append(final)
        if updated is None or destination is not None:
            try:
                target.unlink()
            except OSError as e:
                raise PathError(f"cannot delete {shown}: {e.strerror or e}") from e
            changed.append(target)
        letter = {"add": "A", "delete": "D", "update": "M"}[change.action]
        what = f"{letter} {shown}" + (f" → {workspace.display(final)}" if destination else "")
        body = summary_diff(original or "", updated) if updated is not None else ""
        report.append(f"{what}\n{body}".rstrip())
    only = planned[0] if len(planned) == 1 else None
    diff_shown = None
    if only is not None and only[4] is not None:
        diff_shown = FileDiff(only[2] or only[1], only[3], only[4])
    return ToolOutput(
        text="Applied the patch:\n" + "\n".join(r.splitlines()[0] for r in report),
        diff=diff_shown,
        locations=tuple(Location(p) for p in changed),
        summary="Applied a patch:\n" + "\n".join(report),
        changed=tuple(changed),
    )
