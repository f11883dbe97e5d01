"""Which files a directory holds, as git would list them: ``git ls-files`` (run through ``tools/git.py``, so the
repository's configuration starts no program) or a walk honouring ``.gitignore`` files (``tools/walk.py``).

Either way the cost follows what is returned, not the size of the tree: git's two listings (tracked, and
untracked but not ignored) are read as they stream, merged in path order, checked on disk a batch at a time
in a thread, and git is killed once one file more than asked for was found; the walk stops the same way. Both
run under a time limit and stop when the call is cancelled. Before git runs, its configuration's includes and
the ignore files it would read are checked (a named pipe would hold it): any problem and the directory is
walked instead, with a note saying why.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import replace
from pathlib import Path

from codling.tools.git import config_problem, git_command, git_env
from codling.tools.globs import Glob
from codling.tools.halt import off_loop
from codling.tools.ignores import Refused
from codling.tools.walk import GIT_IGNORE_NAMES, WALK_MAX_FILES, FileListing, audit_ignore_files, walk_files
from codling.tools.workspace import Workspace

__all__ = ["WALK_MAX_FILES", "FileListing", "Glob", "collect_files", "listing_notes", "root_of", "stop", "walk_files"]

LIST_TIME_LIMIT = 30.0
"""How long one listing may take, git or walk."""
_CHECK_BATCH = 512
"""Names from git checked on disk per trip to a thread."""
_READ_CHUNK = 1 << 16


async def collect_files(
    directory: Path,
    workspace: Workspace,
    *,
    git: str | None,
    max_files: int = WALK_MAX_FILES,
    time_limit: float = LIST_TIME_LIMIT,
) -> FileListing:
    """The non-ignored files under ``directory`` in path order, at most ``max_files``: by ``git ls-files`` when
    ``git`` (its path) is given, the directory is in a work tree and git may run there, else by a walk that
    honours ``.gitignore`` files."""
    top = root_of(directory, workspace)
    notes: list[str] = []
    refused: tuple[Refused, ...] = ()
    if git is not None and _in_work_tree(directory):
        problem = await off_loop(lambda _: config_problem(directory, git), time_limit)
        if problem is None:
            audit = await off_loop(
                functools.partial(audit_ignore_files, directory, top, names=GIT_IGNORE_NAMES), time_limit
            )
            refused = audit.refused
            if not audit.complete:
                problem = f"checking the ignore files git would read took over {time_limit:g} s"
            elif refused:
                problem = "git would open the ignore files named below"
        if problem is None:
            listing = await _git_files(directory, git, max_files, time_limit)
            if isinstance(listing, FileListing):
                return listing
            problem = listing
        if problem is not None:
            notes.append(f"git was not used: {problem}; the directory was walked instead")
    listing = await off_loop(functools.partial(walk_files, directory, top, max_files), time_limit)
    known = {r.path for r in listing.refused}
    return replace(
        listing,
        refused=(*listing.refused, *(r for r in refused if r.path not in known)),
        notes=(*notes, *listing.notes),
    )


def listing_notes(listing: FileListing, workspace: Workspace) -> list[str]:
    """What a tool's result must say about a listing besides its files: ignore files not honoured, git not
    used, a time-out."""
    lines = [f"[{note}.]" for note in listing.notes]
    lines += [
        f"[{workspace.display(r.path)} was not read ({r.why}), so its rules were not applied.]" for r in listing.refused
    ]
    return lines


def _in_work_tree(directory: Path) -> bool:
    """Whether ``directory`` or one above it holds a ``.git`` (git would fail at once elsewhere)."""
    return any(os.path.lexists(above / ".git") for above in (directory, *directory.parents))


async def _git_files(directory: Path, git: str, max_files: int, time_limit: float) -> FileListing | str | None:
    """The files git would show (tracked, and untracked but not ignored); ``None`` if git cannot say (not a
    work tree, an unsafe owner), what went wrong if it did not finish in time."""
    procs: list[asyncio.subprocess.Process] = []
    try:
        for which in (("--cached",), ("--others", "--exclude-standard")):
            args = git_command(git, "-C", str(directory), "ls-files", "-z", *which)
            procs.append(
                await asyncio.create_subprocess_exec(
                    *args,
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.DEVNULL,
                    env=git_env(),
                )
            )
        async with asyncio.timeout(time_limit):
            files, complete = await _take(_merged(*(_names(p) for p in procs)), directory, max_files)
            codes = [await p.wait() for p in procs] if complete else []
            if any(code != 0 for code in codes):  # not a work tree, or git refused
                return None
    except OSError:
        return None
    except TimeoutError:
        return f"git did not finish listing within {time_limit:g} s"
    finally:
        for proc in procs:
            await stop(proc)
    return FileListing(files, complete)


async def _names(proc: asyncio.subprocess.Process) -> AsyncIterator[bytes]:
    """The NUL-terminated names ``proc`` writes, as they come."""
    assert proc.stdout is not None
    rest = b""
    while chunk := await proc.stdout.read(_READ_CHUNK):
        *names, rest = (rest + chunk).split(b"\0")
        for name in names:
            if name:
                yield name
    if rest:
        yield rest


async def _merged(first: AsyncIterator[bytes], second: AsyncIterator[bytes]) -> AsyncGenerator[bytes, None]:
    """Two streams of names, each in path order (git's: bytewise), as one in path order without repeats (an
    unmerged file is listed once per stage)."""
    heads = [await anext(first, None), await anext(second, None)]
    streams = [first, second]
    last = None
    while heads[0] is not None or heads[1] is not None:
        pick = 0 if heads[1] is None or (heads[0] is not None and heads[0] <= heads[1]) else 1
        name = heads[pick]
        assert name is not None
        heads[pick] = await anext(streams[pick], None)
        if name != last:
            yield name
            last = name


async def _take(names: AsyncGenerator[bytes, None], directory: Path, max_files: int) -> tuple[list[Path], bool]:
    """The first ``max_files`` names that are files on disk, and whether there are no more; checked on disk a
    batch at a time in a thread, and read no further than one file past the cap."""
    files: list[Path] = []
    batch: list[bytes] = []
    exhausted = False
    while not exhausted and len(files) <= max_files:
        batch.clear()
        while len(batch) < min(_CHECK_BATCH, max_files + 1 - len(files)):  # never wait for a name not needed
            name = await anext(names, None)
            if name is None:
                exhausted = True
                break
            batch.append(name)
        files += await asyncio.to_thread(_existing, directory, list(batch))
    await names.aclose()
    return files[:max_files], len(files) <= max_files


def _existing(directory: Path, names: list[bytes]) -> list[Path]:
    """Of git's names, the files on disk: tracked files may be deleted, submodules are directories; a name
    leaving the directory is not ours."""
    found = []
    for raw in names:
        name = os.fsdecode(raw)
        if ".." in name.split("/"):
            continue
        file = directory / name
        if os.path.islink(file) or os.path.isfile(file):
            found.append(file)
    return found


async def stop(proc: asyncio.subprocess.Process) -> None:
    """Kill a helper process we gave up on (timeout, cancellation, enough output) and reap it, so none
    outlives its call; also when the caller is being cancelled."""
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
    await asyncio.shield(_reap(proc))


async def _reap(proc: asyncio.subprocess.Process) -> None:
    # The process ends only for asyncio once its pipes are closed too, and a reader that stopped reading (its
    # buffer full) never sees that: what is left is read and dropped (the writer is dead, so it ends).
    for stream in (proc.stdout, proc.stderr):
        with contextlib.suppress(RuntimeError, OSError):  # RuntimeError: another task is reading it
            while stream is not None and await stream.read(_READ_CHUNK):
                pass
    with contextlib.suppress(ProcessLookupError):
        await proc.wait()


def root_of(path: Path, workspace: Workspace) -> Path:
    """The innermost workspace root holding ``path``: where .gitignore files start to count."""
    holding = [root for root in workspace.roots if path.is_relative_to(root)]
    return max(holding, key=lambda root: len(root.parts)) if holding else path
