"""codling's benchmark: start-up, per-prompt overhead and streaming throughput, printed as one table.

Run from the repository root::

    .venv/bin/python scripts/bench.py [--quick]

What it measures (see DESIGN.md §13):

1. spawn → initialize reply, median, for ``python -m codling acp`` and for ``scripts/echo_agent.py`` (a
   minimal agent on the same acp SDK), measured alternately with the same interpreter, env and client code;
   the ratio of the two medians should be at most 1.2.
2. spawn → session/new reply for ``codling acp`` (reported only).
3. per-prompt round trip through the ACP layer in-process with a zero-latency scripted model, against the
   same model driven by a bare ``pydantic_ai.Agent``; codling's overhead is the difference of the medians.
4. streaming: text deltas per second delivered to an ACP client in-process and from a spawned
   ``codling acp`` fed by a loopback OpenAI-compatible server, and the extra latency of the first delta.

Progress goes to stderr, the table to stdout. Only 127.0.0.1 is ever contacted. Tests never run this.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import logging
import os
import platform
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import IO, Any, TypeVar

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from acp import PROTOCOL_VERSION, helpers, spawn_agent_process  # noqa: E402
from acp.client.connection import ClientSideConnection  # noqa: E402
from acp.core import DEFAULT_STDIO_BUFFER_LIMIT_BYTES  # noqa: E402

from tests.fakes.acp_client import RecordingClient  # noqa: E402
from tests.fakes.openai_server import OpenAIServer, Reply, running_server  # noqa: E402

ECHO_AGENT = REPO / "scripts" / "echo_agent.py"
CODLING_ARGV = ("-m", "codling", "acp")
ECHO_ARGV = (str(ECHO_AGENT),)
T = TypeVar("T")

RPC_TIMEOUT = 60.0
"""Seconds any single request may take before the bench gives up on it."""


# --- configuration -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Config:
    """How many repetitions each measurement makes (``--quick`` shrinks them)."""

    quick: bool
    spawn_runs: int
    session_runs: int
    warm_prompts: int
    prompts: int
    bare_runs: int
    inproc_deltas: int
    process_deltas: int
    first_delta_runs: int

    @classmethod
    def make(cls, quick: bool) -> Config:
        if quick:
            return cls(True, 5, 3, 10, 60, 60, 20_000, 2_000, 2)
        return cls(False, 15, 7, 20, 300, 300, 20_000, 5_000, 5)


# --- results -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    """One line of the table; ``ok`` is None when the metric has no target."""

    metric: str
    value: str
    target: str = ""
    ok: bool | None = None


def ms(seconds: float) -> str:
    """Seconds as milliseconds with one decimal."""
    return f"{seconds * 1000:.1f} ms"


def median(values: Sequence[float]) -> float:
    """The median (raises on an empty sequence with a clear message)."""
    if not values:
        raise ValueError("no samples were collected")
    return statistics.median(values)


def p95(values: Sequence[float]) -> float:
    """The 95th percentile, nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(0.95 * len(ordered)) - 1))]


def render(rows: Sequence[Row]) -> str:
    """The rows as an aligned text table."""
    header = ("metric", "value", "target", "ok?")
    cells = [header] + [_cells(r) for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(4)]
    lines = ["  ".join(c[i].ljust(widths[i]) for i in range(4)).rstrip() for c in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _cells(row: Row) -> tuple[str, str, str, str]:
    if not row.value:  # a heading for the rows under it
        return (row.metric, "", "", "")
    return (row.metric, row.value, row.target or "-", "-" if row.ok is None else ("yes" if row.ok else "NO"))


def progress(message: str) -> None:
    """A progress note on stderr."""
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def machine_header(config: Config, load: float) -> str:
    """Python, CPUs, platform and the versions of the libraries that matter."""
    versions = []
    for dist in ("codling", "agent-client-protocol", "pydantic-ai-slim", "pydantic", "openai"):
        try:
            versions.append(f"{dist} {metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            versions.append(f"{dist} (not installed)")
    return "\n".join(
        [
            f"codling bench{' (--quick)' if config.quick else ''}",
            f"python {platform.python_version()} ({sys.executable})",
            f"{os.cpu_count()} cpus, load average {load:.2f} at start, {platform.platform()}",
            ", ".join(versions),
        ]
    )


# --- a client that timestamps updates ----------------------------------------------------------------------


@dataclass
class TimedClient(RecordingClient):
    """A RecordingClient that also notes when (``perf_counter``) each session/update arrived."""

    times: list[float] = field(default_factory=list)

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.times.append(time.perf_counter())
        await super().session_update(session_id, update, **kwargs)

    def text_since(self, start: int) -> str:
        """The agent_message_chunk text received from update ``start`` on."""
        return "".join(u.content.text for _, u in self.updates[start:] if u.session_update == "agent_message_chunk")

    def first_text_time(self, start: int) -> float | None:
        """When the first agent_message_chunk from update ``start`` on arrived."""
        for (_, update), stamp in zip(self.updates[start:], self.times[start:], strict=True):
            if update.session_update == "agent_message_chunk":
                return stamp
        return None


# --- spawned agents ----------------------------------------------------------------------------------------


@dataclass
class Env:
    """The environment and scratch directories spawned agents share."""

    vars: dict[str, str]
    project: Path
    stderr_path: Path

    def stderr_tail(self, lines: int = 15) -> str:
        """The last lines spawned agents wrote to stderr (for error messages)."""
        try:
            text = self.stderr_path.read_text(errors="replace")
        except OSError:
            return ""
        tail = text.strip().splitlines()[-lines:]
        return "\n".join(tail)


@contextmanager
def agent_env(server: OpenAIServer) -> Iterator[Env]:
    """A private CODLING_HOME, a project directory and the loopback model server's address."""
    with tempfile.TemporaryDirectory(prefix="codling-bench-") as tmp:
        root = Path(tmp)
        home, project = root / "home", root / "project"
        home.mkdir()
        project.mkdir()
        (project / "README.md").write_text("# bench\n")
        env = {
            "CODLING_HOME": str(home),
            "CODLING_MODEL": "openai-chat:fake-model",
            "OPENAI_BASE_URL": server.base_url,
            "OPENAI_API_KEY": "x",
        }
        yield Env(env, project, root / "stderr.log")


@asynccontextmanager
async def spawned(client: RecordingClient, argv: Sequence[str], env: Env) -> AsyncIterator[ClientSideConnection]:
    """An agent process started with the SDK's client side; killed (not drained) on exit."""
    with env.stderr_path.open("wb") as stderr:  # the latest agent's stderr, for error messages
        async with spawn_agent_process(
            client,
            sys.executable,
            *argv,
            env=env.vars,
            cwd=REPO,
            transport_kwargs={"stderr": stderr, "limit": DEFAULT_STDIO_BUFFER_LIMIT_BYTES},
        ) as (conn, process):
            try:
                yield conn
            finally:
                if process.returncode is None:
                    process.kill()
                await asyncio.wait_for(process.wait(), 10)


async def rpc(awaitable: Awaitable[T], what: str) -> T:
    """Await a request with the bench's timeout and a readable error."""
    try:
        return await asyncio.wait_for(awaitable, RPC_TIMEOUT)
    except TimeoutError as e:
        raise RuntimeError(f"{what} got no reply within {RPC_TIMEOUT:.0f} s") from e


async def time_initialize(argv: Sequence[str], env: Env) -> float:
    """Seconds from just before process creation to the parsed initialize response."""
    start = time.perf_counter()
    async with spawned(RecordingClient(), argv, env) as conn:
        response = await rpc(conn.initialize(protocol_version=PROTOCOL_VERSION), "initialize")
        elapsed = time.perf_counter() - start
    if response.protocol_version is None:
        raise RuntimeError("initialize answered without a protocol version")
    return elapsed


async def time_new_session(env: Env) -> float:
    """Seconds from just before spawning ``codling acp`` to the session/new response."""
    start = time.perf_counter()
    async with spawned(RecordingClient(), CODLING_ARGV, env) as conn:
        await rpc(conn.initialize(protocol_version=PROTOCOL_VERSION), "initialize")
        await rpc(conn.new_session(cwd=str(env.project)), "session/new")
        return time.perf_counter() - start


# --- 1 and 2: start-up -------------------------------------------------------------------------------------


async def bench_initialize(config: Config, env: Env) -> list[Row]:
    """Spawn → initialize for codling and the echo agent, alternating (and alternating which goes first)."""
    progress(f"spawn → initialize: {config.spawn_runs} runs each of codling and the echo agent")
    await time_initialize(CODLING_ARGV, env)  # warm the page cache and .pyc files, not counted
    await time_initialize(ECHO_ARGV, env)
    codling: list[float] = []
    echo: list[float] = []
    for i in range(config.spawn_runs):
        order = [(CODLING_ARGV, codling), (ECHO_ARGV, echo)]
        for argv, samples in order if i % 2 == 0 else reversed(order):
            samples.append(await time_initialize(argv, env))
    ratio = median(codling) / median(echo)
    return [
        Row("spawn → initialize, codling acp (median)", ms(median(codling))),
        Row("spawn → initialize, echo agent on acp SDK (median)", ms(median(echo))),
        Row("  ratio codling / echo", f"{ratio:.2f}", "≤ 1.20", ratio <= 1.2),
    ]


async def bench_new_session(config: Config, env: Env) -> list[Row]:
    """Spawn → session/new for codling."""
    progress(f"spawn → session/new: {config.session_runs} runs")
    samples = [await time_new_session(env) for _ in range(config.session_runs)]
    return [Row("spawn → session/new, codling acp (median)", ms(median(samples)))]


# --- 3: per-prompt overhead --------------------------------------------------------------------------------


def inproc_agent(script: Any, home: Path) -> Any:
    """A CodlingAgent on a scripted model, with settings in ``home`` and no background warm-up."""
    from codling.acp.server import CodlingAgent
    from codling.config import Settings

    env = {"CODLING_HOME": str(home), "CODLING_MODEL": "openai-chat:scripted"}
    return CodlingAgent(
        settings_loader=lambda: Settings(home=home, env=env), model_factory=script.factory(), warm_up=False
    )


@asynccontextmanager
async def inproc_session(script: Any, client: RecordingClient) -> AsyncIterator[tuple[ClientSideConnection, str]]:
    """An in-process codling agent connected to ``client``, with one yolo-mode session open."""
    from tests.fakes.acp_client import connected

    with tempfile.TemporaryDirectory(prefix="codling-bench-") as tmp:
        home, project = Path(tmp) / "home", Path(tmp) / "project"
        home.mkdir()
        project.mkdir()
        async with connected(inproc_agent(script, home), client) as conn:
            await rpc(conn.initialize(protocol_version=PROTOCOL_VERSION), "initialize")
            session = await rpc(conn.new_session(cwd=str(project)), "session/new")
            await rpc(conn.set_session_mode(session_id=session.session_id, mode_id="yolo"), "set_mode")
            yield conn, session.session_id


async def prompt(conn: ClientSideConnection, session_id: str, text: str) -> None:
    """Send one prompt and check it ended normally."""
    request = conn.prompt(session_id=session_id, prompt=[helpers.text_block(text)])
    response = await rpc(request, "session/prompt")
    if response.stop_reason != "end_turn":
        raise RuntimeError(f"the prompt ended with {response.stop_reason!r}, not end_turn")


@dataclass
class PromptTimes:
    """Seconds per prompt: codling's round trip, and a bare run with the same history right after it."""

    codling: list[float] = field(default_factory=list)
    matched: list[float] = field(default_factory=list)

    def differences(self) -> list[float]:
        """codling minus the matched bare run, prompt by prompt."""
        return [c - b for c, b in zip(self.codling, self.matched, strict=True)]


def ok_model() -> Any:
    """A zero-latency scripted model that answers every request with "ok"."""
    from tests.fakes.scenarios import Say, Script

    return Script([], fallback=lambda _messages: [Say("ok")])


def exchange() -> list[Any]:
    """One user/assistant text exchange, as codling records a turn in its history."""
    from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart

    return [ModelRequest(parts=[UserPromptPart("hi")]), ModelResponse(parts=[TextPart("ok")])]


async def bare_run(agent: Any, history: list[Any] | None) -> float:
    """Seconds for one ``agent.run("hi")``."""
    start = time.perf_counter()
    result = await agent.run("hi", message_history=history)
    elapsed = time.perf_counter() - start
    if result.output != "ok":
        raise RuntimeError(f"the bare agent answered {result.output!r}")
    return elapsed


async def prompt_times(config: Config) -> PromptTimes:
    """Prompts through the in-process ACP layer, each followed by a bare pydantic-ai run given a history as
    long as codling's was (interleaved, so both see the same machine load)."""
    from pydantic_ai import Agent

    script = ok_model()
    bare = Agent(ok_model().model())
    client = RecordingClient()
    times = PromptTimes()
    history: list[Any] = []
    async with inproc_session(script, client) as (conn, session_id):
        for i in range(config.warm_prompts + config.prompts):
            start = time.perf_counter()
            await prompt(conn, session_id, "hi")
            elapsed = time.perf_counter() - start
            matched = await bare_run(bare, list(history) or None)
            history += exchange()
            if i >= config.warm_prompts:
                times.codling.append(elapsed)
                times.matched.append(matched)
    if client.agent_text() != "ok" * (config.warm_prompts + config.prompts):
        raise RuntimeError("the client did not receive every reply")
    return times


async def bare_times(config: Config) -> list[float]:
    """Seconds per ``pydantic_ai.Agent(model).run(...)`` with no history."""
    from pydantic_ai import Agent

    agent = Agent(ok_model().model())
    samples = [await bare_run(agent, None) for _ in range(config.warm_prompts + config.bare_runs)]
    return samples[config.warm_prompts :]


async def bench_prompt_overhead(config: Config) -> list[Row]:
    """Per-prompt round trip in-process vs a bare pydantic-ai run; and whether it grows with history."""
    progress(f"per-prompt overhead: {config.prompts} prompts after {config.warm_prompts} warm-up")
    times = await prompt_times(config)
    bare = await bare_times(config)
    codling, matched, diffs = times.codling, times.matched, times.differences()
    overhead = median(codling) - median(bare)
    window = min(50, len(codling) // 2)
    turns = config.warm_prompts + len(codling)
    return [
        Row("prompt round trip in-process, codling (median)", ms(median(codling))),
        Row("prompt round trip in-process, codling (p95)", ms(p95(codling))),
        Row("bare pydantic_ai.Agent.run, same model, no history (median)", ms(median(bare))),
        Row("  codling overhead per prompt (median − bare)", ms(overhead), "≤ 20 ms", overhead <= 0.020),
        Row("bare run given codling's history, interleaved (median)", ms(median(matched))),
        Row("  codling overhead at equal history (median of pairs)", ms(median(diffs))),
        Row(f"history growth over {turns} turns, first {window} → last {window} prompts (medians):", ""),
        Row("  codling round trip", _growth(codling, window)),
        Row("  bare run with the same history", _growth(matched, window)),
        Row("  codling overhead at equal history", _growth(diffs, window)),
    ]


def _growth(samples: Sequence[float], window: int) -> str:
    first, last = median(samples[:window]), median(samples[-window:])
    return f"{ms(first)} → {ms(last)}"


# --- 4: streaming ------------------------------------------------------------------------------------------


def words(n: int) -> list[str]:
    """``n`` one-word deltas."""
    return [f"w{i} " for i in range(n)]


async def bench_stream_inproc(config: Config) -> list[Row]:
    """Deltas per second from a streaming scripted model to an in-process ACP client."""
    from tests.fakes.scenarios import Say, Script

    n = config.inproc_deltas
    progress(f"streaming in-process: {n:,} deltas")
    chunks = words(n)
    script = Script([[Say("warm")], [Say(*chunks)]])
    client = TimedClient()
    async with inproc_session(script, client) as (conn, session_id):
        await prompt(conn, session_id, "warm up")
        before = len(client.updates)
        start = time.perf_counter()
        await prompt(conn, session_id, "stream")
        elapsed = time.perf_counter() - start
    received = client.text_since(before)
    check_text(received, chunks)
    rate = n / elapsed
    return [
        Row(f"stream in-process: {n:,} deltas", f"{rate:,.0f} deltas/s", "≥ 5,000/s", rate >= 5000),
        Row("  session/update notifications received", f"{len(client.updates) - before:,}"),
    ]


def check_text(received: str, chunks: Sequence[str]) -> None:
    """Fail unless the client got exactly the streamed text."""
    expected = "".join(chunks)
    if received != expected:
        raise RuntimeError(f"text was lost or altered: got {len(received):,} characters, sent {len(expected):,}")


async def bench_stream_process(config: Config, server: OpenAIServer, env: Env) -> list[Row]:
    """Deltas per second from the loopback server through a spawned ``codling acp`` to the client."""
    n = config.process_deltas
    progress(f"streaming through codling acp: {n:,} deltas from the loopback server")
    chunks = words(n)
    server.enqueue(Reply(text=["warm"]), Reply(text=chunks))
    client = TimedClient()
    async with spawned(client, CODLING_ARGV, env) as conn:
        await rpc(conn.initialize(protocol_version=PROTOCOL_VERSION), "initialize")
        session = await rpc(conn.new_session(cwd=str(env.project)), "session/new")
        await prompt(conn, session.session_id, "warm up")
        before = len(client.updates)
        start = time.perf_counter()
        await prompt(conn, session.session_id, "stream")
        elapsed = time.perf_counter() - start
    check_text(client.text_since(before), chunks)
    rate = n / elapsed
    ceiling = server_ceiling(server, n)
    return [
        Row(f"stream via codling acp: {n:,} deltas", f"{rate:,.0f} deltas/s", "≥ 5,000/s", rate >= 5000),
        Row("  session/update notifications received", f"{len(client.updates) - before:,}"),
        Row("  loopback server alone, raw HTTP read (ceiling)", f"{ceiling:,.0f} chunks/s"),
    ]


def server_ceiling(server: OpenAIServer, n: int) -> float:
    """Chunks per second the loopback server streams to a bare ``http.client`` reader (no codling at all)."""
    server.enqueue(Reply(text=words(n)))
    body = json.dumps({"model": "fake-model", "stream": True, "messages": [{"role": "user", "content": "x"}]})
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=RPC_TIMEOUT)
    try:
        start = time.perf_counter()
        connection.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
        response = connection.getresponse()
        data = response.read()
        elapsed = time.perf_counter() - start
    finally:
        connection.close()
    if response.status != 200 or data.count(b'"delta": {"content": "') != n:
        raise RuntimeError(f"the loopback server answered {response.status} without the {n:,} chunks")
    return n / elapsed


@contextmanager
def text_chunk_send_times() -> Iterator[list[float]]:
    """While active, notes when (``perf_counter``) the loopback server writes each text-content SSE chunk."""
    from tests.fakes import openai_server

    handler = openai_server._Handler
    original = handler._write_chunk
    stamps: list[float] = []

    def write_chunk(self: Any, data: bytes) -> None:
        if b'"delta": {"content": "' in data:
            stamps.append(time.perf_counter())
        original(self, data)

    handler._write_chunk = write_chunk  # type: ignore[method-assign]
    try:
        yield stamps
    finally:
        handler._write_chunk = original  # type: ignore[method-assign]


async def bench_first_delta(config: Config, server: OpenAIServer, env: Env) -> list[Row]:
    """Client's first agent_message_chunk minus the server's first text chunk, with 50 ms between chunks."""
    progress(f"time to first delta: {config.first_delta_runs} prompts, 50 ms between chunks")
    chunk_count = 6
    slow = Reply(text=words(chunk_count), delay=0.05)
    server.enqueue(Reply(text=["warm"]), *[slow] * config.first_delta_runs)
    client = TimedClient()
    lags: list[float] = []
    with text_chunk_send_times() as sent:
        async with spawned(client, CODLING_ARGV, env) as conn:
            await rpc(conn.initialize(protocol_version=PROTOCOL_VERSION), "initialize")
            session = await rpc(conn.new_session(cwd=str(env.project)), "session/new")
            await prompt(conn, session.session_id, "warm up")
            for _ in range(config.first_delta_runs):
                before_updates, before_sent = len(client.updates), len(sent)
                await prompt(conn, session.session_id, "stream slowly")
                arrived = client.first_text_time(before_updates)
                if arrived is None or len(sent) <= before_sent:
                    raise RuntimeError("no text chunk was sent or received")
                lags.append(arrived - sent[before_sent])
                check_text(client.text_since(before_updates), words(chunk_count))
    return [
        Row(
            "first delta: client receipt − server send (median)",
            ms(median(lags)),
            "small (< 50 ms)",
            median(lags) < 0.05,
        ),
        Row("  worst of the runs", ms(max(lags))),
    ]


# --- driver ------------------------------------------------------------------------------------------------


Section = Callable[[], Awaitable[list[Row]]]


async def guarded(name: str, section: Section, env: Env | None = None) -> list[Row]:
    """Run one section; a failure becomes a row (and a message with details on stderr) instead of a crash."""
    started = time.perf_counter()
    try:
        rows = await section()
    except Exception as e:
        print(f"[bench] {name} FAILED: {type(e).__name__}: {e}", file=sys.stderr)
        traceback.print_exc(file=sys.stderr)
        if env is not None and (tail := env.stderr_tail()):
            print(f"[bench] last lines of the agent's stderr:\n{tail}", file=sys.stderr)
        return [Row(name, f"FAILED: {type(e).__name__}: {e}"[:90], ok=False)]
    progress(f"{name} done in {time.perf_counter() - started:.1f} s")
    return rows


async def run(config: Config) -> list[Row]:
    """Every measurement, in an order that keeps the bench process light while start-up is timed."""
    rows: list[Row] = []
    with running_server() as server, agent_env(server) as env:
        rows += await guarded("spawn → initialize", lambda: bench_initialize(config, env), env)
        rows += await guarded("spawn → session/new", lambda: bench_new_session(config, env), env)
        rows += await guarded("per-prompt overhead", lambda: bench_prompt_overhead(config))
        rows += await guarded("stream in-process", lambda: bench_stream_inproc(config))
        rows += await guarded("stream via process", lambda: bench_stream_process(config, server, env), env)
        rows += await guarded("first delta", lambda: bench_first_delta(config, server, env), env)
    return rows


def parse_args(argv: Sequence[str] | None = None) -> Config:
    """``--quick`` for fewer repetitions (about 30 s instead of about 2 minutes)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="fewer repetitions, for a fast check")
    return Config.make(parser.parse_args(argv).quick)


def main(argv: Sequence[str] | None = None, out: IO[str] = sys.stdout) -> int:
    """Run the bench and print the table; exit status 1 if a target was missed or a measurement failed."""
    config = parse_args(argv)
    # In-process sessions run an uncatalogued scripted model; codling's warning about that is expected here.
    logging.getLogger("codling").setLevel(logging.ERROR)
    if not ECHO_AGENT.exists():
        print(f"[bench] {ECHO_AGENT} is missing", file=sys.stderr)
        return 2
    load = os.getloadavg()[0]
    if load > 0.5 * (os.cpu_count() or 1):
        progress(f"the machine is busy (load average {load:.2f}): start-up numbers will be noisy")
    started = time.perf_counter()
    rows = asyncio.run(run(config))
    print(machine_header(config, load), file=out)
    print(f"total bench time {time.perf_counter() - started:.1f} s\n", file=out)
    print(render(rows), file=out)
    return 1 if any(r.ok is False for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
