"""The checkpoints of one session's workspace: taking them, and rewinding the workspace to one.

A checkpoint is taken by listing what git would not ignore (``tools/listing.py``: ``git ls-files`` in a work
tree, else a walk honouring ``.gitignore``), scanning it (``scan.py``: only files whose ``lstat`` changed are
read) and logging what changed (``log.py``). Everything lives in the session's own directory
(``checkpoints/objects`` and ``checkpoints/log.jsonl``), never in the user's repository or its ``.git``.

A rewind scans the workspace afresh first. Files that differ from the last checkpoint were changed outside
codling since (the user's editor, another program): the rewind is refused, naming them, unless the caller says
to overwrite them. Then the present state is itself checkpointed (so the rewind can be undone), the files are
put back (``rewind.py``), and the result is checkpointed as the new latest state.

What is not covered is said, never skipped silently: ignored paths (as git lists them, a whole ignored
directory as one entry), files over the size limit, unreadable files, files past :data:`MAX_FILES`, and the
session's additional directories (only the working directory is checkpointed).
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from pathlib import Path

from codling.errors import RewindRefused
from codling.tools.checkpoints.log import CheckpointLog
from codling.tools.checkpoints.objects import ObjectStore
from codling.tools.checkpoints.rewind import FileChange, apply, counted, plan
from codling.tools.checkpoints.scan import Scan, Scanner, Uncovered
from codling.tools.git import git_output
from codling.tools.listing import collect_files
from codling.tools.workspace import Workspace

MAX_FILES = 100_000
"""The most files a checkpoint covers; those past it (in path order) are listed as not covered."""
IGNORED_LIST_TIMEOUT = 10.0
"""Seconds git may take to list the ignored paths."""


@dataclass(frozen=True)
class Taken:
    """A checkpoint taken: its number, the bytes it added to the store, and what it does not cover."""

    number: int
    stored_bytes: int
    uncovered: tuple[Uncovered, ...]


@dataclass(frozen=True)
class RewindPlan:
    """What rewinding to checkpoint ``target`` does (``changes``, in path order), and the files changed outside
    codling since the last checkpoint (``outside``), which a rewind would overwrite or delete."""

    target: int
    changes: tuple[FileChange, ...]
    outside: tuple[str, ...]


class CheckpointKeeper:
    """Checkpoints of the workspace ``root``, kept in ``directory`` (the session's); ``git`` is the git program to
    list files with (None: walk)."""

    def __init__(self, directory: Path, root: Path, *, git: str | None) -> None:
        self.root = root
        self.git = git
        self.objects = ObjectStore(directory / "objects")
        self.log = CheckpointLog(directory / "log.jsonl")
        self._scanner = Scanner(root, self.objects)
        self._lock = asyncio.Lock()

    async def take(self) -> Taken:
        """Checkpoint the workspace as it is now (the last checkpoint again if nothing changed)."""
        async with self._lock:
            scan = await self._scan()
            number = await asyncio.to_thread(self.log.add, scan)
            return Taken(number, scan.stored_bytes, scan.uncovered)

    async def preview(self, target: int) -> RewindPlan:
        """What rewinding to checkpoint ``target`` would do, with line counts; nothing is changed (beyond storing
        the contents of files changed since the last checkpoint)."""
        async with self._lock:
            now = await self._scan()
            return await asyncio.to_thread(self._plan, now, target, True)

    async def rewind(self, target: int, *, overwrite_outside: bool = False) -> RewindPlan:
        """Put the workspace back as checkpoint ``target`` holds it. ``RewindRefused`` (nothing changed) if files
        changed outside codling since the last checkpoint, unless ``overwrite_outside``."""
        async with self._lock:
            now = await self._scan()
            rewind = await asyncio.to_thread(self._plan, now, target, False)
            if rewind.outside and not overwrite_outside:
                listed = ", ".join(rewind.outside[:20]) + (" …" if len(rewind.outside) > 20 else "")
                raise RewindRefused(
                    f"{len(rewind.outside)} file(s) changed outside codling since its last checkpoint: {listed}. "
                    "Rewinding would overwrite them; save them elsewhere first, or confirm to rewind anyway",
                    rewind.outside,
                )
            await asyncio.to_thread(self._apply, now, rewind)
            after = await self._scan()
            await asyncio.to_thread(self.log.add, after)
            return rewind

    def _plan(self, now: Scan, target: int, count_lines: bool) -> RewindPlan:
        then = self.log.at(target).files
        latest = self.log.latest().files
        outside = tuple(change.path for change in plan(now.files, latest))
        changes = plan(now.files, then)
        if count_lines:
            changes = [counted(change, now.files, then, self.objects) for change in changes]
        return RewindPlan(target, tuple(changes), outside)

    def _apply(self, now: Scan, rewind: RewindPlan) -> None:
        self.log.add(now)  # the state rewound from, so the rewind can be undone
        apply(self.root, list(rewind.changes), self.log.at(rewind.target).files, self.objects)

    async def _scan(self) -> Scan:
        listing = await collect_files(self.root, Workspace(self.root), git=self.git, max_files=MAX_FILES)
        paths = [path.relative_to(self.root).as_posix() for path in listing.files]
        uncovered = [Uncovered(path, "ignored") for path in await self._ignored()]
        if not listing.complete:
            why = "listing timed out" if listing.timed_out else f"past the first {MAX_FILES:,} files"
            uncovered.append(Uncovered("…", f"files {why} are not covered"))
        return await asyncio.to_thread(self._scanner.scan, paths, uncovered)

    async def _ignored(self) -> list[str]:
        """The ignored paths git lists (an ignored directory once, with a trailing ``/``); none without git."""
        if self.git is None or not any(os.path.lexists(d / ".git") for d in (self.root, *self.root.parents)):
            return []
        out = await git_output(
            self.git,
            "-C",
            str(self.root),
            "ls-files",
            "-z",
            "--others",
            "--ignored",
            "--exclude-standard",
            "--directory",
            timeout=IGNORED_LIST_TIMEOUT,
        )
        return sorted(os.fsdecode(name) for name in (out or b"").split(b"\0") if name)
