"""Where sessions are kept (``$CODLING_HOME/sessions``) and whether they can be written there.

Light on purpose (the standard library and codling's errors): ``session/new`` checks the store before it answers,
and the rest of the store (with the brain's events) is imported only after that answer.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from codling.errors import StoreError


def sessions_root(home: Path) -> Path:
    """The directory holding one directory per session, under the data home ``home``."""
    return home / "sessions"


def unusable(root: Path, problem: str, e: OSError) -> StoreError:
    """The error for a session store that ``problem`` (e.g. "cannot be written"), saying what to change."""
    home = root.parent
    return StoreError(
        f"the session store {root} {problem} ({e.strerror or e}); make $CODLING_HOME ({home}) a directory "
        "you can write, or point CODLING_HOME at one"
    )


def check_writable(root: Path) -> None:
    """Make sure sessions can be written in ``root`` (creating it): ``StoreError`` saying what to change if not."""
    try:
        root.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=root):
            pass
    except OSError as e:
        raise unusable(root, "cannot be written", e) from e
