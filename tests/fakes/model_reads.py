"""What the model reads, measured from the chat-completions requests a scripted server received (issue 28).

``read_metrics`` reports, over one session's requests in order: the share of input tokens an automatic prefix
cache would serve (``prefix_cache.cache_share``), the input tokens in all, control characters in what the
messages say (there should be none: tool output is cleaned), lines said twice in one request (the same line of
40 characters or more: restated context), and fresh tool results squashed although the request would have
held them (a result the model had not seen, replaced by its summary in a request that had room for the whole
result at its largest).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from codling.brain.context.requests import SUMMARISED
from codling.llm.tokens import count_tokens
from tests.fakes.openai_server import text_of
from tests.fakes.prefix_cache import cache_share

REPEAT_CHARS = 40
"""A line this long or longer said twice in one request counts as repeated."""
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\x80-\x9f]")


@dataclass(frozen=True)
class ReadsMetrics:
    """What one session's requests held (see the module's docstring)."""

    requests: int
    input_tokens: int
    cached_tokens: int
    control_characters: int
    repeated_tokens: int
    fresh_squashed: int
    fresh_tokens: int = 0
    """Tokens of tool results the model had not seen yet (after its latest message): new input no cache can
    serve, whatever the layout."""

    @property
    def cache_share(self) -> float:
        """The share of input tokens a prefix cache serves."""
        return self.cached_tokens / self.input_tokens if self.input_tokens else 1.0

    @property
    def cache_share_of_servable(self) -> float:
        """The share a prefix cache serves of what it could: the input tokens less the fresh tool results."""
        servable = self.input_tokens - self.fresh_tokens
        return self.cached_tokens / servable if servable > 0 else 1.0

    @property
    def repeated_share(self) -> float:
        """The share of input tokens that repeat a line already in the same request."""
        return self.repeated_tokens / self.input_tokens if self.input_tokens else 0.0


def read_metrics(bodies: Sequence[dict[str, Any]], input_limit: int, tool_output: int) -> ReadsMetrics:
    """The metrics of requests ``bodies`` (in the order sent), for a model whose requests may hold
    ``input_limit`` tokens and one tool result ``tool_output`` tokens at most."""
    cached, total = cache_share(bodies)
    control = repeated = fresh = fresh_tokens = 0
    for body in bodies:
        messages = body.get("messages", [])
        fresh_tokens += sum(count_tokens(json.dumps(m)) for m in _newest_results(messages))
        texts = [text_of(m.get("content")) for m in messages]
        control += sum(len(_CONTROL.findall(text)) for text in texts)
        lines = Counter(line.strip() for text in texts for line in text.splitlines() if len(line.strip()) >= 40)
        repeated += sum(count_tokens(line) * (n - 1) for line, n in lines.items() if n > 1)
        fresh += _fresh_squashed(messages, input_limit, tool_output)
    return ReadsMetrics(len(bodies), total, cached, control, repeated, fresh, fresh_tokens)


def _newest_results(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tool results after the model's latest message: what it has not read yet."""
    last_assistant = max((i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=-1)
    return [m for m in messages[last_assistant + 1 :] if m.get("role") == "tool"]


def _fresh_squashed(messages: list[dict[str, Any]], input_limit: int, tool_output: int) -> int:
    """Results of the newest tool calls (after the last assistant message) that came squashed, in a request
    that would have held them whole: its size with the largest result put back stays within the limit."""
    squashed = [m for m in _newest_results(messages) if SUMMARISED in text_of(m["content"])]
    if not squashed:
        return 0
    size = count_tokens(json.dumps(messages))
    return len(squashed) if size + tool_output * len(squashed) <= input_limit else 0
