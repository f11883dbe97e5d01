"""File changes that can be undone as a group: how ``apply_patch`` stays all or nothing.

Writes go through the ``FileSystem`` port (the editor's, when it offers one); deletions go to the local disk
(ACP has no delete method) and are made undoable by moving the file to a hidden name beside it
(``atomic.set_aside``), removed only when the whole group has succeeded. Undoing goes through the same ports,
newest change first: an overwritten file gets its old text (and mode) back, a created file and the directories
made for it are removed, a deleted file returns to its name (same inode, mode and owner).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from codling.tools.atomic import put_back, set_aside
from codling.tools.ports import FileSystem


@dataclass(frozen=True)
class _Step:
    path: Path
    undo: Callable[[], Awaitable[None]]
    aside: Path | None = None
    """A deleted file's hidden name, removed once the group is kept."""


@dataclass(frozen=True)
class UndoFailure:
    """A change that could not be undone, and why."""

    path: Path
    reason: str


class ChangeGroup:
    """Changes made one by one, then either all kept (:meth:`keep`) or all undone (:meth:`undo`)."""

    def __init__(self, fs: FileSystem) -> None:
        self._fs = fs
        self._steps: list[_Step] = []

    async def write(self, path: Path, content: str, old: str | None, old_mode: int | None) -> None:
        """Write ``content`` to ``path`` through the port; ``old`` is its text now (``None``: it does not
        exist) and ``old_mode`` its mode, which undoing restores."""
        if old is None:
            made = await asyncio.to_thread(_missing_directories, path.parent)
            # Recorded before the write: a write that fails may still have made directories or a file.
            self._steps.append(_Step(path, lambda: asyncio.to_thread(_remove_created, path, made)))
            await self._fs.write_text(path, content)
            return
        await self._fs.write_text(path, content)
        self._steps.append(_Step(path, lambda: self._restore(path, old, old_mode)))

    async def delete(self, path: Path) -> None:
        """Delete ``path`` (a symbolic link itself, not its target) so that it can still be undone."""
        aside = await asyncio.to_thread(set_aside, path)
        self._steps.append(_Step(path, lambda: asyncio.to_thread(put_back, aside, path), aside))

    async def undo(self) -> list[UndoFailure]:
        """Undo every change, newest first; return those that could not be undone (empty: all were)."""
        failures: list[UndoFailure] = []
        for step in reversed(self._steps):
            try:
                await step.undo()
            except Exception as e:  # every other step must still be undone
                reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
                failures.append(UndoFailure(step.path, reason))
        self._steps.clear()
        return failures

    def keep(self) -> list[Path]:
        """Make the changes final: remove the deleted files' hidden copies. Return the copies that could not
        be removed (left beside their old names)."""
        left: list[Path] = []
        for step in self._steps:
            if step.aside is not None:
                try:
                    os.unlink(step.aside)
                except OSError:
                    left.append(step.aside)
        self._steps.clear()
        return left

    async def _restore(self, path: Path, old: str, old_mode: int | None) -> None:
        await self._fs.write_text(path, old)
        if old_mode is not None:
            await asyncio.to_thread(_set_mode, path, old_mode)


def _missing_directories(directory: Path) -> list[Path]:
    """The directories (deepest first) that must be made for ``directory`` to exist."""
    missing: list[Path] = []
    while not directory.exists() and directory != directory.parent:
        missing.append(directory)
        directory = directory.parent
    return missing


def _remove_created(path: Path, directories: list[Path]) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    for directory in directories:  # deepest first; one that is no longer empty stays, and so do its parents
        try:
            os.rmdir(directory)
        except FileNotFoundError:
            continue
        except OSError:
            return


def _set_mode(path: Path, mode: int) -> None:
    if stat.S_IMODE(os.stat(path).st_mode) != stat.S_IMODE(mode):
        os.chmod(path, stat.S_IMODE(mode))
