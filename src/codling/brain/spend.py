"""What requests cost: tokens spent (``Usage``) with their price, summed across models.

A turn's record carries what it spent and cost, its own requests and what was spent beside them for it
(delegates' turns, special turns such as the summarizer's), each part priced at its own model's list price."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from codling.brain.events import Usage
from codling.llm.catalog import ModelInfo


def usage_of(usage: Any) -> Usage:
    """codling's ``Usage`` of a pydantic-ai run's ``RunUsage``."""
    # RunUsage sums RequestUsage's one-hour writes under the same (undeclared) attribute name.
    one_hour = getattr(usage, "cache_write_1h_tokens", 0)
    return Usage(
        usage.input_tokens,
        usage.output_tokens,
        usage.requests,
        usage.cache_read_tokens,
        usage.cache_write_tokens,
        one_hour if isinstance(one_hour, int) else 0,
    )


def priced(model: ModelInfo, usage: Usage) -> float | None:
    """What ``usage`` cost at ``model``'s list price, in US dollars (None: its price is not known)."""
    return model.cost(
        usage.input_tokens,
        usage.output_tokens,
        usage.cache_read_tokens,
        usage.cache_write_tokens,
        usage.cache_write_1h_tokens,
    )


def add_costs(a: float | None, b: float | None) -> float | None:
    """The sum of two costs; an unknown one (None) adds nothing, and two unknown ones stay unknown."""
    if a is None:
        return b
    return a if b is None else a + b


@dataclass(frozen=True)
class Spend:
    """Tokens spent and what they cost (None: no part of them had a known price)."""

    usage: Usage = field(default_factory=Usage)
    cost: float | None = None

    def __add__(self, other: Spend) -> Spend:
        return Spend(self.usage + other.usage, add_costs(self.cost, other.cost))


class SpentAside:
    """What a session spent beside its turns' own requests (a delegate's turn, a special turn such as the
    summarizer's or the title's), not yet in a turn's record: the next turn to end takes it (the running one,
    or the next one for what was spent between turns, a title named after its turn), since a session's spend
    lives in its turns' records."""

    def __init__(self) -> None:
        self.so_far = Spend()
        """What was spent aside since the last turn took it."""

    def add(self, spend: Spend) -> None:
        """Count ``spend`` in the next turn to end."""
        self.so_far += spend

    def take(self) -> Spend:
        """What was spent aside so far, for the turn that ends now; the count starts again."""
        spent, self.so_far = self.so_far, Spend()
        return spent
