"""``codling run --max-cost``: a pydantic-ai capability that stops a turn before a model request once what the
turn has spent passes the cap (its own requests at the model's list price, plus what was spent beside them and
already counted: a delegate's finished run, a mid-turn compaction). A request's price is known only once it is
answered, so the cap is checked before each request: the turn may pass it by the last request's cost, never by
more. Imported only when a turn runs with a cap.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import UsageLimitExceeded

from codling.brain.spend import add_costs, priced, usage_of
from codling.llm.catalog import ModelInfo


class CostLimitReached(UsageLimitExceeded):
    """The turn's spend passed its cap; ``drive`` ends the turn with ``max_cost``."""


@dataclass
class SpendCap(AbstractCapability[Any]):
    """Refuses the next model request of a run once ``spent_so_far`` passes ``limit`` US dollars."""

    limit: float
    model: ModelInfo
    """The run's model, whose list price prices its requests."""
    aside: Callable[[], float | None]
    """What was spent beside the run's own requests so far in the turn (None: nothing with a known price)."""

    def spent_so_far(self, ctx: Any) -> float | None:
        """The turn's cost so far, in US dollars (None: nothing spent had a known price)."""
        return add_costs(priced(self.model, usage_of(ctx.usage)), self.aside())

    async def before_model_request(self, ctx: Any, request_context: Any) -> Any:
        spent = self.spent_so_far(ctx)
        if spent is not None and spent > self.limit:
            raise CostLimitReached(f"the turn spent ${spent:.4f}, past its cap of ${self.limit:g}")
        return request_context
