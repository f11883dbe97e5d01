"""Installing an npm package once, for tests that need a third party's real program or library."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.fakes.deadlines import deadline


def npm_install(package: str, prefix: Path, installed: Path) -> Path:
    """``installed`` (a path the package provides under ``prefix``), running ``npm install package`` there
    first if it is missing; a test fails, never skips, without npm."""
    if installed.exists():
        return installed
    npm = shutil.which("npm")
    if npm is None:
        pytest.fail(f"npm is needed to install {package}, which these tests use (apt-get install npm)")
    prefix.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund", "--no-save", package],
        capture_output=True,
        text=True,
        timeout=deadline(300),
    )
    assert done.returncode == 0 and installed.exists(), f"npm install {package} failed:\n{done.stderr[-2000:]}"
    return installed
