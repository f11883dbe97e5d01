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
import contextlib
import logging
import os
import sys
import time
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Literal

from codling.errors import CheckpointError, RewindRefused
from codling.tools.atomic import replace_file
from codling.tools.checkpoints.changed import changed_since
from codling.tools.checkpoints.log import CheckpointLog, GitState, Workspace
from codling.tools.checkpoints.objects import ObjectStore
from codling.tools.checkpoints.rewind import FileChange, apply, counted, plan
from codling.tools.checkpoints.scan import CAPPED, RACY_NS, FileState, Scan, Scanner, Uncovered, examined
from codling.tools.git import config_problem, git_output
from codling.tools.halt import off_loop
from codling.tools.walk import GIT_IGNORE_NAMES, audit_ignore_files, walk_files

log = logging.getLogger(__name__)

MAX_FILES = 100_000
"""The most files a checkpoint covers; those past it (in path order) are listed as not covered."""
LIST_TIMEOUT = 30.0
"""Seconds git may take to list files (it is killed then, and the workspace walked)."""
WALK_TIME_LIMIT = 10.0
"""Seconds a walk of the workspace may take. A workspace that cannot be listed in this time (a hostile
``.gitignore``, a huge tree without git) gets no checkpoints for the rest of the session: a partial listing
cannot be one (a rewind would delete what it missed), and every turn would wait this long again."""


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
    saved: int | None = None
    """Once rewound: the checkpoint of the workspace as it was just before (rewinding to it undoes the rewind)."""
    uncovered: tuple[Uncovered, ...] = ()
    """What checkpoints do not cover now (a rewind leaves it as it is)."""


class CheckpointKeeper:
    """Checkpoints of the workspace ``root``, kept in ``directory`` (the session's); ``git`` is the git program to
    list files with (None: walk). Directories in ``excluded`` (codling's own home, when it is inside the
    workspace) are not covered."""

    def __init__(self, directory: Path, root: Path, *, git: str | None, excluded: tuple[Path, ...] = ()) -> None:
        self.root = root
        self.git = git
        self._excluded = tuple(
            f"{place.relative_to(root).as_posix()}/"
            for place in excluded
            if place.is_relative_to(root) and place != root
        )
        self.objects = ObjectStore(directory / "objects")
        self.log = CheckpointLog(directory / "log.jsonl")
        self._scanner = Scanner(root, self.objects)
        self._marker = directory / "scan-mark"
        """A file whose time ``changed.py`` sets to when the last scan began, for ``find -cnewer``."""
        self._cache = directory / "scan-cache.json"
        """What the scanner knew when the session last closed (a file's ``lstat`` then, and what it held)."""
        self._loaded = False
        self._lock = asyncio.Lock()
        self._git_dir: Path | Literal[False] | None = None
        """git's directory for the workspace (False: none; None: not looked for yet)."""
        self._baseline: _Baseline | None = None
        self._taking: set[asyncio.Future[Taken]] = set()
        self.disabled: str | None = None
        """Why no more checkpoints are taken in this session (None: they are)."""

    async def mark(self) -> int | None:
        """Checkpoint the workspace as it is now, for a turn or a tool call: the checkpoint's number, or None
        (said in the log) when it could not be taken; the work goes on. A cancel does not stop a checkpoint
        half-way (the next one waits for it)."""
        if self.disabled is not None:
            return None
        taking = asyncio.ensure_future(self.take())
        self._taking.add(taking)
        taking.add_done_callback(self._taking.discard)
        try:
            return (await asyncio.shield(taking)).number
        except (OSError, CheckpointError) as e:
            log.warning("no checkpoint of %s: %s", self.root, e)
            return None

    async def close(self) -> None:
        """Stop the checkpoints still being taken (their callers may be gone: a checkpoint goes on when its
        caller is cancelled) and wait until they have: the session is closing, and none may be left to the end of
        the event loop. A checkpoint stopped half-way is not logged."""
        for taking in self._taking:
            taking.cancel()
        while self._taking:
            await asyncio.gather(*self._taking, return_exceptions=True)
        async with self._lock:
            if self._loaded:  # it scanned: the next process need not read every file again
                try:
                    await asyncio.to_thread(self._save_cache)
                except OSError as e:
                    log.warning("the checkpoints' scan cache was not saved: %s", e)

    def _save_cache(self) -> None:
        self._cache.parent.mkdir(parents=True, exist_ok=True)
        replace_file(self._cache, self._scanner.saved())

    async def take(self) -> Taken:
        """Checkpoint the workspace as it is now (the last checkpoint again if nothing changed)."""
        async with self._lock:
            scan = await self._scan()
            number = await asyncio.to_thread(self._record, scan)
            return Taken(number, scan.stored_bytes, scan.uncovered)

    async def touched(self, spans: Sequence[tuple[int, int]]) -> list[tuple[str, ...]]:
        """For each span of checkpoints ``(first, last)``, the files changed between them, in path order."""
        async with self._lock:
            return await asyncio.to_thread(self.log.touched, spans)

    async def preview(self, target: int) -> RewindPlan:
        """What rewinding to checkpoint ``target`` would do, with line counts; nothing is changed (beyond storing
        the contents of files changed since the last checkpoint)."""
        async with self._lock:
            now = await self._scan()
            then = await asyncio.to_thread(self.log.at, target)
            return await asyncio.to_thread(self._plan, now, target, then, True)

    async def rewind(
        self, target: int, *, overwrite_outside: bool = False, confirmed: frozenset[str] = frozenset()
    ) -> RewindPlan:
        """Put the workspace back as checkpoint ``target`` holds it. ``RewindRefused`` (nothing changed) if files
        changed outside codling since the last checkpoint, unless ``overwrite_outside`` or the user ``confirmed``
        overwriting each of them (they were in the preview they saw)."""
        async with self._lock:
            now = await self._scan()
            then = await asyncio.to_thread(self.log.at, target)
            rewind = await asyncio.to_thread(self._plan, now, target, then, False)
            if not overwrite_outside and not confirmed.issuperset(rewind.outside):
                listed = ", ".join(rewind.outside[:20]) + (" …" if len(rewind.outside) > 20 else "")
                raise RewindRefused(
                    f"{len(rewind.outside)} file(s) changed outside codling since its last checkpoint: {listed}. "
                    "Rewinding would overwrite them; save them elsewhere first, or confirm to rewind anyway",
                    rewind.outside,
                )
            saved = await asyncio.to_thread(self._apply, now, rewind, then.files)
            after = await self._scan()
            await asyncio.to_thread(self._record, after)
            return replace(rewind, saved=saved)

    def _plan(self, now: Scan, target: int, then: Workspace, count_lines: bool) -> RewindPlan:
        latest = self.log.latest()
        outside = tuple(change.path for change in plan(now.files, latest.files, latest.uncovered))
        changes = plan(now.files, then.files, then.uncovered, now.uncovered)
        if count_lines:
            changes = [counted(change, now.files, then.files, self.objects) for change in changes]
        return RewindPlan(target, tuple(changes), outside, uncovered=now.uncovered)

    def _apply(self, now: Scan, rewind: RewindPlan, then: Mapping[str, FileState]) -> int:
        saved = self._record(now)  # the state rewound from, so the rewind can be undone
        apply(self.root, list(rewind.changes), then, self.objects)
        return saved

    def _record(self, scan: Scan) -> int:
        """Log ``scan`` as a checkpoint (the last one again if nothing changed); its number."""
        baseline = self._baseline if self._baseline is not None and self._baseline.scan is scan else None
        number = self.log.add(scan, GitState(baseline.index) if baseline is not None else None)
        if baseline is not None:
            self._baseline = replace(baseline, logged=True)
        return number

    async def _scan(self) -> Scan:
        """The workspace now. In a git work tree whose index has not changed since this keeper's last scan (git
        tracks the same files) and whose ignore files did not change, only the files that may have changed are
        looked at: those whose ctime moved since that scan began (``changed.py``), those git listed as untracked
        or deleted then, and, when an entry was made or removed somewhere, those it lists so now. A keeper
        started afresh (or where ``find`` cannot tell) looks at every file of the last scan by its ``lstat``
        instead, and lists what is new. Otherwise the workspace is listed afresh and every covered file looked at.
        Either way a file whose ``lstat`` is as when it was last read is not read again (the scanner's memory,
        kept across processes in ``scan-cache.json``).

        Not ``git ls-files -m``: git does not call a file modified for permission bits it does not track, for a
        mode change under ``core.fileMode=false``, or at all when it is marked assume-unchanged or skip-worktree."""
        repository = await self._repository()
        started = time.time_ns() - RACY_NS  # what changes from here on, or just before, the next scan looks at
        if not self._loaded:
            self._loaded = True
            with contextlib.suppress(OSError):
                self._scanner.load(await asyncio.to_thread(self._cache.read_bytes))
        if self._baseline is None and repository is not None:  # a keeper started afresh: from the log's last scan
            latest = await asyncio.to_thread(self.log.latest)
            if latest.git is not None:
                self._baseline = _Baseline(Scan(latest.files, latest.uncovered), latest.git.index, logged=True)
        baseline = self._baseline
        if repository is None or baseline is None or _index_key(repository) != baseline.index:
            return await self._full_scan(repository, started)
        before = baseline.scan
        known = frozenset((*before.files, *(u.path for u in before.uncovered if examined(u))))
        looked = await self._changed(baseline, known) or await self._swept(before, known)
        if looked is None:
            return await self._full_scan(repository, started)
        scan, dirty = looked
        if _ignore_files_changed(before, scan):  # what is covered may have changed: list it all
            return await self._full_scan(repository, started)
        if not baseline.logged:  # what it looked at is relative to a scan the log does not have
            scan = replace(scan, looked_at=None)
        self._baseline = _Baseline(scan, baseline.index, since=started, dirty=dirty)
        return scan

    async def _changed(self, baseline: _Baseline, known: frozenset[str]) -> tuple[Scan, frozenset[str]] | None:
        """The last scan with what may have changed since looked at again: what ``find`` says changed, what git
        lists as deleted or untracked, what it listed then; and those names. None when either cannot tell."""
        if baseline.since is None or baseline.dirty is None:
            return None
        before = baseline.scan
        pruned = [u.path.rstrip("/") for u in before.uncovered if u.path.endswith("/")]
        found = await changed_since(self.root, baseline.since, self._marker, pruned, LIST_TIMEOUT)
        if found is None:
            return None
        dirty = baseline.dirty
        others = found - known - dirty
        under: set[str] = set()
        if others:
            # Something was made, removed or replaced (its directory changed too): git tells what is new and not
            # ignored, and what is gone; a directory may have become a link, or a file: what was under it too.
            listed = await self._git_listing("-d", "-o")
            if listed is None:
                return None
            dirty = frozenset(listed)
            under = {name for name in known if _within(name, others)}
        candidates = {
            name
            for name in (found & (known | baseline.dirty)) | under | dirty | baseline.dirty
            if not name.endswith("/") and not self._excludes(name)
        }
        scan = await asyncio.to_thread(self._scanner.rescan, before, candidates)
        return scan, dirty

    async def _swept(self, before: Scan, known: frozenset[str]) -> tuple[Scan, frozenset[str]] | None:
        """The last scan with each of its files looked at again by its ``lstat``, and what git lists that it did
        not hold; and the names git lists as untracked or that are missing. None if git failed."""
        scan, tagged = await asyncio.gather(
            asyncio.to_thread(self._scanner.rescan, before, known), self._git_listing("-c", "-o")
        )
        if tagged is None:
            return None
        new = {n for n in tagged if not n.endswith("/") and n not in known and not self._excludes(n)}
        if new:
            more = await asyncio.to_thread(self._scanner.rescan, scan, new)
            assert scan.looked_at is not None and more.looked_at is not None
            looked_at = scan.looked_at | more.looked_at
            scan = replace(more, stored_bytes=scan.stored_bytes + more.stored_bytes, looked_at=looked_at)
        return scan, _dirty(tagged, scan)

    async def _full_scan(self, repository: Path | None, started: int) -> Scan:
        index = _index_key(repository) if repository is not None else ()  # before listing: a change meanwhile is seen
        tagged = None
        ignored: list[str] = []
        if repository is not None:
            tagged, ignored = await asyncio.gather(self._git_listing("-c", "-o"), self._ignored())
        uncovered = [Uncovered(path, "ignored") for path in ignored]
        if repository is not None and tagged is None:
            self._git_dir = False  # git failed or timed out (an ignore file it would read is a pipe): walk from now
        if tagged is None:
            walked: list[str] = []
            listing = await off_loop(
                lambda halt: walk_files(self.root, self.root, MAX_FILES, halt, ignored=walked),
                WALK_TIME_LIMIT,
                "codling-checkpoint-walk",
            )
            if listing.timed_out:
                self.disabled = f"listing the workspace took over {WALK_TIME_LIMIT:g} s"
                raise CheckpointError(f"no more checkpoints in this session: {self.disabled}")
            uncovered = [Uncovered(path, "ignored") for path in walked]
            paths = [path.relative_to(self.root).as_posix() for path in listing.files]
            complete = listing.complete
        else:
            names = sorted(tagged)
            uncovered += [Uncovered(name, "another git repository") for name in names if name.endswith("/")]
            paths = [name for name in names if not name.endswith("/")]
            complete = len(paths) <= MAX_FILES
            paths = paths[:MAX_FILES]
        if not complete:
            uncovered.append(Uncovered(CAPPED, f"files past the first {MAX_FILES:,} are not covered"))
        if self._excluded:
            paths = [path for path in paths if not self._excludes(path)]
            uncovered += [Uncovered(prefix, "codling's own files") for prefix in self._excluded]
        scan = await asyncio.to_thread(self._scanner.scan, paths, uncovered)
        use_git = repository is not None and tagged is not None and complete
        dirty = _dirty(tagged, scan) if tagged is not None else None
        self._baseline = _Baseline(scan, index, since=started, dirty=dirty) if use_git else None
        return scan

    def _excludes(self, path: str) -> bool:
        return path.startswith(self._excluded) or f"{path}/" in self._excluded

    async def _repository(self) -> Path | None:
        """git's directory for the work tree holding the workspace (None: no git, or not a work tree), found once."""
        if self._git_dir is None and self.git is not None:
            # A configuration include or an ignore file that is a pipe would hold git: walk instead (as
            # tools/listing.py does; checked once, and a git listing that fails later stops git too).
            audit = await off_loop(
                partial(audit_ignore_files, self.root, self.root, names=GIT_IGNORE_NAMES), LIST_TIMEOUT
            )
            problem = await asyncio.to_thread(config_problem, self.root, self.git)
            if not audit.complete or audit.refused or problem is not None:
                self._git_dir = False
            else:
                out = await git_output(self.git, "-C", str(self.root), "rev-parse", "--absolute-git-dir")
                self._git_dir = Path(os.fsdecode(out.strip())) if out else False
        return self._git_dir or None

    async def _git_listing(self, *which: str) -> dict[str, str] | None:
        """What ``git ls-files -t`` lists with ``which`` (and ``--exclude-standard``): each name (relative to the
        workspace; a nested repository with a trailing ``/``) with git's tag for it (``?`` for an untracked file,
        ``R`` for a deleted one, ``H``, ``S``… for a tracked one); None if git failed."""
        assert self.git is not None
        out = await git_output(
            self.git, "-C", str(self.root), "ls-files", "-z", "-t", *which, "--exclude-standard", timeout=LIST_TIMEOUT
        )
        if out is None:
            return None
        entries = out.decode(sys.getfilesystemencoding(), "surrogateescape").split("\0")  # os.fsdecode, at once
        return {entry[2:]: entry[0] for entry in entries if len(entry) > 2}

    async def _ignored(self) -> list[str]:
        """The ignored paths git lists (an ignored directory once, with a trailing ``/``)."""
        assert self.git is not None
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
            timeout=LIST_TIMEOUT,
        )
        return sorted(os.fsdecode(name) for name in (out or b"").split(b"\0") if name)


def _ignore_files_changed(before: Scan, after: Scan) -> bool:
    """Whether an ignore file differs between the scans (then what is covered may change, and git must list it
    all); only what ``after`` looked at is compared, when it says."""
    paths = after.looked_at if after.looked_at is not None else before.files.keys() | after.files.keys()
    return any(
        before.files.get(path) != after.files.get(path)
        for path in paths
        if path.endswith(GIT_IGNORE_NAMES) and path.rsplit("/", 1)[-1] in GIT_IGNORE_NAMES
    )


def _index_key(repository: Path) -> tuple[int, ...]:
    """What git's index looks like from outside (size, times, inode); () when there is none."""
    try:
        st = os.stat(repository / "index")
    except OSError:
        return ()
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


def _within(path: str, directories: Set[str]) -> bool:
    """Whether ``path`` lies under one of ``directories``."""
    parent = path.rpartition("/")[0]
    while parent:
        if parent in directories:
            return True
        parent = parent.rpartition("/")[0]
    return False


def _dirty(tagged: Mapping[str, str], scan: Scan) -> frozenset[str]:
    """What a later scan must look at whatever ``find`` says: the untracked files git listed, and the tracked
    ones missing (one may come back with an old ctime, from an archive or a copy that keeps times)."""
    return frozenset(name for name, tag in tagged.items() if tag == "?" or name not in scan.files)


@dataclass(frozen=True)
class _Baseline:
    """What this keeper's last scan knew: the scan, git's index then, when it began (less the racy margin), and
    the names git listed as untracked or deleted then (None for the last two: not known, after a restart)."""

    scan: Scan
    index: tuple[int, ...]
    logged: bool = False
    since: int | None = None
    dirty: frozenset[str] | None = None
    """Whether the log's latest checkpoint is this scan (a preview's is not logged)."""
