"""The model catalog: ``models.json`` bundled with codling, plus ``$CODLING_HOME/models.json``.

Both files have the shape ``{"models": {"<provider:model>": {"context_limit": N, "max_output_tokens": N,
"thinking": bool, "images": bool, "compact_threshold": share (optional), "price": [input, output] or
[input, output, cache read], [..., cache write] or [..., cache write, one-hour cache write] (optional: US
dollars per million tokens)}}}``; the user's entries add to or replace the bundled ones. The bundled prices are
the providers' list prices when they were written down, cache reads and writes included (Anthropic's
five-minute and one-hour writes; OpenAI and Gemini bill no writes), so a cost shown is what the provider's
price list says for the tokens it reported. An id found in neither still works,
with conservative defaults (``ModelInfo.known`` is then false and a warning is due).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Any

from codling.errors import ConfigError

DEFAULT_CONTEXT_LIMIT = 32_000

SAME_PROVIDER = {"google": "google-gla", "google-gla": "google"}
"""Provider names pydantic-ai takes for the same API (``google-gla`` is the Gemini API's older name)."""
DEFAULT_MAX_OUTPUT_TOKENS = 4_096


@dataclass(frozen=True)
class Price:
    """A model's list price, in US dollars per million tokens."""

    input: float
    output: float
    cache_read: float | None = None
    """Input read from the provider's prompt cache (None: billed as other input)."""
    cache_write: float | None = None
    """Input written to the provider's prompt cache (None: billed as other input)."""
    cache_write_1h: float | None = None
    """Input written to the prompt cache to live an hour (None: billed as other writes)."""

    def cost(
        self,
        input_tokens: int,
        output_tokens: int,
        cache_read_tokens: int = 0,
        cache_write_tokens: int = 0,
        cache_write_1h_tokens: int = 0,
    ) -> float:
        """What these tokens cost; ``input_tokens`` includes the cache's reads and writes, and
        ``cache_write_tokens`` the one-hour writes."""
        read = self.input if self.cache_read is None else self.cache_read
        write = self.input if self.cache_write is None else self.cache_write
        write_1h = write if self.cache_write_1h is None else self.cache_write_1h
        plain = max(0, input_tokens - cache_read_tokens - cache_write_tokens)
        short_writes = max(0, cache_write_tokens - cache_write_1h_tokens)
        dollars = (
            plain * self.input + cache_read_tokens * read + short_writes * write + cache_write_1h_tokens * write_1h
        )
        return (dollars + output_tokens * self.output) / 1_000_000


@dataclass(frozen=True)
class ModelInfo:
    """What codling knows about one model id."""

    id: str
    context_limit: int = DEFAULT_CONTEXT_LIMIT
    max_output_tokens: int = DEFAULT_MAX_OUTPUT_TOKENS
    thinking: bool = False
    images: bool = False
    compact_threshold: float | None = None
    """This model's own compaction threshold (share of the context limit), overriding config.toml's."""
    known: bool = True
    """False when the id is in no catalog and the defaults above are guesses."""
    price: Price | None = None
    """What its tokens cost (None: not known, so no cost is shown)."""

    def cost(
        self,
        input_tokens: int,
        output_tokens: int,
        cache_read_tokens: int = 0,
        cache_write_tokens: int = 0,
        cache_write_1h_tokens: int = 0,
    ) -> float | None:
        """What these tokens cost at this model's list price, in US dollars (None when the price is unknown);
        ``input_tokens`` includes the cache's reads and writes, as providers' usage reports count them."""
        if self.price is None:
            return None
        return self.price.cost(
            input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cache_write_1h_tokens
        )

    @property
    def provider(self) -> str:
        """The provider prefix of the id (``openai-chat`` for ``openai-chat:qwen``)."""
        return provider_of(self.id)


def provider_of(model_id: str) -> str:
    """The provider part of a ``provider:model`` id ('' when there is none)."""
    provider, sep, _ = model_id.partition(":")
    return provider if sep else ""


PROVIDER_NAMES: dict[str, str] = {
    "anthropic": "Anthropic",
    "openai": "OpenAI",
    "openai-responses": "OpenAI (Responses API)",
    "openai-chat": "OpenAI-compatible (chat completions)",
    "google": "Google",
    "google-gla": "Google",
    "openrouter": "OpenRouter",
    "deepseek": "DeepSeek",
    "groq": "Groq",
    "mistral": "Mistral",
    "xai": "xAI",
    "cerebras": "Cerebras",
    "ollama": "Ollama",
}
"""How a provider prefix is shown to people (a model picker's groups)."""


def provider_name(provider: str) -> str:
    """``provider``'s display name (the prefix itself for one codling has no name for)."""
    return PROVIDER_NAMES.get(provider, provider or "Other")


@dataclass(frozen=True)
class Catalog:
    """Model ids in catalog order (bundled first, then the user's additions)."""

    models: dict[str, ModelInfo]

    def get(self, model_id: str) -> ModelInfo:
        """The entry for ``model_id`` (or for the same model under its provider's other name: ``google:`` and
        ``google-gla:`` are one provider to pydantic-ai), else conservative defaults flagged ``known=False``."""
        if (found := self.models.get(model_id)) is not None:
            return found
        provider = provider_of(model_id)
        if (other := SAME_PROVIDER.get(provider)) is not None:
            alias = self.models.get(other + model_id[len(provider) :])
            if alias is not None:
                return replace(alias, id=model_id)
        return ModelInfo(id=model_id, known=False)

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.models.values())


def _threshold(value: Any, model_id: str, source: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 1:
        raise ConfigError(f"{source}: {model_id}: compact_threshold must be a number between 0 and 1")
    return float(value)


def _price(value: Any, model_id: str, source: str) -> Price | None:
    if value is None:
        return None
    if (
        not isinstance(value, list)
        or len(value) not in (2, 3, 4, 5)
        or not all(isinstance(v, int | float) and not isinstance(v, bool) and v >= 0 for v in value)
    ):
        raise ConfigError(
            f"{source}: {model_id}: price must be [input, output], optionally followed by cache read, cache "
            "write and one-hour cache write, in dollars per million tokens"
        )
    numbers = [float(v) for v in value]
    return Price(*numbers)


def _parse(data: Any, source: str) -> dict[str, ModelInfo]:
    if not isinstance(data, dict) or not isinstance(data.get("models"), dict):
        raise ConfigError(f'{source}: expected {{"models": {{"<provider:model>": {{...}}}}}}')
    out: dict[str, ModelInfo] = {}
    for model_id, entry in data["models"].items():
        if not isinstance(entry, dict) or ":" not in model_id:
            raise ConfigError(f"{source}: entry {model_id!r} must be an object keyed by 'provider:model'")
        try:
            out[model_id] = ModelInfo(
                id=model_id,
                context_limit=int(entry.get("context_limit", DEFAULT_CONTEXT_LIMIT)),
                max_output_tokens=int(entry.get("max_output_tokens", DEFAULT_MAX_OUTPUT_TOKENS)),
                thinking=bool(entry.get("thinking", False)),
                images=bool(entry.get("images", False)),
                compact_threshold=_threshold(entry.get("compact_threshold"), model_id, source),
                price=_price(entry.get("price"), model_id, source),
            )
        except (TypeError, ValueError) as e:
            raise ConfigError(f"{source}: entry {model_id!r} has a non-numeric limit: {e}") from e
    return out


def _read(path: Path) -> dict[str, ModelInfo]:
    try:
        data = strict_json(path.read_text(encoding="utf-8"), str(path))
    except json.JSONDecodeError as e:
        raise ConfigError(f"{path}: not valid JSON ({e})") from e
    except OSError as e:
        raise ConfigError(f"{path}: cannot be read ({e})") from e
    return _parse(data, str(path))


def strict_json(text: str, source: str) -> Any:
    """``text`` parsed as JSON; an object that names a key twice is a ``ConfigError`` naming ``source``
    (Python's parser keeps the last without a word, so a catalog's second ``"price"`` replaced its first)."""

    def unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        keys = [key for key, _ in pairs]
        if repeated := sorted({key for key in keys if keys.count(key) > 1}):
            raise ConfigError(f"{source}: the key {repeated[0]!r} appears twice in one object; say it once")
        return dict(pairs)

    return json.loads(text, object_pairs_hook=unique)


def bundled_catalog_text() -> str:
    """The text of the models.json shipped inside the package."""
    return resources.files("codling").joinpath("models.json").read_text(encoding="utf-8")


def load_catalog(user_file: Path | None = None) -> Catalog:
    """The bundled catalog with the user's file (if it exists) layered on top."""
    models = _parse(strict_json(bundled_catalog_text(), "bundled models.json"), "bundled models.json")
    if user_file is not None and user_file.exists():
        models.update(_read(user_file))
    return Catalog(models)
