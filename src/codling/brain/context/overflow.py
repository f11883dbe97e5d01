"""Recognising a provider's "the context is too long" answer, whoever sends it.

Each wording below is one provider's (or local server's) answer to a request larger than the model's window,
with the HTTP status it comes with. The status alone says nothing (llama.cpp answers 400 or 500), so the
message decides; ``requested`` and ``limit`` name the groups holding the two numbers, when the message has them.
Sources: each provider's documented error and the wording users report in its issue tracker (noted per row).

A stated window (``Overflow.limit``) is what ``context/window.py`` learns from. An error in none of these
wordings may still be an overflow: a 400 or 413 whose message speaks of a size passed (``guess_overflow``) is
taken for one, conservatively (``Overflow.guessed``): the history is compacted and the turn retried once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

OVERFLOW_STATUSES = frozenset({400, 413, 422, 500})
"""Statuses a context overflow comes with (llama.cpp uses 500 for some of its wordings)."""


@dataclass(frozen=True)
class Wording:
    """One provider's way of saying the request is too long."""

    provider: str
    source: str
    """The regular expression (matched case-insensitively, ``.`` across lines), compiled on first use."""
    requested: str | None = None
    """The name of the group holding the request's size (tokens), if the wording has it."""
    limit: str | None = None
    """The name of the group holding the window (tokens), if the wording has it."""
    plus: str | None = None
    """The name of a group holding tokens the request asked for on top of ``requested`` (its ``max_tokens``,
    when the wording gives input and output apart), so ``requested`` is what was compared with the window."""

    @property
    def pattern(self) -> re.Pattern[str]:
        """The compiled expression (``re`` caches it: compiling them all at import would slow start-up)."""
        return re.compile(self.source, re.IGNORECASE | re.DOTALL)


def _w(
    provider: str, pattern: str, requested: str | None = "n", limit: str | None = "max", plus: str | None = None
) -> Wording:
    return Wording(provider, pattern, requested, limit, plus)


_N = r"(?P<n>[\d,]+)"
_MAX = r"(?P<max>[\d,]+)"
_OUT = r"(?P<out>[\d,]+)"

WORDINGS: tuple[Wording, ...] = (
    # OpenAI, code context_length_exceeded, 400: "This model's maximum context length is 8192 tokens. However,
    # your messages resulted in 9500 tokens." (chat, smol-ai/developer#7) and the older ", however you requested
    # 4231 tokens (3975 in your prompt; 256 for the completion)" (completions, hwchase17/chat-your-data#10).
    _w("openai", rf"maximum context length is {_MAX} tokens[.,]\s*however,? your messages resulted in {_N} tokens"),
    # vLLM, 400 (BadRequestError), vllm-project/vllm#20409: "This model's maximum context length is 16384 tokens.
    # However, you requested 122946 tokens (112946 in the messages, 10000 in the completion)." OpenRouter, DeepSeek
    # and the OpenAI completions API say the same; OpenRouter's own wording is below.
    _w("vllm", rf"maximum context length is {_MAX} tokens[.,]\s*however,? you requested {_N} tokens"),
    # vLLM >= 0.10 (vllm/entrypoints/openai/serving_engine.py), 400: "…is 32768 tokens. However, your request has
    # 40000 input tokens. Please reduce the length of the input messages."
    _w("vllm", rf"maximum context length is {_MAX} tokens[.,]\s*however,? your request has {_N} input tokens"),
    # vLLM >= 0.10, 400, when the input fits but not with max_tokens: "'max_tokens' or 'max_completion_tokens' is
    # too large: 8000. This model's maximum context length is 4096 tokens and your request has 2778 input tokens
    # (8000 > 4096 - 2778)." What was compared with the window is input + max_tokens.
    _w(
        "vllm",
        rf"too large: {_OUT}\. This model's maximum context length is {_MAX} tokens and your request has {_N} input",
        plus="out",
    ),
    # vLLM (multimodal path), vllm-project/vllm#12165: "The prompt (total length 25938) is too long to fit into the
    # model (context length 4096)."
    _w("vllm", rf"prompt \(total length {_N}\) is too long to fit into the model \(context length {_MAX}\)"),
    # vLLM (encoder-decoder models): "The decoder prompt (length 9000) is longer than the maximum model length of 8192."
    _w("vllm", rf"prompt \(length {_N}\) is longer than the maximum model length of {_MAX}"),
    # vLLM (old scheduler, vllm-project/vllm#10440): "Input prompt (35247 tokens) is too long and exceeds limit of
    # 1000".
    _w("vllm", rf"input prompt \({_N} tokens\) is too long and exceeds (?:the )?limit of {_MAX}"),
    # OpenRouter, 400, OpenHands/OpenHands#9937: "This endpoint's maximum context length is 131072 tokens. However,
    # you requested about 138956 tokens (7884 of text input, 131072 in the output)."
    _w("openrouter", rf"endpoint's maximum context length is {_MAX} tokens[.,]\s*however,? you requested about {_N}"),
    # llama.cpp server, type exceed_context_size_error (ggml-org/llama.cpp#15780 added it with code 500; since
    # #16486 it is 400, oobabooga/textgen#7257), with n_prompt_tokens and n_ctx in the body: "the request exceeds the
    # available context size. try increasing the context size or enable context shift", and the newer
    # "request (4476 tokens) exceeds the available context size (4096 tokens), try increasing it".
    _w("llama.cpp", rf"request \({_N} tokens\) exceeds the available context size \({_MAX} tokens\)"),
    # Some builds name the window in the message: "the request exceeds the available context size (n_ctx: 4096)".
    # Without it, the body's n_ctx and n_prompt_tokens give the numbers (see ``_body_numbers``).
    _w("llama.cpp", rf"the request exceeds the available context size \(n_ctx:? {_MAX}\)", None),
    _w("llama.cpp", r"the request exceeds the available context size", None, None),
    _w("llama.cpp", r"context size has been exceeded", None, None),
    # llama-cpp-python's server, 400 (abetlen/llama-cpp-python#416): "Requested tokens (2285) exceed context window
    # of 2048".
    _w("llama-cpp-python", rf"requested tokens \({_N}\) exceed context window of {_MAX}"),
    # Ollama, 400, when it does not truncate the prompt silently (its default): "prompt too long; exceeded max
    # context length by 4021 tokens" (the excess, not the size); /api/embed and others answer 400, 413 or 500 "the
    # input length exceeds the context length".
    _w("ollama", r"prompt too long; exceeded (?:max )?context length", None, None),
    _w("ollama", r"input length exceeds (?:the )?(?:maximum )?context length", None, None),
    # LM Studio, 400 (lmstudio-ai/lmstudio-bug-tracker#237, #546), typo included: "Trying to keep the first 15857
    # tokens when context the overflows. However, the model is loaded with context length of only 4096 tokens".
    _w(
        "lm-studio", rf"trying to keep the first {_N} tokens when context the overflows.*?context length of only {_MAX}"
    ),
    # LM Studio, the same answer's end alone (a proxy may pass on only part of it): "the model is loaded with
    # context length of only 4096 tokens".
    _w("lm-studio", rf"context length of only {_MAX} tokens", None),
    _w("lm-studio", r"tokens to keep from the initial prompt is greater than the context length", None, None),
    # Anthropic, 400 invalid_request_error: "prompt is too long: 215432 tokens > 200000 maximum"; before Claude
    # Sonnet 4.5, input plus max_tokens: "input length and `max_tokens` exceed context limit: 188240 + 21333 >
    # 200000, decrease input length or `max_tokens` and try again" (strands-agents/sdk-python#152).
    _w("anthropic", rf"prompt is too long: {_N} tokens > {_MAX} maximum"),
    _w("anthropic", rf"input length and `?max_tokens`? exceed context limit: {_N} \+ {_OUT} > {_MAX}", plus="out"),
    # Gemini, 400 INVALID_ARGUMENT (google-gemini/gemini-cli#6678): "The input token count (1200293) exceeds the
    # maximum number of tokens allowed (1048576)."
    _w("gemini", rf"input token count \({_N}\) exceeds the maximum number of tokens allowed \({_MAX}\)"),
    # Mistral, 400 (docs.mistral.ai, known limitations): "Prompt contains 40000 tokens and 0 draft tokens, too large
    # for model with 32768 maximum context length" (or "… and 0 images, too large …").
    _w("mistral", rf"prompt contains {_N} tokens.*?too large for model with {_MAX} maximum context length"),
    # Together AI, 400: "The input (516368 tokens) is longer than the model's context length (262144 tokens)."
    _w("together", rf"input \({_N} tokens\) is longer than the model'?s context length \({_MAX} tokens\)"),
    # xAI: "This model's maximum prompt length is 131072 but the request contains 140000 tokens."
    _w("xai", rf"maximum prompt length is {_MAX} but the request contains {_N} tokens"),
    # Kimi: "Your request exceeded model token limit: 262144 (requested: 300000)".
    _w("kimi", rf"exceeded model token limit: {_MAX} \(requested: {_N}\)"),
    # Hugging Face text-generation-inference, 422 (huggingface/text-generation-inference#628, chat-ui#340): "Input
    # validation error: `inputs` tokens + `max_new_tokens` must be <= 4096. Given: 4000 `inputs` tokens and 500
    # `max_new_tokens`" (the window: max_total_tokens), and "`inputs` must have less than 2048 tokens. Given:
    # 2222" (its max_input_tokens, which is less than the window: learning it as one errs on the safe side).
    _w(
        "tgi",
        rf"`?inputs`? tokens \+ `?max_new_tokens`? must be <= {_MAX}\. Given: {_N} `?inputs`? tokens and {_OUT}",
        plus="out",
    ),
    _w("tgi", rf"`?inputs`? must have less than {_MAX} tokens\. Given: {_N}"),
    # HTTP 413 from a provider or a proxy in front of it: Anthropic's request_too_large ("Request exceeds the
    # maximum allowed number of bytes"), nginx's "413 Request Entity Too Large", "Payload Too Large". Bytes, not
    # tokens, but a shorter request is the cure all the same.
    _w("http-413", r"request_too_large|request entity too large|payload too large", None, None),
    # Generic wordings and codes (proxies such as LiteLLM, other OpenAI-compatible servers).
    _w("generic", r"context_length_exceeded|exceed_context_size_error|model_context_window_exceeded", None, None),
    _w("generic", r"context (?:length|window) (?:exceeded|is exceeded)|exceeds? the (?:model's )?context", None, None),
    _w("generic", r"too many tokens|prompt is too long|input is too long|maximum context length", None, None),
)


GUESS_STATUSES = frozenset({400, 413})
"""Statuses an error in no known wording may still be an overflow with (413 always is one: the request was
too large for whoever refused it)."""

_PASSED = re.compile(r"too long|too large|too big|exceed|maximum|\blimit", re.IGNORECASE)
_SIZE_OF = re.compile(r"context|tokens?\b|length|prompt|input", re.IGNORECASE)
_NOT_THE_INPUT = re.compile(
    r"max_tokens|max_completion_tokens|max_new_tokens|max_output|output tokens|completion tokens|rate.?limit|"
    r"per min|quota|tool calls?",
    re.IGNORECASE,
)
"""What makes a size passed something else: the answer's own limit, a rate limit or a quota, tool calls."""


@dataclass(frozen=True)
class Overflow:
    """A recognised overflow: whose wording matched, and the numbers it gave (tokens), if any."""

    provider: str
    requested: int | None = None
    limit: int | None = None
    guessed: bool = False
    """No known wording matched: a 400 or 413 whose message speaks of a size passed (see ``guess_overflow``)."""


def overflow_of(e: BaseException) -> Overflow | None:
    """The overflow ``e`` reports (a provider's HTTP error, or pydantic-ai's own overflow error); None if it
    is not one."""
    from pydantic_ai.exceptions import ModelAPIError, ModelContextWindowExceededError, ModelHTTPError

    known = isinstance(e, ModelContextWindowExceededError)  # pydantic-ai knew it (OpenAI's code, say)
    if not known and (not isinstance(e, ModelHTTPError) or e.status_code not in OVERFLOW_STATUSES):
        return None
    assert isinstance(e, ModelAPIError)
    found = match_overflow(" ".join([*_strings(e.body), e.message]))
    if found is None and known:
        found = Overflow("pydantic-ai")
    elif found is None:
        assert isinstance(e, ModelHTTPError)
        # (the model's name is left out: a name like "long-context-8k" says nothing about this error)
        return guess_overflow(e.status_code, " ".join([*_strings(e.body), e.message.replace(e.model_name, "")]))
    if found.limit is None or found.requested is None:
        requested, limit = _body_numbers(e.body)
        found = replace(found, requested=found.requested or requested, limit=found.limit or limit)
    return found


def guess_overflow(status: int, text: str) -> Overflow | None:
    """An overflow in a wording the table does not know, conservatively: any 413, or a 400 whose message says
    a size was passed (too long, too large, exceeds, maximum, limit) of the context, the tokens, the length,
    the prompt or the input, and not of the answer (``max_tokens``), a rate or a quota. The turn loop compacts
    and retries once on it (never more), and shows the provider's own message if the retry fails too."""
    if status not in GUESS_STATUSES:
        return None
    if status == 413 or (_PASSED.search(text) and _SIZE_OF.search(text) and not _NOT_THE_INPUT.search(text)):
        return Overflow("unrecognised", guessed=True)
    return None


def match_overflow(text: str) -> Overflow | None:
    """The overflow an error message describes, or None."""
    for wording in WORDINGS:
        if (found := wording.pattern.search(text)) is None:
            continue
        requested = _number(found, wording.requested)
        if requested is not None and (extra := _number(found, wording.plus)) is not None:
            requested += extra
        return Overflow(wording.provider, requested, _number(found, wording.limit))
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


def _body_numbers(body: object) -> tuple[int | None, int | None]:
    """``(requested, limit)`` from a body's own fields, when its message has no numbers: llama.cpp's
    ``exceed_context_size_error`` carries ``n_prompt_tokens`` and ``n_ctx``."""
    fields = _ints(body)
    return fields.get("n_prompt_tokens"), fields.get("n_ctx")


def _ints(value: object) -> dict[str, int]:
    """Every positive integer field of a JSON body, by name (the outermost wins)."""
    if isinstance(value, list):
        return {k: v for item in reversed(value) for k, v in _ints(item).items()}
    if not isinstance(value, dict):
        return {}
    found = {k: v for item in reversed(list(value.values())) for k, v in _ints(item).items()}
    found.update(
        {k: v for k, v in value.items() if isinstance(k, str) and type(v) is int and v > 0}  # (no bools)
    )
    return found


def _number(found: re.Match[str], group: str | None) -> int | None:
    return int(found.group(group).replace(",", "")) if group is not None else None


def is_context_overflow(e: BaseException) -> bool:
    """Whether the provider rejected a request because the context was too long."""
    return overflow_of(e) is not None
