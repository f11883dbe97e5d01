"""Token budgets: what a request may hold, and the estimates codling budgets requests with."""

from __future__ import annotations

from codling.brain.prompt import ImageBlock
from codling.llm.catalog import ModelInfo

TOOL_SCHEMA_TOKENS = 1_500
"""An estimate of what the tool definitions add to every request."""

IMAGE_TOKENS = 1_600
"""An estimate of what one attached image costs a request (providers scale and tile images differently)."""

OUTPUT_MARGIN_TOKENS = 1_000
MIN_OUTPUT_TOKENS = 1_024


def image_tokens(images: tuple[ImageBlock, ...], model: ModelInfo) -> int:
    """What a prompt's images are estimated to cost a request (nothing when the model cannot see them)."""
    return IMAGE_TOKENS * len(images) if model.images else 0
