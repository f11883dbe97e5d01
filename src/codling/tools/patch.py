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

How a patch is read and an update's hunks are found is ``tools/patch_format.py``'s. The whole patch is checked
against the files, and every change approved, before anything is written, so a patch that does not apply (or is not
allowed) changes nothing. A write or delete that fails part-way is undone with every change made before it
(``tools/rollback.py``), so a patch that fails changes nothing either; the error says so, or names exactly what
could not be undone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic_ai import RunContext

from codling.errors import EditError, MissingPathError, PathError
from codling.tools.base import ShownResult, ToolOutput
from codling.tools.deps import ToolDeps
from codling.tools.diffs import SUMMARY_DIFF_CHARS, change_size, summary_diff
from codling.tools.files import lexical_path, read_content
from codling.tools.patch_format import FileChange, apply_hunks, parse_patch
from codling.tools.ports import PermissionRequest
from codling.tools.rollback import ChangeGroup, UndoFailure
from codling.tools.workspace import Workspace
from codling.vocabulary import FileDiff, Location, ToolKind


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
    planned = await _plan(ctx.deps, parse_patch(patch))
    approved = await _approve(ctx, planned, patch)
    applied = await _apply(ctx.deps, approved)
    return _report(ctx.deps.workspace, applied)


async def _plan(deps: ToolDeps, changes: Sequence[FileChange]) -> tuple[_Planned, ...]:
    """Every change checked against the files and its new content made, in memory: a patch that does not apply
    fails here, before anything is asked or written."""
    named: set[Path] = set()
    return tuple([await _plan_file(deps, change, named) for change in changes])


async def _plan_file(deps: ToolDeps, change: FileChange, named: set[Path]) -> _Planned:
    """One file's change, checked against the file; ``named`` holds the paths earlier sections change."""
    workspace = deps.workspace
    target = workspace.resolve(change.path)
    destination = workspace.resolve(change.move_to) if change.move_to else None
    if destination == target:
        destination = None  # a move onto itself is no move
    for path in (target, destination):
        if path is not None and path in named:
            raise EditError(f"the patch changes {workspace.display(path)} twice; put all its changes in one section")
        if path is not None:
            named.add(path)
    try:
        original: str | None = await read_content(deps, target)
    except MissingPathError:
        original = None
    updated = _updated(change, original, workspace.display(target))
    if destination is not None and destination.exists():
        raise EditError(f"{workspace.display(destination)} already exists; the patch would overwrite it")
    return _Planned(
        change,
        target,
        destination,
        original,
        updated,
        lexical_path(workspace, change.path),
        lexical_path(workspace, change.move_to) if destination is not None and change.move_to else None,
        _mode(target) if original is not None else None,
    )


def _updated(change: FileChange, original: str | None, shown: str) -> str | None:
    """The file's content after ``change`` (None: it is deleted), given its content now (None: it is absent)."""
    if change.action == "add":
        if original is not None:
            raise EditError(f"{shown} already exists; update it instead of adding it")
        return "".join(f"{line}\n" for line in change.lines)
    if original is None:
        raise EditError(f"{shown} does not exist, so it cannot be {change.action}d")
    return None if change.action == "delete" else apply_hunks(original, change.hunks, shown)


@dataclass(frozen=True)
class _Approved:
    """The planned changes once every one was allowed: only these are applied."""

    changes: tuple[_Planned, ...]


async def _approve(ctx: RunContext[ToolDeps], planned: tuple[_Planned, ...], patch: str) -> _Approved:
    """Ask for every change (``PermissionDenied`` for the first refused) before any is made, so a rejection leaves
    all the files as they were."""
    for item in planned:
        await ctx.deps.permissions.check(item.request(ctx.tool_call_id or "", patch, ctx.deps.workspace))
    return _Approved(planned)


@dataclass(frozen=True)
class _Applied:
    """The changes made, and kept."""

    changes: tuple[_Planned, ...]
    changed: tuple[Path, ...]
    """Every path written or deleted, in order."""
    left: tuple[Path, ...]
    """Deleted files' hidden copies that could not be removed."""


async def _apply(deps: ToolDeps, approved: _Approved) -> _Applied:
    """Make the approved changes as one ``ChangeGroup``: if one fails (or the turn is cancelled), every change
    already made is undone and ``PathError`` says so, or names what could not be undone."""
    changed: list[Path] = []
    group = ChangeGroup(deps.fs)
    for item in approved.changes:
        try:
            changed.extend(await _make(group, item))
        except BaseException as e:  # cancellation too: a patch is never left half applied
            failures = await group.undo()
            if not isinstance(e, (OSError, PathError)):
                raise
            raise _not_applied(deps.workspace, item, e, failures) from e
    return _Applied(approved.changes, tuple(changed), tuple(group.keep()))


async def _make(group: ChangeGroup, item: _Planned) -> list[Path]:
    """Make one file's change in ``group``; the paths written or deleted."""
    made: list[Path] = []
    if item.updated is not None:
        await group.write(item.final, item.updated, None if item.destination else item.original, item.mode)
        made.append(item.final)
    if item.updated is None or item.destination is not None:
        # A symbolic link is deleted itself, never the file it points to.
        await group.delete(item.lexical if item.lexical.is_symlink() else item.target)
        made.append(item.target)
    return made


def _not_applied(
    workspace: Workspace, item: _Planned, error: OSError | PathError, failures: list[UndoFailure]
) -> PathError:
    """The error of a patch whose change of ``item`` failed, once the changes made before it were undone
    (``failures``: those that could not be)."""
    reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
    stopped = f"the patch could not be applied: changing {workspace.display(item.target)} failed: {reason}."
    if not failures:
        return PathError(f"{stopped} Nothing was changed (the changes already made were undone).")
    lost = "; ".join(f"{workspace.display(f.path)} ({f.reason})" for f in failures)
    return PathError(
        f"{stopped} Undoing the changes already made failed for: {lost}. Every other file is as it was; "
        "tell the user which files to check."
    )


def _report(workspace: Workspace, applied: _Applied) -> ToolOutput:
    """What the model, the user and the history are told of an applied patch."""
    planned = applied.changes
    summaries = _summaries(workspace, planned)
    notes = "".join(f"\n(could not remove {workspace.display(p)}, the deleted file's copy)" for p in applied.left)
    only = planned[0] if len(planned) == 1 else None
    # Every file's diff and a title saying what was done: an editor otherwise keeps the title of the last
    # permission request, which named one file.
    names = [workspace.display(item.final) for item in planned]
    title = "Patched " + (", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else names[0])
    diffs = tuple(FileDiff(item.final, item.original, item.updated or "") for item in planned) if not only else ()
    return ToolOutput(
        text="Applied the patch:\n" + "\n".join(r.splitlines()[0] for r in summaries) + notes,
        diff=FileDiff(only.final, only.original, only.updated) if only and only.updated is not None else None,
        locations=tuple(Location(p) for p in applied.changed),
        summary="Applied a patch:\n" + "\n".join(summaries),
        changed=applied.changed,
        shown=ShownResult(title=title, diffs=diffs),
    )


def _summaries(workspace: Workspace, planned: tuple[_Planned, ...]) -> list[str]:
    """Each file's line and diff for the summary. The diffs share one edit's budget, however many files the patch
    touches: each file gets its share (at least _MIN_DIFF_CHARS, while the budget lasts); every file keeps its
    line and change size."""
    share, budget, summaries = max(SUMMARY_DIFF_CHARS // len(planned), _MIN_DIFF_CHARS), SUMMARY_DIFF_CHARS, []
    for item in planned:
        chars = min(share, budget) if budget >= _MIN_DIFF_CHARS else 0
        budget -= chars
        summaries.append(item.report(workspace, chars))
    return summaries


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
