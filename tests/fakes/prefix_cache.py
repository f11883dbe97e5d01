"""What an automatic prefix cache would serve of a session's requests, computed from the requests themselves.

Providers that cache automatically (OpenAI, DeepSeek, most OpenAI-compatible servers with a KV cache) serve
the longest prefix of a request that an earlier request shared, counted in tokens, in steps of 128 and only
from 1,024 tokens on. A request is laid out as the provider reads it: the tool definitions, then each message
in order. ``cached_tokens`` gives what one request would be served; ``cache_share`` the share of all input
tokens served over a session — the figure issue 28 asks to be at least 93% at 128k.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from codling.llm.tokens import count_tokens

MIN_PREFIX_TOKENS = 1_024
STEP_TOKENS = 128
LOOK_BACK = 4
"""Earlier requests a request is compared with (the longest shared prefix is almost always with the latest)."""


def layout(body: dict[str, Any]) -> str:
    """A chat-completions request body as the text a cache sees, in order: tools, then messages."""
    parts = [json.dumps(body.get("tools") or [], sort_keys=True)]
    parts += [json.dumps(message, sort_keys=True) for message in body.get("messages", [])]
    return "\n".join(parts)


def common_prefix(a: str, b: str) -> int:
    """The length of the longest common prefix of ``a`` and ``b`` (a binary search over C-speed compares)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def cached_tokens(shared_prefix_tokens: int) -> int:
    """What a cache serves of a shared prefix: 128-token steps, nothing below 1,024."""
    if shared_prefix_tokens < MIN_PREFIX_TOKENS:
        return 0
    return shared_prefix_tokens - shared_prefix_tokens % STEP_TOKENS


def cache_share(bodies: Sequence[dict[str, Any]]) -> tuple[int, int]:
    """(tokens served from the cache, input tokens in all) over requests sent in this order."""
    texts = [layout(body) for body in bodies]
    served = total = 0
    for index, text in enumerate(texts):
        total += count_tokens(text)
        shared = max((common_prefix(text, earlier) for earlier in texts[max(0, index - LOOK_BACK) : index]), default=0)
        served += cached_tokens(count_tokens(text[:shared])) if shared else 0
    return served, total
