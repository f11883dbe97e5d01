"""Newline-delimited JSON-RPC over stdio that answers bad input instead of dropping it or dying of it.

The SDK's own transport logs and skips a line that is not JSON, and a line holding JSON that is not an object
would stop its receive loop. This one checks every line before the SDK sees it and keeps serving:

* a line that is not UTF-8, not JSON (``NaN`` and numbers beyond a float's range included), or nested so deeply
  that Python's parser gives up is answered with -32700 parse error (``id: null``);
* a message that is not a JSON-RPC 2.0 request, notification or response (no ``"jsonrpc": "2.0"``, an id that
  is not a string or an integer, a method that is not a string, params that are not structured) or that nests
  deeper than ``MAX_DEPTH`` is answered with -32600 invalid request, carrying its id when it has a usable one
  (a malformed notification or response is logged and dropped: nothing may answer those);
* a line longer than ``MAX_LINE_BYTES`` is read to its end, dropped and answered with -32600;
* an ``initialize`` whose ``protocolVersion`` is not an integer is answered with -32602 invalid params (the SDK
  would read any such value as version 1 and let the connection go on as if the client had asked for it);
* a ``session/set_config_option`` whose value's JSON type does not fit its form (a boolean without ``"type":
  "boolean"``, a string with it) is answered with -32602 saying so (the SDK's answer names only a pydantic
  type);
* every string of an accepted message is cleaned: a lone UTF-16 surrogate (what a JSON escape like ``\\ud800``
  decodes to in Python) becomes U+FFFD, so no text that cannot be written as UTF-8 reaches a session, its
  history or a provider.

It also honours ``$/cancel_request`` for a pending ``session/prompt``: the transport sees every prompt's request
id and session, and asks for that session's turn to be cancelled (the prompt then answers ``cancelled``, a valid
response as ACP allows). Other ``$/`` notifications, which ACP lets a receiver ignore, are dropped.

Outgoing messages that cannot be serialized (an SDK error whose data holds Python objects) are sent with those
values as text rather than lost.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import re
from collections.abc import Awaitable, Callable
from typing import Any, cast

from acp import PROTOCOL_VERSION
from acp.task import MessageSender

from codling.acp.config_options import shape_problem
from codling.text import clean_text

log = logging.getLogger(__name__)

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602

MAX_DEPTH = 64
"""The deepest nesting of arrays and objects an accepted message may have (the message object is level 1).

The deepest structure the ACP schema defines (a prompt's embedded resource with its annotations, inside
``params``) is under ten levels, and ``_meta`` objects clients add are shallow; 64 leaves ample room for any
real client. It also keeps every recursive walk downstream (pydantic validation, ``copy.deepcopy`` of messages
for stream observers, ``json.dumps`` in the history writer, codling's own code) hundreds of frames away from
Python's recursion limit of 1,000, even when such a walk starts deep in a call stack."""

MAX_LINE_BYTES = 256 * 1024 * 1024
"""The longest line accepted: far above the largest real message (a 20 MB image is ~27 MB of base64), and a
bound on the memory one line can take."""

_MAYBE_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")
"""A JSON escape that may decode to a lone surrogate (raw surrogates cannot survive strict UTF-8 decoding)."""


class _Rejected(Exception):
    """A line or message that is answered with an error instead of being passed on."""

    def __init__(self, code: int, message: str, request_id: Any = None, answer: bool = True) -> None:
        super().__init__(message)
        self.code = code
        self.request_id = request_id
        self.answer = answer


def _error(code: int, message: str, request_id: Any = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


def usable_id(value: Any) -> bool:
    """Whether ``value`` may identify a JSON-RPC request: a string or an integer (``true``/``false`` are not,
    though Python's bool is an int; a float only when it has no fractional part)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, float):
        return value.is_integer()
    return isinstance(value, str | int)


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} is out of range")
    return value


MAX_INT_DIGITS = 1000
"""The longest integer accepted; Python's own limit (4,300 digits) would answer with advice about its internals."""


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError(f"a number has more than {MAX_INT_DIGITS} digits")
    return int(text)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse_line(line: bytes) -> Any:
    """The JSON value of one line; ``_Rejected`` (-32700) if it is not strict UTF-8 JSON a parser can hold."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _Rejected(PARSE_ERROR, f"Parse error: the line is not UTF-8 (byte {e.start})") from e
    try:
        value = json.loads(text, parse_float=_finite_float, parse_int=_bounded_int, parse_constant=_no_constant)
    except RecursionError as e:
        raise _Rejected(PARSE_ERROR, f"Parse error: nested too deeply (at most {MAX_DEPTH} levels)") from e
    except ValueError as e:
        raise _Rejected(PARSE_ERROR, f"Parse error: {e}") from e
    if _MAYBE_SURROGATE.search(text):
        if depth(value) <= MAX_DEPTH:  # (cleaning recurses: a deeper message is refused by check_message)
            value = clean_strings(value)
        elif isinstance(value, dict) and isinstance(value.get("id"), str):  # echoed in the refusal
            value["id"] = clean_text(value["id"])
    return value


def depth(value: Any, limit: int = MAX_DEPTH) -> int:
    """How deeply arrays and objects nest in ``value`` (a scalar is 0), counted without recursion; counting
    stops at ``limit + 1``."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, level = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        deepest = max(deepest, level)
        if deepest > limit:
            return deepest
        stack.extend((child, level + 1) for child in children if isinstance(child, dict | list))
    return deepest


def clean_strings(value: Any) -> Any:
    """``value`` with every string in it (object keys included) cleaned by ``clean_text``; recursive, so only
    for values of bounded depth (the parser's own limit bounds it here)."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, list):
        return [clean_strings(item) for item in value]
    if isinstance(value, dict):
        return {clean_text(key): clean_strings(item) for key, item in value.items()}
    return value


def check_message(message: Any) -> None:
    """Raise ``_Rejected`` (-32600) unless ``message`` is a valid JSON-RPC 2.0 request, notification or response
    of at most ``MAX_DEPTH`` levels."""
    if not isinstance(message, dict):
        raise _Rejected(INVALID_REQUEST, "Invalid Request: a JSON-RPC message must be an object")
    has_id, request_id = "id" in message, message.get("id")
    is_response = "method" not in message and ("result" in message or "error" in message)
    answer = not is_response and (has_id or "method" not in message)  # never answer a notification or response
    if has_id and request_id is not None and not usable_id(request_id):
        raise _Rejected(INVALID_REQUEST, "Invalid Request: id must be a string or an integer", None, answer)
    echo = request_id if has_id else None

    def reject(reason: str) -> _Rejected:
        return _Rejected(INVALID_REQUEST, f"Invalid Request: {reason}", echo, answer)

    if message.get("jsonrpc") != "2.0":
        raise reject('"jsonrpc" must be exactly "2.0"')
    if depth(message) > MAX_DEPTH:
        raise reject(f"nested more than {MAX_DEPTH} levels deep")
    if "method" in message:
        if not isinstance(message["method"], str):
            raise reject("method must be a string")
        params = message.get("params")
        if params is not None and not isinstance(params, dict | list):
            raise reject("params must be an object")
        if message["method"] == "initialize" and isinstance(params, dict) and "protocolVersion" in params:
            version = params["protocolVersion"]
            if not isinstance(version, int) or isinstance(version, bool):
                raise _Rejected(
                    INVALID_PARAMS,
                    f"Invalid params: protocolVersion must be an integer (codling speaks {PROTOCOL_VERSION}), "
                    f"not {json.dumps(version)[:40]}",
                    echo,
                    answer,
                )
        if (
            message["method"] == "session/set_config_option"
            and isinstance(params, dict)
            and (problem := shape_problem(params)) is not None
        ):
            raise _Rejected(INVALID_PARAMS, f"Invalid params: {problem}", echo, answer)
        return
    if not has_id:
        raise reject("neither a request nor a response")
    if ("result" in message) == ("error" in message):
        raise reject("a response has either a result or an error")
    error = message.get("error")
    if "error" in message and not (
        isinstance(error, dict) and usable_id(error.get("code")) and isinstance(error.get("message"), str)
    ):
        raise reject("an error must be an object with an integer code and a message")


class TolerantTransport:
    """An ``acp`` Transport over asyncio streams that never stops on a malformed line."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        sender: MessageSender,
        max_line: int = MAX_LINE_BYTES,
        on_cancel_prompt: Callable[[str], None] | None = None,
        on_end: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._reader = reader
        self._sender = sender
        self._max_line = max_line
        self._on_cancel_prompt = on_cancel_prompt
        self._on_end = on_end
        """Awaited once at the end of input, before the connection is let go: the turns still running end,
        recorded, while their responses can still be sent."""
        self._prompts: dict[str | int, str] = {}
        """Pending session/prompt requests: request id → session id (until their response is sent)."""

    async def send(self, message: dict[str, Any]) -> None:
        """Write one message as a line (values JSON cannot hold go as their text)."""
        if "method" not in message and isinstance(message.get("id"), str | int):
            self._prompts.pop(message["id"], None)  # a response: that request is no longer pending
        try:
            await self._sender.send(message)
        except (TypeError, ValueError) as e:  # raised by json.dumps before anything is written
            log.warning("outgoing message not serializable (%s); sending its values as text", e)
            await self._sender.send(json.loads(json.dumps(message, default=str)))

    async def receive(self) -> dict[str, Any] | None:
        """The next valid message, or None at end of input; invalid lines are answered (or logged) and skipped."""
        while True:
            line = await self._read_line()
            if line is None:
                if self._on_end is not None:
                    on_end, self._on_end = self._on_end, None
                    await on_end()
                return None
            line = line.strip()
            if not line:
                continue
            try:
                message = parse_line(line)
                check_message(message)
            except _Rejected as e:
                log.warning("rejected a JSON-RPC line (%d bytes): %s", len(line), e)
                if e.answer:
                    await self.send(_error(e.code, str(e), e.request_id))
                continue
            method = message.get("method")
            if isinstance(method, str) and method.startswith("$/"):
                self._protocol_notification(method, message.get("params"))
                continue
            if method == "session/prompt" and isinstance(message.get("params"), dict):
                session_id = message["params"].get("sessionId")
                if isinstance(session_id, str) and usable_id(message.get("id")):
                    self._prompts[message["id"]] = session_id
            return cast(dict[str, Any], message)

    def _protocol_notification(self, method: str, params: Any) -> None:
        """``$/cancel_request`` of a pending prompt cancels its turn; anything else is logged and dropped."""
        request_id = params.get("requestId") if isinstance(params, dict) else None
        session_id = self._prompts.get(request_id) if isinstance(request_id, str | int) else None
        if method == "$/cancel_request" and session_id is not None and self._on_cancel_prompt is not None:
            log.info("$/cancel_request for prompt %r: cancelling the turn of session %s", request_id, session_id)
            self._on_cancel_prompt(session_id)
        else:
            log.debug("ignored %s (%r)", method, request_id)

    async def close(self) -> None:
        """Flush and stop the writer."""
        await self._sender.close()

    async def _read_line(self) -> bytes | None:
        """The next line (None at end of input); a line over the limit is consumed, answered and skipped."""
        chunks: list[bytes] = []
        size = 0
        while True:
            try:
                chunk = await self._reader.readuntil(b"\n")
                done = True
            except asyncio.LimitOverrunError as e:
                chunk, done = await self._reader.readexactly(e.consumed), False
            except asyncio.IncompleteReadError as e:
                chunk, done = e.partial, True
                if not chunk and size == 0:
                    return None
            size += len(chunk)
            if size <= self._max_line:
                chunks.append(chunk)
            elif chunks:
                chunks = []  # too long: keep reading to its end, holding nothing
            if done:
                if size <= self._max_line:
                    return b"".join(chunks)
                log.warning("dropped a JSON-RPC line of %d bytes", size)
                limit = f"Invalid Request: a line is limited to {self._max_line} bytes"
                await self.send(_error(INVALID_REQUEST, limit))
                chunks, size = [], 0
