"""The checkpoints of one session, one JSON line each in ``log.jsonl``: what changed since the checkpoint
before (files changed or added, files deleted) and, when it differs from the one before, what is not covered.

Checkpoints are numbered from 1 in the order they were taken; a scan that finds nothing changed since the last
checkpoint is that checkpoint again (no line, no bytes). The workspace at checkpoint *k* is the deltas 1..*k*
folded in order. The latest state is kept in memory (read once, when the log is first used), so taking a
checkpoint costs what changed; going back to an earlier one reads the log up to it.

A line cut short by a crash can only be the last one, and no history record names it yet (the history names
a checkpoint after its line is written): it is ignored, and overwritten by the next checkpoint.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from codling.errors import CheckpointError
from codling.tools.checkpoints.scan import FileState, Scan, Uncovered


@dataclass(frozen=True)
class GitState:
    """What git said at a checkpoint's scan: how its index looked from outside (size, times, inode). A keeper
    started afresh whose index still looks so needs no full listing at its first scan (``keeper.py``)."""

    index: tuple[int, ...]


@dataclass(frozen=True)
class Workspace:
    """The workspace as one checkpoint holds it: every covered file, what was not covered, and what git said
    (None: the workspace was walked)."""

    files: Mapping[str, FileState]
    uncovered: tuple[Uncovered, ...]
    git: GitState | None = None


def _delta(scan: Scan, before: Workspace) -> tuple[dict[str, FileState], list[str]]:
    """The files ``scan`` changed or added since ``before``, and those it no longer has (only the paths the scan
    looked at, when it says which)."""
    paths = scan.files.keys() | before.files.keys() if scan.looked_at is None else scan.looked_at
    changed = {p: scan.files[p] for p in paths if p in scan.files and before.files.get(p) != scan.files[p]}
    deleted = sorted(p for p in paths if p in before.files and p not in scan.files)
    return changed, deleted


def _line(
    number: int, changed: Mapping[str, FileState], deleted: list[str], after: Workspace, before: Workspace
) -> bytes:
    line: dict[str, Any] = {
        "id": number,
        "changed": {path: [s.kind, s.mode, s.digest, s.size] for path, s in sorted(changed.items())},
        "deleted": deleted,
    }
    if after.uncovered != before.uncovered:
        line["uncovered"] = [[u.path, u.why] for u in after.uncovered]
    if after.git is not None:
        line["git"] = {"index": list(after.git.index)}
    return (json.dumps(line, separators=(",", ":")) + "\n").encode()


def _fold(state: Workspace, line: Mapping[str, Any]) -> Workspace:
    """``state`` with ``line`` applied; its files are changed in place (callers fold a copy, line by line)."""
    files = cast(dict[str, FileState], state.files)
    for path in line["deleted"]:
        files.pop(path, None)
    for path, (kind, mode, digest, size) in line["changed"].items():
        files[path] = FileState(kind, mode, digest, size)
    uncovered = state.uncovered
    if "uncovered" in line:
        uncovered = tuple(Uncovered(path, why) for path, why in line["uncovered"])
    git = None
    if "git" in line:
        git = GitState(tuple(line["git"]["index"]))
    return Workspace(files, uncovered, git)


class CheckpointLog:
    """The append-only log of one session's checkpoints, at ``path``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._latest: Workspace | None = None
        self._count = 0
        self._end = 0
        """Where the next line goes: the end of the last whole line (past a torn one)."""

    @property
    def count(self) -> int:
        """How many checkpoints there are."""
        self._load()
        return self._count

    def latest(self) -> Workspace:
        """The workspace at the last checkpoint (empty before the first)."""
        return self._load()

    def add(self, scan: Scan, git: GitState | None = None) -> int:
        """Record ``scan`` (with what git said then) as a checkpoint unless it equals the last one; the
        checkpoint's number."""
        before = self._load()
        changed, deleted = _delta(scan, before)
        if self._count and not changed and not deleted and scan.uncovered == before.uncovered:
            return self._count
        number = self._count + 1
        after = Workspace(dict(scan.files), scan.uncovered, git)
        data = _line(number, changed, deleted, after, before)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o600)
            try:
                os.truncate(fd, self._end)  # a torn last line goes
                os.pwrite(fd, data, self._end)
            finally:
                os.close(fd)
        except OSError as e:
            raise CheckpointError(f"cannot write the checkpoint log {self.path} ({e.strerror or e})") from e
        self._end += len(data)
        self._count = number
        self._latest = after
        return number

    def at(self, number: int) -> Workspace:
        """The workspace at checkpoint ``number``."""
        if not 1 <= number <= self.count:
            raise CheckpointError(f"there is no checkpoint {number}: this session has {self.count}")
        state = Workspace({}, ())
        for line in self._lines():
            state = _fold(state, line)
            if line["id"] == number:
                return state
        raise CheckpointError(f"the checkpoint log {self.path} has no checkpoint {number}")

    def touched(self, spans: Sequence[tuple[int, int]]) -> list[tuple[str, ...]]:
        """For each span ``(first, last)``, the paths checkpoints ``first`` + 1 to ``last`` changed, added or
        deleted, in path order (one reading of the log for them all)."""
        touched: list[set[str]] = [set() for _ in spans]
        for line in self._lines():
            for (first, last), paths in zip(spans, touched, strict=True):
                if first < line["id"] <= last:
                    paths.update(line["changed"], line["deleted"])
        return [tuple(sorted(paths)) for paths in touched]

    def _load(self) -> Workspace:
        if self._latest is None:
            state = Workspace({}, ())
            for line in self._lines():
                state = _fold(state, line)
                self._count = line["id"]
            self._latest = state
        return self._latest

    def _lines(self) -> Iterator[Mapping[str, Any]]:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return
        except OSError as e:
            raise CheckpointError(f"cannot read the checkpoint log {self.path} ({e.strerror or e})") from e
        offset = 0
        expected = 1
        for raw in data.splitlines(keepends=True):
            if not raw.endswith(b"\n"):
                break  # torn by a crash: never named by the history
            try:
                line = json.loads(raw)
                if line["id"] != expected:
                    raise ValueError(f"checkpoint {line['id']} where {expected} was expected")
            except (ValueError, KeyError, TypeError) as e:
                raise CheckpointError(f"the checkpoint log {self.path} is damaged at checkpoint {expected}: {e}") from e
            offset += len(raw)
            expected += 1
            yield line
        self._end = offset
