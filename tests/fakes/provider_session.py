"""A codling session on a real pydantic-ai provider model pointed at a loopback provider fake, as the in-process
provider tests drive it (tests/unit/test_anthropic_provider.py, test_responses_provider.py,
test_gemini_provider.py): titles off, read-only, codling's retries waiting on a fake sleep."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from codling.brain.events import Event, TextDelta, TurnFailed
from codling.brain.factory import open_session
from codling.brain.prompt import PromptBlock
from codling.brain.retries import RetryPolicy
from codling.brain.session import ConversationSession
from codling.config import PromptCache, Settings
from codling.llm.catalog import ModelInfo
from codling.llm.providers import build_model, warm_up_provider
from tests.fakes.deadlines import deadline


class FakeSleep:
    """Records each wait and returns at once."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def provider_session(
    env: Mapping[str, str],
    model: ModelInfo,
    project: Path,
    settings: Settings,
    *,
    cache: PromptCache = "5m",
    sleep: FakeSleep | None = None,
) -> ConversationSession:
    """A session on ``model``, built with ``env`` (the fake's base URL and key) and ``cache``."""
    warm_up_provider(model.id)  # an SDK's import takes seconds on a busy machine: not the turn's liveness
    session = open_session(
        replace(settings, titles=False, cache=cache),
        model,
        project,
        approver=None,
        mode="read-only",
        model_factory=lambda model_id: build_model(model_id, env=env, cache=cache),
    )
    session.options = replace(session.options, retry=RetryPolicy(sleep=sleep or FakeSleep()))
    return session


async def turn(session: ConversationSession, prompt: str | tuple[PromptBlock, ...] = "hi") -> list[Event]:
    """One turn's events."""
    async with asyncio.timeout(deadline(120)):  # liveness only
        return [event async for event in session.stream(prompt)]


def text_of(events: list[Event]) -> str:
    """The reply's text."""
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def failures(events: list[Event]) -> list[TurnFailed]:
    """The turn's failure, if it failed."""
    return [e for e in events if isinstance(e, TurnFailed)]
