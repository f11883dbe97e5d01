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

    def scan(self, paths: Iterable[str], uncovered: Iterable[Uncovered] = ()) -> Scan:
        """The state of ``paths`` (relative, with ``/``); a path that is gone, or is no file, is left out."""
        started = time.time_ns()
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
        ``before`` did not cover stays so, but for the candidates, looked at again too)."""
        started = time.time_ns()
        files = dict(before.files)
        candidates = set(candidates)
        missing = [u for u in before.uncovered if u.path not in candidates]
        stored = 0
        for rel in sorted(candidates):
            state, written = self._examine(rel, started, missing)
            stored += written
            if state is None:
                files.pop(rel, None)
                self._known.pop(rel, None)
            else:
                files[rel] = state
        self.objects.flush()
        return Scan(files, tuple(missing), stored, frozenset(candidates))

    def _examine(self, rel: str, started: int, missing: list[Uncovered]) -> tuple[FileState | None, int]:
        """The file at ``rel`` now (None: gone, no file, or not covered, which ``missing`` then says) and the
        bytes stored for it."""
        full = os.path.join(self.root, rel)
        try:
            st = os.lstat(full)
        except FileNotFoundError:
            return None, 0  # deleted since it was listed
        except OSError as e:
            missing.append(Uncovered(rel, f"cannot be read ({e.strerror or e})"))
            return None, 0
        key: _StatKey | None = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_mode)
        known = self._known.get(rel)
        if known is not None and known[0] == key:
            return known[1], 0
        if stat.S_ISLNK(st.st_mode):
            try:
                data = os.fsencode(os.readlink(full))
            except OSError as e:
                missing.append(Uncovered(rel, f"cannot be read ({e.strerror or e})"))
                return None, 0
            kind: FileKind = "link"
            mode = 0
        elif stat.S_ISREG(st.st_mode):
            too_large = Uncovered(rel, f"larger than {self.max_file_bytes // (1024 * 1024)} MiB")
            if st.st_size > self.max_file_bytes:
                missing.append(too_large)
                return None, 0
            try:
                with open(full, "rb") as f:
                    data = f.read(self.max_file_bytes + 1)
            except OSError as e:
                missing.append(Uncovered(rel, f"cannot be read ({e.strerror or e})"))
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
