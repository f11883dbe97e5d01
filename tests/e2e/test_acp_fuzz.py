"""A bounded, seeded JSON-RPC fuzz of one spawned `codling acp` over real pipes.

A thousand lines (valid requests, wrong types, missing members, huge numbers, deep nesting, bad UTF-8, lone
surrogates, random bytes, unknown methods, wrong ``jsonrpc``, bool ids, notifications, responses to nothing)
go to one agent. It must never die, write only JSON-RPC to stdout, answer every request that has a usable id
exactly once (and nothing else by id), and still serve a real session afterwards.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.raw_acp import agent_env, raw_agent
from tests.fakes.openai_server import OpenAIServer, Reply, running_server
from tests.fakes.scenarios import user_prompt

SEED = 20_240_611
LINES = 1_000
"""Each of the 16 kinds of line below comes about 60 times (at least 40 with this seed), so every variant of
each is drawn many times; 3,000 lines cost the agent three times the CPU for the same kinds of line."""
KINDS = 16

METHODS = [
    "initialize",
    "authenticate",
    "session/new",
    "session/load",
    "session/resume",
    "session/fork",
    "session/close",
    "session/list",
    "session/prompt",
    "session/set_mode",
    "session/set_config_option",
    "no/such/method",
    "_codling/ext",
    "",
]
SESSION_IDS = ["20240101-0123456789ab", "../../../etc", "", "a\0b", "\ud800", "x" * 3000, 7, None, ["x"]]


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with running_server() as s:
        yield s


@dataclass(frozen=True)
class Line:
    data: bytes
    answered: Any = None
    """The id it must be answered with, exactly once (None: no response may carry an id of it)."""
    maybe: Any = None
    """An id it may or may not be answered with (parser limits decide)."""


class Fuzzer:
    def __init__(self, seed: int, project: Path) -> None:
        self.rng = random.Random(seed)
        self.project = project
        self.counter = 0
        self.kinds: Counter[int] = Counter()
        """How many lines of each kind were made."""

    def new_id(self) -> int | str:
        self.counter += 1
        return self.counter if self.counter % 2 else f"req-{self.counter}"

    def value(self, depth: int = 0) -> Any:
        r = self.rng
        choice = r.randrange(12 if depth < 4 else 8)
        return [
            lambda: None,
            lambda: r.choice([True, False]),
            lambda: r.randint(-(2**70), 2**70),
            lambda: r.uniform(-1e300, 1e300),
            lambda: "".join(chr(r.randrange(0x20, 0x3000)) for _ in range(r.randrange(12))),
            lambda: "\ud800 lone \udfff",
            lambda: str(self.project) if r.random() < 0.5 else "relative/dir",
            lambda: r.choice(SESSION_IDS),
            lambda: [self.value(depth + 1) for _ in range(r.randrange(4))],
            lambda: {self.key(): self.value(depth + 1) for _ in range(r.randrange(4))},
            lambda: {"type": "text", "text": self.value(depth + 1)},
            lambda: [{"type": r.choice(["text", "image", "resource_link", "?"]), "text": "t", "data": "!!"}],
        ][choice]()

    def key(self) -> str:
        keys = ["sessionId", "cwd", "prompt", "protocolVersion", "modeId", "configId", "value", "mcpServers"]
        return self.rng.choice([*keys, "additionalDirectories", "cursor", "_meta", "x"])

    def params(self) -> Any:
        r = self.rng
        if r.random() < 0.1:
            return self.value()
        params = {self.key(): self.value() for _ in range(r.randrange(5))}
        if r.random() < 0.5:
            params["sessionId"] = r.choice(SESSION_IDS)
        return params

    def request(self, request_id: Any) -> dict[str, Any]:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": self.rng.choice(METHODS)}
        if self.rng.random() < 0.9:
            message["params"] = self.params()
        return message

    @staticmethod
    def encode(message: Any) -> bytes:
        return json.dumps(message).encode() + b"\n"

    def line(self) -> Line:
        r = self.rng
        kind = r.randrange(KINDS)
        self.kinds[kind] += 1
        rid = self.new_id()
        if kind <= 3:  # a well-formed request with junk params
            return Line(self.encode(self.request(rid)), answered=rid)
        if kind == 4:  # a valid request that works
            method, params = r.choice(
                [
                    ("initialize", {"protocolVersion": r.randrange(0, 4)}),
                    ("session/list", {}),
                    ("session/new", {"cwd": str(self.project), "mcpServers": []}),
                ]
            )
            return Line(self.encode({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}), answered=rid)
        if kind == 5:  # wrong or missing jsonrpc
            message = self.request(rid)
            if r.random() < 0.5:
                del message["jsonrpc"]
            else:
                message["jsonrpc"] = r.choice(["1.0", 2.0, "2.0 ", None, ["2.0"]])
            return Line(self.encode(message), answered=rid)
        if kind == 6:  # an id that is not usable: answered (with id null) or not, but never by an id
            message = self.request(None)
            message["id"] = r.choice([True, False, 1.5, {"id": 1}, [1], -0.25])
            return Line(self.encode(message))
        if kind == 7:  # missing or mistyped members
            message = self.request(rid)
            mutation = r.randrange(3)
            if mutation == 0:
                del message["method"]
            elif mutation == 1:
                message["method"] = r.choice([1, None, ["initialize"], {"m": 1}])
            else:
                message["params"] = r.choice(["text", 5, True])
            return Line(self.encode(message), answered=rid)
        if kind == 8:  # huge numbers
            number = r.choice(["1e999", "-1e999", "9" * 5000, "1" + "0" * 400, "NaN", "Infinity"])
            params = f'{{"protocolVersion":{number}}}'
            text = f'{{"jsonrpc":"2.0","id":{json.dumps(rid)},"method":"initialize","params":{params}}}'
            parses = number in ("1" + "0" * 400,)
            return Line(text.encode() + b"\n", answered=rid if parses else None)
        if kind == 9:  # deep nesting, in params or bare
            levels = r.choice([70, 500, 990, 1_500, 20_000, 100_000])
            nest = ("[" * levels + "]" * levels) if r.random() < 0.5 else ('{"a":' * levels + "1" + "}" * levels)
            text = f'{{"jsonrpc":"2.0","id":{json.dumps(rid)},"method":"session/new","params":{{"x":{nest}}}}}'
            return Line(text.encode() + b"\n", maybe=rid) if r.random() < 0.8 else Line(nest.encode() + b"\n")
        if kind == 10:  # bad UTF-8 inside an otherwise valid request
            spliced = bytearray(self.encode(self.request(rid)))
            position = r.randrange(1, len(spliced) - 1)
            spliced[position:position] = r.choice([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xe9", b"\x80\x80"])
            return Line(bytes(spliced))
        if kind == 11:  # lone surrogates written as JSON escapes, everywhere
            message = self.request(rid)
            text = json.dumps(message).replace('"method"', '"meth\\udc00od"' if r.random() < 0.1 else '"method"')
            text = text[:-1] + ',"note\\ud800":"\\udbff\\u0041"}'
            return Line(text.encode() + b"\n", answered=rid)  # without a method it is still answered
        if kind == 12:  # random bytes
            data = bytes(r.randrange(256) for _ in range(r.randrange(1, 200))).replace(b"\n", b"")
            return Line(data + b"\n")
        if kind == 13:  # notifications, which are never answered
            message = self.request(None)
            del message["id"]
            if r.random() < 0.5:
                message["method"] = "session/cancel"
            return Line(self.encode(message))
        if kind == 14:  # responses to nothing, well-formed or not
            body = r.choice([{"result": self.value()}, {"error": {"code": -1, "message": "no"}}, {"error": "x"}, {}])
            message = {"jsonrpc": "2.0", "id": rid, **body}
            return Line(self.encode(message), answered=rid if body == {} else None)
        # kind 15: truncated JSON
        data = self.encode(self.request(rid))
        return Line(data[: r.randrange(1, len(data) - 1)] + b"\n")


async def test_fuzzed_json_rpc_never_breaks_the_agent(
    home: Path, project: Path, tmp_path: Path, server: OpenAIServer
) -> None:
    fuzzer = Fuzzer(SEED, project)
    lines = [fuzzer.line() for _ in range(LINES)]
    assert min(fuzzer.kinds[kind] for kind in range(KINDS)) >= 40, fuzzer.kinds  # every kind, many times over
    must = {line.answered for line in lines if line.answered is not None}
    may = {line.maybe for line in lines if line.maybe is not None}
    server.enqueue(Reply(text=["still alive"]))
    async with raw_agent(agent_env(home, server), tmp_path / "stderr.log") as agent:
        await agent.write(*(line.data for line in lines))

        def answered_ids() -> list[Any]:
            return [m["id"] for m in agent.messages if "method" not in m and m.get("id") is not None]

        done: Callable[[], bool] = lambda: must <= set(answered_ids())  # noqa: E731
        try:
            await agent.wait_until(done, 20)
        except TimeoutError:
            missing = must - set(answered_ids())
            raise AssertionError([line for line in lines if line.answered in missing][:5]) from None

        # Afterwards a real session still works.
        init = await agent.request("after-1", "initialize", {"protocolVersion": 1})
        assert init["result"]["agentInfo"]["name"] == "codling"
        session = await agent.request("after-2", "session/new", {"cwd": str(project), "mcpServers": []})
        sid = session["result"]["sessionId"]
        prompt = [{"type": "text", "text": "are you there?"}]
        reply = await agent.request("after-3", "session/prompt", {"sessionId": sid, "prompt": prompt})
        assert reply["result"]["stopReason"] == "end_turn", reply

    ids = [i for i in answered_ids() if not str(i).startswith("after-")]
    assert sorted(map(str, ids)) == sorted(map(str, set(ids))), "an id was answered twice"
    assert set(ids) - must - may == set(), "answers carried ids of lines that must not be answered by id"
    assert must - set(ids) == set()
    assert user_prompt(server.requests[-1]["messages"][-1]["content"]) == "are you there?"
