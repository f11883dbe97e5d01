"""Token budgets: what a request may hold, and the estimates codling budgets requests with.

Every share here is of the model's window (``context_limit`` in the catalog). A request's input may use the
window minus the room its answer needs (``input_limit``); compaction starts at ``compact_threshold`` of that;
each part of the context (one tool result, the turn ledger, the pinned instructions, a fallback summary, the
user messages a compaction keeps) has its own cap, so none of them can crowd out the others.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from codling.brain.prompt import ImageBlock
from codling.llm.catalog import ModelInfo
from codling.llm.tokens import count_tokens

IMAGE_TOKENS = 1_600
"""An estimate of what one attached image costs a request (providers scale and tile images differently)."""

MESSAGE_OVERHEAD_TOKENS = 8
"""What a message costs besides its content: its role and the JSON around it."""

MIN_ANSWER_TOKENS = 256
"""The least room an answer is given; a request that would leave less is shrunk first."""

TOOL_OUTPUT_SHARE = 0.25
TOOL_OUTPUT_MAX_TOKENS = 25_000
LEDGER_SHARE = 0.07
LEDGER_MAX_TOKENS = 3_000
PINS_SHARE = 0.05
PINS_MAX_TOKENS = 1_000
FALLBACK_SHARE = 0.10
FALLBACK_MAX_TOKENS = 2_000
KEPT_USER_SHARE = 0.08
SUMMARY_SHARE = 0.12
SUMMARY_MAX_TOKENS = 8_000
KEPT_USER_MAX_TOKENS = 20_000
PROMPT_SHARE = 0.35
"""The most of the input limit a user's prompt may take (a longer paste is cut in the middle)."""
SAFETY_SHARE = 0.05
"""Room left for the difference between codling's token counts (o200k) and the provider's tokenizer."""


@dataclass(frozen=True)
class Budget:
    """The token budgets of one model's window."""

    window: int
    max_output: int
    threshold: float
    """Compact once a request would pass this share of ``input_limit``."""

    @classmethod
    def of(cls, model: ModelInfo, threshold: float) -> Budget:
        """The budgets of ``model``'s window; ``threshold`` is used unless the catalog gives the model its own."""
        return cls(model.context_limit, model.max_output_tokens, model.compact_threshold or threshold)

    @property
    def reserved_output(self) -> int:
        """Room kept for the answer: the catalog's maximum output, at most half the window."""
        return max(MIN_ANSWER_TOKENS, min(self.max_output, self.window // 2))

    @property
    def input_limit(self) -> int:
        """The most a request's input may hold: the window minus the answer's room and a safety margin."""
        return max(1, self.window - self.reserved_output - int(self.window * SAFETY_SHARE))

    @property
    def compact_at(self) -> int:
        """Tokens past which the history is compacted (before a turn, or between requests of one)."""
        return int(self.input_limit * self.threshold)

    @property
    def tool_output(self) -> int:
        """The most tokens one tool result keeps for the model (about a quarter of the window)."""
        return max(MIN_ANSWER_TOKENS, min(int(self.window * TOOL_OUTPUT_SHARE), TOOL_OUTPUT_MAX_TOKENS))

    @property
    def ledger(self) -> int:
        """The most the turn ledger (what earlier turns did) takes in a request."""
        return min(int(self.window * LEDGER_SHARE), LEDGER_MAX_TOKENS)

    @property
    def pins(self) -> int:
        """The most the pinned instructions take in a request."""
        return min(int(self.window * PINS_SHARE), PINS_MAX_TOKENS)

    @property
    def fallback(self) -> int:
        """The most a summary built without the model may take: min(2,000, 10% of the window)."""
        return min(int(self.window * FALLBACK_SHARE), FALLBACK_MAX_TOKENS)

    @property
    def summary(self) -> int:
        """The most a model-written compaction summary may take (the summarizer is asked for no more)."""
        return min(self.max_output, max(self.fallback, min(int(self.window * SUMMARY_SHARE), SUMMARY_MAX_TOKENS)))

    @property
    def kept_user(self) -> int:
        """The most the user messages a compaction keeps verbatim may take."""
        return max(256, min(int(self.window * KEPT_USER_SHARE), KEPT_USER_MAX_TOKENS))

    @property
    def prompt(self) -> int:
        """The most one user prompt may take in a request (and in the history)."""
        return max(MIN_ANSWER_TOKENS, int(self.input_limit * PROMPT_SHARE))

    def answer_room(self, input_tokens: int) -> int:
        """``max_tokens`` for a request of ``input_tokens``: the catalog's maximum output, never more than the
        room the window has left (and at least ``MIN_ANSWER_TOKENS``, which the caller makes sure there is)."""
        room = self.window - input_tokens - int(self.window * SAFETY_SHARE)
        return max(min(MIN_ANSWER_TOKENS, self.max_output), min(self.max_output, room))


def newest_that_fit(newest_first: Iterable[str], room: int, per_item: int = 1) -> tuple[list[str], int]:
    """The texts of ``newest_first`` (newest first; it may be lazy) that fit ``room`` tokens together, each
    costing its tokens and ``per_item``, up to the first that does not fit; oldest first, with their cost."""
    kept: list[str] = []
    used = 0
    for text in newest_first:
        cost = count_tokens(text) + per_item
        if used + cost > room:
            break
        kept.append(text)
        used += cost
    kept.reverse()
    return kept, used


def image_tokens(images: tuple[ImageBlock, ...], model: ModelInfo) -> int:
    """What a prompt's images are estimated to cost a request (nothing when the model cannot see them)."""
    from codling.brain.images import may_see_images

    return IMAGE_TOKENS * len(images) if may_see_images(model) else 0
