"""The first answer of a fresh ``codling acp``, as an editor opening a thread sees it (a part of ``bench.py``).

A client spawns the agent and, as Zed does, sends initialize, session/new and the first prompt at once; the
loopback server answers with no delay. Measured per run:

* spawn → first agent_message_chunk of the first prompt, against the import floor: a fresh interpreter
  importing the acp SDK, pydantic-ai and the OpenAI provider (what any Python agent on this stack must load),
  measured alternately in the same run;
* session/new: request → response, sent right after the initialize response (the warm-up is under way);
* the first prompt: the server's first text chunk → the client's first agent_message_chunk;
* per-prompt overhead through the spawned agent: a warm prompt's round trip with a one-chunk reply, minus
  the same HTTP exchange made by a bare client (median of many).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import subprocess
import time
import urllib.request
from collections.abc import Callable
from typing import Any

from acp import PROTOCOL_VERSION, helpers

IMPORT_FLOOR = (
    "import acp, acp.schema, pydantic_ai, pydantic_ai.models.openai, pydantic_ai.providers.openai, openai; print('ok')"
)


def import_floor(python: str) -> float:
    """Seconds for a fresh interpreter to import the acp SDK, pydantic-ai and the OpenAI provider."""
    start = time.perf_counter()
    subprocess.run([python, "-c", IMPORT_FLOOR], check=True, capture_output=True, timeout=60)
    return time.perf_counter() - start


def bare_exchange(base_url: str) -> float:
    """Seconds for one streamed chat completion from the loopback server, read whole by a bare HTTP client."""
    body = json.dumps({"model": "fake-model", "stream": True, "messages": [{"role": "user", "content": "hi"}]})
    request = urllib.request.Request(
        f"{base_url}/chat/completions", data=body.encode(), headers={"Content-Type": "application/json"}
    )
    start = time.perf_counter()
    with urllib.request.urlopen(request, timeout=30) as response:
        response.read()
    return time.perf_counter() - start


async def first_answer(
    spawned: Callable[..., Any], client: Any, argv: Any, env: Any, sent: list[float]
) -> tuple[float, float, float]:
    """One fresh agent: (spawn → first chunk, session/new latency, provider's first text byte → first chunk)."""
    start = time.perf_counter()
    async with spawned(client, argv, env) as conn:
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        asked = time.perf_counter()
        session = await conn.new_session(cwd=str(env.project))
        answered = time.perf_counter()
        before_updates, before_sent = len(client.updates), len(sent)
        await conn.prompt(session_id=session.session_id, prompt=[helpers.text_block("hello")])
        first = client.first_text_time(before_updates)
        if first is None or len(sent) <= before_sent:
            raise RuntimeError("the first prompt brought no text")
        return first - start, answered - asked, first - sent[before_sent]


async def prompt_overhead(
    spawned: Callable[..., Any], client: Any, argv: Any, env: Any, base_url: str, runs: int
) -> tuple[float, float]:
    """Median round trips of a warm prompt through the agent and of the bare HTTP exchange, in seconds."""
    async with spawned(client, argv, env) as conn:
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        session = await conn.new_session(cwd=str(env.project))
        for _ in range(3):  # warm: imports, first requests, the title
            await conn.prompt(session_id=session.session_id, prompt=[helpers.text_block("warm")])
        agent: list[float] = []
        bare: list[float] = []
        for _ in range(runs):
            start = time.perf_counter()
            await conn.prompt(session_id=session.session_id, prompt=[helpers.text_block("next")])
            agent.append(time.perf_counter() - start)
            bare.append(await asyncio.to_thread(bare_exchange, base_url))
    return statistics.median(agent), statistics.median(bare)
