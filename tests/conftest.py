"""Shared fixtures: a settings object with a private CODLING_HOME and a workspace with a few files; and the order
the tests start in."""

from __future__ import annotations

from pathlib import Path

import pytest

from codling.config import Settings


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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Start the longest tests first: those marked ``slow``, then the rest of ``tests/e2e`` (each starts codling
    processes), then everything else, each group in collection order. pytest-xdist hands tests out in this order,
    so the run ends with many short tests that even out the workers, rather than one worker finishing a long test
    alone while the others idle."""
    items.sort(key=_start_group)


def _start_group(item: pytest.Item) -> int:
    if item.get_closest_marker("slow") is not None:
        return 0
    return 1 if item.nodeid.startswith("tests/e2e/") else 2
