"""The chat's model stack, loaded in a thread (``cli/preload.py``), and the cheap check that runs before it."""

from __future__ import annotations

import pytest

from codling.cli.plan import check_model
from codling.cli.preload import Preload
from codling.config import Settings
from codling.errors import MissingCredentialsError, UnknownProviderError
from codling.llm.catalog import ModelInfo
from tests.fakes.deadlines import deadline


def test_a_usable_model_loads_to_no_error() -> None:
    done = Preload("openai-chat:some-model", {"OPENAI_API_KEY": "sk-preload-test"}).start().done
    assert done.result(timeout=deadline(30)) is None


def test_an_unknown_provider_loads_to_the_error_the_chat_reports() -> None:
    failure = Preload("nosuch:model", {}).start().done.result(timeout=deadline(30))
    assert isinstance(failure, UnknownProviderError)
    assert str(failure) == "cannot use model 'nosuch:model': Unknown provider: nosuch"


def test_missing_credentials_are_found_before_the_chat_opens_without_building(settings: Settings) -> None:
    """settings.env holds no key: the check says so, with no model built (none could be)."""
    with pytest.raises(MissingCredentialsError, match="needs ANTHROPIC_API_KEY"):
        check_model(ModelInfo("anthropic:claude-x", context_limit=1000), settings, build=False)
