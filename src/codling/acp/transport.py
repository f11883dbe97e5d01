"""Newline-delimited JSON-RPC over stdio that answers bad input instead of dropping it.

The SDK's own transport logs and skips a line that is not JSON, and a line holding JSON that is not an object
would stop its receive loop. This one answers both with the JSON-RPC errors the spec asks for (-32700 parse
error, -32600 invalid request, with ``id: null``) and keeps serving.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from acp.task import MessageSender

log = logging.getLogger(__name__)

PARSE_ERROR = -32700
INVALID_REQUEST = -32600


def _error(code: int, message: str, request_id: Any = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


def check_message(message: Any) -> dict[str, Any] | None:
    """An error response for a message that is not a valid JSON-RPC request, notification or response."""
    if not isinstance(message, dict):
        return _error(INVALID_REQUEST, "Invalid Request: a JSON-RPC message must be an object")
    request_id = message.get("id")
    if request_id is not None and not isinstance(request_id, str | int):
        return _error(INVALID_REQUEST, "Invalid Request: id must be a string or a number")
    if "method" in message:
        if not isinstance(message["method"], str):
            return _error(INVALID_REQUEST, "Invalid Request: method must be a string", request_id)
        params = message.get("params")
        if params is not None and not isinstance(params, dict | list):
            return _error(INVALID_REQUEST, "Invalid Request: params must be an object", request_id)
        return None
    if "id" in message and ("result" in message or "error" in message):
        return None
    return _error(INVALID_REQUEST, "Invalid Request: neither a request nor a response", request_id)


class TolerantTransport:
    """An ``acp`` Transport over asyncio streams that never stops on a malformed line."""

    def __init__(self, reader: asyncio.StreamReader, sender: MessageSender) -> None:
        self._reader = reader
        self._sender = sender

    async def send(self, message: dict[str, Any]) -> None:
        """Write one message as a line."""
        await self._sender.send(message)

    async def receive(self) -> dict[str, Any] | None:
        """The next valid message, or None at end of input; invalid lines are answered and skipped."""
        while True:
            line = await self._read_line()
            if not line:
                return None
            line = line.strip()
            if not line:
                continue
            try:
                message = json.loads(line)
            except (ValueError, UnicodeDecodeError) as e:
                log.warning("unparsable JSON-RPC line (%d bytes): %s", len(line), e)
                await self.send(_error(PARSE_ERROR, f"Parse error: {e}"))
                continue
            if (error := check_message(message)) is not None:
                log.warning("invalid JSON-RPC message: %s", error["error"]["message"])
                if not isinstance(message, dict) or "method" not in message or "id" in message:
                    await self.send(error)
                continue
            return message

    async def close(self) -> None:
        """Flush and stop the writer."""
        await self._sender.close()

    async def _read_line(self) -> bytes:
        chunks: list[bytes] = []
        while True:
            try:
                chunks.append(await self._reader.readuntil(b"\n"))
                return b"".join(chunks)
            except asyncio.LimitOverrunError as e:
                chunks.append(await self._reader.readexactly(e.consumed))
            except asyncio.IncompleteReadError as e:
                chunks.append(e.partial)
                return b"".join(chunks)
