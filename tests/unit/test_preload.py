"""The chat's model stack, loaded in a thread (``cli/preload.py``), and the cheap check that runs before it."""

from __future__ import annotations

from pathlib import Path

import pytest

from codling.cli.preload import Preload
from codling.cli.session_plan import check_model
from codling.config import Settings
from codling.errors import CodlingError, MissingCredentialsError, StoreError, UnknownProviderError
from codling.llm.catalog import ModelInfo
from tests.fakes.deadlines import deadline


def loaded(preload: Preload) -> CodlingError | None:
    preload.start()
    return preload.done.result(timeout=deadline(30))


def test_a_usable_model_and_store_load_to_no_error(home: Path) -> None:
    settings = Settings(home=home, env={"OPENAI_API_KEY": "sk-preload-test"})
    preload = Preload(settings, "openai-chat:some-model")
    preload.start()
    preload.start()  # once is enough: the input line and the first turn both start it
    assert preload.done.result(timeout=deadline(30)) is None


def test_an_unknown_provider_loads_to_the_error_the_chat_reports(settings: Settings) -> None:
    failure = loaded(Preload(settings, "nosuch:model"))
    assert isinstance(failure, UnknownProviderError)
    assert str(failure) == "cannot use model 'nosuch:model': Unknown provider: nosuch"


def test_a_session_store_that_cannot_be_written_loads_to_the_error_the_chat_reports(tmp_path: Path) -> None:
    not_a_directory = tmp_path / "file"
    not_a_directory.write_text("")
    settings = Settings(home=not_a_directory, env={"OPENAI_API_KEY": "sk-preload-test"})
    failure = loaded(Preload(settings, "openai-chat:some-model"))
    assert isinstance(failure, StoreError) and "make $CODLING_HOME" in str(failure)


def test_missing_credentials_are_found_before_the_chat_opens_without_building(settings: Settings) -> None:
    """settings.env holds no key: the check says so, with no model built (none could be)."""
    with pytest.raises(MissingCredentialsError, match="needs ANTHROPIC_API_KEY"):
        check_model(ModelInfo("anthropic:claude-x", context_limit=1000), settings, build=False)
