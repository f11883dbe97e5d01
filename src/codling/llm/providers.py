"""Model selection and lazy construction of pydantic-ai models.

A model id is a pydantic-ai model string, ``provider:model``. Nothing here imports pydantic-ai or a provider
SDK at module import time: :func:`build_model` does, the first time a model is needed, so ``codling acp``
can answer ``initialize`` before any of that is loaded.

codling builds the OpenAI, Anthropic and Gemini clients itself rather than taking the SDKs' defaults: with no
retries of their own (they would wait out a ``Retry-After`` in silence; the turn loop retries visibly, see
``brain/retries.py``) and with a read timeout of ``idle_timeout`` seconds (the SDKs wait ten or twenty minutes
for a stalled stream). OpenAI-compatible chat streams must end with a finish reason, so a stream cut short is an
error rather than a complete-looking reply.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from codling.config import PromptCache, Settings
from codling.errors import ConfigError, MissingCredentialsError, NoModelError, UnknownProviderError
from codling.llm.catalog import Catalog, ModelInfo, provider_of
from codling.startup import imports_without_gc

if TYPE_CHECKING:
    from pydantic_ai import Agent
    from pydantic_ai.models import Model
    from pydantic_ai.providers import Provider

DEFAULT_IDLE_TIMEOUT = 120.0
"""Seconds without data from the provider before a request fails (``stream_idle_timeout`` in config.toml)."""

CONNECT_TIMEOUT = 10.0
"""Seconds to open a connection to the provider."""

MODEL_LIST_TIMEOUT = 5.0
"""Seconds to wait for an OpenAI-compatible server's model list (``GET {OPENAI_BASE_URL}/models``)."""

_OPENAI_API_HOST = "api.openai.com"

_OPENAI_PROVIDERS = ("openai", "openai-chat", "openai-responses")

# Any one of a provider's variables is enough. Kept here, not in pydantic-ai, so `codling models` and model
# selection need no provider import.
CREDENTIAL_VARIABLES: dict[str, tuple[str, ...]] = {
    "openai": ("OPENAI_API_KEY",),
    "openai-chat": ("OPENAI_API_KEY", "OPENAI_BASE_URL"),
    "openai-responses": ("OPENAI_API_KEY",),
    "anthropic": ("ANTHROPIC_API_KEY",),
    "google": ("GOOGLE_API_KEY", "GEMINI_API_KEY"),
    "google-gla": ("GOOGLE_API_KEY", "GEMINI_API_KEY"),
    "openrouter": ("OPENROUTER_API_KEY",),
    "deepseek": ("DEEPSEEK_API_KEY",),
    "groq": ("GROQ_API_KEY",),
    "mistral": ("MISTRAL_API_KEY",),
    "xai": ("XAI_API_KEY",),
    "cerebras": ("CEREBRAS_API_KEY",),
    "ollama": ("OLLAMA_BASE_URL",),
}


BASE_URL_VARIABLES: dict[str, str] = {
    "openai": "OPENAI_BASE_URL",
    "openai-chat": "OPENAI_BASE_URL",
    "openai-responses": "OPENAI_BASE_URL",
    "anthropic": "ANTHROPIC_BASE_URL",
    "google": "GOOGLE_GEMINI_BASE_URL",
    "google-gla": "GOOGLE_GEMINI_BASE_URL",
    "ollama": "OLLAMA_BASE_URL",
}
"""The variable that points a provider's client at another server (where codling's clients read one)."""


@dataclass(frozen=True)
class Endpoint:
    """Where a model's requests go: what a failed request's message names, so the user knows what to fix."""

    model_id: str
    base_url: str | None = None

    def advice(self, status: int | None) -> str:
        """What to do about a request that failed with HTTP ``status`` (None: no connection could be made);
        empty when there is nothing specific to say."""
        provider = provider_of(self.model_id)
        api = _API_NAMES.get(provider)
        where = self.base_url or f"the {provider} API"
        if api and self.base_url:
            where = f"{api} at {self.base_url}"
        url_variable = BASE_URL_VARIABLES.get(provider)
        keys = [n for n in CREDENTIAL_VARIABLES.get(provider, ()) if n != url_variable]
        if status is None:
            elsewhere = f", or set {url_variable} if the server is elsewhere" if url_variable else ""
            return f"check that {where} is reachable from here{elsewhere}"
        if status in (401, 403):
            if not keys:
                return f"{where} refused the request: check its credentials"
            return (
                f"{where} refused the key in {' or '.join(keys)}: check that it is valid for this server "
                "(`codling login` stores another)"
            )
        if status == 404:
            _, _, name = self.model_id.partition(":")
            if provider in ("openai", "openai-responses") and _is_custom(self.base_url):
                return (
                    f"{where} may not exist: most OpenAI-compatible servers offer only chat completions, so use "
                    f"the model 'openai-chat:{name}' (or set no model, and codling takes the first one the "
                    "server lists)"
                )
            fix = (
                f"check the model name (see `codling models`) and {url_variable}"
                if url_variable
                else ("check the model name (see `codling models`)")
            )
            return f"{where} may not serve a model named {name!r}: {fix}"
        return ""


_RESPONSES_PROVIDERS = ("openai", "openai-responses")


def prompt_cache_settings(model_id: str, base_url: str | None, session_id: str) -> dict[str, Any]:
    """Request settings that ask the provider to cache a session's prompt prefix: for OpenAI, a
    ``prompt_cache_key`` stable across the session's requests, so they are routed to the same cache.

    Sent on the Responses API (``openai:``, ``openai-responses:``) whatever the base URL, as the field is part
    of that API's request schema; on chat completions (``openai-chat:``) only to OpenAI's own endpoint, since
    other OpenAI-compatible servers may refuse a field they do not know. Empty for every other provider."""
    provider = _PROVIDER_ALIASES.get(provider_of(model_id), provider_of(model_id))
    if provider in _RESPONSES_PROVIDERS or (provider == "openai-chat" and not _is_custom(base_url)):
        return {"openai_prompt_cache_key": f"codling-{session_id}"}
    return {}


def history_breakpoint(model_id: str, cache: PromptCache, history: Sequence[Any]) -> list[Any]:
    """What opens a request's new user message so that the provider caches the ``history`` before it, as well as
    the whole request (pydantic-ai's ``cache`` puts a breakpoint on the last block): on Anthropic with caching on,
    a ``CachePoint`` (it marks the previous message's last block). A request whose last message differs from the
    previous request's (the summarizer's, the first after a compaction, the next turn's) then still reads the
    history they share. Empty for every other provider, with caching off, and when the history is empty or does
    not end with a reply's text (a user message: the prompt then joins it, which later requests send as one
    block)."""
    provider = _PROVIDER_ALIASES.get(provider_of(model_id), provider_of(model_id))
    if cache == "off" or provider != "anthropic" or not history:
        return []
    from pydantic_ai.messages import CachePoint, ModelResponse, TextPart

    last = history[-1]
    # Only on text with words: an empty reply is left out of the request (the prompt then joins the user message
    # before it), and a breakpoint on a thinking block or on blank text is a 400.
    if not isinstance(last, ModelResponse) or not last.parts:
        return []
    part = last.parts[-1]
    if not isinstance(part, TextPart) or not part.content.strip():
        return []

    return [CachePoint(ttl=cache)]


_API_NAMES = {
    "openai": "the OpenAI Responses API",
    "openai-responses": "the OpenAI Responses API",
    "openai-chat": "the chat-completions API",
    "ollama": "the chat-completions API",
}
"""The API a provider's requests use, for messages about a server that answered (or did not)."""


def _is_custom(base_url: str | None) -> bool:
    """Whether ``base_url`` names a server other than OpenAI's own API (None: the default, OpenAI's)."""
    return bool(base_url) and urlsplit(str(base_url)).hostname != _OPENAI_API_HOST


def local_server_url(env: Mapping[str, str]) -> str | None:
    """``OPENAI_BASE_URL`` when it points somewhere other than OpenAI's own API (a local or self-hosted
    OpenAI-compatible server), without a trailing slash; None otherwise."""
    url = (env.get("OPENAI_BASE_URL") or "").strip().rstrip("/")
    return url if _is_custom(url) else None


def first_served_model(base_url: str, api_key: str | None, timeout: float = MODEL_LIST_TIMEOUT) -> str:
    """The id of the first model an OpenAI-compatible server lists (``GET {base_url}/models``); a ConfigError
    naming the URL, the API and what to do when it cannot be had."""
    import urllib.error  # only asked of a local server, and ~7 ms to import: not on session/new's way
    import urllib.request

    url = f"{base_url}/models"
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    if api_key:
        request.add_header("Authorization", f"Bearer {api_key}")

    def failed(what: str) -> ConfigError:
        return ConfigError(
            f"no model is configured, so codling asked the OpenAI-compatible server at OPENAI_BASE_URL for its "
            f"models (GET {url}, the chat-completions API's model list) and {what}. Start the server or fix "
            "OPENAI_BASE_URL (Ollama: http://localhost:11434/v1, LM Studio: http://localhost:1234/v1, "
            "llama.cpp: http://localhost:8080/v1), or choose a model with --model openai-chat:<name>"
        )

    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            data = json.loads(response.read(1_000_000))
    except urllib.error.HTTPError as e:
        raise failed(f"it answered HTTP {e.code}") from e
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise failed(f"could not reach it ({reason})") from e
    except ValueError as e:
        raise failed("its answer was not JSON") from e
    models = data.get("data") if isinstance(data, dict) else None
    ids = [m.get("id") for m in models if isinstance(m, dict)] if isinstance(models, list) else []
    first = next((i for i in ids if isinstance(i, str) and i.strip()), None)
    if first is None:
        raise failed("it listed no models (load or pull one into the server first)")
    return first


def credential_names() -> frozenset[str]:
    """Every provider's credential variables: secrets whatever their names look like (``codling.secrecy``).
    Not the base URLs, which error messages name so the user can fix them (one holding a password is a
    secret by its value: ``secrecy.secret_names``)."""
    urls = set(BASE_URL_VARIABLES.values())
    return frozenset(name for names in CREDENTIAL_VARIABLES.values() for name in names if name not in urls)


# Older pydantic-ai provider names that codling keeps accepting.
_PROVIDER_ALIASES = {"google-gla": "google"}


def has_credentials(model_id: str, env: Mapping[str, str]) -> bool:
    """Whether the environment holds credentials for the model's provider (unknown providers: assume yes)."""
    names = CREDENTIAL_VARIABLES.get(provider_of(model_id))
    return names is None or any(env.get(name) for name in names)


def check_credentials(model_id: str, env: Mapping[str, str]) -> None:
    """Raise MissingCredentialsError, saying how to give one, unless ``env`` holds credentials for the model's
    provider: the check :func:`build_model` starts with, cheap enough to run before anything heavy loads."""
    if not has_credentials(model_id, env):
        names = CREDENTIAL_VARIABLES[provider_of(model_id)]
        raise MissingCredentialsError(
            f"model {model_id!r} needs {' or '.join(names)}: run `codling login` to store a key, set it in the "
            'environment codling starts in (in Zed: the agent server\'s "env" setting), or choose another model',
            names,
        )


def available_models(catalog: Catalog, env: Mapping[str, str], current: str) -> list[str]:
    """The model ids a session may switch to: ``current`` first, then every catalog model whose provider has
    credentials in ``env``."""
    return [current] + [m.id for m in catalog if m.id != current and has_credentials(m.id, env)]


@dataclass(frozen=True)
class ModelMenu:
    """The models a session may switch to (``/model``): the catalog's, and any ``provider:model`` id, as long as
    the environment holds the provider's credentials."""

    catalog: Catalog
    env: Mapping[str, str] = field(repr=False)

    def available(self, current: str) -> list[str]:
        """``current`` first, then the catalog's models with credentials."""
        return available_models(self.catalog, self.env, current)

    def choose(self, model_id: str) -> ModelInfo:
        """The model ``model_id``; ConfigError (saying what to do) if it is malformed or has no credentials."""
        if not provider_of(model_id) or model_id.endswith(":"):
            raise ConfigError(f"{model_id!r} is not a model id: they look like 'provider:model'")
        if not has_credentials(model_id, self.env):
            names = " or ".join(CREDENTIAL_VARIABLES[provider_of(model_id)])
            raise MissingCredentialsError(f"{model_id} needs {names}, which codling's environment does not set", ())
        return self.catalog.get(model_id)


@dataclass(frozen=True)
class ModelChoice:
    """The chosen model and where the choice came from."""

    info: ModelInfo
    source: str
    """One of ``--model``, ``CODLING_MODEL``, ``config.toml``, ``codling login``, ``credentials``, ``server`` (the
    first model the server at ``OPENAI_BASE_URL`` lists)."""
    note: str | None = None
    """What the user should be told about the choice (which model a server offered), or None."""


def select_model(cli_model: str | None, settings: Settings, catalog: Catalog) -> ModelChoice:
    """Choose the model: ``--model``, ``CODLING_MODEL``, config.toml, ``codling login``'s; then, when
    ``OPENAI_BASE_URL`` points at a server other than OpenAI's, the first model that server lists, on the
    chat-completions API (most local servers lack the Responses API); else the first credentialed catalog model.
    Asking the server is a request with a short timeout, made here, when a session's model is first needed."""
    for model_id, source in (
        (cli_model, "--model"),
        (settings.env.get("CODLING_MODEL"), "CODLING_MODEL"),
        (settings.model, "config.toml"),
        (settings.login_model, "codling login"),
    ):
        if model_id:
            if not provider_of(model_id):
                raise ConfigError(f"model {model_id!r} (from {source}) must look like 'provider:model'")
            return ModelChoice(catalog.get(model_id), source)
    if (server := local_server_url(settings.env)) is not None:
        model_id = "openai-chat:" + first_served_model(server, settings.env.get("OPENAI_API_KEY") or None)
        note = (
            f"using {model_id}, the first model {server} lists (no model is configured); choose another with "
            "--model, CODLING_MODEL or model in config.toml"
        )
        return ModelChoice(catalog.get(model_id), "server", note)
    for info in catalog:
        if has_credentials(info.id, settings.env):
            return ModelChoice(info, "credentials")
    variables = sorted({name for names in CREDENTIAL_VARIABLES.values() for name in names})
    raise NoModelError(
        "no model is configured and no provider has credentials. Run `codling login` to store a provider key, "
        "or set one of "
        + ", ".join(variables)
        + " (for example ANTHROPIC_API_KEY or OPENAI_API_KEY); choose a model with --model, CODLING_MODEL "
        'or `model = "provider:name"` in $CODLING_HOME/config.toml.'
    )


def build_model(
    model_id: str,
    *,
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
    env: Mapping[str, str] | None = None,
    cache: PromptCache = "5m",
) -> Model:
    """Construct the pydantic-ai model for ``model_id``, importing its provider SDK now.

    ``openai-chat:<name>`` reaches any OpenAI-compatible chat-completions server through ``OPENAI_BASE_URL``
    and ``OPENAI_API_KEY`` (read from ``env``, default the process environment). OpenAI and Anthropic
    clients make one attempt per request and give up on a read after ``idle_timeout`` seconds of silence.

    Anthropic models cache the prompt unless ``cache`` is ``"off"``: every request they make (turns, summaries,
    titles) puts breakpoints on the tool definitions, the system prompt and the conversation's last block, so
    each request reads the previous one's prefix from the cache (pydantic-ai's ``cache`` setting).
    """
    with imports_without_gc():  # the model stack's import and construction: long-lived objects only
        return _build_model(model_id, idle_timeout, env, cache)


def _build_model(model_id: str, idle_timeout: float, env: Mapping[str, str] | None, cache: PromptCache) -> Model:
    from pydantic_ai.exceptions import UserError
    from pydantic_ai.models import infer_model
    from pydantic_ai.providers import infer_provider

    provider, _, name = model_id.partition(":")
    canonical_provider = _PROVIDER_ALIASES.get(provider, provider)
    variables = os.environ if env is None else env
    check_credentials(model_id, variables)

    def provider_factory(provider_name: str) -> Provider[Any]:
        if provider_name in _OPENAI_PROVIDERS:
            return _openai_provider(variables, idle_timeout)
        if provider_name == "anthropic":
            return _anthropic_provider(variables, idle_timeout)
        if provider_name == "google":
            return _google_provider(variables, idle_timeout)
        return infer_provider(provider_name)

    try:
        if canonical_provider == "openai-chat":
            from pydantic_ai.models.openai import OpenAIChatModel
            from pydantic_ai.profiles.openai import OpenAIModelProfile

            # Without this, pydantic-ai takes a stream that ends without a finish reason for a finished one.
            return OpenAIChatModel(
                name,
                provider=provider_factory(canonical_provider),
                profile=OpenAIModelProfile(openai_chat_streaming_requires_finish_reason=True),
            )
        if canonical_provider == "anthropic":
            from pydantic_ai.models.anthropic import AnthropicModel

            return AnthropicModel(
                name,
                provider=provider_factory(canonical_provider),
                settings=None if cache == "off" else {"cache": cache},
            )
        return infer_model(f"{canonical_provider}:{name}", provider_factory)
    except ImportError as e:
        raise UnknownProviderError(
            f"model {model_id!r} needs an optional package that is not installed ({e.name or e}); "
            f"install pydantic-ai-slim[{_sdk_extra(canonical_provider)}] into codling's environment"
        ) from e
    except (UserError, ValueError) as e:
        raise UnknownProviderError(f"cannot use model {model_id!r}: {e}") from e


def _sdk_extra(provider: str) -> str:
    """The pydantic-ai-slim extra that brings ``provider``'s SDK (``google-vertex``: ``google``)."""
    return next((family for family in ("google", "openai", "bedrock") if provider.startswith(family)), provider)


def agent_class() -> type[Agent[Any, Any]]:
    """pydantic-ai's ``Agent``, with its first-run banner turned off: codling owns its terminal (and in
    ``codling acp``, stdout is JSON-RPC alone)."""
    import pydantic_ai

    pydantic_ai.BANNER_ENABLED = False
    return pydantic_ai.Agent


def warm_up_provider(model_id: str) -> None:
    """Import pydantic-ai and the provider SDK ``model_id`` needs, without building anything (a background
    thread does it, so the first prompt does not wait for the imports)."""
    with imports_without_gc():
        _import_provider(_PROVIDER_ALIASES.get(provider_of(model_id), provider_of(model_id)))


def _import_provider(provider: str) -> None:
    import pydantic_ai

    if provider in _OPENAI_PROVIDERS:
        import pydantic_ai.models.openai
        import pydantic_ai.providers.openai

        import codling.llm.openai_client  # noqa: F401
    elif provider == "anthropic":
        import pydantic_ai.models.anthropic
        import pydantic_ai.providers.anthropic
    elif provider == "google":
        import pydantic_ai.models.google
        import pydantic_ai.providers.google  # noqa: F401


def _timeout(idle_timeout: float) -> Any:
    import httpx2

    return httpx2.Timeout(idle_timeout, connect=min(CONNECT_TIMEOUT, idle_timeout))


def _openai_provider(env: Mapping[str, str], idle_timeout: float) -> Provider[Any]:
    """An OpenAI provider on a client of our own, reading the OpenAI SDK's usual variables from ``env``."""
    from pydantic_ai.exceptions import UserError
    from pydantic_ai.providers.openai import OpenAIProvider

    from codling.llm.openai_client import FastOpenAI

    base_url = env.get("OPENAI_BASE_URL") or None
    api_key = env.get("OPENAI_API_KEY") or None
    if api_key is None:
        if base_url is None:
            raise UserError("Set the OPENAI_API_KEY environment variable to use OpenAI models.")
        api_key = "api-key-not-set"  # local OpenAI-compatible servers often need none, but the SDK wants one
    client = FastOpenAI(api_key=api_key, base_url=base_url, max_retries=0, timeout=_timeout(idle_timeout))
    return OpenAIProvider(openai_client=client)


def _anthropic_provider(env: Mapping[str, str], idle_timeout: float) -> Provider[Any]:
    """An Anthropic provider on a client of our own (``ANTHROPIC_API_KEY``, ``ANTHROPIC_BASE_URL``)."""
    from anthropic import AsyncAnthropic
    from pydantic_ai.exceptions import UserError
    from pydantic_ai.providers.anthropic import AnthropicProvider

    api_key = env.get("ANTHROPIC_API_KEY") or None
    if api_key is None:
        raise UserError("Set the ANTHROPIC_API_KEY environment variable to use Anthropic models.")
    client = AsyncAnthropic(
        api_key=api_key,
        base_url=env.get("ANTHROPIC_BASE_URL") or None,
        max_retries=0,
        timeout=_timeout(idle_timeout),
    )
    return AnthropicProvider(anthropic_client=client)


def _google_provider(env: Mapping[str, str], idle_timeout: float) -> Provider[Any]:
    """A Gemini API provider on a client of our own (``GOOGLE_API_KEY`` or ``GEMINI_API_KEY``, and
    ``GOOGLE_GEMINI_BASE_URL``, the variable google-genai itself reads, taken from ``env`` like the others)."""
    import httpx2
    from google.genai.types import HttpRetryOptions
    from pydantic_ai.exceptions import UserError
    from pydantic_ai.providers.google import GoogleProvider

    api_key = env.get("GOOGLE_API_KEY") or env.get("GEMINI_API_KEY") or None
    if api_key is None:
        raise UserError("Set the GOOGLE_API_KEY or GEMINI_API_KEY environment variable to use Gemini models.")
    return GoogleProvider(
        api_key=api_key,
        http_client=httpx2.AsyncClient(timeout=_timeout(idle_timeout)),
        base_url=env.get("GOOGLE_GEMINI_BASE_URL") or None,
        # One attempt: without this, a request without ``max_retries`` in its settings would be the SDK's
        # to retry (and wait on) in silence.
        retry_options=HttpRetryOptions(attempts=1),
    )
