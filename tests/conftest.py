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


FIRST = ("tests/e2e/test_context_fidelity.py", "tests/e2e/", "tests/unit/test_facts_session.py")
"""What runs first, in this order: the suite's longest test, the tests that start real processes, then the long
in-process sessions. xdist hands tests out in collection order, so a long test collected last would run alone at
the end while the other worker idles; started first, the short tests fill in around it."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Order the tests as ``FIRST`` says (a stable sort: the rest keep their order)."""

    def rank(item: pytest.Item) -> int:
        where = item.nodeid
        return next((i for i, prefix in enumerate(FIRST) if where.startswith(prefix)), len(FIRST))

    items.sort(key=rank)
