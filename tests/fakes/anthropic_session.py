"""A scripted coding session against the Anthropic fake, priced under Anthropic's cache rules (the bench's
prompt-cache section and the cost tests): a growing conversation in which every third turn reads a file first,
run through a real ``ConversationSession`` on the real ``AnthropicModel`` over HTTP, in a window small enough to
compact or large enough not to.

The model's side is :class:`SessionModel`, a responder for ``anthropic_server.py``: it reads which turn a request
belongs to from the request itself (``Step N:`` in the last user text; a tool result means the read is done),
and answers codling's summarize requests with a summary made of the conversation's own words, so compactions
succeed and cost what they would."""

from __future__ import annotations

import asyncio
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from codling.brain.events import CompactionStarted, TurnEnded, TurnFailed, Usage
from codling.brain.factory import open_session
from codling.config import PromptCache, Settings
from codling.llm.catalog import ModelInfo, load_catalog
from codling.llm.providers import build_model
from tests.fakes import fidelity
from tests.fakes.anthropic_bridge import ChatBridge
from tests.fakes.anthropic_cache import Billed
from tests.fakes.anthropic_server import Reply, ScriptedReply, ToolUse, running_server
from tests.fakes.deadlines import deadline
from tests.fakes.summarizer import MARK

MODEL_ID = "anthropic:claude-sonnet-5-5"

_STEP = re.compile(r"Step (\d+):")


def model(window: int) -> ModelInfo:
    """The catalog's Claude Sonnet (its list price) with a ``window``-token context."""
    return replace(load_catalog(None).get(MODEL_ID), context_limit=window, thinking=False)


def _texts(body: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(role, text) of every text block of the request's messages, system first."""
    system = body.get("system")
    out = [("system", system if isinstance(system, str) else " ".join(b.get("text", "") for b in system or []))]
    for message in body.get("messages") or []:
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        out += [(message["role"], b.get("text", "")) for b in blocks if b.get("type") == "text"]
    return out


def _ends_with_tool_result(body: Mapping[str, Any]) -> bool:
    last = (body.get("messages") or [{}])[-1]
    content = last.get("content")
    return isinstance(content, list) and any(b.get("type") == "tool_result" for b in content)


def summary_of(body: Mapping[str, Any]) -> str:
    """A handoff summary made of the conversation's own lines: the steps asked and the modules read."""
    texts = [text for role, text in _texts(body) if role != "system" and MARK not in text]
    steps = sorted({int(n) for text in texts for n in _STEP.findall(text)})
    modules = sorted(set(re.findall(r"src/mod\d+\.py", " ".join(texts))))
    return (
        "## Goal\nLook into the modules step by step and explain each.\n\n## Progress\n"
        + f"Steps done: {', '.join(map(str, steps)) or 'none'}.\n"
        + f"Modules read: {', '.join(modules) or 'none'}.\n"
    )


class SessionModel:
    """The scripted model of the session: turn ``i`` reads ``src/mod{i}.py`` first when ``i % 3 == 1``."""

    def __call__(self, body: dict[str, Any]) -> ScriptedReply:
        texts = _texts(body)
        if any(MARK in text for _, text in texts):
            return Reply(text=summary_of(body))
        last_user = next((text for role, text in reversed(texts) if role == "user" and _STEP.search(text)), "")
        found = _STEP.findall(last_user)
        step = int(found[-1]) if found else 0
        if step % 3 == 1 and not _ends_with_tool_result(body):
            return Reply(tool_uses=[ToolUse("read_file", {"path": f"src/mod{step}.py"})])
        return Reply(text=f"Turn {step}: " + "explanation " * 60)


@dataclass(frozen=True)
class SessionBill:
    """What a session's requests were billed by the fake, and what codling said they cost."""

    bill: tuple[Billed, ...]
    usage: Usage
    """What codling's turns reported spending, summed."""
    cost: float
    """What codling's turns reported costing, summed (US dollars)."""
    compactions: int

    @property
    def input_tokens(self) -> int:
        """Every input token sent, however billed."""
        return sum(b.total_input_tokens for b in self.bill)

    @property
    def cache_share(self) -> float:
        """The share of input tokens served from the cache."""
        return sum(b.cache_read_input_tokens for b in self.bill) / max(1, self.input_tokens)

    @property
    def missed_share(self) -> float:
        """The share of repeated input (sent before by an earlier request) the cache did not serve."""
        return sum(b.missed_tokens for b in self.bill) / max(1, sum(b.repeated_input_tokens for b in self.bill))

    @property
    def billed_input(self) -> float:
        """Input priced in base-input tokens (reads 0.1x, writes 1.25x or 2x)."""
        return sum(b.billed_input() for b in self.bill)

    def priced(self, info: ModelInfo) -> float:
        """The fake's bill at ``info``'s list price (US dollars)."""
        return sum(bill_price(b, info) for b in self.bill)


def bill_price(billed: Billed, info: ModelInfo) -> float:
    """What one request's bill costs at ``info``'s list price (US dollars), from Anthropic's own usage fields
    and Anthropic's price list (not through codling's pricing, which it checks)."""
    price = info.price
    assert price is not None and price.cache_read is not None and price.cache_write is not None
    one_hour = price.cache_write if price.cache_write_1h is None else price.cache_write_1h
    dollars = (
        billed.input_tokens * price.input
        + billed.cache_read_input_tokens * price.cache_read
        + (billed.cache_creation_input_tokens - billed.ephemeral_1h_input_tokens) * price.cache_write
        + billed.ephemeral_1h_input_tokens * one_hour
        + billed.output_tokens * price.output
    )
    return dollars / 1_000_000


Script = Literal["reads", "fidelity"]
"""Which session: ``reads`` (:class:`SessionModel`, any number of turns) or ``fidelity`` (the 30-turn session of
``fidelity.py``: facts and constraints stated along the way, reads of up to 138 KB, commands printing 10–50 KB,
edits, a delegate; played through :class:`~tests.fakes.anthropic_bridge.ChatBridge`)."""


async def run_session(turns: int, cache: PromptCache, window: int = 200_000, script: Script = "reads") -> SessionBill:
    """``turns`` turns of ``script`` with ``cache`` in a ``window``-token context; raises if a turn fails."""
    info = model(window)
    if script == "fidelity":
        responder: Any = ChatBridge(fidelity.Model(window, summarizer_works=True))
        prompts = [turn.prompt for turn in fidelity.turns()][:turns]
    else:
        responder = SessionModel()
        prompts = [f"Step {i}: " + "look into the module and explain " * 8 for i in range(turns)]
    with tempfile.TemporaryDirectory() as tmp, running_server(responder=responder) as server:
        root = Path(tmp)
        project, home = root / "project", root / "home"
        home.mkdir()
        if script == "fidelity":
            fidelity.make_repo(project)
        else:
            (project / "src").mkdir(parents=True)
            for i in range(turns):
                (project / "src" / f"mod{i}.py").write_text(f"def f{i}(x):\n    return x * {i}\n" * 20)
        session = open_session(
            Settings(home=home, env={"CODLING_HOME": str(home)}, titles=False, cache=cache),
            info,
            project,
            approver=None,
            mode="yolo" if script == "fidelity" else "read-only",
            model_factory=lambda model_id: build_model(model_id, env=server.env(), cache=cache),
        )
        session.options = replace(session.options, auto_title=False)
        usage, cost, compactions = Usage(), 0.0, 0
        for i, prompt in enumerate(prompts):
            async with asyncio.timeout(deadline(120)):  # liveness only
                events = [e async for e in session.stream(prompt)]
            if failed := [e for e in events if isinstance(e, TurnFailed)]:
                raise RuntimeError(f"turn {i} failed: {failed[0].message}")
            ended = next(e for e in events if isinstance(e, TurnEnded))
            usage, cost = usage + ended.usage, cost + (ended.cost or 0.0)
            compactions += sum(isinstance(e, CompactionStarted) for e in events)
        return SessionBill(tuple(server.bill), usage, cost, compactions)
