"""What the workspace's files are now, read as cheaply as git reads its index.

A scan gets the paths to look at (``tools/listing.py``: what git would not ignore) and ``lstat``s each. A file
whose size, modification and change times, inode and mode are what they were at the last scan is taken as it
was; any other is read, hashed and stored (``objects.py``). So a scan of 10,000 files of which 5 changed reads
5 files. A file modified within :data:`RACY_NS` of a scan is read again at the next one: its time stamp may not
tell a second change in the same tick from the first (git's "racy" files).

Files over :data:`MAX_FILE_BYTES`, and files that cannot be read, are not covered; the scan says so (they are
never dropped silently). Directories are not recorded: a file's path implies them.
"""

from __future__ import annotations

import json
import os
import stat
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from codling.tools.checkpoints.objects import ObjectStore

MAX_FILE_BYTES = 10 * 1024 * 1024
"""Files larger than this are not covered by checkpoints (a build output, a data set): listed, not stored."""
RACY_NS = 2_000_000_000
"""A file modified this close to a scan (or after its start) is read again at the next scan."""

FileKind = Literal["file", "link"]


@dataclass(frozen=True)
class FileState:
    """One file as a checkpoint holds it: a regular file (its permission bits) or a symbolic link (its target),
    and the digest of its content (or target)."""

    kind: FileKind
    mode: int
    digest: str
    size: int


CAPPED = "…"
"""The path of the ``Uncovered`` entry that stands for the files past the listing's cap."""


@dataclass(frozen=True)
class Uncovered:
    """A path checkpoints do not cover, and why (ignored, too large, unreadable, past the listing's cap)."""

    path: str
    why: str


TOO_LARGE = "larger than"
UNREADABLE = "cannot be read"


def examined(uncovered: Uncovered) -> bool:
    """Whether a path is not covered because of what it was when looked at (too large, unreadable): a later
    scan looks at it again. The others (ignored, nested repositories, past the cap) come from the listing."""
    return uncovered.why.startswith((TOO_LARGE, UNREADABLE))


@dataclass(frozen=True)
class Scan:
    """The covered files by path (relative to the workspace, with ``/``), what is not covered, and the bytes
    the scan added to the object store."""

    files: Mapping[str, FileState]
    uncovered: tuple[Uncovered, ...]
    stored_bytes: int = 0
    looked_at: frozenset[str] | None = None
    """The only paths that may differ from the scan this one was made from (None: any may)."""


_StatKey = tuple[int, int, int, int, int]


class Scanner:
    """Scans of one workspace ``root``, storing what changed in ``objects``; it remembers each file's ``lstat``
    from the scan before, so an unchanged file is not read again."""

    def __init__(self, root: Path, objects: ObjectStore, max_file_bytes: int = MAX_FILE_BYTES) -> None:
        self.root = root
        self.objects = objects
        self.max_file_bytes = max_file_bytes
        self._known: dict[str, tuple[_StatKey | None, FileState]] = {}
        self._directories: dict[str, bool] = {}
        """Whether each directory looked at in this scan is a real one (no link on the way)."""

    def saved(self) -> bytes:
        """What the scanner knows of each file (its ``lstat`` when read, and what it held), to be :meth:`load`-ed
        by a scanner of the same workspace in another process: its first scan then reads only what changed."""
        known = {
            rel: [list(key) if key is not None else None, state.kind, state.mode, state.digest, state.size]
            for rel, (key, state) in self._known.items()
        }
        return json.dumps({"v": 1, "known": known}, separators=(",", ":")).encode()

    def load(self, data: bytes) -> None:
        """Take what :meth:`saved` wrote (anything unreadable is ignored: the files are read again)."""
        try:
            held = json.loads(data)
            self._known = {
                rel: (
                    tuple(key) if key is not None else None,
                    FileState(kind, mode, digest, size),
                )
                for rel, (key, kind, mode, digest, size) in held["known"].items()
            }
        except (ValueError, KeyError, TypeError):
            self._known = {}

    def scan(self, paths: Iterable[str], uncovered: Iterable[Uncovered] = ()) -> Scan:
        """The state of ``paths`` (relative, with ``/``); a path that is gone, or is no file, is left out."""
        started = time.time_ns()
        self._directories = {}
        files: dict[str, FileState] = {}
        missing = list(uncovered)
        stored = 0
        for rel in paths:
            state, written = self._examine(rel, started, missing)
            stored += written
            if state is not None:
                files[rel] = state
        for gone in self._known.keys() - files.keys():
            del self._known[gone]
        self.objects.flush()
        return Scan(files, tuple(missing), stored)

    def rescan(self, before: Scan, candidates: Iterable[str]) -> Scan:
        """``before`` with only ``candidates`` looked at again: the caller knows no other file changed since (what
        ``before`` did not cover stays so, but for the candidates, looked at again too). The scan's
        ``looked_at`` is what may differ from ``before``: the candidates read again, or held otherwise."""
        started = time.time_ns()
        files = dict(before.files)
        candidates = set(candidates)
        missing = [u for u in before.uncovered if u.path not in candidates]
        stored = 0
        root, known, lstat = os.fspath(self.root), self._known, os.lstat
        self._directories = {}
        looked_again: list[str] = []
        held_otherwise: list[str] = []
        for rel in candidates:  # the common case inline: a file whose lstat is as when it was read
            try:
                st = lstat(f"{root}/{rel}")
            except OSError:
                looked_again.append(rel)
                continue
            held = known.get(rel)
            if (
                held is None
                or held[0] != (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_mode)
                or not self._real_parent(rel)
            ):
                looked_again.append(rel)
            elif files.get(rel) is not held[1]:
                files[rel] = held[1]
                held_otherwise.append(rel)
        for rel in sorted(looked_again):
            state, written = self._examine(rel, started, missing)
            stored += written
            if state is None:
                files.pop(rel, None)
                self._known.pop(rel, None)
            else:
                files[rel] = state
        self.objects.flush()
        return Scan(files, tuple(missing), stored, frozenset((*looked_again, *held_otherwise)))

    def _real_parent(self, rel: str) -> bool:
        """Whether every directory on the way to ``rel`` is a real directory, no symbolic link (``lstat`` would
        follow a link in the way, and read what it leads to, maybe outside the workspace); known per scan."""
        parent, _, _ = rel.rpartition("/")
        if not parent:
            return True
        real = self._directories.get(parent)
        if real is None:
            try:
                st = os.lstat(os.path.join(self.root, parent))
                real = stat.S_ISDIR(st.st_mode) and self._real_parent(parent)
            except OSError:
                real = False
            self._directories[parent] = real
        return real

    def _examine(self, rel: str, started: int, missing: list[Uncovered]) -> tuple[FileState | None, int]:
        """The file at ``rel`` now (None: gone, no file, or not covered, which ``missing`` then says) and the
        bytes stored for it."""
        full = os.path.join(self.root, rel)
        if not self._real_parent(rel):
            return None, 0  # its directory is now a link (or gone): nothing of it is read through that link
        try:
            st = os.lstat(full)
        except FileNotFoundError:
            return None, 0  # deleted since it was listed
        except OSError as e:
            missing.append(Uncovered(rel, f"{UNREADABLE} ({e.strerror or e})"))
            return None, 0
        key: _StatKey | None = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_mode)
        known = self._known.get(rel)
        if known is not None and known[0] == key:
            return known[1], 0
        if stat.S_ISLNK(st.st_mode):
            try:
                data = os.fsencode(os.readlink(full))
            except OSError as e:
                missing.append(Uncovered(rel, f"{UNREADABLE} ({e.strerror or e})"))
                return None, 0
            kind: FileKind = "link"
            mode = 0
        elif stat.S_ISREG(st.st_mode):
            too_large = Uncovered(rel, f"{TOO_LARGE} {self.max_file_bytes // (1024 * 1024)} MiB")
            if st.st_size > self.max_file_bytes:
                missing.append(too_large)
                return None, 0
            try:
                with open(full, "rb") as f:
                    data = f.read(self.max_file_bytes + 1)
            except OSError as e:
                missing.append(Uncovered(rel, f"{UNREADABLE} ({e.strerror or e})"))
                return None, 0
            if len(data) > self.max_file_bytes:  # grew while it was read
                missing.append(too_large)
                return None, 0
            kind, mode = "file", stat.S_IMODE(st.st_mode)
        else:
            return None, 0  # a directory (a submodule), a socket, a pipe, a device: nothing to put back
        digest, written = self.objects.put(data)
        state = FileState(kind, mode, digest, len(data))
        if st.st_mtime_ns >= started - RACY_NS or len(data) != st.st_size:
            key = None  # changed too recently to trust its time stamp: read it again next time
        self._known[rel] = (key, state)
        return state, written
