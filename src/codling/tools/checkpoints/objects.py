"""A session's checkpoint objects: the contents of files (and the targets of symbolic links) by their sha256.

Objects are zlib-compressed and appended to a pack: one file per scan that stored anything
(``objects/pack-<…>.pack``), written to a temporary name and renamed into place when the scan is done, then its
index (``pack-<…>.idx``: one line ``<digest> <offset> <length>`` per object). A pack counts only once its index
is there, so a crash mid-scan leaves an ignored temporary file, never a half-written object. A content seen
before (in any file, at any checkpoint) costs nothing more. A workspace's first checkpoint of 10,000 files
thus writes two files, not 10,000. Reading checks the digest, so a damaged object is an error that names it
rather than a wrong file put back.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from codling.errors import CheckpointError
from codling.tools.atomic import replace_file

COMPRESSION_LEVEL = 1
"""zlib's fastest level: source code still shrinks 3–4×, at a fraction of the default level's time."""


def digest_of(data: bytes) -> str:
    """The name an object with ``data`` has: its sha256, in hex."""
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class _Location:
    pack: str
    offset: int
    length: int


@dataclass
class _Pending:
    """The pack being written: its final name, its temporary file and the objects in it so far."""

    name: str
    file: BinaryIO
    temporary: Path
    entries: list[tuple[str, int, int]]
    size: int = 0


class ObjectStore:
    """Content-addressed, compressed, write-once storage in packs under ``root``; ``put`` objects, then ``flush``
    to make them durable (``get`` flushes first)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._index: dict[str, _Location] | None = None
        self._pending: _Pending | None = None

    def __len__(self) -> int:
        """How many objects are stored."""
        return len(self._load())

    def has(self, digest: str) -> bool:
        """Whether the object is stored (or waits in the pack being written)."""
        return digest in self._load()

    def put(self, data: bytes, digest: str | None = None) -> tuple[str, int]:
        """Store ``data`` (whose digest the caller may already know); its digest and the bytes written (0 when
        it was stored already)."""
        digest = digest or digest_of(data)
        index = self._load()
        if digest in index:
            return digest, 0
        packed = zlib.compress(data, COMPRESSION_LEVEL)
        pending = self._pending or self._start_pack()
        try:
            pending.file.write(packed)
        except OSError as e:
            raise self._unwritable(e) from e
        index[digest] = _Location(pending.name, pending.size, len(packed))
        pending.entries.append((digest, pending.size, len(packed)))
        pending.size += len(packed)
        return digest, len(packed)

    def flush(self) -> None:
        """Put the pack being written in place, with its index."""
        pending, self._pending = self._pending, None
        if pending is None:
            return
        lines = "".join(f"{digest} {offset} {length}\n" for digest, offset, length in pending.entries)
        try:
            pending.file.close()
            os.replace(pending.temporary, self.root / f"{pending.name}.pack")
            replace_file(self.root / f"{pending.name}.idx", lines.encode())  # the pack counts from here on
        except OSError as e:
            self._index = None  # read again from disk: what this pack held is not there
            raise self._unwritable(e) from e

    def get(self, digest: str) -> bytes:
        """The object's content, checked against its digest."""
        self.flush()
        location = self._load().get(digest)
        if location is None:
            raise CheckpointError(f"the checkpoint object {digest} is missing from {self.root}")
        path = self.root / f"{location.pack}.pack"
        try:
            with open(path, "rb") as f:
                f.seek(location.offset)
                data = zlib.decompress(f.read(location.length))
        except (OSError, zlib.error) as e:
            raise CheckpointError(f"the checkpoint object {digest} in {path} cannot be read ({e})") from e
        if digest_of(data) != digest:
            raise CheckpointError(f"the checkpoint object {digest} in {path} is damaged (its content does not match)")
        return data

    def _start_pack(self) -> _Pending:
        name = f"pack-{time.time_ns():x}-{secrets.token_hex(4)}"
        temporary = self.root / f".{name}.pack.tmp"
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            file = open(temporary, "wb")  # noqa: SIM115 — closed by flush
        except OSError as e:
            raise self._unwritable(e) from e
        self._pending = _Pending(name, file, temporary, [])
        return self._pending

    def _unwritable(self, e: OSError) -> CheckpointError:
        return CheckpointError(f"cannot store checkpoint objects in {self.root} ({e.strerror or e})")

    def _load(self) -> dict[str, _Location]:
        """Every stored object's place, from the packs' indexes (read once)."""
        if self._index is None:
            index: dict[str, _Location] = {}
            try:
                names = sorted(p for p in os.listdir(self.root) if p.endswith(".idx") and not p.startswith("."))
            except FileNotFoundError:
                names = []
            except OSError as e:
                raise CheckpointError(f"cannot read the checkpoint objects in {self.root} ({e.strerror or e})") from e
            for name in names:
                pack = name.removesuffix(".idx")
                try:
                    for line in (self.root / name).read_text().splitlines():
                        digest, offset, length = line.split(" ")
                        index[digest] = _Location(pack, int(offset), int(length))
                except (OSError, ValueError) as e:
                    raise CheckpointError(f"the checkpoint pack index {self.root / name} is damaged ({e})") from e
            self._index = index
        return self._index
