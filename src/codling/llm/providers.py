"""Model selection and lazy construction of pydantic-ai models.

A model id is a pydantic-ai model string, ``provider:model``. Nothing here imports pydantic-ai or a provider
SDK at module import time: :func:`build_model` does, the first time a model is needed, so ``codling acp``
can answer ``initialize`` before any of that is loaded.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from codling.config import Settings
from codling.errors import ConfigError, NoModelError, UnknownProviderError
from codling.llm.catalog import Catalog, ModelInfo, provider_of

if TYPE_CHECKING:
    from pydantic_ai.models import Model

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


def credential_names() -> frozenset[str]:
    """Every provider's credential variables: secrets whatever their names look like (``codling.secrecy``)."""
    return frozenset(name for names in CREDENTIAL_VARIABLES.values() for name in names)


# Older pydantic-ai provider names that codling keeps accepting.
_PROVIDER_ALIASES = {"google-gla": "google"}


def has_credentials(model_id: str, env: Mapping[str, str]) -> bool:
    """Whether the environment holds credentials for the model's provider (unknown providers: assume yes)."""
    names = CREDENTIAL_VARIABLES.get(provider_of(model_id))
    return names is None or any(env.get(name) for name in names)


@dataclass(frozen=True)
class ModelChoice:
    """The chosen model and where the choice came from."""

    info: ModelInfo
    source: str
    """One of ``--model``, ``CODLING_MODEL``, ``config.toml``, ``credentials``."""


def select_model(cli_model: str | None, settings: Settings, catalog: Catalog) -> ModelChoice:
    """Choose the model: ``--model``, ``CODLING_MODEL``, config.toml, then the first credentialed catalog model."""
    for model_id, source in (
        (cli_model, "--model"),
        (settings.env.get("CODLING_MODEL"), "CODLING_MODEL"),
        (settings.model, "config.toml"),
    ):
        if model_id:
            if not provider_of(model_id):
                raise ConfigError(f"model {model_id!r} (from {source}) must look like 'provider:model'")
            return ModelChoice(catalog.get(model_id), source)
    for info in catalog:
        if has_credentials(info.id, settings.env):
            return ModelChoice(info, "credentials")
    variables = sorted({name for names in CREDENTIAL_VARIABLES.values() for name in names})
    raise NoModelError(
        "no model is configured and no provider has credentials. Set one of "
        + ", ".join(variables)
        + " (for example ANTHROPIC_API_KEY or OPENAI_API_KEY), or choose a model with --model, CODLING_MODEL "
        'or `model = "provider:name"` in $CODLING_HOME/config.toml.'
    )


def build_model(model_id: str) -> Model:
    """Construct the pydantic-ai model for ``model_id``, importing its provider SDK now.

    ``openai-chat:<name>`` reaches any OpenAI-compatible chat-completions server through ``OPENAI_BASE_URL``
    and ``OPENAI_API_KEY``.
    """
    from pydantic_ai.exceptions import UserError
    from pydantic_ai.models import infer_model

    provider, _, name = model_id.partition(":")
    canonical = f"{_PROVIDER_ALIASES.get(provider, provider)}:{name}"
    try:
        return infer_model(canonical)
    except ImportError as e:
        raise UnknownProviderError(
            f"model {model_id!r} needs an optional package that is not installed ({e.name or e}); "
            f"install pydantic-ai-slim[{provider}] into codling's environment"
        ) from e
    except (UserError, ValueError) as e:
        raise UnknownProviderError(f"cannot use model {model_id!r}: {e}") from e
