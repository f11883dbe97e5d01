"""A scripted coding session against the Anthropic fake, priced under Anthropic's cache rules (the bench's
prompt-cache section): a growing conversation in which every third turn reads a file first, run through a real
``ConversationSession`` on the real ``AnthropicModel`` over HTTP."""

from __future__ import annotations

import asyncio
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from codling.brain.events import TurnFailed
from codling.brain.factory import open_session
from codling.config import PromptCache, Settings
from codling.llm.catalog import ModelInfo
from codling.llm.providers import build_model
from tests.fakes.anthropic_cache import Billed
from tests.fakes.anthropic_server import Reply, ToolUse, running_server

MODEL = ModelInfo("anthropic:claude-sonnet-4-5", context_limit=200_000, thinking=False, images=True)


@dataclass(frozen=True)
class SessionBill:
    """What a session's requests were billed."""

    bill: tuple[Billed, ...]

    @property
    def input_tokens(self) -> int:
        """Every input token sent, however billed."""
        return sum(b.total_input_tokens for b in self.bill)

    @property
    def cache_share(self) -> float:
        """The share of input tokens served from the cache."""
        return sum(b.cache_read_input_tokens for b in self.bill) / max(1, self.input_tokens)

    @property
    def billed_input(self) -> float:
        """Input priced in base-input tokens (reads 0.1x, writes 1.25x or 2x)."""
        return sum(b.billed_input() for b in self.bill)


async def run_session(turns: int, cache: PromptCache) -> SessionBill:
    """``turns`` scripted turns with ``cache``; raises if a turn fails."""
    with tempfile.TemporaryDirectory() as tmp, running_server() as server:
        root = Path(tmp)
        project, home = root / "project", root / "home"
        (project / "src").mkdir(parents=True)
        home.mkdir()
        for i in range(turns):
            (project / "src" / f"mod{i}.py").write_text(f"def f{i}(x):\n    return x * {i}\n" * 20)
        session = open_session(
            Settings(home=home, env={"CODLING_HOME": str(home)}, titles=False, cache=cache),
            MODEL,
            project,
            approver=None,
            mode="read-only",
            model_factory=lambda model_id: build_model(model_id, env=server.env(), cache=cache),
        )
        session.options = replace(session.options, auto_title=False)
        for i in range(turns):
            if i % 3 == 1:
                server.enqueue(Reply(tool_uses=[ToolUse("read_file", {"path": f"src/mod{i}.py"})]))
            server.enqueue(Reply(text=f"Turn {i}: " + "explanation " * 60))
            async with asyncio.timeout(60):  # liveness only
                events = [e async for e in session.stream(f"Step {i}: " + "look into the module and explain " * 8)]
            if failed := [e for e in events if isinstance(e, TurnFailed)]:
                raise RuntimeError(f"turn {i} failed: {failed[0].message}")
        return SessionBill(tuple(server.bill))
