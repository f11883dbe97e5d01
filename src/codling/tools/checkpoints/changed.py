"""Which files changed since a time, as the kernel saw it: their change time (ctime) is later.

Any change to a file moves its ctime: its content, its permission bits, a rename onto it, a new link to it; and
no program can set a ctime back. So ``find -cnewer`` (one C process ``lstat``ing the tree, a few milliseconds
for 10,000 files) tells which files a checkpoint must look at, whatever git makes of them: git does not call a
file modified for permission bits it does not track, under ``core.fileMode=false``, or when it is marked
assume-unchanged or skip-worktree. What git ignores is pruned by directory (as git listed it); the caller
keeps only the paths it covers.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterable
from pathlib import Path

from codling.tools.processes import captured

MAX_PRUNED = 2_000
"""More directories to leave out than this make too long a command line: the caller looks at every file."""

_GLOB = re.compile(r"([*?\[\]\\])")

_FIND = shutil.which("find")


async def changed_since(
    root: Path, since_ns: int, marker: Path, pruned: Iterable[str], timeout: float
) -> frozenset[str] | None:
    """The paths under ``root`` (relative, with ``/``; directories too, ``.`` for ``root`` itself: an entry made or
    removed changes its directory) whose ctime is later than ``since_ns``,
    leaving out ``.git`` and the directories ``pruned`` (relative, without a trailing ``/``); ``marker`` is a
    file this may set the time of. None when it cannot tell (no ``find``, too many directories to leave out,
    an error, or ``timeout`` seconds passed)."""
    pruned = [".git", *pruned]
    if _FIND is None or len(pruned) > MAX_PRUNED:
        return None
    try:
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()
        os.utime(marker, ns=(since_ns, since_ns))
    except OSError:
        return None
    leave_out: list[str] = []
    for path in pruned:
        leave_out += [*(["-o"] if leave_out else []), "-path", "./" + _GLOB.sub(r"\\\1", path)]
    args = [_FIND, ".", "(", *leave_out, ")", "-prune", "-o", "-cnewer", str(marker), "-print0"]
    out = await captured(args, timeout=timeout, cwd=root)
    if out is None:
        return None
    names = os.fsdecode(out).split("\0")
    return frozenset(name[2:] if name.startswith("./") else name for name in names if name)
