"""``codling login`` and ``codling logout``: a provider key stored for codling (``codling.credentials``), so a
user with nothing set in the environment, or an editor's terminal sign-in, gets a working model.

On a terminal the provider is picked from a numbered list and the key typed without echo; otherwise both come
from the options and standard input (one line), so scripts and tests can log in too."""

from __future__ import annotations

import getpass
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass

from codling.credentials import credentials_file, forget, store
from codling.errors import ConfigError
from codling.llm.catalog import Catalog, provider_of
from codling.paths import codling_home


@dataclass(frozen=True)
class Provider:
    """A provider one can log in to: the variable its key stands for."""

    id: str
    label: str
    variable: str


PROVIDERS = (
    Provider("anthropic", "Anthropic (Claude)", "ANTHROPIC_API_KEY"),
    Provider("openai", "OpenAI", "OPENAI_API_KEY"),
    Provider("google", "Google (Gemini)", "GEMINI_API_KEY"),
    Provider("openrouter", "OpenRouter", "OPENROUTER_API_KEY"),
    Provider("deepseek", "DeepSeek", "DEEPSEEK_API_KEY"),
    Provider("mistral", "Mistral", "MISTRAL_API_KEY"),
    Provider("groq", "Groq", "GROQ_API_KEY"),
    Provider("xai", "xAI (Grok)", "XAI_API_KEY"),
    Provider("cerebras", "Cerebras", "CEREBRAS_API_KEY"),
)


def _provider(name: str) -> Provider:
    wanted = {"google-gla": "google", "gemini": "google", "claude": "anthropic"}.get(name.lower(), name.lower())
    for provider in PROVIDERS:
        if provider.id == wanted:
            return provider
    names = ", ".join(p.id for p in PROVIDERS)
    raise ConfigError(f"unknown provider {name!r}: choose one of {names}")


def _pick(ask: Callable[[str], str], say: Callable[[str], None]) -> Provider:
    say("Log in to which provider?")
    for number, provider in enumerate(PROVIDERS, 1):
        say(f"  {number}. {provider.label}")
    answer = ask("Number or name: ").strip()
    if answer.isdigit() and 1 <= int(answer) <= len(PROVIDERS):
        return PROVIDERS[int(answer) - 1]
    return _provider(answer)


def default_model(provider: Provider, catalog: Catalog) -> str | None:
    """The first catalog model of ``provider`` (None: the catalog has none)."""
    aliases = {"google": ("google", "google-gla")}.get(provider.id, (provider.id,))
    return next((info.id for info in catalog if provider_of(info.id) in aliases), None)


def login(
    catalog: Catalog,
    provider_name: str | None,
    model: str | None,
    *,
    interactive: bool,
    say: Callable[[str], None],
    ask: Callable[[str], str] = input,
    secret: Callable[[str], str] = getpass.getpass,
    read_line: Callable[[], str] | None = None,
) -> str:
    """Store a key and a model; returns what to tell the user. Interactive: ask for what the options do not
    give; otherwise ``provider_name`` is needed and the key is ``read_line``'s (default: a line of stdin)."""
    if provider_name:
        provider = _provider(provider_name)
    elif interactive:
        provider = _pick(ask, say)
    else:
        raise ConfigError("name the provider with --provider (e.g. --provider anthropic) and pass the key on stdin")
    if interactive:
        key = secret(f"{provider.variable} (input hidden): ").strip()
    else:
        key = (read_line or sys.stdin.readline)().strip()
    if not key:
        raise ConfigError(f"no key given for {provider.label}: nothing was stored")
    if model is not None and ":" not in model:
        raise ConfigError(f"model {model!r} must look like 'provider:model'")
    chosen = model or default_model(provider, catalog)
    home = codling_home()
    path = store(home, provider.variable, key, chosen)
    lines = [f"Stored {provider.variable} for codling in {path} (readable by you only)."]
    if chosen:
        lines.append(f"Model: {chosen} (choose another with --model, CODLING_MODEL or model in config.toml).")
    if (current := os.environ.get(provider.variable)) and current != key:
        lines.append(f"{provider.variable} is also set in your environment, and that value wins over the stored one.")
    return "\n".join(lines)


def logout(provider_name: str | None) -> str:
    """Remove the stored key of ``provider_name`` (None: every stored key and the model); what to tell the user."""
    home = codling_home()
    variables = None if provider_name is None else {_provider(provider_name).variable}
    gone = forget(home, variables)
    if not gone:
        return "No key was stored for codling" + ("." if variables is None else f" as {', '.join(variables)}.")
    left = "" if variables is None else f" ({credentials_file(home)} keeps the others)"
    return f"Removed {', '.join(gone)}{left}. Keys set in the environment are not affected."
