"""Model catalog, settings and model selection."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import httpx2
import pytest
from anthropic import AsyncAnthropic
from pydantic_ai.models.anthropic import AnthropicModel

from codling import config
from codling.config import KNOWN_KEYS, Settings, load_settings
from codling.errors import ConfigError, NoModelError, UnknownProviderError
from codling.llm.catalog import (
    DEFAULT_CONTEXT_LIMIT,
    ModelInfo,
    Price,
    bundled_catalog_text,
    load_catalog,
    strict_json,
)
from codling.llm.providers import (
    CONNECT_TIMEOUT,
    Endpoint,
    ModelChoice,
    build_model,
    has_credentials,
    select_model,
)
from tests.fakes.deadlines import deadline

ROOT = Path(__file__).resolve().parents[2]


def test_packaged_catalog_is_the_top_level_models_json() -> None:
    assert json.loads(bundled_catalog_text()) == json.loads((ROOT / "models.json").read_text())


def test_the_shipped_catalog_is_strict_json_and_a_repeated_key_is_refused(tmp_path: Path) -> None:
    """(issue 33 D4) Every entry had its "price" twice; Python's parser kept the second without a word."""
    strict_json(bundled_catalog_text(), "bundled models.json")  # raises on any repeated key
    user = tmp_path / "models.json"
    user.write_text('{"models": {"x:y": {"context_limit": 8000, "price": [1, 2], "price": [3, 4]}}}')
    with pytest.raises(ConfigError, match=rf"{re.escape(str(user))}: the key 'price' appears twice in one object"):
        load_catalog(user)


def test_user_catalog_adds_and_overrides(tmp_path: Path) -> None:
    user = tmp_path / "models.json"
    user.write_text(
        json.dumps(
            {
                "models": {
                    "openai:gpt-5": {"context_limit": 1000, "max_output_tokens": 10},
                    "openai-chat:tiny": {"context_limit": 4096, "max_output_tokens": 512, "thinking": True},
                }
            }
        )
    )
    catalog = load_catalog(user)
    assert catalog.get("openai:gpt-5") == ModelInfo("openai:gpt-5", 1000, 10)
    assert catalog.get("openai-chat:tiny") == ModelInfo("openai-chat:tiny", 4096, 512, thinking=True)
    assert list(catalog.models)[-1] == "openai-chat:tiny"


def test_a_price_gives_a_cost(tmp_path: Path) -> None:
    user = tmp_path / "models.json"
    user.write_text(json.dumps({"models": {"openai-chat:p": {"price": [3, 15]}}}))
    info = load_catalog(user).get("openai-chat:p")
    assert info.price == Price(3.0, 15.0)
    assert info.cost(2_000, 1_000) == pytest.approx(0.006 + 0.015)
    assert info.cost(2_000, 1_000, cache_read_tokens=1_000) == pytest.approx(0.006 + 0.015)  # no discount known
    assert load_catalog().get("openai-chat:unknown").cost(2_000, 1_000) is None


def test_cache_reads_and_writes_are_priced_apart_from_other_input(tmp_path: Path) -> None:
    user = tmp_path / "models.json"
    user.write_text(
        json.dumps({"models": {"anthropic:c": {"price": [3, 15, 0.3, 3.75]}, "openai:o": {"price": [1, 8, 0.1]}}})
    )
    claude = load_catalog(user).get("anthropic:c")
    assert claude.price == Price(3.0, 15.0, 0.3, 3.75)
    # 10,000 input tokens of which 8,000 were read from the cache and 1,500 written to it; 200 output.
    assert claude.cost(10_000, 200, 8_000, 1_500) == pytest.approx(
        (500 * 3 + 8_000 * 0.3 + 1_500 * 3.75 + 200 * 15) / 1e6
    )
    assert load_catalog(user).get("openai:o").cost(10_000, 0, 9_000) == pytest.approx((1_000 * 1 + 9_000 * 0.1) / 1e6)


def test_one_hour_cache_writes_are_priced_at_their_own_rate(tmp_path: Path) -> None:
    user = tmp_path / "models.json"
    user.write_text(json.dumps({"models": {"anthropic:c": {"price": [3, 15, 0.3, 3.75, 6]}}}))
    claude = load_catalog(user).get("anthropic:c")
    assert claude.price == Price(3.0, 15.0, 0.3, 3.75, 6.0)
    # 1,500 tokens written to the cache, 1,000 of them for an hour.
    assert claude.cost(10_000, 0, 8_000, 1_500, 1_000) == pytest.approx(
        (500 * 3 + 8_000 * 0.3 + 500 * 3.75 + 1_000 * 6) / 1e6
    )
    # Without a one-hour price, one-hour writes cost what other writes do.
    assert Price(3, 15, 0.3, 3.75).cost(10_000, 0, 8_000, 1_500, 1_000) == claude.cost(10_000, 0, 8_000, 1_500)
    # The bundled Anthropic prices carry Anthropic's one-hour rate: twice the input price.
    bundled = load_catalog(None).get("anthropic:claude-sonnet-4-5").price
    assert bundled is not None and bundled.cache_write_1h == 2 * bundled.input


@pytest.mark.parametrize("price", [[1], [1, 2, 3, 4, 5, 6], [1, -2], [1, True]])
def test_a_malformed_price_is_a_config_error_naming_the_forms(tmp_path: Path, price: list[object]) -> None:
    user = tmp_path / "models.json"
    user.write_text(json.dumps({"models": {"openai-chat:p": {"price": price}}}))
    with pytest.raises(
        ConfigError,
        match=r"price must be \[input, output\], optionally followed by cache read, cache write and one-hour",
    ):
        load_catalog(user)


def test_unknown_model_gets_conservative_defaults() -> None:
    info = load_catalog().get("openai-chat:whatever")
    assert info == ModelInfo("openai-chat:whatever", DEFAULT_CONTEXT_LIMIT, known=False)
    assert info.provider == "openai-chat"


@pytest.mark.parametrize(
    "content",
    [
        "not json",
        '{"models": []}',
        '{"models": {"no-provider": {}}}',
        '{"models": {"a:b": {"context_limit": "x"}}}',
        '{"models": {"a:b": {"price": [1]}}}',
        '{"models": {"a:b": {"price": [1, -2]}}}',
        '{"models": {"a:b": {"price": "cheap"}}}',
    ],
)
def test_bad_user_catalog_is_a_config_error(tmp_path: Path, content: str) -> None:
    user = tmp_path / "models.json"
    user.write_text(content)
    with pytest.raises(ConfigError) as info:
        load_catalog(user)
    assert str(user) in str(info.value)


def test_settings_from_config_toml(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text(
        'model = "anthropic:claude-haiku-4-5"\nmode = "accept-edits"\nmax_requests_per_turn = 7\ncommand_timeout = 5\n'
    )
    settings = load_settings({"CODLING_HOME": str(tmp_path)})
    assert settings == Settings(
        home=tmp_path,
        model="anthropic:claude-haiku-4-5",
        mode="accept-edits",
        max_requests_per_turn=7,
        command_timeout=5.0,
        env={"CODLING_HOME": str(tmp_path)},
    )


def test_special_turn_settings_from_config_toml(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text(
        'titles = false\ntitle_model = "openai:gpt-5-mini"\ngreeting = true\nmax_tool_passes = 3\n'
    )
    settings = load_settings({"CODLING_HOME": str(tmp_path)})
    assert settings == Settings(
        home=tmp_path,
        titles=False,
        title_model="openai:gpt-5-mini",
        greeting=True,
        max_tool_passes=3,
        env={"CODLING_HOME": str(tmp_path)},
    )


@pytest.mark.parametrize(
    "toml",
    [
        'mode = "wild"',
        "max_requests_per_turn = 0",
        "model = 3",
        "this is not toml",
        "command_timeout = true",
        'greeting = "yes"',
        "titles = 1",
        'title_model = "haiku"',
        "max_tool_passes = -1",
    ],
)
def test_bad_config_is_a_config_error(tmp_path: Path, toml: str) -> None:
    (tmp_path / "config.toml").write_text(toml)
    with pytest.raises(ConfigError):
        load_settings({"CODLING_HOME": str(tmp_path)})


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ('modle = "openai:gpt-5"', "unknown setting 'modle' (did you mean 'mode' or 'model'?)"),
        ("command_timeot = 5", "unknown setting 'command_timeot' (did you mean 'command_timeout'?)"),
        ("[mcp_server.x]\ncommand = 'a'", "unknown setting 'mcp_server' (did you mean 'mcp_servers'?)"),
        ("[mcp_servers.x]\ncomand = 'a'", "[mcp_servers.x]: unknown key 'comand' (did you mean 'command'?)"),
        (
            'model = "openai:gpt-5"\nzzz = 1',
            "unknown setting 'zzz' (known: cache, checkpoints, command_env_allow, command_timeout",
        ),
        ("model = ", "not valid TOML: "),
    ],
)
def test_a_mistyped_setting_is_named_with_a_suggestion(tmp_path: Path, toml: str, message: str) -> None:
    path = tmp_path / "config.toml"
    path.write_text(toml)
    with pytest.raises(ConfigError) as info:
        load_settings({"CODLING_HOME": str(tmp_path)})
    assert str(info.value).startswith(f"{path}")
    assert message in str(info.value)


def test_every_documented_setting_is_known() -> None:
    documented = re.findall(r"^    (\w+) = ", config.__doc__ or "", re.MULTILINE)
    tables = {"command", "args", "allow", "ask", "deny"}  # keys of [mcp_servers.NAME] and [permissions]
    assert set(documented) - tables == set(KNOWN_KEYS) - {"mcp_servers", "permissions"}


def test_a_config_file_that_is_not_utf8_is_named(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_bytes(b'model = "caf\xe9"\n')
    with pytest.raises(ConfigError) as info:
        load_settings({"CODLING_HOME": str(tmp_path)})
    assert str(info.value) == f"{tmp_path / 'config.toml'}: not UTF-8 text (byte 0xe9 at offset 12)"


def test_selection_order(tmp_path: Path) -> None:
    catalog = load_catalog()
    env = {"CODLING_MODEL": "openai:gpt-5-mini", "ANTHROPIC_API_KEY": "k"}
    settings = Settings(home=tmp_path, model="openai:gpt-4.1", env=env)
    assert select_model("openai:gpt-5", settings, catalog) == ModelChoice(catalog.get("openai:gpt-5"), "--model")
    assert select_model(None, settings, catalog).source == "CODLING_MODEL"
    no_env = Settings(home=tmp_path, model="openai:gpt-4.1", env={"ANTHROPIC_API_KEY": "k"})
    assert select_model(None, no_env, catalog) == ModelChoice(catalog.get("openai:gpt-4.1"), "config.toml")
    creds_only = Settings(home=tmp_path, env={"OPENAI_API_KEY": "k"})
    assert select_model(None, creds_only, catalog) == ModelChoice(catalog.get("openai:gpt-5"), "credentials")


def test_no_model_and_no_credentials_names_the_variables(tmp_path: Path) -> None:
    with pytest.raises(NoModelError) as info:
        select_model(None, Settings(home=tmp_path, env={}), load_catalog())
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GOOGLE_API_KEY", "OPENROUTER_API_KEY"):
        assert name in str(info.value)


def test_model_id_without_provider_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        select_model("gpt-5", Settings(home=tmp_path, env={}), load_catalog())


def test_credentials() -> None:
    assert has_credentials("anthropic:x", {"ANTHROPIC_API_KEY": "k"})
    assert not has_credentials("anthropic:x", {"OPENAI_API_KEY": "k"})
    assert has_credentials("openai-chat:local", {"OPENAI_BASE_URL": "http://127.0.0.1:1/v1"})
    assert has_credentials("ollama:qwen", {"OLLAMA_BASE_URL": "http://127.0.0.1:11434/v1"})


def test_build_model_errors_are_config_errors() -> None:
    with pytest.raises(UnknownProviderError):
        build_model("no-such-provider:model")


def test_a_models_own_compaction_threshold_is_read(tmp_path: Path) -> None:
    user = tmp_path / "models.json"
    user.write_text(json.dumps({"models": {"openai-chat:a": {"compact_threshold": 0.6}, "openai-chat:b": {}}}))
    catalog = load_catalog(user)
    assert catalog.get("openai-chat:a") == ModelInfo("openai-chat:a", compact_threshold=0.6)
    assert catalog.get("openai-chat:b").compact_threshold is None


@pytest.mark.parametrize("threshold", ["0", "1.5", "-0.5", "true", '"half"', "[0.5]"])
def test_a_compaction_threshold_outside_0_to_1_is_a_config_error(tmp_path: Path, threshold: str) -> None:
    user = tmp_path / "models.json"
    user.write_text(f'{{"models": {{"openai-chat:a": {{"compact_threshold": {threshold}}}}}}}')
    with pytest.raises(ConfigError) as info:
        load_catalog(user)
    assert str(info.value) == f"{user}: openai-chat:a: compact_threshold must be a number between 0 and 1"


def test_a_user_catalog_that_cannot_be_read_is_a_config_error(tmp_path: Path) -> None:
    user = tmp_path / "models.json"
    user.mkdir()
    with pytest.raises(ConfigError) as info:
        load_catalog(user)
    assert str(info.value) == f"{user}: cannot be read ([Errno 21] Is a directory: '{user}')"


@pytest.mark.parametrize(
    ("model_id", "base_url", "status", "advice"),
    [
        (
            "ollama:qwen",
            "http://127.0.0.1:11434/v1",
            401,
            "the chat-completions API at http://127.0.0.1:11434/v1 refused the request: check its credentials",
        ),
        (
            "ollama:qwen",
            None,
            None,
            "check that the ollama API is reachable from here, or set OLLAMA_BASE_URL if the server is elsewhere",
        ),
        (
            "groq:llama",
            None,
            403,
            "the groq API refused the key in GROQ_API_KEY: check that it is valid for this server (`codling login` "
            "stores another)",
        ),
        ("groq:llama", None, None, "check that the groq API is reachable from here"),
        (
            "groq:llama",
            None,
            404,
            "the groq API may not serve a model named 'llama': check the model name (see `codling models`)",
        ),
        ("groq:llama", None, 500, ""),
    ],
)
def test_a_failed_requests_advice_names_what_this_provider_reads(
    model_id: str, base_url: str | None, status: int | None, advice: str
) -> None:
    assert Endpoint(model_id, base_url).advice(status) == advice


def test_anthropic_models_are_built_on_a_client_of_codling_s_own() -> None:
    env = {"ANTHROPIC_API_KEY": "sk-ant-test", "ANTHROPIC_BASE_URL": "http://127.0.0.1:9/"}
    model = build_model("anthropic:claude-test", idle_timeout=30, env=env)
    assert isinstance(model, AnthropicModel) and model.model_name == "claude-test"
    client = model.client
    assert isinstance(client, AsyncAnthropic)  # the plain client, not a cloud vendor's
    assert (client.api_key, str(client.base_url), client.max_retries) == ("sk-ant-test", "http://127.0.0.1:9/", 0)
    assert isinstance(client.timeout, httpx2.Timeout)
    assert (client.timeout.read, client.timeout.connect) == (30, CONNECT_TIMEOUT)


@pytest.mark.parametrize(
    ("model_id", "variable", "sdk", "extra"),
    [("groq:llama", "GROQ_API_KEY", "groq", "groq"), ("mistral:devstral", "MISTRAL_API_KEY", "mistralai", "mistral")],
)
def test_a_provider_whose_sdk_is_missing_says_what_to_install(
    model_id: str, variable: str, sdk: str, extra: str
) -> None:
    assert importlib.util.find_spec(sdk) is None  # codling does not ship these SDKs
    with pytest.raises(UnknownProviderError) as info:
        build_model(model_id, env={variable: "k"})
    message = str(info.value)
    assert message.startswith(f"model {model_id!r} needs an optional package that is not installed (")
    assert message.endswith(f"); install pydantic-ai-slim[{extra}] into codling's environment")


def test_warming_up_a_provider_imports_its_sdk_and_not_another() -> None:
    sdks = ("anthropic", "pydantic_ai.models.anthropic", "google.genai", "pydantic_ai.models.google", "openai")
    code = (
        "import sys; from codling.llm.providers import warm_up_provider\n"
        "for model in sys.argv[1:]:\n"
        "    warm_up_provider(model)\n"
        f"    print(' '.join(m for m in {sdks!r} if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, "anthropic:claude-test", "google:gemini-test"],
        capture_output=True,
        text=True,
        timeout=deadline(60),
        check=True,
    )
    anthropic, then_google = done.stdout.splitlines()
    assert anthropic.split() == ["anthropic", "pydantic_ai.models.anthropic"]
    assert then_google.split() == [*anthropic.split(), "google.genai", "pydantic_ai.models.google"]
