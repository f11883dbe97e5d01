"""Anthropic's prompt-caching rules, simulated for the fake Messages API server (``anthropic_server.py``).

What is simulated, per Anthropic's prompt-caching documentation:

- A request's prompt is a sequence of blocks in a fixed order: ``tools`` (one block per tool), then ``system``
  (a string is one block), then each message's content blocks (a string content is one block).
- ``cache_control`` (``{"type": "ephemeral"}``, optionally ``"ttl": "5m" | "1h"``) on a block is a breakpoint;
  a top-level ``cache_control`` (automatic caching) puts one on the last cacheable block. At most 4 breakpoints
  in all; none on a thinking or redacted-thinking block or on an empty text block (each is a ``400``, as the API
  answers).
- The cache key of a breakpoint is the exact prefix up to and including its block. For each breakpoint the
  simulator looks back up to :data:`LOOKBACK_BLOCKS` blocks (the breakpoint's own included) for the longest prefix
  with a live cache entry; the request reads the longest such prefix (``cache_read_input_tokens``).
- Each breakpoint whose prefix reaches the minimum cacheable length is written (or, when it was read, refreshed):
  ``cache_creation_input_tokens`` is what lies between the prefix read and the last breakpoint written; the
  rest is ``input_tokens``. A prefix shorter than the minimum is neither written nor read.
- Minimum cacheable length: 2048 tokens for Haiku models, 1024 for the others (the model name decides).
- Entries live 5 minutes (``"5m"``, the default) or an hour (``"1h"``) from their last write or read, on an
  injected clock (a callable returning seconds) the test controls.

Tokens are estimated, not tokenised: one token per :data:`CHARS_PER_TOKEN` characters of a block's canonical
JSON (``cache_control`` left out, keys sorted), at least one per block. A real tokenizer would count differently,
but the rules (what is read, written or billed in full) only need every request to count the same way.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "CHARS_PER_TOKEN",
    "LOOKBACK_BLOCKS",
    "MAX_BREAKPOINTS",
    "Billed",
    "CacheRejected",
    "PromptCache",
    "estimate_tokens",
    "minimum_cacheable",
]

CHARS_PER_TOKEN = 4
LOOKBACK_BLOCKS = 20
MAX_BREAKPOINTS = 4
TTL_SECONDS: Mapping[str, float] = {"5m": 300.0, "1h": 3600.0}

Ttl = Literal["5m", "1h"]


class CacheRejected(ValueError):
    """A request the API would refuse with a ``400 invalid_request_error`` (the message is the API's)."""


@dataclass(frozen=True)
class Billed:
    """What one request was billed, in Anthropic's usage fields (``cache_creation`` split by TTL)."""

    input_tokens: int
    cache_creation_input_tokens: int
    cache_read_input_tokens: int
    output_tokens: int = 0
    ephemeral_5m_input_tokens: int = 0
    ephemeral_1h_input_tokens: int = 0
    repeated_input_tokens: int = 0
    """Not a usage field: the longest prefix of this request's prompt that an earlier request sent too, cached
    or not (what a cache could have served; what it did not is a miss to explain)."""

    @property
    def missed_tokens(self) -> int:
        """Input an earlier request had sent the same that the cache did not serve."""
        return max(0, self.repeated_input_tokens - self.cache_read_input_tokens)

    @property
    def total_input_tokens(self) -> int:
        """Every input token of the request, however billed."""
        return self.input_tokens + self.cache_creation_input_tokens + self.cache_read_input_tokens

    def billed_input(self) -> float:
        """Input priced in base-input tokens: reads at 0.1x, 5-minute writes at 1.25x, 1-hour writes at 2x."""
        return (
            self.input_tokens
            + 0.1 * self.cache_read_input_tokens
            + 1.25 * self.ephemeral_5m_input_tokens
            + 2.0 * self.ephemeral_1h_input_tokens
        )

    def usage_json(self) -> dict[str, Any]:
        """The ``usage`` object of a response (``output_tokens`` as given)."""
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_creation_input_tokens": self.cache_creation_input_tokens,
            "cache_read_input_tokens": self.cache_read_input_tokens,
            "cache_creation": {
                "ephemeral_5m_input_tokens": self.ephemeral_5m_input_tokens,
                "ephemeral_1h_input_tokens": self.ephemeral_1h_input_tokens,
            },
        }


def estimate_tokens(block: Mapping[str, Any]) -> int:
    """The simulator's token count of one block (its canonical JSON, ``cache_control`` left out)."""
    text = json.dumps({k: v for k, v in block.items() if k != "cache_control"}, sort_keys=True)
    return max(1, math.ceil(len(text) / CHARS_PER_TOKEN))


def minimum_cacheable(model: str) -> int:
    """The shortest prefix (in tokens) Anthropic caches for ``model``."""
    return 2048 if "haiku" in model.lower() else 1024


@dataclass(frozen=True)
class _Block:
    where: str  # for error messages, as the API names the field
    tokens: int
    digest: bytes  # of the prefix up to and including this block
    cache_control: Mapping[str, Any] | None
    cacheable: bool


def _blocks(body: Mapping[str, Any]) -> list[_Block]:
    """The request's prompt as blocks in cache-prefix order, each with its prefix digest."""
    raw: list[tuple[str, Mapping[str, Any], bool]] = []
    for i, tool in enumerate(body.get("tools") or []):
        raw.append((f"tools.{i}", tool, True))
    system = body.get("system")
    if isinstance(system, str):
        raw.append(("system", {"type": "text", "text": system}, bool(system)))
    elif isinstance(system, list):
        for i, block in enumerate(system):
            raw.append((f"system.{i}", block, _cacheable(block)))
    for m, message in enumerate(body.get("messages") or []):
        content = message.get("content")
        if isinstance(content, str):
            raw.append((f"messages.{m}.content", {"type": "text", "text": content, "role": message["role"]}, True))
            continue
        for c, block in enumerate(content or []):
            # The role is part of the prefix: the same block from the other side is a different prompt.
            raw.append((f"messages.{m}.content.{c}", {**block, "role": message.get("role")}, _cacheable(block)))
    blocks: list[_Block] = []
    digest = hashlib.sha256(str(body.get("model")).encode())
    for where, block, cacheable in raw:
        tokens = estimate_tokens({k: v for k, v in block.items() if k != "role"})
        digest.update(json.dumps({k: v for k, v in block.items() if k != "cache_control"}, sort_keys=True).encode())
        control = block.get("cache_control")
        blocks.append(
            _Block(where, tokens, digest.copy().digest(), control if isinstance(control, dict) else None, cacheable)
        )
    return blocks


def _cacheable(block: Mapping[str, Any]) -> bool:
    if block.get("type") in ("thinking", "redacted_thinking"):
        return False
    return not (block.get("type") == "text" and not block.get("text"))


def _ttl(control: Mapping[str, Any], where: str) -> Ttl:
    if control.get("type") != "ephemeral":
        raise CacheRejected(f"{where}.cache_control.type: Input should be 'ephemeral'")
    ttl = control.get("ttl", "5m")
    if ttl not in TTL_SECONDS:
        raise CacheRejected(f"{where}.cache_control.ttl: Input should be '5m' or '1h'")
    return "1h" if ttl == "1h" else "5m"


class PromptCache:
    """The cache of one organisation: entries keyed by prefix digest, expiring on an injected clock.

    Not thread-safe by itself; the server calls :meth:`bill` under its lock.
    """

    def __init__(self, clock: Callable[[], float], *, minimum: int | None = None) -> None:
        """``clock`` returns the current time in seconds; ``minimum`` overrides the per-model minimum."""
        self.clock = clock
        self.minimum = minimum
        self._entries: dict[bytes, float] = {}  # prefix digest -> expiry time
        self._sent: set[bytes] = set()  # the digest of every prefix any request sent

    def clear(self) -> None:
        self._entries.clear()
        self._sent.clear()

    def bill(self, body: Mapping[str, Any]) -> Billed:
        """Apply the request to the cache and say how its input is billed (``output_tokens`` 0).

        Raises :class:`CacheRejected` for breakpoints the API refuses.
        """
        blocks = _blocks(body)
        breakpoints: list[tuple[int, Ttl]] = []
        for index, block in enumerate(blocks):
            if block.cache_control is None:
                continue
            if not block.cacheable:
                raise CacheRejected(f"{block.where}.cache_control: cache_control cannot be set on this block")
            breakpoints.append((index, _ttl(block.cache_control, block.where)))
        automatic = body.get("cache_control")
        if isinstance(automatic, dict):
            last = next((i for i in range(len(blocks) - 1, -1, -1) if blocks[i].cacheable), None)
            if last is not None and all(i != last for i, _ in breakpoints):
                breakpoints.append((last, _ttl(automatic, "cache_control")))
        if len(breakpoints) > MAX_BREAKPOINTS:
            raise CacheRejected(
                f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {len(breakpoints)}."
            )
        breakpoints.sort()
        prefix = [0]
        for block in blocks:
            prefix.append(prefix[-1] + block.tokens)
        total = prefix[-1]
        minimum = self.minimum if self.minimum is not None else minimum_cacheable(str(body.get("model", "")))
        now = self.clock()
        # Reads: for each breakpoint, the longest live entry within the lookback window.
        read_end = 0  # blocks [0, read_end) come from the cache
        for index, _ in breakpoints:
            for j in range(index, max(-1, index - LOOKBACK_BLOCKS), -1):
                expiry = self._entries.get(blocks[j].digest)
                if expiry is not None and expiry > now:
                    read_end = max(read_end, j + 1)
                    break
        # Writes (and refreshes): every breakpoint long enough; the bytes between the read and it are written.
        written_end = read_end
        by_ttl = {"5m": 0, "1h": 0}
        for index, ttl in breakpoints:
            if prefix[index + 1] < minimum:
                continue
            digest = blocks[index].digest
            self._entries[digest] = max(self._entries.get(digest, 0.0), now + TTL_SECONDS[ttl])
            if index + 1 > written_end:
                by_ttl[ttl] += prefix[index + 1] - prefix[written_end]
                written_end = index + 1
        # A hit refreshes the entry read, with the TTL it was read for.
        for index, ttl in breakpoints:
            for j in range(index, max(-1, index - LOOKBACK_BLOCKS), -1):
                if j + 1 == read_end and blocks[j].digest in self._entries:
                    self._entries[blocks[j].digest] = max(self._entries[blocks[j].digest], now + TTL_SECONDS[ttl])
        read = prefix[read_end]
        creation = prefix[written_end] - read
        # Prefix digests chain, so the last block whose digest was sent before ends the longest shared prefix.
        repeated_end = next((j + 1 for j in range(len(blocks) - 1, -1, -1) if blocks[j].digest in self._sent), 0)
        self._sent.update(block.digest for block in blocks)
        return Billed(
            input_tokens=total - read - creation,
            cache_creation_input_tokens=creation,
            cache_read_input_tokens=read,
            ephemeral_5m_input_tokens=by_ttl["5m"],
            ephemeral_1h_input_tokens=by_ttl["1h"],
            repeated_input_tokens=prefix[repeated_end],
        )
