"""Recognising a provider's "the context is too long" answer, whoever sends it.

Each wording below is one provider's (or local server's) answer to a request larger than the model's window,
with the HTTP status it comes with. The status alone says nothing (llama.cpp answers 400 or 500), so the
message decides; ``requested`` and ``limit`` name the groups holding the two numbers, when the message has them.
Sources: each provider's documented error and the wording users report in its issue tracker (noted per row).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

OVERFLOW_STATUSES = frozenset({400, 413, 422, 500})
"""Statuses a context overflow comes with (llama.cpp uses 500 for some of its wordings)."""


@dataclass(frozen=True)
class Wording:
    """One provider's way of saying the request is too long."""

    provider: str
    pattern: re.Pattern[str]
    requested: str | None = None
    """The name of the group holding the request's size (tokens), if the wording has it."""
    limit: str | None = None
    """The name of the group holding the window (tokens), if the wording has it."""


def _w(provider: str, pattern: str, requested: str | None = "n", limit: str | None = "max") -> Wording:
    return Wording(provider, re.compile(pattern, re.IGNORECASE | re.DOTALL), requested, limit)


_N = r"(?P<n>[\d,]+)"
_MAX = r"(?P<max>[\d,]+)"

WORDINGS: tuple[Wording, ...] = (
    # OpenAI: code context_length_exceeded.
    _w("openai", rf"maximum context length is {_MAX} tokens\. However, your messages resulted in {_N} tokens"),
    # vLLM (older and newer wordings); OpenRouter says "This endpoint's maximum context length…" (below).
    _w("vllm", rf"maximum context length is {_MAX} tokens\. However, you requested {_N} tokens"),
    _w("vllm", rf"prompt \(length {_N}\) is longer than the maximum model length of {_MAX}"),
    _w("vllm", rf"input prompt \({_N} tokens\) is too long and exceeds (?:the )?limit of {_MAX}"),
    _w("openrouter", rf"endpoint's maximum context length is {_MAX} tokens\. However, you requested about {_N}"),
    # llama.cpp server (ggml-org/llama.cpp #15780, #19774): type exceed_context_size_error, 400 or 500.
    _w("llama.cpp", rf"request \({_N} tokens\) exceeds the available context size \({_MAX} tokens\)"),
    _w("llama.cpp", r"the request exceeds the available context size", None, None),
    _w("llama.cpp", r"context size has been exceeded", None, None),
    _w("llama-cpp-python", rf"requested tokens \({_N}\) exceed context window of {_MAX}"),
    # Ollama's OpenAI-compatible API, when it does not truncate silently.
    _w("ollama", r"prompt too long; exceeded (?:max )?context length by (?P<n>[\d,]+) tokens", "n", None),
    _w("ollama", r"input length exceeds (?:the )?(?:maximum )?context length", None, None),
    # LM Studio (its own wording, typo included).
    _w(
        "lm-studio", rf"trying to keep the first {_N} tokens when context the overflows.*?context length of only {_MAX}"
    ),
    _w("lm-studio", r"tokens to keep from the initial prompt is greater than the context length", None, None),
    # Anthropic: invalid_request_error.
    _w("anthropic", rf"prompt is too long: {_N} tokens > {_MAX} maximum"),
    _w("anthropic", rf"input length and `?max_tokens`? exceed context limit: {_N} \+ [\d,]+ > {_MAX}"),
    # Gemini: INVALID_ARGUMENT.
    _w("gemini", rf"input token count \({_N}\) exceeds the maximum number of tokens allowed \({_MAX}\)"),
    # Mistral.
    _w("mistral", rf"prompt contains {_N} tokens.*?too large for model with {_MAX} maximum context length"),
    # Generic wordings and codes (proxies, other OpenAI-compatible servers).
    _w("generic", r"context_length_exceeded|exceed_context_size_error", None, None),
    _w("generic", r"context (?:length|window) (?:exceeded|is exceeded)|exceeds? the (?:model's )?context", None, None),
    _w("generic", r"too many tokens|prompt is too long|input is too long|maximum context length", None, None),
)


@dataclass(frozen=True)
class Overflow:
    """A recognised overflow: whose wording matched, and the numbers it gave (tokens), if any."""

    provider: str
    requested: int | None = None
    limit: int | None = None


def overflow_of(e: BaseException) -> Overflow | None:
    """The overflow ``e`` reports (a provider's HTTP error, or pydantic-ai's own overflow error); None if it
    is not one."""
    from pydantic_ai.exceptions import ModelContextWindowExceededError, ModelHTTPError

    if isinstance(e, ModelContextWindowExceededError):
        return Overflow("pydantic-ai")
    if not isinstance(e, ModelHTTPError) or e.status_code not in OVERFLOW_STATUSES:
        return None
    return match_overflow(" ".join([*_strings(e.body), e.message]))


def match_overflow(text: str) -> Overflow | None:
    """The overflow an error message describes, or None."""
    for wording in WORDINGS:
        if (found := wording.pattern.search(text)) is None:
            continue
        return Overflow(wording.provider, _number(found, wording.requested), _number(found, wording.limit))
    return None


def _strings(value: object) -> list[str]:
    """Every string in a JSON body (a provider's message may sit at any depth), in order."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _number(found: re.Match[str], group: str | None) -> int | None:
    return int(found.group(group).replace(",", "")) if group is not None else None


def is_context_overflow(e: BaseException) -> bool:
    """Whether the provider rejected a request because the context was too long."""
    return overflow_of(e) is not None
