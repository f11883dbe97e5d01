"""Paths as the client named them.

codling works on resolved paths (symbolic links followed), but an editor knows a file by the path under the
directory it opened: a location, a diff or an fs/* call naming the resolved path would open a second buffer,
or none, when the project sits behind a symbolic link. ``ClientPaths`` maps each session directory's resolved
form back to the form the client gave.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path


class ClientPaths:
    """Maps a resolved path under one of a session's directories back to the client's form of it."""

    def __init__(self, directories: Iterable[str] = ()) -> None:
        # The longest root first, so a directory inside another maps by its own name.
        pairs = {Path(d).resolve(): Path(d) for d in directories}
        self._roots = sorted(pairs.items(), key=lambda pair: len(pair[0].parts), reverse=True)

    def __call__(self, path: Path) -> str:
        """``path`` as the client knows it (unchanged when it is under none of the directories)."""
        for resolved, given in self._roots:
            if path.is_relative_to(resolved):
                return str(given / path.relative_to(resolved))
        return str(path)
