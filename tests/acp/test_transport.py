"""The ACP transport in-process: bytes in through a real StreamReader, lines out through the SDK's MessageSender."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from acp.task import MessageSender
from acp.task.supervisor import TaskSupervisor

from codling.acp.transport import MAX_DEPTH, TolerantTransport

INITIALIZE = {"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {"protocolVersion": 1}}
INIT_LINE = json.dumps(INITIALIZE).encode() + b"\n"


class LineWriter:
    """The writer end MessageSender writes to: keeps every byte."""

    def __init__(self) -> None:
        self.data = bytearray()

    def write(self, data: bytes) -> None:
        self.data += data

    async def drain(self) -> None:
        pass

    def lines(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.data.decode("utf-8").splitlines()]


async def exchange(*lines: bytes, max_line: int | None = None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Feed ``lines`` (then end of input); the messages the transport passes on and the lines it answers."""
    reader = asyncio.StreamReader(limit=1024)
    for line in lines:
        reader.feed_data(line)
    reader.feed_eof()
    writer = LineWriter()
    # LineWriter has the two StreamWriter methods MessageSender uses (write, drain), not the class.
    sender = MessageSender(writer, TaskSupervisor(source="test"))  # type: ignore[arg-type]
    transport = TolerantTransport(reader, sender, max_line=max_line) if max_line else TolerantTransport(reader, sender)
    received = []
    while (message := await transport.receive()) is not None:
        received.append(message)
    await transport.close()
    return received, writer.lines()


def nested(kind: str, levels: int) -> bytes:
    open_, close = ("[", "]") if kind == "array" else ('{"a":', "}")
    return (open_ * levels + "1" + close * levels).encode()


def error(code: int, request_id: Any = None) -> tuple[int, Any]:
    return code, request_id


def codes(answers: list[dict[str, Any]]) -> list[tuple[int, Any]]:
    return [(a["error"]["code"], a["id"]) for a in answers]


@pytest.mark.parametrize("kind", ["array", "object"])
@pytest.mark.parametrize("levels", [1_000, 100_000])
async def test_deep_nesting_is_answered_and_the_next_line_served(kind: str, levels: int) -> None:
    bare = nested(kind, levels) + b"\n"
    as_params = b'{"jsonrpc":"2.0","id":5,"method":"session/new","params":{"x":' + nested(kind, levels) + b"}}\n"
    received, answers = await exchange(bare, as_params, INIT_LINE)
    assert received == [INITIALIZE]
    assert len(answers) == 2
    for answer in answers:
        assert answer["error"]["code"] in (-32700, -32600)
        assert answer["id"] in (None, 5)


async def test_parseable_nesting_past_the_cap_is_refused_with_the_request_s_id() -> None:
    def request(request_id: int, levels: int) -> bytes:
        # The message object is level 1 and params level 2: ``levels`` in all.
        params = json.loads(nested("array", levels - 2))
        return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "m", "params": {"deep": params}}).encode()

    received, answers = await exchange(request(1, MAX_DEPTH) + b"\n", request(2, MAX_DEPTH + 1) + b"\n")
    assert [m["id"] for m in received] == [1]
    assert codes(answers) == [error(-32600, 2)]


async def test_bytes_that_are_not_utf8_are_a_parse_error() -> None:
    latin1 = '{"jsonrpc":"2.0","id":1,"method":"m","params":{"t":"café"}}\n'.encode("latin-1")
    utf16 = json.dumps(INITIALIZE).encode("utf-16")  # json.loads(bytes) would guess the encoding and accept it
    received, answers = await exchange(latin1, b"\xff\xfe\x00garbage\n", utf16 + b"\n", INIT_LINE)
    assert received == [INITIALIZE]
    assert codes(answers) == [error(-32700)] * 3


async def test_a_huge_integer_is_a_parse_error_that_speaks_of_json_not_python() -> None:
    huge = b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"n":' + b"9" * 5000 + b"}}\n"
    received, answers = await exchange(huge, INIT_LINE)
    assert received == [INITIALIZE]
    assert answers == [
        {
            "jsonrpc": "2.0",
            "id": None,
            "error": {"code": -32700, "message": "Parse error: a number has more than 1000 digits"},
        }
    ]


async def test_lone_surrogates_become_replacement_characters_everywhere() -> None:
    line = (
        rb'{"jsonrpc":"2.0","id":"x\ud800","method":"session/prompt","params":{"key\udfff":"a\ud800b",'
        rb'"pair":"\ud83d\ude00","list":[["\uDC00"]],"escaped":"\\ud800"}}'
    )
    (message,), answers = await exchange(line + b"\n")
    assert answers == []
    assert message == {
        "jsonrpc": "2.0",
        "id": "x\ufffd",
        "method": "session/prompt",
        "params": {"key\ufffd": "a\ufffdb", "pair": "\U0001f600", "list": [["\ufffd"]], "escaped": "\\ud800"},
    }
    json.dumps(message, ensure_ascii=False).encode("utf-8")  # writable as UTF-8


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (b'{"id":1,"method":"initialize","params":{}}', error(-32600, 1)),
        (b'{"jsonrpc":"1.0","id":"a","method":"initialize","params":{}}', error(-32600, "a")),
        (b'{"jsonrpc":2.0,"id":3,"method":"initialize"}', error(-32600, 3)),
        (b'{"jsonrpc":"2.0","id":true,"method":"initialize","params":{}}', error(-32600)),
        (b'{"jsonrpc":"2.0","id":false,"method":"initialize","params":{}}', error(-32600)),
        (b'{"jsonrpc":"2.0","id":1.5,"method":"initialize","params":{}}', error(-32600)),
        (b'{"jsonrpc":"2.0","id":{"a":1},"method":"initialize","params":{}}', error(-32600)),
        (b'{"jsonrpc":"2.0","id":[1],"method":"initialize","params":{}}', error(-32600)),
        (b'{"jsonrpc":"2.0","id":4,"method":7}', error(-32600, 4)),
        (b'{"jsonrpc":"2.0","id":5,"method":"m","params":"text"}', error(-32600, 5)),
        (b'{"jsonrpc":"2.0","id":6}', error(-32600, 6)),
        (b'{"jsonrpc":"2.0"}', error(-32600)),
        (b"[1,2]", error(-32600)),
        (b'"text"', error(-32600)),
        (b"{", error(-32700)),
        (b'{"jsonrpc":"2.0","id":7,"method":"m","params":{"n":NaN}}', error(-32700)),
        (b'{"jsonrpc":"2.0","id":8,"method":"m","params":{"n":-Infinity}}', error(-32700)),
        (b'{"jsonrpc":"2.0","id":9,"method":"m","params":{"n":1e999}}', error(-32700)),
        (b'{"jsonrpc":"2.0","id":10,"method":"m","params":{"n":' + b"9" * 5000 + b"}}", error(-32700)),
        (b'{"jsonrpc":"2.0","id":11,"method":"initialize","params":{"protocolVersion":"one"}}', error(-32602, 11)),
        (
            b'{"jsonrpc":"2.0","id":12,"method":"initialize","params":{"protocolVersion":"2024-11-05"}}',
            error(-32602, 12),
        ),
        (b'{"jsonrpc":"2.0","id":13,"method":"initialize","params":{"protocolVersion":1.5}}', error(-32602, 13)),
        (b'{"jsonrpc":"2.0","id":14,"method":"initialize","params":{"protocolVersion":true}}', error(-32602, 14)),
        (b'{"jsonrpc":"2.0","id":15,"method":"initialize","params":{"protocolVersion":null}}', error(-32602, 15)),
    ],
)
async def test_malformed_messages_are_answered_with_their_id_when_usable(line: bytes, expected: tuple) -> None:
    received, answers = await exchange(line + b"\n", INIT_LINE)
    assert received == [INITIALIZE]
    assert codes(answers) == [expected]
    assert all(a["jsonrpc"] == "2.0" and isinstance(a["error"]["message"], str) for a in answers)


async def test_valid_ids_and_messages_pass() -> None:
    messages = [
        {"jsonrpc": "2.0", "id": "s", "method": "m", "params": {}},
        {"jsonrpc": "2.0", "id": 10**30, "method": "m", "params": []},
        {"jsonrpc": "2.0", "id": 3.0, "method": "m"},
        {"jsonrpc": "2.0", "id": None, "method": "m"},
        {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "x"}},
        {"jsonrpc": "2.0", "id": 99, "result": None},
        {"jsonrpc": "2.0", "id": 98, "error": {"code": -1, "message": "no"}},
    ]
    received, answers = await exchange(*(json.dumps(m).encode() + b"\n" for m in messages))
    assert (received, answers) == (messages, [])


async def test_malformed_notifications_and_responses_are_dropped_unanswered() -> None:
    lines = [
        b'{"jsonrpc":"1.0","method":"session/cancel","params":{}}',
        b'{"method":"session/cancel"}',
        b'{"jsonrpc":"2.0","method":5}',
        b'{"jsonrpc":"2.0","id":1,"error":"bad"}',
        b'{"jsonrpc":"2.0","id":2,"result":1,"error":{"code":1,"message":"m"}}',
        b'{"jsonrpc":"2.0","id":true,"result":1}',
    ]
    received, answers = await exchange(*(line + b"\n" for line in lines), INIT_LINE)
    assert (received, answers) == ([INITIALIZE], [])


async def test_an_overlong_line_is_dropped_answered_and_the_next_served() -> None:
    long = b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"t":"' + b"x" * 10_000 + b'"}}\n'
    received, answers = await exchange(long, INIT_LINE, long[:-1], max_line=4096)
    assert received == [INITIALIZE]
    assert codes(answers) == [error(-32600), error(-32600)]


async def test_a_line_longer_than_the_reader_s_buffer_is_read_whole() -> None:
    message = {"jsonrpc": "2.0", "id": 1, "method": "m", "params": {"t": "y" * 50_000}}
    received, answers = await exchange(json.dumps(message).encode() + b"\n")
    assert (received, answers) == ([message], [])


async def test_an_outgoing_value_json_cannot_hold_goes_as_text() -> None:
    reader = asyncio.StreamReader()
    writer = LineWriter()
    transport = TolerantTransport(reader, MessageSender(writer, TaskSupervisor(source="test")))  # type: ignore[arg-type]
    unserializable = {"code": -32602, "message": "m", "data": ValueError("v")}
    await transport.send({"jsonrpc": "2.0", "id": 1, "error": unserializable})
    await transport.close()
    assert writer.lines() == [{"jsonrpc": "2.0", "id": 1, "error": {"code": -32602, "message": "m", "data": "v"}}]


async def test_cancel_request_names_a_pending_prompt_until_it_is_answered() -> None:
    def line(message: dict[str, Any]) -> bytes:
        return json.dumps(message).encode() + b"\n"

    def cancel(request_id: Any) -> bytes:
        return line({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": request_id}})

    prompt = {"jsonrpc": "2.0", "id": 5, "method": "session/prompt", "params": {"sessionId": "s-1", "prompt": []}}
    reader = asyncio.StreamReader()
    writer = LineWriter()
    cancelled: list[str] = []
    transport = TolerantTransport(
        reader,
        MessageSender(writer, TaskSupervisor(source="test")),  # type: ignore[arg-type]  # a duck-typed StreamWriter
        on_cancel_prompt=cancelled.append,
    )
    reader.feed_data(line(prompt) + cancel(6) + cancel(5) + line({"jsonrpc": "2.0", "method": "$/other"}))
    assert await transport.receive() == prompt
    reader.feed_data(INIT_LINE)
    assert await transport.receive() == INITIALIZE  # the $/ notifications were taken, not passed on
    assert cancelled == ["s-1"]
    await transport.send({"jsonrpc": "2.0", "id": 5, "result": {"stopReason": "cancelled"}})
    reader.feed_data(cancel(5))
    reader.feed_eof()
    assert await transport.receive() is None
    assert cancelled == ["s-1"]  # answered: no longer a prompt to cancel
    await transport.close()


@pytest.mark.parametrize(
    ("levels", "expected"),
    [
        (500, [error(-32600), error(-32600, "\ufffd-7")]),  # parsed, then refused for its depth, with its id
        (990, [error(-32700), error(-32700)]),  # too deep for the parser itself
    ],
)
async def test_deep_nesting_around_a_lone_surrogate_is_answered_and_the_next_line_served(
    levels: int, expected: list[tuple[int, Any]]
) -> None:
    # (issue 29 D6: the surrogate cleaner recursed before the depth check, and a 1 KB line killed codling acp)
    deep = b"[" * levels + b'"\\ud800"' + b"]" * levels
    as_params = b'{"jsonrpc":"2.0","id":"\\ud800-7","method":"session/new","params":{"x":' + deep + b"}}\n"
    received, answers = await exchange(deep + b"\n", as_params, INIT_LINE)
    assert received == [INITIALIZE]
    assert codes(answers) == expected


def set_option(request_id: int, **params: Any) -> bytes:
    """A session/set_config_option line for the thinking option with ``params`` (value, type)."""
    params = {"sessionId": "s", "configId": "thinking", **params}
    message = {"jsonrpc": "2.0", "id": request_id, "method": "session/set_config_option", "params": params}
    return json.dumps(message).encode() + b"\n"


async def test_a_config_value_whose_type_does_not_fit_its_form_is_refused_saying_so() -> None:
    received, answers = await exchange(
        set_option(1, value=True),
        set_option(2, type="boolean", value="maybe"),
        set_option(3, value=3),
        set_option(4, type="boolean", value=False),
        set_option(5, value="off"),
    )
    assert [m["id"] for m in received] == [4, 5]  # the well-formed ones reach the agent
    assert [(a["id"], a["error"]["code"], a["error"]["message"]) for a in answers] == [
        (
            1,
            -32602,
            'Invalid params: value true is a boolean: send it with "type": "boolean" (a select takes one of its '
            "value ids)",
        ),
        (2, -32602, 'Invalid params: a "boolean" config option takes true or false, not "maybe"'),
        (
            3,
            -32602,
            "Invalid params: value 3 is neither a select's value id (a string) nor a boolean sent with "
            '"type": "boolean"',
        ),
    ]
