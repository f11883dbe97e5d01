"""The directories a session may touch, and how tool paths are resolved inside them."""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path

from codling.errors import PathError


class Workspace:
    """The session's working directory plus any additional directories the user granted.

    Every path a tool receives goes through :meth:`resolve`, so nothing outside these roots is read,
    written or listed, not even through a symbolic link.
    """

    def __init__(self, cwd: Path, additional: Sequence[Path] = ()) -> None:
        self.cwd: Path = Path(cwd).resolve()
        roots: list[Path] = []
        for root in (self.cwd, *(Path(p).resolve() for p in additional)):
            if root not in roots:
                roots.append(root)
        self.roots: tuple[Path, ...] = tuple(roots)

    def __repr__(self) -> str:
        return f"Workspace(cwd={self.cwd!s}, roots={[str(r) for r in self.roots]})"

    def contains(self, path: Path) -> bool:
        """Whether the absolute, resolved ``path`` lies inside one of the roots."""
        return any(path.is_relative_to(root) for root in self.roots)

    def resolve(self, path: str) -> Path:
        """Turn a tool's path argument into an absolute path inside the workspace.

        Relative paths are taken from the cwd; ``~`` is not expanded (it is an ordinary name). Symbolic links
        are followed, and a path that ends up outside every root is refused with :class:`PathError`.
        """
        if not path or not path.strip():
            raise PathError("the path is empty; give a file or directory path relative to the workspace")
        if "\0" in path:
            raise PathError(f"path {path!r} contains a NUL character; give a plain file path")
        joined = self.cwd / path  # an absolute ``path`` replaces cwd
        try:
            resolved = joined.resolve()
        except (OSError, RuntimeError) as e:  # RuntimeError: symlink loop on some Python versions
            raise PathError(f"path '{path}' cannot be resolved: {e}") from e
        if self.contains(resolved):
            return resolved
        lexical = Path(os.path.normpath(joined))
        if self.contains(lexical):
            raise PathError(
                f"path '{path}' leads outside the workspace through a symbolic link (to {resolved}); "
                "use a path inside the workspace"
            )
        raise PathError(f"path '{path}' is outside the workspace ({self._roots_text()}); use a path inside it")

    def display(self, path: Path) -> str:
        """How to show ``path`` to the model and the user: relative to the cwd if inside it, else absolute."""
        if path == self.cwd:
            return "."
        if path.is_relative_to(self.cwd):
            return str(path.relative_to(self.cwd))
        return str(path)

    def _roots_text(self) -> str:
        return ", ".join(str(root) for root in self.roots)


def read_plain_file(path: Path, max_bytes: int, *, inside: Path | None = None) -> bytes | None:
    """The first ``max_bytes + 1`` bytes of ``path`` if it is a plain file codling may read on its own accord
    (AGENTS.md, .gitignore), else ``None``.

    A plain file is a regular file with one hard link; with ``inside`` None a symbolic link is never followed,
    otherwise it is followed only when its target lies inside ``inside``. A repository can make these names
    links to ``/proc/self/environ``, ``/dev/stdin``, ``/dev/zero``, a named pipe or a private key: none of those
    is read (nor blocks: the file is opened non-blocking), and no read is larger than the cap.
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)
    if inside is None:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    else:
        try:
            if not path.resolve().is_relative_to(inside.resolve()):
                return None
        except (OSError, RuntimeError):
            return None
    try:
        fd = os.open(path, flags)
    except OSError:  # missing, a link where none may be followed, unreadable
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
            return None
        chunks: list[bytes] = []
        size = 0
        while size <= max_bytes and (chunk := os.read(fd, max_bytes + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)
