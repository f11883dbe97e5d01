"""A minimal ACP agent on the acp SDK: the start-up baseline ``scripts/bench.py`` compares ``codling acp`` to.

It imports ``acp`` and nothing else (beyond the standard library), answers ``initialize`` with an
``InitializeResponse``, and echoes prompts back, exactly as a minimal SDK agent would. Run it with
``python scripts/echo_agent.py``; it serves JSON-RPC on stdin/stdout via ``acp.run_agent``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from acp import PROTOCOL_VERSION, run_agent, text_block, update_agent_message
from acp.interfaces import Client
from acp.schema import (
    AgentCapabilities,
    Implementation,
    InitializeResponse,
    NewSessionResponse,
    PromptResponse,
)


class EchoAgent:
    """Answers initialize, opens sessions, and echoes each prompt's text back as one message chunk."""

    def __init__(self) -> None:
        self._client: Client | None = None
        self._sessions = 0

    def on_connect(self, conn: Client) -> None:
        """Keep the client connection for session/update notifications."""
        self._client = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        """Answer with the protocol version and no optional capabilities."""
        return InitializeResponse(
            protocol_version=min(protocol_version, PROTOCOL_VERSION),
            agent_capabilities=AgentCapabilities(),
            agent_info=Implementation(name="echo", title="echo", version="0"),
        )

    async def new_session(self, cwd: str, **kwargs: Any) -> NewSessionResponse:
        """Open a session (there is no state to keep)."""
        self._sessions += 1
        return NewSessionResponse(session_id=f"echo-{self._sessions}")

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        """Send the prompt's text back, then end the turn."""
        text = "".join(getattr(block, "text", "") for block in prompt)
        if self._client is not None:
            update = update_agent_message(text_block(text))
            await self._client.session_update(session_id=session_id, update=update)
        return PromptResponse(stop_reason="end_turn")


def main() -> None:
    """Serve on stdio until the client closes the connection."""
    asyncio.run(run_agent(EchoAgent()))


if __name__ == "__main__":
    main()
