"""Shared fixtures: a settings object with a private CODLING_HOME and a workspace with a few files."""

from __future__ import annotations

from pathlib import Path

import pytest

from codling.config import Settings

# The suite's time limits (scaled by CODLING_TEST_TIME_FACTOR; none armed while pytest reports).
pytest_plugins = ["tests.time_limits"]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


@pytest.fixture
def settings(home: Path) -> Settings:
    return Settings(home=home, env={"CODLING_HOME": str(home)})


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("def greet():\n    return 'hello'\n")
    (root / "README.md").write_text("# demo\n")
    return root
