"""A spawned `codling acp` driven by raw bytes over real pipes, every stdout line checked as JSON-RPC."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from tests.fakes import warm
from tests.fakes.deadlines import deadline
from tests.fakes.openai_server import OpenAIServer
from tests.fakes.processes import measured


def check_json_rpc_line(raw: bytes) -> dict[str, Any]:
    """``raw`` as a JSON-RPC 2.0 message; AssertionError if it is not strict UTF-8 JSON of one."""
    text = raw.decode("utf-8")  # strict: the agent writes UTF-8 only
    message = json.loads(text, parse_constant=lambda name: (_ for _ in ()).throw(AssertionError(name)))
    assert isinstance(message, dict) and message.get("jsonrpc") == "2.0", text[:200]
    if "method" in message:
        assert isinstance(message["method"], str), text[:200]
        return message
    assert "id" in message and ("result" in message) != ("error" in message), text[:200]
    if "error" in message:
        error = message["error"]
        assert isinstance(error["code"], int) and isinstance(error["message"], str), text[:200]
    return message


class RawAgent:
    """Writes lines to the agent and collects what it answers, by id."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.messages: list[dict[str, Any]] = []
        self._arrived = asyncio.Condition()
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self.process.stdout is not None
        while raw := await self.process.stdout.readline():
            message = check_json_rpc_line(raw)
            async with self._arrived:
                self.messages.append(message)
                self._arrived.notify_all()

    async def write(self, *lines: bytes) -> None:
        """Send lines as they are (each must end with a newline)."""
        assert self.process.stdin is not None
        for line in lines:
            self.process.stdin.write(line)
            await self.process.stdin.drain()

    async def send(self, message: dict[str, Any]) -> None:
        await self.write(json.dumps(message).encode() + b"\n")

    def answers(self, request_id: Any = None) -> list[dict[str, Any]]:
        """Every response so far with this id (``None``: the id-less error responses)."""
        return [m for m in self.messages if "method" not in m and m.get("id") == request_id]

    async def answer(self, request_id: Any, timeout: float = 30) -> dict[str, Any]:
        """The response to ``request_id`` once it has come."""
        await self.wait_until(lambda: bool(self.answers(request_id)), timeout)
        return self.answers(request_id)[0]

    async def wait_until(self, condition: Any, timeout: float = 30) -> None:
        async def wait() -> None:
            async with self._arrived:
                await self._arrived.wait_for(lambda: condition() or self._reader.done())

        await asyncio.wait_for(wait(), deadline(timeout))
        if self._reader.done():
            self._reader.result()  # re-raise a bad line
            assert condition(), "the agent closed stdout"

    async def finished(self, timeout: float = 30) -> None:
        """Wait until the agent has closed its stdout; raises if a line it wrote was not JSON-RPC."""
        await asyncio.wait_for(asyncio.shield(self._reader), deadline(timeout))

    async def request(self, request_id: Any, method: str, params: Any, timeout: float = 30) -> dict[str, Any]:
        await self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        return await self.answer(request_id, timeout)


def agent_env(home: Path, server: OpenAIServer, api_key: str = "sk-test-raw-123456") -> dict[str, str]:
    """A minimal environment for a spawned agent on the loopback model server (nothing from the machine's)."""
    return measured(
        {
            "PATH": "/usr/bin:/bin",
            "CODLING_HOME": str(home),
            "CODLING_MODEL": "openai-chat:fake-model",
            "OPENAI_BASE_URL": server.base_url,
            "OPENAI_API_KEY": api_key,
        }
    )


@asynccontextmanager
async def raw_agent(env: dict[str, str], stderr: Path, *, cold: bool = False) -> AsyncIterator[RawAgent]:
    """`codling acp` with its stderr in a file; on exit its stdin is closed and it must end cleanly. ``cold``:
    a process of its own, which imports what it needs as it goes (a warm one has it all loaded)."""
    with stderr.open("wb") as err:
        process = await asyncio.create_subprocess_exec(
            *(warm.cold() if cold else warm.codling()),
            "acp",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=err,
            env=env,
            limit=64 * 1024 * 1024,
        )
        agent = RawAgent(process)
        try:
            yield agent
            assert process.returncode is None, f"the agent died: {stderr.read_text()[-2000:]}"
            assert process.stdin is not None
            process.stdin.close()
            assert await asyncio.wait_for(process.wait(), deadline(20)) == 0
            await agent.finished()
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
