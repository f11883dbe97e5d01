"""Changing files on the local disk so that a failure or a crash never leaves one half written.

``replace_file`` writes a temporary file in the target's directory and renames it over the target, so the path
holds either the old content or the new, never a mix or a truncated file. ``set_aside`` and ``put_back`` let a
caller delete a file in a way it can undo (``tools/patch.py`` rolls back a patch that failed part-way).

What a replacement means for links, deliberately:

* A symbolic link is followed: its real file is replaced and the link keeps pointing at it. (Tools resolve
  their paths through the workspace first, so that file is inside it.)
* A hard link is not written through. The rename gives the path a new inode; every other name of the old
  file (which may be outside the workspace) keeps the old content. codling never changes a file through a
  name it was not given.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path

_TEMP_SUFFIX = ".codling-tmp"
_ASIDE_SUFFIX = ".codling-deleted"


def replace_file(path: Path, data: bytes) -> None:
    """Make ``path`` hold exactly ``data``: all of it, or (on any error) its old content and no temporary file.

    The temporary file (a unique name in the same directory, created with ``O_EXCL``) is written, flushed and
    fsynced, given the old file's mode (and owner, where the process may set it), renamed over ``path`` with
    ``os.replace``, and the directory is fsynced so the rename survives a power loss. A final symbolic link is
    followed (see the module docstring). Raises ``OSError`` as the system reports it.
    """
    path = Path(os.path.realpath(path))
    try:
        old: os.stat_result | None = os.stat(path)
    except FileNotFoundError:
        old = None
    if old is not None and stat.S_ISDIR(old.st_mode):
        raise IsADirectoryError(21, "Is a directory", str(path))
    fd, temp = _create_beside(path, 0o600 if old is not None else 0o666)  # umask applies to a new file
    try:
        try:
            if old is not None:
                _copy_owner_and_mode(fd, old)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    sync_directory(path.parent)


def set_aside(path: Path) -> Path:
    """Move ``path`` (a symbolic link itself, not its target) to a hidden name beside it and return that name:
    a deletion :func:`put_back` can undo. The caller removes the returned file once the deletion is final."""
    while True:
        aside = path.with_name(f".{path.name[:64]}.{secrets.token_hex(4)}{_ASIDE_SUFFIX}")
        if not os.path.lexists(aside):
            break
    os.rename(path, aside)
    sync_directory(path.parent)
    return aside


def put_back(aside: Path, path: Path) -> None:
    """Undo :func:`set_aside`: the file returns to ``path`` (refusing to overwrite anything there now)."""
    if os.path.lexists(path):
        raise FileExistsError(17, "File exists", str(path))
    os.rename(aside, path)
    sync_directory(path.parent)


def sync_directory(directory: Path) -> None:
    """fsync a directory so the names created or renamed in it are on disk. Some file systems cannot; the
    change itself is already made, so that is not an error."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _create_beside(path: Path, mode: int) -> tuple[int, Path]:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)
    while True:
        # The target's name is left out: a long name plus a suffix could pass the file system's limit.
        temp = path.with_name(f".{secrets.token_hex(8)}{_TEMP_SUFFIX}")
        try:
            return os.open(temp, flags, mode), temp
        except FileExistsError:
            continue


def _copy_owner_and_mode(fd: int, old: os.stat_result) -> None:
    """Give the new file the old one's owner (when allowed: only root may give a file away) and then its mode
    (in that order: changing the owner clears set-user-id bits)."""
    new = os.fstat(fd)
    if (new.st_uid, new.st_gid) != (old.st_uid, old.st_gid):
        with contextlib.suppress(OSError):
            os.fchown(fd, old.st_uid, old.st_gid)
    os.fchmod(fd, stat.S_IMODE(old.st_mode))
