"""``codling login`` / ``codling logout`` and the key store behind them (``codling.credentials``): keys stored
readable by their owner only, used when the environment does not set them, never when others may read them."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from codling.config import load_settings
from codling.credentials import Stored, apply, credentials_file, forget, read, store
from codling.errors import ConfigError
from codling.llm.catalog import load_catalog
from codling.llm.providers import select_model
from tests.fakes.cli_runner import clean_env, codling


def test_a_stored_key_is_readable_by_its_owner_only_and_kept_beside_the_others(home: Path) -> None:
    path = store(home, "ANTHROPIC_API_KEY", "sk-ant-one", "anthropic:claude-sonnet-5-5")
    store(home, "OPENAI_API_KEY", "sk-two", None)

    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert read(home) == Stored(
        {"ANTHROPIC_API_KEY": "sk-ant-one", "OPENAI_API_KEY": "sk-two"}, "anthropic:claude-sonnet-5-5"
    )
    assert not list(home.glob(".credentials.json.*"))  # the temporary file is gone
    assert forget(home, {"OPENAI_API_KEY"}) == ["OPENAI_API_KEY"]
    assert read(home).keys == {"ANTHROPIC_API_KEY": "sk-ant-one"}
    assert forget(home) == ["ANTHROPIC_API_KEY"] and not path.exists()
    assert forget(home) == [] and read(home) == Stored()


def test_the_environment_wins_over_a_stored_key(home: Path) -> None:
    store(home, "ANTHROPIC_API_KEY", "sk-ant-stored", None)
    store(home, "OPENAI_API_KEY", "sk-stored", None)
    environ = {"CODLING_HOME": str(home), "OPENAI_API_KEY": "sk-from-env"}

    assert apply(environ) == ["ANTHROPIC_API_KEY"]
    assert environ["ANTHROPIC_API_KEY"] == "sk-ant-stored" and environ["OPENAI_API_KEY"] == "sk-from-env"


def test_forgetting_takes_applied_keys_out_of_the_environment_and_leaves_the_environments_own(home: Path) -> None:
    store(home, "ANTHROPIC_API_KEY", "sk-ant-stored", None)
    store(home, "OPENAI_API_KEY", "sk-stored", None)
    store(home, "GEMINI_API_KEY", "gm-stored", None)
    environ = {"CODLING_HOME": str(home), "OPENAI_API_KEY": "sk-from-env"}
    apply(environ)

    assert forget(home, {"GEMINI_API_KEY"}, environ) == ["GEMINI_API_KEY"]
    assert forget(home, environ=environ) == ["ANTHROPIC_API_KEY", "OPENAI_API_KEY"]
    assert environ == {"CODLING_HOME": str(home), "OPENAI_API_KEY": "sk-from-env"}


def test_a_key_file_others_can_read_is_refused_saying_how_to_fix_it(home: Path) -> None:
    path = store(home, "ANTHROPIC_API_KEY", "sk-ant-one", None)
    path.chmod(0o644)
    with pytest.raises(ConfigError, match=r"can be read by others.*chmod 600"):
        apply({"CODLING_HOME": str(home)})
    path.write_text("{not json")
    path.chmod(0o600)
    with pytest.raises(ConfigError, match="run `codling login` again"):
        read(home)
    # Logging in again replaces an unusable file; logging out removes it whatever it holds.
    store(home, "OPENAI_API_KEY", "sk-two", None)
    assert read(home).keys == {"OPENAI_API_KEY": "sk-two"}
    path.chmod(0o644)
    assert forget(home) == ["credentials.json"] and not path.exists()


def test_the_model_chosen_at_login_comes_after_config_toml(home: Path) -> None:
    store(home, "ANTHROPIC_API_KEY", "sk-ant-one", "anthropic:claude-opus-5-5")
    env = {"CODLING_HOME": str(home), "ANTHROPIC_API_KEY": "sk-ant-one"}
    catalog = load_catalog(None)

    choice = select_model(None, load_settings(env), catalog)
    assert (choice.info.id, choice.source) == ("anthropic:claude-opus-5-5", "codling login")
    (home / "config.toml").write_text('model = "anthropic:claude-sonnet-5-5"\n')
    assert select_model(None, load_settings(env), catalog).source == "config.toml"


def test_codling_login_stores_the_key_from_stdin_and_logout_removes_it(home: Path) -> None:
    env = clean_env(home)

    result = codling(env, "login", "--provider", "anthropic", stdin="sk-ant-typed\n")

    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines() == [
        f"Stored ANTHROPIC_API_KEY for codling in {credentials_file(home)} (readable by you only).",
        "Model: anthropic:claude-sonnet-5-5 (choose another with --model, CODLING_MODEL or model in config.toml).",
    ]
    assert json.loads(credentials_file(home).read_text()) == {
        "keys": {"ANTHROPIC_API_KEY": "sk-ant-typed"},
        "model": "anthropic:claude-sonnet-5-5",
    }
    google = codling(env, "login", "-p", "gemini", "--model", "google-gla:gemini-2.5-flash", stdin="g-key\n")
    assert google.exit_code == 0 and read(home).keys["GEMINI_API_KEY"] == "g-key"
    assert read(home).model == "google-gla:gemini-2.5-flash"

    out = codling(env, "logout", "--provider", "google")
    assert out.exit_code == 0 and out.stdout.startswith("Removed GEMINI_API_KEY")
    assert codling(env, "logout").stdout.startswith("Removed ANTHROPIC_API_KEY")
    assert not credentials_file(home).exists()


@pytest.mark.parametrize(
    ("args", "stdin", "message"),
    [
        (["login"], "sk\n", "name the provider with --provider"),
        (["login", "-p", "acme"], "sk\n", "unknown provider 'acme': choose one of anthropic, openai"),
        (["login", "-p", "openai"], "\n", "no key given for OpenAI: nothing was stored"),
        (["login", "-p", "openai", "--model", "gpt-5"], "sk\n", "must look like 'provider:model'"),
    ],
)
def test_a_login_that_cannot_store_says_why_and_stores_nothing(
    home: Path, args: list[str], stdin: str, message: str
) -> None:
    result = codling(clean_env(home), *args, stdin=stdin)
    assert result.exit_code == 2
    assert message in result.stderr
    assert not credentials_file(home).exists()
