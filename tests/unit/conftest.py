"""Fixtures for running the `codling` command line in process against the loopback OpenAI-compatible server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.cli_runner import MODEL, clean_env
from tests.fakes.openai_server import OpenAIServer, running_server


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with running_server() as s:
        yield s


@pytest.fixture
def served(home: Path, project: Path, server: OpenAIServer, monkeypatch: pytest.MonkeyPatch) -> dict[str, str | None]:
    """codling's environment for turns against the loopback server, run from the project's directory."""
    monkeypatch.chdir(project)
    return clean_env(home, CODLING_MODEL=MODEL, OPENAI_BASE_URL=server.base_url, OPENAI_API_KEY="sk-cli-test")
