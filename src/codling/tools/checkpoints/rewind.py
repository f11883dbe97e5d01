"""Putting the workspace back as a checkpoint holds it: the plan (what each file will go through, with line
counts for a preview) and its application.

Only covered files are touched: a file the checkpoint does not hold, and that is covered now, was made after it
and is deleted; one it holds is written back (content, then permission bits) or made a symbolic link again.
Ignored and uncovered files are left as they are. Directories left empty by a deletion are removed, up to the
workspace; directories a restored file needs are made.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, assert_never

from codling.errors import CheckpointError
from codling.tools.atomic import replace_file
from codling.tools.checkpoints.objects import ObjectStore
from codling.tools.checkpoints.scan import CAPPED, FileState, Uncovered, examined

LINE_COUNT_MAX_BYTES = 1024 * 1024
"""Lines are counted for the preview only in files up to this size (difflib's cost grows faster)."""

Action = Literal["restore", "remove", "recreate", "mode"]


@dataclass(frozen=True)
class FileChange:
    """What a rewind does to one file: ``restore`` its old content, ``remove`` it (made after the checkpoint),
    ``recreate`` it (deleted after), or set its old ``mode``; lines added and removed by doing so (None: not
    counted, for a binary or large file)."""

    path: str
    action: Action
    added: int | None = None
    removed: int | None = None


def plan(
    now: Mapping[str, FileState],
    then: Mapping[str, FileState],
    then_uncovered: Sequence[Uncovered] = (),
    now_uncovered: Sequence[Uncovered] = (),
) -> list[FileChange]:
    """The changes taking the workspace from ``now`` to ``then``, in path order (without line counts). A file
    ``then`` does not hold is removed only if ``then`` covered its path: one it did not cover (ignored then,
    too large, past the cap) may have been there all along, and is left as it is. A file not covered now (grown
    too large, unreadable) is left as it is too: what it holds could not be saved, so it is never overwritten."""
    changes = []
    kept = _Uncovered(then_uncovered)
    unsaved = {u.path for u in now_uncovered if examined(u)}
    for path in sorted(now.keys() | then.keys()):
        old, new = then.get(path), now.get(path)
        if old == new or path in unsaved:
            continue
        if old is None:
            if not kept.holds(path):
                changes.append(FileChange(path, "remove"))
        elif new is None:
            changes.append(FileChange(path, "recreate"))
        elif old.digest == new.digest and old.kind == new.kind:
            changes.append(FileChange(path, "mode"))
        else:
            changes.append(FileChange(path, "restore"))
    return changes


class _Uncovered:
    """Paths a checkpoint did not cover: exact ones, whole directories (``build/``), or anything past the cap."""

    def __init__(self, uncovered: Sequence[Uncovered]) -> None:
        self._paths = {u.path for u in uncovered}
        self._directories = tuple(u.path for u in uncovered if u.path.endswith("/"))
        self._capped = CAPPED in self._paths

    def holds(self, path: str) -> bool:
        return self._capped or path in self._paths or path.startswith(self._directories)


def counted(
    change: FileChange, now: Mapping[str, FileState], then: Mapping[str, FileState], objects: ObjectStore
) -> FileChange:
    """``change`` with the lines a rewind adds and removes, when both sides are small text."""
    before, after = now.get(change.path), then.get(change.path)
    if any(s is not None and (s.kind != "file" or s.size > LINE_COUNT_MAX_BYTES) for s in (before, after)):
        return change
    old = _lines(objects.get(before.digest)) if before is not None else []
    new = _lines(objects.get(after.digest)) if after is not None else []
    if old is None or new is None:
        return change
    added = removed = 0
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if tag != "equal":
            removed += i2 - i1
            added += j2 - j1
    return FileChange(change.path, change.action, added, removed)


def _lines(data: bytes) -> list[str] | None:
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8").splitlines()
    except UnicodeDecodeError:
        return None


def apply(root: Path, changes: list[FileChange], then: Mapping[str, FileState], objects: ObjectStore) -> None:
    """Make the workspace under ``root`` what ``then`` holds, by ``changes`` (from :func:`plan`): removals first
    (a directory may have to go before a file takes its name), then the rest. Nothing is changed if a path
    would lead outside the workspace (a symbolic link to elsewhere in its way, one checkpoints do not cover)."""
    real_root = root.resolve()
    for change in changes:
        _check_inside(root, real_root, change.path)
    for change in changes:
        if change.action == "remove":
            _remove(root, change.path)
    for change in changes:
        state = then.get(change.path)
        full = root / change.path
        try:
            match change.action:
                case "remove":
                    continue
                case "restore" | "recreate":
                    assert state is not None
                    _write(full, state, objects)
                case "mode":
                    assert state is not None
                    os.chmod(full, state.mode)
                case _:
                    assert_never(change.action)
        except OSError as e:
            raise CheckpointError(f"cannot put {change.path} back ({e.strerror or e})") from e


def _check_inside(root: Path, real_root: Path, path: str) -> None:
    """``CheckpointError`` unless ``path`` names a place under ``root`` that no symbolic link leads out of."""
    parts = path.split("/")
    if not path or path.startswith("/") or any(part in ("", ".", "..") for part in parts):
        raise CheckpointError(f"the checkpoint names {path!r}, which is no path inside the workspace; nothing changed")
    above = (root / path).parent
    while not above.exists() and above != root:  # the directories still to be made are made as directories
        above = above.parent
    if not above.resolve().is_relative_to(real_root):
        raise CheckpointError(
            f"{path} would be reached through a symbolic link leading outside the workspace "
            f"({above.relative_to(root)} → {above.resolve()}); nothing changed. Remove that link to rewind"
        )


def _write(full: Path, state: FileState, objects: ObjectStore) -> None:
    data = objects.get(state.digest)
    if full.is_dir() and not full.is_symlink():
        full.rmdir()  # a directory took the file's name: its covered files went with the removals (else: refused)
    full.parent.mkdir(parents=True, exist_ok=True)
    if state.kind == "link":
        if full.is_symlink() or full.exists():
            full.unlink()
        os.symlink(os.fsdecode(data), full)
        return
    if full.is_symlink():
        full.unlink()  # replace_file would write through the link
    replace_file(full, data)
    os.chmod(full, state.mode)


def _remove(root: Path, path: str) -> None:
    full = root / path
    try:
        full.unlink()
    except FileNotFoundError:
        pass
    except OSError as e:
        raise CheckpointError(f"cannot remove {path} ({e.strerror or e})") from e
    parent = full.parent
    while parent != root and parent.is_relative_to(root):
        try:
            parent.rmdir()  # only if empty: ignored files keep their directory
        except OSError:
            break
        parent = parent.parent
