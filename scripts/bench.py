"""codling's benchmark: start-up, per-prompt overhead and streaming throughput, printed as one table.

Run from the repository root::

    .venv/bin/python scripts/bench.py [--quick]

What it measures (see DESIGN.md §13):

1. spawn → initialize reply, median, for ``python -m codling acp`` and for ``scripts/echo_agent.py`` (a
   minimal agent on the same acp SDK), measured alternately with the same interpreter, env and client code;
   the ratio of the two medians should be at most 1.15 (issue 33 D7), with its spread and the CPU time each
   agent had used by its reply (steadier than the wall clock on a busy machine).
2. spawn → session/new reply for ``codling acp``, and session/new's own time sent right after initialize
   (≤ 100 ms, issue 33 D7); a fresh agent's first answer
   (``bench_first_answer.py``): spawn → first chunk against the import floor, session/new right after
   initialize (< 100 ms), the provider's first byte → the first chunk (≤ 150 ms), and the per-prompt overhead
   through a spawned agent (≤ 20 ms).
2b. memory at rest (issue 33 D7): a spawned ``codling acp``'s resident set (``VmRSS``, and the peak ``VmHWM``)
   after initialize, after session/new and after 10, 100 and 300 prompts against the loopback server with
   zero-latency replies, beside the echo agent's. Targets: ≤ 130 MB after 10 prompts, ≤ 150 MB after 300.
3. per-prompt round trip through the ACP layer in-process with a zero-latency scripted model, against the
   same model driven by a bare ``pydantic_ai.Agent``; codling's overhead is the difference of the medians.
4. streaming: text deltas per second delivered to an ACP client in-process and from a spawned
   ``codling acp`` fed by a loopback OpenAI-compatible server, and the extra latency of the first delta.
5. the terminal's light commands (``bench_cli.py``): ``--version``, ``--help``, ``models``, ``sessions list`` and
   ``sessions show``, spawned through the ``codling`` entry point, against bare ``python -c pass`` in the same
   run: each under 0.5 s and importing neither pydantic-ai nor a provider SDK.
6. the session store: session/load of a 1,000-turn session until the replay is complete and session/list over
   1,000 sessions, both through an in-process agent on histories written by codling's own recorder; session/list's
   page 1 against page 200 of 10,000 sessions (a page costs no more deep in the list); the time
   to append one record to a history.jsonl, and the records per second a HistoryRecorder writes.
7. token accounting per turn in a ConversationSession (``record_turn``: two HistoryEntry.of counting ~1.5k
   tokens of new text, then ``context_used()``) with a 150k-token history, against a 15k-token one to show it does
   not grow; and the ``state.messages()`` copy each request makes. The tokenizer is loaded before timing.
8. compaction's work besides the model on a 200k-token history: ``compaction_input`` within ``input_budget`` for a
   200k-context model with 32k output (and the transcript's real token count against that budget),
   ``fallback_summary`` (within its budget) and ``rebuild``.
8b. big text (issue 29 D1): CPU time to count (as a request carries it) and cap (as a tool result) 0.25, 1 and
   10 MB without whitespace; target: linear or better.
9. context fidelity: the scripted 30-turn coding session of ``tests/fakes/fidelity.py`` (reads of up to 138 KB,
   commands printing 10–50 KB, edits, a patch, a delegate, a pasted CI log, facts and standing rules stated
   along the way) on 8,000- and 16,000-token models, with a working and a failing summarizer, against the
   loopback server counting every request with o200k and rejecting any over the window; live, and restarted
   (a new session restored from history.jsonl) before every turn. Targets: no request over the window minus
   the maximum output, at most one rejected, facts kept ≥ 95% (working) / ≥ 80% (failing), pins 100%, the
   restarted run's requests identical to the live run's. ``--quick`` runs 12 turns.
10. pins: precision and recall of pinning (standing rules and durable facts, not one-offs nor the code's
   current state) on the labelled corpus ``tests/unit/data/pins_corpus.jsonl``. Targets: ≥ 95% / ≥ 90%.
11. facts over 100 turns: the scripted session of ``tests/fakes/facts_session.py`` (reads, commands printing
   10–30 KB, edits, a pasted log, small talk) with 14 facts planted in prompts, tool results and replies, each
   asked 71 turns later; kept when the asking turn's first request holds it. 8,000 and 16,000 tokens with a
   working, failing, empty and garbage summarizer, 32,000 with a failing one; a hanging one once, on 40 turns
   (each hang waits codling's 30 s). Targets: 100% (working), ≥ 90% (the others). ``--quick`` runs 40 turns,
   working and failing only.

12. hostile repositories (issue 29 D2, D7): list_files (first 1,000 files) in a git tree with 100,000 and
   1,000,000 untracked files (``--quick``: 100,000), and a walk under a 4,000-rule wildcard .gitignore over 10,000
   files, each in a fresh process: time, peak memory, the event loop's longest stall; and how soon cancelling a
   walk under 4,000 rules that no index can skip stops it.
13. prompt caching on Anthropic (issue 30 item 5): scripted sessions (``tests/fakes/anthropic_session.py``) of
   reads (30 and 100 turns; ``--quick``: 12) and the context-fidelity session (30 turns of facts, 10–138 KB tool
   output, edits and a delegate), in a 16k window, which compacts, and a 200k one, on the real AnthropicModel
   against the Anthropic fake, which bills them under Anthropic's cache rules; with ``cache`` 5m and 1h: the
   share of input tokens read from the cache (≥ 80% at 16k, ≥ 85% at 200k), the share of repeated input (sent
   the same by an earlier request) the cache missed, the billed input (reads 0.1×, writes 1.25× / 2×) against the
   same session with ``cache = "off"`` (≤ 0.3×), and codling's reported cost against the fake's bill at the list
   price (within 1%).
14. checkpoints (issue 34 D4): a 10,000-file git workspace (~1.2 KB Python files, a day old), 5 files rewritten per
   turn: the checkpoint's time (≤ 50 ms) and bytes added to the session's folder against the changed bytes
   (≤ 1.01×), the first checkpoint of the workspace, and a rewind 5 turns back; then whole turns of a recorded
   session (a command rewriting 5 files) with checkpoints and without, side by side (the three checkpoints of a
   turn: ≤ 150 ms), and ``/undo`` of the last one.
15. sandbox: a scripted 30-turn session of 40 run_command calls (pytest, git, ls, cat, grep, python -c, make,
   a few with pipes or ``&&``, a fetch from a dev server on the host's loopback that the sandbox blocks and that
   is run again with the network lifted) in a small git project, through an in-process agent and real
   LocalTerminal commands, in ``ask`` and in ``auto`` mode, with a user who answers "always" when it covers a
   whole program and "once" otherwise: the questions asked in each (auto: ≥ 80% fewer); then ``true`` and
   ``git status`` through ``LocalTerminal.run`` unconfined and confined, interleaved (the reaper runs in both):
   median, p95 and the ratio of the medians (``true``: ≤ 1.2×).
Progress goes to stderr, the table to stdout. Only 127.0.0.1 is ever contacted. Tests never run this. ``--only NAME``
runs the sections whose name contains NAME (e.g. ``--only memory``).
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import logging
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
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
    load_runs: int
    list_runs: int
    appends: int
    recorder_turns: int
    accounting_runs: int
    compaction_runs: int
    fidelity_turns: int
    only: tuple[str, ...] = ()
    """Run only the sections whose name contains one of these (all when empty)."""

    @classmethod
    def make(cls, quick: bool, only: Sequence[str] = ()) -> Config:
        if quick:
            return cls(True, 5, 3, 10, 60, 60, 20_000, 2_000, 2, 2, 5, 1_000, 100, 100, 3, 12, tuple(only))
        return cls(False, 15, 7, 20, 300, 300, 20_000, 5_000, 5, 7, 15, 5_000, 500, 300, 9, 30, tuple(only))

    def runs(self, section: str) -> bool:
        """Whether ``--only`` lets the section run."""
        return not self.only or any(name in section for name in self.only)


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


def percentile(values: Sequence[float], fraction: float) -> float:
    """A percentile (``fraction`` of 1), nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))]


def p95(values: Sequence[float]) -> float:
    """The 95th percentile, nearest rank."""
    return percentile(values, 0.95)


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
            # The agents run this checkout's sources, whichever checkout the virtualenv was installed from.
            "PYTHONPATH": str(REPO / "src"),
        }
        yield Env(env, project, root / "stderr.log")


@asynccontextmanager
async def spawned(client: RecordingClient, argv: Sequence[str], env: Env) -> AsyncIterator[ClientSideConnection]:
    """An agent process started with the SDK's client side; killed (not drained) on exit."""
    async with spawned_process(client, argv, env) as (conn, _pid):
        yield conn


@asynccontextmanager
async def spawned_process(
    client: RecordingClient, argv: Sequence[str], env: Env
) -> AsyncIterator[tuple[ClientSideConnection, int]]:
    """As :func:`spawned`, with the agent's process id (for its memory in /proc)."""
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
                yield conn, process.pid
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


def cpu_seconds(pid: int) -> float:
    """A live process's CPU time so far (user + system, all its threads), from /proc/<pid>/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def time_initialize(argv: Sequence[str], env: Env) -> tuple[float, float]:
    """Seconds from just before process creation to the parsed initialize response, and the CPU seconds the
    agent had used by then (less sensitive than the wall clock to other work on the machine)."""
    start = time.perf_counter()
    async with spawned_process(RecordingClient(), argv, env) as (conn, pid):
        response = await rpc(conn.initialize(protocol_version=PROTOCOL_VERSION), "initialize")
        elapsed = time.perf_counter() - start
        cpu = cpu_seconds(pid)
    if response.protocol_version is None:
        raise RuntimeError("initialize answered without a protocol version")
    return elapsed, cpu


async def time_new_session(env: Env) -> tuple[float, float]:
    """Seconds from just before spawning ``codling acp`` to the session/new response, and from the request
    (sent as soon as initialize is answered) to that response."""
    start = time.perf_counter()
    async with spawned(RecordingClient(), CODLING_ARGV, env) as conn:
        await rpc(conn.initialize(protocol_version=PROTOCOL_VERSION), "initialize")
        asked = time.perf_counter()
        await rpc(conn.new_session(cwd=str(env.project)), "session/new")
        end = time.perf_counter()
        return end - start, end - asked


# --- 1 and 2: start-up -------------------------------------------------------------------------------------


async def bench_initialize(config: Config, env: Env) -> list[Row]:
    """Spawn → initialize for codling and the echo agent, alternating (and alternating which goes first)."""
    progress(f"spawn → initialize: {config.spawn_runs} runs each of codling and the echo agent")
    await time_initialize(CODLING_ARGV, env)  # warm the page cache and .pyc files, not counted
    await time_initialize(ECHO_ARGV, env)
    codling: list[tuple[float, float]] = []
    echo: list[tuple[float, float]] = []
    for i in range(config.spawn_runs):
        order = [(CODLING_ARGV, codling), (ECHO_ARGV, echo)]
        for argv, samples in order if i % 2 == 0 else reversed(order):
            samples.append(await time_initialize(argv, env))
    wall = [median([s[0] for s in codling]), median([s[0] for s in echo])]
    cpu = [median([s[1] for s in codling]), median([s[1] for s in echo])]
    ratio = wall[0] / wall[1]
    fastest, slowest = min(s[0] for s in codling), max(s[0] for s in codling)
    spread = [fastest / max(s[0] for s in echo), slowest / min(s[0] for s in echo)]
    return [
        Row("spawn → initialize, codling acp (median)", ms(wall[0])),
        Row("spawn → initialize, echo agent on acp SDK (median)", ms(wall[1])),
        Row("  ratio codling / echo (issue 33 D7)", f"{ratio:.2f}", "≤ 1.15", ratio <= 1.15),
        Row("  ratio's spread (fastest / slowest run … slowest / fastest)", f"{spread[0]:.2f} … {spread[1]:.2f}"),
        # CPU time is the steadier measure when other work shares the machine (the wall clock waits for it).
        Row("  CPU time to initialize: codling / echo (median)", f"{ms(cpu[0])} / {ms(cpu[1])}: {cpu[0] / cpu[1]:.2f}"),
    ]


async def bench_new_session(config: Config, env: Env) -> list[Row]:
    """Spawn → session/new for codling, and session/new's own time when sent right after initialize."""
    progress(f"spawn → session/new: {config.session_runs} runs")
    samples = [await time_new_session(env) for _ in range(config.session_runs)]
    own = median([s[1] for s in samples])
    return [
        Row("spawn → session/new, codling acp (median)", ms(median([s[0] for s in samples]))),
        Row("  session/new sent right after initialize, request → response (median)", ms(own), "≤ 100 ms", own <= 0.1),
    ]


async def bench_first_answer(config: Config, server: OpenAIServer, env: Env) -> list[Row]:
    """A fresh agent's first answer against the import floor; session/new; per-prompt overhead spawned."""
    from bench_first_answer import first_answer, import_floor, prompt_overhead

    runs = config.session_runs
    progress(f"first answer: {runs} fresh agents, alternating with the import floor")
    server.title_reply = Reply(text=["Bench"])
    server.responder = lambda _body: Reply(text=["Hello there."])
    floors: list[float] = []
    firsts: list[float] = []
    news: list[float] = []
    lags: list[float] = []
    try:
        with text_chunk_send_times() as sent:
            for _ in range(runs):
                floors.append(import_floor(sys.executable))
                first, new, lag = await rpc(first_answer(spawned, TimedClient(), CODLING_ARGV, env, sent), "first")
                firsts.append(first)
                news.append(new)
                lags.append(lag)
        prompts = 10 if config.quick else 40
        overhead, bare = await rpc(
            prompt_overhead(spawned, TimedClient(), CODLING_ARGV, env, server.base_url, prompts), "prompts"
        )
    finally:
        server.responder = None
    gap = median(firsts) - median(floors)
    return [
        Row("spawn → first chunk of the first prompt (median)", ms(median(firsts))),
        Row("  import floor: acp + pydantic-ai + openai provider (median)", ms(median(floors))),
        Row("  first chunk past the floor", ms(gap)),
        Row(
            "session/new right after initialize, request → response (median)",
            ms(median(news)),
            "< 100 ms",
            median(news) < 0.1,
        ),
        Row(
            "first prompt: provider's first byte → client's first chunk (median)",
            ms(median(lags)),
            "≤ 150 ms",
            median(lags) <= 0.15,
        ),
        Row(
            "per-prompt overhead, spawned codling acp (median round trip − bare HTTP)",
            ms(overhead - bare),
            "≤ 20 ms",
            overhead - bare <= 0.02,
        ),
        Row("  warm prompt round trip / bare HTTP exchange", f"{ms(overhead)} / {ms(bare)}"),
    ]


# --- 2b: memory at rest -----------------------------------------------------------------------------------

MEMORY_MARKS = (10, 100, 300)
"""After how many prompts the memory section reads the agent's memory (the last is the session's length)."""


def memory_mb(pid: int) -> tuple[float, float]:
    """A live process's resident set and its peak so far (``VmRSS``, ``VmHWM`` of /proc/<pid>/status), in MB."""
    fields: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0]) / 1024  # kB
    return fields["VmRSS"], fields["VmHWM"]


async def memory_profile(argv: Sequence[str], env: Env) -> dict[str, tuple[float, float]]:
    """One agent's (VmRSS, VmHWM) after initialize, after session/new and after each of MEMORY_MARKS prompts."""
    marks: dict[str, tuple[float, float]] = {}
    async with spawned_process(RecordingClient(), argv, env) as (conn, pid):
        await rpc(conn.initialize(protocol_version=PROTOCOL_VERSION), "initialize")
        marks["initialize"] = memory_mb(pid)
        session = await rpc(conn.new_session(cwd=str(env.project)), "session/new")
        marks["session/new"] = memory_mb(pid)
        for turn in range(1, MEMORY_MARKS[-1] + 1):
            await prompt(conn, session.session_id, f"prompt {turn}: say hello")
            if turn in MEMORY_MARKS:
                marks[f"{turn} prompts"] = memory_mb(pid)
    return marks


async def bench_memory(config: Config, server: OpenAIServer, env: Env) -> list[Row]:
    """Resident memory of a spawned ``codling acp`` over a 300-turn session, beside the echo agent's."""
    runs = 1 if config.quick else 3
    progress(f"memory at rest: {runs} runs each of codling and the echo agent, {MEMORY_MARKS[-1]} prompts each")
    server.title_reply = Reply(text=["Bench"])
    server.responder = lambda _body: Reply(text=["Hello there."])
    codling: list[dict[str, tuple[float, float]]] = []
    echo: list[dict[str, tuple[float, float]]] = []
    try:
        for i in range(runs):
            order = [(CODLING_ARGV, codling), (ECHO_ARGV, echo)]
            for argv, samples in order if i % 2 == 0 else reversed(order):
                samples.append(await memory_profile(argv, env))
    finally:
        server.responder = None
    targets = {f"{MEMORY_MARKS[0]} prompts": 130.0, f"{MEMORY_MARKS[-1]} prompts": 150.0}
    rows = [Row("resident memory (VmRSS, median of runs): codling acp / echo agent; peak (VmHWM)", "")]
    for mark in codling[0]:
        rss = median([m[mark][0] for m in codling])
        peak = median([m[mark][1] for m in codling])
        floor = median([m[mark][0] for m in echo])
        value = f"{rss:.0f} MB / {floor:.0f} MB; peak {peak:.0f} MB"
        limit = targets.get(mark)
        if limit is None:
            rows.append(Row(f"  after {mark}", value))
        else:
            rows.append(Row(f"  after {mark}", value, f"≤ {limit:.0f} MB", rss <= limit))
    return rows


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


async def bench_light_commands(config: Config, env: Env) -> list[Row]:
    """The terminal's light commands against bare Python (``bench_cli.py``)."""
    sys.path.insert(0, str(REPO / "scripts"))
    from bench_cli import (
        CHAT_TARGET_RATIO,
        TARGET_SECONDS,
        chat_imports_before_input,
        chat_prompt_times,
        install_golden,
        summary,
    )

    install_golden(Path(env.vars["CODLING_HOME"]))
    variables = {**os.environ, **env.vars}
    measured = await asyncio.to_thread(summary, config.spawn_runs, variables)
    (_, bare, _, _), (typer_label, typer, _, _), *commands = measured
    rows = [Row("bare python -c pass (median)", ms(bare)), Row(f"bare {typer_label} (median)", ms(typer))]
    version = next(seconds for label, seconds, _, _ in commands if label == "codling --version")
    for label, seconds, heavy, starts in commands:
        target = f"< {TARGET_SECONDS * 1000:.0f} ms, no model stack, one start"
        value = (
            ms(seconds)
            + (f", imports {', '.join(heavy)}" if heavy else "")
            + (f", {starts} starts" if starts != 1 else "")
        )
        rows.append(
            Row(f"{label}, a key set (median)", value, target, seconds < TARGET_SECONDS and not heavy and starts == 1)
        )
    chat = median(await asyncio.to_thread(chat_prompt_times, config.spawn_runs, variables, env.project))
    early = await asyncio.to_thread(chat_imports_before_input, variables, env.project)
    target = f"≤ {CHAT_TARGET_RATIO:.0f}× --version"
    value = f"{ms(chat)} ({chat / version:.1f}× --version)"
    rows.append(Row("codling chat: until its input line (median)", value, target, chat <= CHAT_TARGET_RATIO * version))
    rows.append(
        Row(
            "codling chat: imported before its input line",
            ", ".join(early) or "no pydantic, pydantic-ai, rich, store or brain",
            "none of them",
            not early,
        )
    )
    return rows


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
    library = max(library_ceiling(server, n) for _ in range(2))
    return [
        Row(f"stream via codling acp: {n:,} deltas", f"{rate:,.0f} deltas/s", "≥ 5,000/s", rate >= 5000),
        Row("  session/update notifications received", f"{len(client.updates) - before:,}"),
        Row("  loopback server alone, raw HTTP read (ceiling)", f"{ceiling:,.0f} chunks/s"),
        Row("  bare pydantic-ai + openai provider in a process of its own, best of 2", f"{library:,.0f} deltas/s"),
    ]


_LIBRARY_READER = """
import asyncio, sys, time
from pydantic_ai import Agent
from pydantic_ai.messages import PartDeltaEvent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

async def main():
    agent = Agent(OpenAIChatModel("fake-model", provider=OpenAIProvider(base_url=sys.argv[1], api_key="k")))
    count, start = 0, time.perf_counter()
    async with agent.iter("stream") as run:
        async for node in run:
            if Agent.is_model_request_node(node):
                async with node.stream(run.ctx) as events:
                    async for event in events:
                        count += isinstance(event, PartDeltaEvent)
    print(count, time.perf_counter() - start)

asyncio.run(main())
"""


def library_ceiling(server: OpenAIServer, n: int) -> float:
    """Deltas per second pydantic-ai itself (openai provider, ``Agent.iter``, no codling) reads from the
    loopback server, in a process of its own as ``codling acp`` is: what codling's streaming is bounded by."""
    server.enqueue(Reply(text=words(n)))
    result = subprocess.run(
        [sys.executable, "-c", _LIBRARY_READER, server.base_url],
        capture_output=True,
        text=True,
        timeout=RPC_TIMEOUT,
        check=True,
    )
    count, elapsed = result.stdout.split()
    return int(count) / float(elapsed)


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
    from tests.fakes import http_fake

    handler = http_fake.Handler
    original = handler.write_chunk
    stamps: list[float] = []

    def write_chunk(self: Any, data: bytes) -> None:
        if b'"delta": {"content": "' in data:
            stamps.append(time.perf_counter())
        original(self, data)

    handler.write_chunk = write_chunk  # type: ignore[method-assign]
    try:
        yield stamps
    finally:
        handler.write_chunk = original  # type: ignore[method-assign]


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


# --- 5: the session store ----------------------------------------------------------------------------------


STORE_MODEL = "openai-chat:scripted"
LOAD_TURNS = 1_000
LIST_SESSIONS = 1_000
LIST_PROJECTS = 10
PAGED_SESSIONS = 10_000
DELTA_SIZE = 16
"""Characters per streamed text or thought delta (a few tokens, as providers send them)."""

_PROSE = (
    "the function returns a value when its argument is empty so the caller should check the result before "
    "using it in the loop below which reads each line of the file and splits it on commas then we update "
    "tests to cover this case and run them again to make sure nothing else broke"
)
_VOCABULARY = tuple(_PROSE.split())


def prose(seed: int, length: int) -> str:
    """Deterministic English-looking text of ``length`` characters."""
    out: list[str] = []
    size, i = 0, seed
    while size < length:
        word = _VOCABULARY[i % len(_VOCABULARY)]
        out.append(word)
        size += len(word) + 1
        i += 7
    return " ".join(out)[:length]


def pieces(text: str) -> list[str]:
    """``text`` cut into streamed deltas."""
    return [text[i : i + DELTA_SIZE] for i in range(0, len(text), DELTA_SIZE)]


def small_file(n: int) -> str:
    """A 20-line Python module (about 600 characters)."""
    lines = [f"def helper_{n}_{i}(value):" if i % 4 == 0 else f"    value = value + {i}  # step {i}" for i in range(19)]
    return "\n".join([*lines, "    return value"]) + "\n"


def tool_events(n: int, turn: str, project: Path) -> list[Any]:
    """One tool call of turn ``n``, started and finished: a read, an edit (with a diff) or a command in turn."""
    from codling.brain.events import ToolCallFinished, ToolCallStarted
    from codling.vocabulary import FileDiff, Location

    call, path = f"call-{n:05}", f"src/module_{n % 40}.py"
    where = (Location(project / path),)
    match n % 3:
        case 0:
            text = small_file(n)
            return [
                ToolCallStarted(turn, call, "read_file", f"Read {path}", "read", {"path": path}, where),
                ToolCallFinished(turn, call, "read_file", "completed", text, None, where),
            ]
        case 1:
            old = small_file(n)
            new = old.replace("+ 5  # step 5", "- 5  # step 5, fixed")
            args = {"path": path, "old_text": "+ 5  # step 5", "new_text": "- 5  # step 5, fixed"}
            diff = FileDiff(project / path, old, new)
            return [
                ToolCallStarted(turn, call, "edit_file", f"Edit {path}", "edit", args, where),
                ToolCallFinished(turn, call, "edit_file", "completed", f"Edited {path}.", diff, where),
            ]
    command = f"pytest -q tests/test_module_{n % 40}.py"
    output = f"$ {command}\n" + prose(n, 250) + "\n3 passed in 0.42s\n"
    return [
        ToolCallStarted(turn, call, "run_command", f"Run `{command}`", "execute", {"command": command}),
        ToolCallFinished(turn, call, "run_command", "completed", output),
    ]


def turn_events(n: int, project: Path) -> list[Any]:
    """The brain events of one realistic turn: a ~100-character prompt, streamed thinking and text (a few hundred
    characters each), one tool call, more text, the end. Replayed, it is 6 updates; recorded, 7 records."""
    from codling.brain.events import TextDelta, ThoughtDelta, TurnEnded, TurnStarted, Usage
    from codling.brain.prompt import TextBlock

    turn = f"turn-{n:05}"
    request = prose(n, 100)
    events: list[Any] = [TurnStarted(turn, request, True, datetime.now(UTC), (TextBlock(request),))]
    events += [ThoughtDelta(turn, t) for t in pieces(prose(n + 1, 300))]
    events += [TextDelta(turn, t) for t in pieces(prose(n + 2, 200))]
    events += tool_events(n, turn, project)
    events += [TextDelta(turn, t) for t in pieces(prose(n + 3, 400))]
    events.append(TurnEnded(turn, "end_turn", Usage(2_000 + 40 * n, 180, 2)))
    return events


UPDATES_PER_TURN = {
    "user_message_chunk": 1,
    "agent_thought_chunk": 1,
    "agent_message_chunk": 2,
    "tool_call": 1,
    "tool_call_update": 1,
}
RECORDS_PER_TURN = 7


async def write_long_session(home: Path, project: Path, turns: int) -> str:
    """A session of ``turns`` turns written through codling's own store and recorder; returns its id."""
    from codling.store.header import SessionHeader
    from codling.store.ids import new_session_id
    from codling.store.index import SessionStore

    store = SessionStore(home)
    header = SessionHeader(new_session_id(), project, STORE_MODEL, "yolo")
    file = store.create(header)
    try:
        recorder = store.recorder(header, file)
        for n in range(turns):
            for event in turn_events(n, project):
                await recorder(event)
    finally:
        file.close()
    return header.session_id


async def until_updates(client: RecordingClient, count: int) -> None:
    """Wait (within the bench's timeout) until the client holds at least ``count`` updates."""
    async with asyncio.timeout(RPC_TIMEOUT):
        while len(client.updates) < count:
            client.update_seen.clear()
            await client.update_seen.wait()


@dataclass(frozen=True)
class LoadRun:
    """One session/load: seconds until the replay was complete, and how many updates preceded the response."""

    complete: float
    at_response: int


async def time_load(home: Path, project: Path, session_id: str, turns: int) -> LoadRun:
    """session/load in a fresh in-process agent; checks every replayed update arrived, of the expected kinds."""
    from tests.fakes.acp_client import connected

    expected = turns * sum(UPDATES_PER_TURN.values())
    client = TimedClient()
    async with connected(inproc_agent(ok_model(), home), client) as conn:
        await rpc(conn.initialize(protocol_version=PROTOCOL_VERSION), "initialize")
        start = time.perf_counter()
        await rpc(conn.load_session(cwd=str(project), session_id=session_id), "session/load")
        answered = time.perf_counter()
        at_response = len(client.updates)
        await until_updates(client, expected)  # notifications are handled in tasks: a few may still be queued
        complete = max(answered, client.times[-1])
        await rpc(conn.close_session(session_id=session_id), "session/close")
    kinds: dict[str, int] = {}
    for _, update in client.updates:
        if update.session_update in ("available_commands_update", "usage_update"):
            continue  # session metadata sent after the response, not part of the replay
        kinds[update.session_update] = kinds.get(update.session_update, 0) + 1
    if kinds != {kind: per_turn * turns for kind, per_turn in UPDATES_PER_TURN.items()}:
        raise RuntimeError(f"replay sent {len(client.updates):,} updates ({kinds}), expected {expected:,}")
    return LoadRun(complete - start, at_response)


async def bench_session_load(config: Config) -> list[Row]:
    """session/load of a long session in a fresh in-process agent, until every replayed update has arrived."""
    turns = LOAD_TURNS
    progress(f"session/load: writing a {turns:,}-turn session, then {config.load_runs} loads (after 1 warm-up)")
    with tempfile.TemporaryDirectory(prefix="codling-bench-") as tmp:
        home, project = Path(tmp) / "home", Path(tmp) / "project"
        home.mkdir()
        project.mkdir()
        session_id = await write_long_session(home, project, turns)
        history = home / "sessions" / session_id / "history.jsonl"
        size, records = history.stat().st_size, history.read_bytes().count(b"\n")
        await time_load(home, project, session_id, turns)  # imports and first-use caches, not counted
        runs = [await time_load(home, project, session_id, turns) for _ in range(config.load_runs)]
        reads = time_reads(home, session_id, config.load_runs)
    complete = median([r.complete for r in runs])
    updates = turns * sum(UPDATES_PER_TURN.values())
    return [
        Row(
            f"session/load, {turns:,}-turn session, replay complete (median)", ms(complete), "≤ 1.5 s", complete <= 1.5
        ),
        Row("  session/update notifications replayed", f"{updates:,}"),
        Row("  of them received before the response (fewest in a run)", f"{min(r.at_response for r in runs):,}"),
        Row("  reading the history alone, SessionStore.read (median)", ms(median(reads))),
        Row("  history.jsonl", f"{records:,} records, {size / 1e6:.1f} MB"),
    ]


def time_reads(home: Path, session_id: str, runs: int) -> list[float]:
    """Seconds per SessionStore.read of the session (parsing and folding its records into events)."""
    from codling.store.index import SessionStore

    store = SessionStore(home)
    samples: list[float] = []
    for _ in range(runs):
        start = time.perf_counter()
        store.read(session_id)
        samples.append(time.perf_counter() - start)
    return samples


async def write_many_sessions(home: Path, projects: Sequence[Path], count: int) -> None:
    """``count`` one-turn sessions spread over ``projects``, titled by the recorder as codling titles them."""
    from codling.brain.events import TextDelta, TurnEnded, TurnStarted
    from codling.brain.prompt import TextBlock
    from codling.store.header import SessionHeader
    from codling.store.ids import new_session_id
    from codling.store.index import SessionStore

    store = SessionStore(home)
    for i in range(count):
        header = SessionHeader(new_session_id(), projects[i % len(projects)], STORE_MODEL, "ask")
        file = store.create(header)
        try:
            recorder = store.recorder(header, file)  # the first request becomes the title (meta.json too)
            request = prose(i, 100)
            await recorder(TurnStarted("t1", request, False, datetime.now(UTC), (TextBlock(request),)))
            await recorder(TextDelta("t1", prose(i + 1, 200)))
            await recorder(TurnEnded("t1", "end_turn"))
        finally:
            file.close()


async def bench_session_list(config: Config) -> list[Row]:
    """session/list (first page, all and one cwd) over many sessions through an in-process agent; and the
    store's list() alone."""
    from codling.acp.server import LIST_PAGE_SIZE
    from codling.store.index import SessionStore
    from tests.fakes.acp_client import connected

    count, runs = LIST_SESSIONS, config.list_runs
    progress(f"session/list: writing {count:,} sessions, then {runs} lists of each kind")
    with tempfile.TemporaryDirectory(prefix="codling-bench-") as tmp:
        home = Path(tmp) / "home"
        projects = [Path(tmp) / f"project-{i}" for i in range(LIST_PROJECTS)]
        for directory in (home, *projects):
            directory.mkdir()
        await write_many_sessions(home, projects, count)
        in_one = count // LIST_PROJECTS
        async with connected(inproc_agent(ok_model(), home), RecordingClient()) as conn:
            await rpc(conn.initialize(protocol_version=PROTOCOL_VERSION), "initialize")
            start = time.perf_counter()
            await rpc(conn.list_sessions(), "session/list")  # also loads settings and the model catalog
            first = time.perf_counter() - start
            everything: list[float] = []
            filtered: list[float] = []
            for _ in range(runs):
                start = time.perf_counter()
                page = await rpc(conn.list_sessions(), "session/list")
                everything.append(time.perf_counter() - start)
                check_page(page, LIST_PAGE_SIZE, count)
                start = time.perf_counter()
                page = await rpc(conn.list_sessions(cwd=str(projects[0])), "session/list")
                filtered.append(time.perf_counter() - start)
                check_page(page, LIST_PAGE_SIZE, in_one, projects[0])
        store = SessionStore(home)
        direct: list[float] = []
        for _ in range(runs):
            start = time.perf_counter()
            found = store.list()
            direct.append(time.perf_counter() - start)
            if len(found) != count:
                raise RuntimeError(f"SessionStore.list() found {len(found):,} sessions, not {count:,}")
    listed, in_cwd = median(everything), median(filtered)
    return [
        Row(f"session/list over {count:,} sessions, first page (median)", ms(listed), "≤ 300 ms", listed <= 0.3),
        Row(f"  with cwd ({in_one} match), first page (median)", ms(in_cwd), "≤ 300 ms", in_cwd <= 0.3),
        Row("  first session/list of a fresh agent (one sample)", ms(first)),
        Row(f"  SessionStore.list() directly, all {count:,} (median)", ms(median(direct))),
    ]


async def bench_list_paging(config: Config) -> list[Row]:
    """session/list's page 1 and page 200 over 10,000 sessions (issue 29: each page cost as much as re-listing
    everything up to it): the cursor names the last session listed, so a page should cost the same anywhere."""
    from codling.acp.server import LIST_PAGE_SIZE
    from tests.fakes.acp_client import connected

    count, runs = PAGED_SESSIONS, config.list_runs
    last = count // LIST_PAGE_SIZE
    progress(f"session/list paging: writing {count:,} sessions, then pages 1 and {last}, {runs} times each")
    with tempfile.TemporaryDirectory(prefix="codling-bench-") as tmp:
        home, project = Path(tmp) / "home", Path(tmp) / "project"
        for directory in (home, project):
            directory.mkdir()
        await write_many_sessions(home, [project], count)
        async with connected(inproc_agent(ok_model(), home), RecordingClient()) as conn:
            await rpc(conn.initialize(protocol_version=PROTOCOL_VERSION), "initialize")
            page = await rpc(conn.list_sessions(), "session/list")  # also loads settings and the catalog
            seen = len(page.sessions)
            for _ in range(last - 2):  # to the cursor of the last page
                page = await rpc(conn.list_sessions(cursor=page.next_cursor), "session/list")
                seen += len(page.sessions)
            before_last = page.next_cursor
            firsts: list[float] = []
            lasts: list[float] = []
            for _ in range(runs):
                start = time.perf_counter()
                await rpc(conn.list_sessions(), "session/list")
                firsts.append(time.perf_counter() - start)
                start = time.perf_counter()
                page = await rpc(conn.list_sessions(cursor=before_last), "session/list")
                lasts.append(time.perf_counter() - start)
            if seen + len(page.sessions) != count or page.next_cursor is not None:
                raise RuntimeError(f"paging listed {seen + len(page.sessions):,} of {count:,} sessions")
    first, at_end = median(firsts), median(lasts)
    return [
        Row(f"session/list over {count:,} sessions, page 1 (median)", ms(first)),
        Row(f"  page {last} (median)", ms(at_end), "≤ 2 × page 1", at_end <= 2 * first),
    ]


def check_page(page: Any, size: int, total: int, cwd: Path | None = None) -> None:
    """Fail unless a first page is full (or holds everything), titled, in ``cwd`` and says whether there is more."""
    expected = min(size, total)
    if len(page.sessions) != expected or (page.next_cursor is None) != (total <= size):
        raise RuntimeError(f"session/list gave {len(page.sessions)} sessions (cursor {page.next_cursor!r})")
    if any(not s.title or (cwd is not None and s.cwd != str(cwd)) for s in page.sessions):
        raise RuntimeError("session/list gave an untitled session or one from another directory")


def time_appends(path: Path, count: int) -> list[float]:
    """Seconds per HistoryFile.append of a ~300-character message record (after 100 not counted)."""
    from codling.secrecy import Redactor
    from codling.store.history import HistoryFile

    # codling redacts every record; a user typically has one API key in the environment.
    redact = Redactor.from_env({"OPENAI_API_KEY": "sk-bench-0123456789abcdef"})
    file = HistoryFile(path, "20261122-0123456789ab", redact)
    payload = {"kind": "message", "text": prose(0, 300)}
    samples: list[float] = []
    try:
        for i in range(100 + count):
            start = time.perf_counter()
            file.append(payload, "turn-00042")
            if i >= 100:
                samples.append(time.perf_counter() - start)
    finally:
        file.close()
    if path.read_bytes().count(b"\n") != 100 + count:
        raise RuntimeError("not every appended record reached the file")
    return samples


async def recorder_rate(path: Path, turns: int) -> tuple[float, float]:
    """Records and events per second a HistoryRecorder writes while consuming realistic turns."""
    from codling.store.history import HistoryFile, HistoryRecorder

    project = path.parent
    events = [event for n in range(turns) for event in turn_events(n, project)]
    file = HistoryFile(path, "20261122-0123456789ab")
    recorder = HistoryRecorder(file, title="bench")  # titled already: no settings records in the way
    try:
        start = time.perf_counter()
        for event in events:
            await recorder(event)
        elapsed = time.perf_counter() - start
    finally:
        file.close()
    records = path.read_bytes().count(b"\n")
    if records != turns * RECORDS_PER_TURN:
        raise RuntimeError(f"the recorder wrote {records:,} records, expected {turns * RECORDS_PER_TURN:,}")
    return records / elapsed, len(events) / elapsed


async def bench_append(config: Config) -> list[Row]:
    """HistoryFile.append latency, and HistoryRecorder throughput on realistic turns."""
    progress(f"history append: {config.appends:,} appends, then {config.recorder_turns} recorded turns")
    with tempfile.TemporaryDirectory(prefix="codling-bench-") as tmp:
        samples = time_appends(Path(tmp) / "append.jsonl", config.appends)
        records, events = await recorder_rate(Path(tmp) / "recorder.jsonl", config.recorder_turns)
    typical = median(samples)
    per_turn = len(turn_events(0, Path(".")))
    return [
        Row(
            f"append one ~300-char message record, {len(samples):,} appends (median)",
            f"{typical * 1000:.3f} ms",
            "≤ 0.2 ms",
            typical <= 0.0002,
        ),
        Row("  p99", f"{percentile(samples, 0.99) * 1000:.3f} ms"),
        Row(
            f"HistoryRecorder, {config.recorder_turns} turns ({per_turn} events → {RECORDS_PER_TURN} records each)",
            f"{records:,.0f} records/s",
        ),
        Row("  events consumed", f"{events:,.0f} events/s"),
    ]


# --- 6: context accounting and compaction ------------------------------------------------------------------


ACCOUNTING_HISTORIES = (15_000, 150_000)
"""History sizes (tokens) at which the per-turn accounting is timed; the cost must not grow between them."""
ACCOUNTING_LIMIT = 400_000
"""The context limit of the accounting sessions' model (large enough that 150k tokens need no compaction)."""
COMPACTION_HISTORY = 200_000
COMPACTION_LIMIT = 200_000
COMPACTION_MAX_OUTPUT = 32_000

_IDENTIFIERS = (
    "parse_config",
    "load_settings",
    "history_entry",
    "token_budget",
    "render_table",
    "session_id",
    "read_lines",
    "apply_patch",
    "retry_after",
    "user_prompt",
    "WorkspaceError",
    "resolve_path",
    "max_retries",
    "cache_dir",
    "encode_batch",
    "TimeoutError",
    "flush_buffer",
    "schema_version",
)


def code(seed: int, lines: int) -> str:
    """Python-looking code with varied identifiers, numbers and strings (about 12 tokens a line)."""
    out: list[str] = []
    for i in range(lines):
        a = _IDENTIFIERS[(seed + i) % len(_IDENTIFIERS)]
        b = _IDENTIFIERS[(seed * 3 + i * 5) % len(_IDENTIFIERS)]
        match i % 6:
            case 0:
                out.append(f"def {a}_{(seed + i) % 97}({b}: dict[str, int], limit: int = {(seed * 7 + i) % 1000}):")
            case 1:
                out.append(f'    """Return the {b} entries of {a} that fit within ``limit``."""')
            case 2:
                out.append(f"    found = [k for k, v in {b}.items() if v <= limit and k.startswith('{a[:4]}')]")
            case 3:
                out.append(f"    if not found:  # see issue #{(seed * 13 + i) % 5000}")
            case 4:
                out.append(f'        raise ValueError(f"no {a} under {{limit}} in {{{b}!r}}")')
            case _:
                out.append(f"    return sorted(found, key={b}.get)\n")
    return "\n".join(out)


def log_output(seed: int, lines: int) -> str:
    """Test-run / traceback output as a user pastes it (paths, line numbers, assertion messages)."""
    out: list[str] = []
    for i in range(lines):
        a = _IDENTIFIERS[(seed + 2 * i) % len(_IDENTIFIERS)]
        b = _IDENTIFIERS[(seed + 5 * i) % len(_IDENTIFIERS)]
        match i % 4:
            case 0:
                out.append(f"src/codling/{a}.py:{(seed * 31 + i) % 900 + 10}: in {b}")
            case 1:
                out.append(f"    result = {b}({a}, timeout={(seed + i) % 60}.0)")
            case 2:
                out.append(f"E   AssertionError: expected {(seed * 17 + i) % 10_000} entries, got {(seed + i) % 9_999}")
            case _:
                seconds = 0.01 * (i % 300)
                out.append(f"FAILED tests/unit/test_{a}.py::test_{b}_{i % 40} - AssertionError ({seconds:.2f}s)")
    return "\n".join(out)


def turn_log(n: int, project: Path) -> Any:
    """A realistic finished turn (about 1,500 tokens of history text): a prompt (every fourth with a pasted
    log), reply prose, three tool calls (read, edit, command) and a code block with more prose."""
    from codling.brain.events import TextDelta
    from codling.brain.turns import TurnLog

    turn = f"turn-{n:05}"
    request = prose(n, 250 + 150 * (n % 3))
    if n % 4 == 0:
        request += "\n\nThe test run says:\n```\n" + log_output(n, 12) + "\n```"
    log_ = TurnLog(n + 1, request)
    log_.apply(TextDelta(turn, prose(n + 1, 1_000) + "\n\n"))
    for k in range(3):
        for event in tool_events(3 * n + k, turn, project):
            log_.apply(event)
    block = f"Here is the change:\n\n```python\n{code(n, 36)}\n```\n\n{prose(n + 2, 1_200)}"
    log_.apply(TextDelta(turn, block))
    return log_


async def history_session(root: Path, tokens: int) -> Any:
    """A ConversationSession on the scripted model after one real turn (so its system prompt is counted), its
    history then filled through ``record_turn`` with realistic turns until it holds at least ``tokens``."""
    from codling.brain.factory import open_session
    from codling.brain.restore import record_turn
    from codling.brain.state import HistoryEntry
    from codling.config import Settings
    from codling.llm.catalog import ModelInfo

    home, project = root / "home", root / "project"
    home.mkdir(parents=True)
    project.mkdir()
    settings = Settings(home=home, env={"CODLING_HOME": str(home)})
    model = ModelInfo(STORE_MODEL, context_limit=ACCOUNTING_LIMIT, max_output_tokens=COMPACTION_MAX_OUTPUT)
    factory = ok_model().factory()
    session = open_session(settings, model, project, approver=None, mode="yolo", model_factory=factory)
    if (await session.run("hi")).text != "ok":
        raise RuntimeError("the warm-up turn did not answer ok")
    n = 0
    while session.state.history_tokens < tokens:
        record_turn(session.state, turn_log(n, project), None)
        n += 1
    if (
        sum(HistoryEntry.of(e.role, e.text, e.context).tokens for e in session.state.entries)
        != session.state.history_tokens
    ):
        raise RuntimeError("the running token total differs from a recount of the history")
    return session


@dataclass
class AccountingTimes:
    """Seconds per turn of accounting, per history size; and the tokens each sample added."""

    samples: dict[int, list[float]] = field(default_factory=dict)
    added: list[int] = field(default_factory=list)


def time_accounting(sessions: dict[int, Any], logs: Sequence[Any], runs: int) -> AccountingTimes:
    """``record_turn`` (two HistoryEntry.of: count, append) plus ``context_used()``, per sample; the sessions
    alternate (so both see the same machine load) and each is rolled back after every sample (not timed)."""
    from codling.brain.restore import record_turn
    from codling.brain.state import HistoryEntry

    def counted(log_: Any) -> int:
        return HistoryEntry.of("user", log_.user_text).tokens + HistoryEntry.of("assistant", log_.reply()).tokens

    expected = [counted(log_) for log_ in logs]
    times = AccountingTimes({size: [] for size in sessions})
    order = list(sessions.items())
    for i in range(runs):
        log_ = logs[i % len(logs)]
        for size, session in order if i % 2 == 0 else reversed(order):
            state = session.state
            kept, tokens, turns = list(state.entries), state.history_tokens, state.turn_count
            reported = state.reported_input_tokens
            start = time.perf_counter()
            record_turn(session.state, log_, None)
            used = session.context.context_used()
            times.samples[size].append(time.perf_counter() - start)
            added = state.history_tokens - tokens
            if added != expected[i % len(logs)] or used < state.history_tokens:
                raise RuntimeError(f"the turn added {added:,} tokens (expected {expected[i % len(logs)]:,})")
            times.added.append(added)
            state.replace_history(kept)  # back to the measured size
            state.turn_count, state.reported_input_tokens = turns, reported
    return times


def time_messages_copy(session: Any, runs: int, batch: int = 20) -> list[float]:
    """Seconds per ``state.messages()`` (the list copy each request makes), timed in batches."""
    samples: list[float] = []
    for _ in range(runs):
        start = time.perf_counter()
        for _ in range(batch):
            session.state.messages()
        samples.append((time.perf_counter() - start) / batch)
    return samples


def fine_ms(seconds: float) -> str:
    """Seconds as milliseconds with three decimals."""
    return f"{seconds * 1000:.3f} ms"


async def bench_accounting(config: Config) -> list[Row]:
    """Per-turn token accounting in a ConversationSession at two history sizes, and the per-request copy."""
    from codling.llm.tokens import warm_up

    runs = config.accounting_runs
    sizes = ", ".join(f"{s:,}" for s in ACCOUNTING_HISTORIES)
    progress(f"token accounting: histories of {sizes} tokens, {runs} turns at each")
    warm_up()  # the tokenizer's first-use load is not what a turn costs
    with tempfile.TemporaryDirectory(prefix="codling-bench-") as tmp:
        sessions = {s: await history_session(Path(tmp) / f"s{s}", s) for s in ACCOUNTING_HISTORIES}
        logs = [turn_log(10_000 + k, Path(tmp)) for k in range(20)]  # new turns, not in either history
        time_accounting(sessions, logs[:5], 20)  # warm-up, not counted
        times = time_accounting(sessions, logs, runs)
        big = sessions[ACCOUNTING_HISTORIES[-1]]
        copies = time_messages_copy(big, runs)
    small_size, big_size = ACCOUNTING_HISTORIES[0], ACCOUNTING_HISTORIES[-1]
    small, large = median(times.samples[small_size]), median(times.samples[big_size])
    growth = large / small
    state = big.state
    added = median(times.added)
    return [
        Row(
            f"token accounting per turn, {state.history_tokens:,}-token history (median)",
            fine_ms(large),
            "≤ 5 ms",
            large <= 0.005,
        ),
        Row("  p95", fine_ms(p95(times.samples[big_size]))),
        Row(
            f"  same, {sessions[small_size].state.history_tokens:,}-token history (median)",
            fine_ms(small),
        ),
        Row("  growth with the history (150k median / 15k median)", f"{growth:.2f}×", "≤ 1.25× (flat)", growth <= 1.25),
        Row("  new text counted per turn (median)", f"{added:,.0f} tokens in 2 entries"),
        Row(
            f"  state.messages() copy per request, {len(state.entries)} messages (median)",
            f"{median(copies) * 1e6:.1f} µs",
        ),
    ]


def long_history(tokens: int, project: Path) -> list[Any]:
    """About ``tokens`` tokens of history: an earlier summary, then realistic turns; every tenth prompt carries a
    pasted log and every eighth reply a whole module (2k–10k tokens each: the per-message cap applies)."""
    from codling.brain.state import SUMMARY_PREFIX, HistoryEntry

    entries = [HistoryEntry.of("summary", SUMMARY_PREFIX + "## Goal\n" + prose(1, 3_000))]
    total, n = entries[0].tokens, 0
    while total < tokens:
        log_ = turn_log(n, project)
        request, reply = log_.user_text, log_.reply()
        if n % 10 == 4:
            request += "\n\nFull output:\n```\n" + log_output(n, 120 + 37 * n % 480) + "\n```"
        if n % 8 == 3:
            reply += "\n\nThe whole module now reads:\n```python\n" + code(n, 150 + 53 * n % 450) + "\n```"
        for entry in (HistoryEntry.of("user", request), HistoryEntry.of("assistant", reply)):
            entries.append(entry)
            total += entry.tokens
        n += 1
    return entries


def timed(work: Callable[[], T], runs: int) -> tuple[list[float], T]:
    """Seconds per call of ``work`` over ``runs`` calls after one not counted, and the last result."""
    result = work()
    samples: list[float] = []
    for _ in range(runs):
        start = time.perf_counter()
        result = work()
        samples.append(time.perf_counter() - start)
    return samples, result


BIG_TEXT_SIZES = (250_000, 1_000_000, 10_000_000)
"""Characters of text without whitespace counted and capped by ``bench_big_text`` (issue 29 D1)."""


async def bench_big_text(config: Config) -> list[Row]:
    """CPU time to count a text without whitespace as a request carries it and to cap it as a tool result,
    at 0.25, 1 and 10 MB: bounded (estimated past ``EXACT_MAX_CHARS``, cut by prefix), never superlinear."""
    from codling.llm.tokens import count_wire_tokens, warm_up
    from codling.tools.toolset import capped

    progress("big text: counting and capping 0.25 / 1 / 10 MB without whitespace")
    warm_up()
    rows = [Row("big text without whitespace (CPU time, one run)", "")]
    times = []
    for size in BIG_TEXT_SIZES:
        text = "x" * size
        start = time.process_time()
        count_wire_tokens(text)
        capped(text, 25_000)
        times.append(time.process_time() - start)
        rows.append(Row(f"count + cap {size / 1e6:g} MB", ms(times[-1])))
    linear = times[-1] <= 40 * times[0] + 0.05  # 40x the size: linear or better
    rows.append(Row("10 MB vs 0.25 MB", f"{times[-1] / max(times[0], 1e-9):.1f}x", "≤ 40x (linear)", linear))
    return rows


async def bench_compaction(config: Config) -> list[Row]:
    """The non-model work of a compaction on a 200k-token history: the summarizer's input, the fallback
    summary and the rebuilt history."""
    from codling.brain.context import compaction
    from codling.brain.context.budget import Budget
    from codling.brain.context.fallback import FallbackInput, fallback_summary
    from codling.llm.tokens import count_tokens, warm_up

    runs = config.compaction_runs
    progress(f"compaction: a {COMPACTION_HISTORY:,}-token history, {runs} runs of each step")
    warm_up()
    project = Path("/work/project")
    entries = long_history(COMPACTION_HISTORY, project)
    total = sum(e.tokens for e in entries)
    capped = sum(1 for e in entries if e.tokens > compaction.MESSAGE_CAP_TOKENS)
    budget = compaction.input_budget(COMPACTION_LIMIT, COMPACTION_MAX_OUTPUT)
    inputs, transcript = timed(lambda: compaction.compaction_input(entries, budget), runs)
    used = count_tokens(transcript)
    left_out = re.match(r"\[(\d+) older messages were left out", transcript)
    dropped = int(left_out.group(1)) if left_out else 0
    files = [project / f"src/module_{i}.py" for i in range(10)]
    source = FallbackInput(
        turns_older=[f"Turn {i}: step {i} of the port — changed src/module_{i % 10}.py — Done." for i in range(300)],
        recent_files=files,
        first_request=entries[0].text,
        last_request=entries[-2].text,
        last_reply=entries[-1].text,
        cwd=project,
    )
    fallback_budget = Budget(COMPACTION_LIMIT, COMPACTION_MAX_OUTPUT, 0.7).fallback
    fallbacks, summary = timed(lambda: fallback_summary(source, fallback_budget), runs)
    user_budget = Budget(COMPACTION_LIMIT, COMPACTION_MAX_OUTPUT, 0.7).kept_user

    def rebuild() -> list[Any]:  # as the compactor does it: the user messages kept, then the summary
        kept = compaction.kept_user_messages(entries, user_budget)
        return compaction.rebuilt_history([e.text for e in kept], summary)

    rebuilds, rebuilt = timed(rebuild, runs)
    took = median(inputs)
    return [
        Row(
            f"compaction input, {total:,}-token history, {len(entries)} messages (median)",
            ms(took),
            "≤ 100 ms",
            took <= 0.1,
        ),
        Row(
            f"  transcript tokens, budget input_budget({COMPACTION_LIMIT:,}, {COMPACTION_MAX_OUTPUT:,})",
            f"{used:,} of {budget:,}",
            "≤ budget",
            used <= budget,
        ),
        Row(
            f"  messages over the {compaction.MESSAGE_CAP_TOKENS:,}-token cap / kept / left out",
            f"{capped} / {len(entries) - dropped} / {dropped}",
        ),
        Row(
            f"  fallback_summary, 300 turns, {count_tokens(summary):,} of {fallback_budget:,} tokens (median)",
            fine_ms(median(fallbacks)),
            f"≤ {fallback_budget:,} tokens",
            count_tokens(summary) <= fallback_budget,
        ),
        Row(
            f"  rebuild, {user_budget:,}-token user budget, {len(rebuilt)} entries kept (median)",
            fine_ms(median(rebuilds)),
        ),
    ]


# --- 8: context fidelity --------------------------------------------------------------------------------------


async def bench_fidelity(config: Config) -> list[Row]:
    """The scripted coding session of tests/fakes/fidelity.py on 8,000- and 16,000-token models, with a working
    and a failing summarizer, live and restarted before every turn: requests over the window's budget,
    rejected requests, compactions, the median request after one, facts and pins kept, and whether the
    restarted run sent the live run's requests."""
    from tests.fakes.fidelity import run_session

    turns = config.fidelity_turns
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "run"  # the same path for both runs: paths are part of every request
        for window in (8_000, 16_000):
            for works in (True, False):
                progress(f"fidelity: {turns} turns, {window:,}-token window, {'working' if works else 'failing'}")
                live = await run_session(window, works, restarts=False, turn_count=turns, root=root)
                again = await run_session(window, works, restarts=True, turn_count=turns, root=root)
                same = sum(a == b for a, b in zip(live.turn_bodies, again.turn_bodies, strict=False))
                identical = same == len(live.turn_bodies) == len(again.turn_bodies)
                facts_target = 0.95 if works else 0.80
                name = f"{window // 1000}k, {live.summarizer} summarizer, {turns} turns"
                rows += [
                    Row(
                        f"{name}: requests over window − max output", str(live.over_budget), "0", live.over_budget == 0
                    ),
                    Row("  rejected requests (over the window)", str(live.rejected), "≤ 1", live.rejected <= 1),
                    Row(
                        "  compactions / median request after one",
                        f"{live.compactions} / {live.median_after_compaction:,} tokens",
                    ),
                    Row(
                        "  facts kept in every later request",
                        f"{live.facts_kept:.0%}",
                        f"≥ {facts_target:.0%}",
                        live.facts_kept >= facts_target,
                    ),
                    Row(
                        "  pinned constraints kept", f"{live.constraints_kept:.0%}", "100%", live.constraints_kept == 1
                    ),
                    Row(
                        "  restarted before every turn: same requests",
                        f"{same} of {len(live.turn_bodies)}",
                        "all",
                        identical,
                    ),
                ]
    return rows


# --- 9b: what the model reads ------------------------------------------------------------------------------


async def bench_model_reads(config: Config) -> list[Row]:
    """The requests the scripted coding session of tests/fakes/fidelity.py sends (8k, 16k and 128k windows,
    working and failing summarizer) as the model reads them: the share of input tokens an automatic prefix cache
    serves, the input tokens in all, control characters, lines said twice in one request, fresh tool results
    squashed while the request had room, and where compaction leaves the next request."""
    from codling.brain.context.budget import Budget
    from codling.llm.catalog import ModelInfo
    from tests.fakes.fidelity import MAX_OUTPUT, run_session
    from tests.fakes.model_reads import read_metrics

    turns = config.fidelity_turns
    rows: list[Row] = [Row(f"what the model reads ({turns}-turn scripted session)", "")]
    for window in (8_000, 16_000, 128_000):
        budget = Budget.of(ModelInfo("m", context_limit=window, max_output_tokens=MAX_OUTPUT), 0.7)
        for works in (True, False):
            if window == 128_000 and not works:
                continue  # no compaction at 128k in 30 turns: the summarizer is never asked
            progress(f"model reads: {window:,}-token window, {'working' if works else 'failing'} summarizer")
            live = await run_session(window, works, restarts=False, turn_count=turns)
            seen = read_metrics(live.bodies, budget.input_limit, budget.tool_output)
            name = f"{window // 1000}k, {live.summarizer} summarizer"
            cache_target = 0.93 if window >= 128_000 else 0.85
            rows += [
                Row(
                    f"{name}: prefix cache serves",
                    f"{seen.cache_share:.1%} of {seen.input_tokens:,} tokens",
                    f"≥ {cache_target:.0%}",
                    seen.cache_share >= cache_target,
                ),
                Row(
                    "  of what a cache could serve (all but fresh tool results)",
                    f"{seen.cache_share_of_servable:.1%} ({seen.fresh_tokens / seen.input_tokens:.0%} were fresh)",
                ),
                Row(
                    "  control characters in requests", str(seen.control_characters), "0", seen.control_characters == 0
                ),
                Row(
                    "  lines said twice in one request",
                    f"{seen.repeated_share:.2%}",
                    "≤ 1%",
                    seen.repeated_share <= 0.01,
                ),
                Row("  fresh results squashed while they fit", str(seen.fresh_squashed), "0", seen.fresh_squashed == 0),
            ]
            if live.compacted_to:
                after = int(statistics.median(live.compacted_to))
                half = budget.input_limit // 2
                rows.append(
                    Row(
                        f"  what a compaction leaves (median of {len(live.compacted_to)}; the turn's prompt aside)",
                        f"{after:,} of {budget.input_limit:,}",
                        f"≤ {half:,}",
                        after <= half,
                    )
                )
    return rows


# --- 10: pins ---------------------------------------------------------------------------------------------

PINS_CORPUS = REPO / "tests" / "unit" / "data" / "pins_corpus.jsonl"


async def bench_pins(config: Config) -> list[Row]:
    """Precision and recall of capture_pins and capture_facts on the labelled corpus (the same in --quick)."""
    from codling.brain.context.pin_score import label_counts, load_corpus, score_pins

    corpus = load_corpus(PINS_CORPUS)
    progress(f"pins: {sum(label_counts(corpus).values())} labelled sentences in {len(corpus)} prompts")
    score = score_pins(corpus)
    counts = ", ".join(f"{n} {label}" for label, n in label_counts(corpus).items())
    return [
        Row("pins: precision / recall on the labelled corpus", ""),
        Row(
            f"  precision ({score.correct} right of {score.pins_made} pins made)",
            f"{score.precision:.1%}",
            "≥ 95%",
            score.precision >= 0.95,
        ),
        Row(
            f"  recall ({score.recalled} of {score.expected} rules and facts)",
            f"{score.recall:.1%}",
            "≥ 90%",
            score.recall >= 0.90,
        ),
        Row("  corpus", counts),
    ]


# --- 11: facts over 100 turns ------------------------------------------------------------------------------


async def bench_facts(config: Config) -> list[Row]:
    """The planted-facts session of tests/fakes/facts_session.py: the share of facts the asking turn's first
    request still holds, and which were lost, per window and summarizer (issue 28)."""
    from tests.fakes.facts_session import Mode, ask_gap, run_facts_session

    turns = 40 if config.quick else 100
    modes: tuple[Mode, ...] = ("working", "failing") if config.quick else ("working", "failing", "empty", "garbage")
    runs = [(window, mode, turns) for window in (8_000, 16_000) for mode in modes]
    if not config.quick:
        runs += [(32_000, "failing", turns), (128_000, "working", turns), (8_000, "hanging", 40)]
    gap = ask_gap(turns)
    asked = "60+" if gap >= 60 else str(gap)
    rows = [Row(f"facts over {turns} turns (planted in prompts, tool results, replies; asked {asked} turns later)", "")]
    for window, mode, count in runs:
        progress(f"facts: {count} turns, {window:,}-token window, {mode} summarizer")
        r = await run_facts_session(window, mode, count)
        target = 1.0 if mode == "working" else 0.90
        lost = ", ".join(r.lost) or "none"
        rows += [
            Row(
                f"  {window // 1000}k, {mode} summarizer"
                + (f" ({count} turns, asked {ask_gap(count)} later)" if count != turns else "")
                + ": facts kept",
                f"{len(r.kept)} of {r.facts} ({r.share:.0%})",
                "100%" if target == 1 else f"≥ {target:.0%}",
                r.share >= target,
            ),
            Row(
                f"    lost ({r.compactions} compactions, {r.fallbacks} fallbacks, {r.rejected} rejected)",
                lost if len(lost) <= 60 else lost[:59] + "…",
            ),
        ]
        if mode == "working" and window in (16_000, 128_000):
            cached, total = r.cache()
            cache_target = 0.93 if window >= 128_000 else 0.85
            rows.append(
                Row(
                    "    prefix cache serves",
                    f"{cached / total:.1%} of {total:,} tokens",
                    f"≥ {cache_target:.0%}",
                    cached >= cache_target * total,
                )
            )
    return rows


# --- 12: hostile repositories ------------------------------------------------------------------------------

LISTING_PROBE = r"""
import asyncio, json, resource, shutil, sys, time
from pathlib import Path
from codling.tools.listing import collect_files
from codling.tools.workspace import Workspace

async def main() -> None:
    root, use_git = Path(sys.argv[1]), sys.argv[2] == "git"
    max_files, cancel_after = int(sys.argv[3]), float(sys.argv[4])
    lag = 0.0
    async def ticker() -> None:
        nonlocal lag
        while True:
            before = time.perf_counter()
            await asyncio.sleep(0.005)
            lag = max(lag, time.perf_counter() - before - 0.005)
    tick = asyncio.create_task(ticker())
    started = time.perf_counter()
    work = asyncio.create_task(collect_files(root, Workspace(root), git=shutil.which("git") if use_git else None,
                                             max_files=max_files))
    result = {}
    if cancel_after > 0:
        await asyncio.sleep(cancel_after)
        cancelled = time.perf_counter()
        work.cancel()
        await asyncio.gather(work, return_exceptions=True)
        result["cancel_s"] = time.perf_counter() - cancelled
    else:
        listing = await work
        result.update(files=len(listing.files), complete=listing.complete, timed_out=listing.timed_out)
    result["seconds"] = time.perf_counter() - started
    tick.cancel()
    result["lag_ms"] = lag * 1000
    result["rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(result))

asyncio.run(main())
"""


def untracked_tree(root: Path, files: int) -> None:
    """A git work tree with ``files`` untracked files, 1,000 to a directory."""
    subprocess.run(["git", "init", "-q", str(root)], check=True, timeout=60)
    for d in range(0, files, 1000):
        directory = root / f"d{d // 1000:04d}"
        directory.mkdir()
        for f in range(min(1000, files - d)):
            os.close(os.open(directory / f"f{f:03d}.txt", os.O_CREAT | os.O_WRONLY, 0o644))


def probe_listing(root: Path, *, git: bool, max_files: int = 1000, cancel_after: float = 0) -> dict[str, Any]:
    """One listing in a fresh interpreter (its peak memory is the listing's), with the loop's worst stall."""
    out = subprocess.run(
        [sys.executable, "-c", LISTING_PROBE, str(root), "git" if git else "walk", str(max_files), str(cancel_after)],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
        env={**os.environ, "PYTHONPATH": str(REPO / "src")},
    )
    return json.loads(out.stdout)


async def bench_hostile_repos(config: Config) -> list[Row]:
    """list_files where it used to stall the agent (issue 29 D2, D7): a git tree with very many untracked files,
    a 4,000-rule wildcard .gitignore, and one whose rules all need the general matcher (cancelled)."""
    rows = [Row("hostile repositories (list_files, first 1,000 files; a fresh process each)", "")]
    sizes = (100_000,) if config.quick else (100_000, 1_000_000)
    for size in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            progress(f"hostile repositories: creating {size:,} untracked files")
            untracked_tree(Path(tmp), size)
            progress(f"hostile repositories: listing {size:,} untracked files")
            r = probe_listing(Path(tmp), git=True)
            rows += [
                Row(f"  git, {size:,} untracked files: time", f"{r['seconds']:.2f} s", "< 5 s", r["seconds"] < 5),
                Row("    peak memory of the process", f"{r['rss_mb']:.0f} MB", "< 150 MB", r["rss_mb"] < 150),
                Row("    longest event-loop stall", f"{r['lag_ms']:.0f} ms", "< 100 ms", r["lag_ms"] < 100),
            ]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        rules = "".join(f"*foo{i}*bar*\n**/dir{i}/*.tmp\n[a-c]{i}?*\n" for i in range(1334))
        (root / ".gitignore").write_text(rules)
        for d in range(10):
            (root / f"src{d}").mkdir()
            for f in range(1000):
                (root / f"src{d}" / f"file_{f}_bar.py").write_text("")
        progress("hostile repositories: 4,000 wildcard rules over 10,000 files")
        r = probe_listing(root, git=False, max_files=100_000)
        rows += [
            Row(
                "  4,000 wildcard rules, 10,000 files (walk): time", f"{r['seconds']:.2f} s", "< 5 s", r["seconds"] < 5
            ),
            Row("    longest event-loop stall", f"{r['lag_ms']:.0f} ms", "< 100 ms", r["lag_ms"] < 100),
        ]
        (root / ".gitignore").write_text("".join(f"**/file*[0-9]*[!{chr(0x4E00 + i)}]\n" for i in range(4000)))
        progress("hostile repositories: 4,000 rules the index cannot skip, cancelled after 1 s")
        r = probe_listing(root, git=False, max_files=100_000, cancel_after=1.0)
        rows += [
            Row(
                "  4,000 rules the index cannot skip: cancel → walk stopped",
                f"{r['cancel_s'] * 1000:.0f} ms",
                "< 100 ms",
                r["cancel_s"] < 0.1,
            ),
            Row("    longest event-loop stall", f"{r['lag_ms']:.0f} ms", "< 100 ms", r["lag_ms"] < 100),
        ]
    return rows


# --- 13: prompt caching on Anthropic ---------------------------------------------------------------------


async def bench_anthropic_cache(config: Config) -> list[Row]:
    """Scripted sessions on the real AnthropicModel against the Anthropic fake, which bills them under Anthropic's
    cache rules: a session of reads (30 and 100 turns) and the context-fidelity session (30 turns, large tool
    output), each in a 16k window (compacting) and a 200k one, with caching on (5m, 1h) against off; and codling's
    reported cost against the fake's bill (issue 30 item 5)."""
    from tests.fakes.anthropic_session import model, run_session

    turns = [12] if config.quick else [30, 100]
    runs = [("reads", n, w) for n in turns for w in (16_000, 200_000)]
    runs += [("fidelity", 12 if config.quick else 30, w) for w in (16_000, 200_000)]
    rows: list[Row] = []
    for script, turn_count, window in runs:
        label = f"{script} session, {turn_count} turns, {window // 1000}k window"
        progress(f"anthropic cache: {label}, cache off")
        off = await run_session(turn_count, "off", window, script)
        rows.append(
            Row(f"prompt caching on Anthropic ({label}: {len(off.bill)} requests, {off.compactions} compactions)", "")
        )
        share_target = 0.8 if window < 100_000 else 0.85
        for ttl in ("5m", "1h"):
            progress(f"anthropic cache: {label}, cache {ttl}")
            on = await run_session(turn_count, "5m" if ttl == "5m" else "1h", window, script)
            ratio = on.billed_input / off.billed_input
            billed = on.priced(model(window))
            gap = abs(on.cost - billed) / billed
            rows += [
                Row(
                    f"  {ttl}: input served from cache",
                    f"{on.cache_share:.1%} of {on.input_tokens:,}",
                    f"≥ {share_target:.0%}",
                    on.cache_share >= share_target,
                ),
                Row(f"  {ttl}: repeated input the cache missed", f"{on.missed_share:.2%}"),
                Row(f"  {ttl}: billed input vs cache off", f"{ratio:.2f}×", "≤ 0.3×", ratio <= 0.3),
                Row(
                    f"  {ttl}: codling's cost vs the bill",
                    f"${on.cost:.4f} vs ${billed:.4f} ({gap:.2%} apart)",
                    "≤ 1%",
                    gap <= 0.01,
                ),
            ]
    return rows


# --- 14: checkpoints ---------------------------------------------------------------------------------------


CHECKPOINT_FILES = 10_000
CHECKPOINT_CHANGED = 5


async def bench_checkpoints(config: Config) -> list[Row]:
    """Checkpoint time and bytes per turn, and rewind time, on a 10,000-file git workspace."""
    import shutil

    from codling.tools.checkpoints.keeper import CheckpointKeeper

    turns = 5 if config.quick else 20
    git = shutil.which("git")
    progress(f"checkpoints: {CHECKPOINT_FILES:,} files, {turns} turns of {CHECKPOINT_CHANGED} changed files")
    with tempfile.TemporaryDirectory(prefix="codling-bench-") as tmp:
        root = Path(tmp) / "project"
        files = checkpoint_workspace(root, git)
        keeper = CheckpointKeeper(Path(tmp) / "checkpoints", root, git=git)
        started = time.perf_counter()
        first = await keeper.take()
        first_time = time.perf_counter() - started
        log = Path(tmp) / "checkpoints" / "log.jsonl"
        times: list[float] = []
        ratios: list[float] = []
        for turn in range(turns):
            changed = 0
            for k in range(CHECKPOINT_CHANGED):
                text = code(100_000 + turn * CHECKPOINT_CHANGED + k, 40)
                files[(turn * 997 + k * 1_931) % CHECKPOINT_FILES].write_text(text)
                changed += len(text.encode())
            logged = log.stat().st_size
            started = time.perf_counter()
            taken = await keeper.take()
            times.append(time.perf_counter() - started)
            ratios.append((taken.stored_bytes + log.stat().st_size - logged) / changed)
        for k in range(CHECKPOINT_CHANGED):
            files[k * 7].write_text(code(200_000 + k, 40))
        await keeper.close()  # as a session closes: the scanner's memory is saved for the next process
        restarted = CheckpointKeeper(Path(tmp) / "checkpoints", root, git=git)  # a new process, the same session
        started = time.perf_counter()
        await restarted.take()
        restart_time = time.perf_counter() - started
        started = time.perf_counter()
        rewound = await restarted.rewind(first.number + turns - 5)
        rewind_time = time.perf_counter() - started
    per_turn, ratio = median(times), max(ratios)
    return [
        Row(f"first checkpoint of {CHECKPOINT_FILES:,} files ({'git' if git else 'walk'} listing)", ms(first_time)),
        Row(
            f"checkpoint per turn, {CHECKPOINT_CHANGED} of {CHECKPOINT_FILES:,} files changed (median of {turns})",
            ms(per_turn),
            "≤ 50 ms",
            per_turn <= 0.05,
        ),
        Row("  worst", ms(max(times))),
        Row("  bytes stored per turn / bytes changed (worst turn)", f"{ratio:.2f}", "≤ 1.01", ratio <= 1.01),
        Row(f"first checkpoint after a restart, {CHECKPOINT_CHANGED} files changed", ms(restart_time)),
        Row(f"rewind 5 turns back ({len(rewound.changes)} files put back)", ms(rewind_time)),
        *(await bench_checkpointed_turns(config, git)),
    ]


def checkpoint_workspace(root: Path, git: str | None) -> list[Path]:
    """A workspace of ``CHECKPOINT_FILES`` Python files, a day old, committed to git when there is one."""
    files = [root / f"pkg{i // 100}" / f"module_{i}.py" for i in range(CHECKPOINT_FILES)]
    for i, path in enumerate(files):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(code(i, 40))
    day_ago = time.time_ns() - 86_400 * 10**9
    for path in files:
        os.utime(path, ns=(day_ago, day_ago))
    if git is not None:  # committed after: git's index holds the files' times, as in a repository in use
        commit = ["-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "b"]
        for args in (["init", "-q"], ["add", "-A"], commit):
            subprocess.run([git, "-C", str(root), *args], check=True, capture_output=True)
    return files


async def bench_checkpointed_turns(config: Config, git: str | None) -> list[Row]:
    """Whole turns (a command rewriting 5 files, then a reply) in a recorded session on the 10,000-file
    workspace, with checkpoints and without, side by side, and ``/undo`` of the last one."""
    from codling.config import Settings
    from codling.llm.catalog import ModelInfo
    from codling.store.header import SessionHeader
    from codling.store.ids import new_session_id
    from codling.store.index import SessionStore
    from codling.store.live import start_session
    from tests.fakes.scenarios import Call, Say, Script

    turns = 4 if config.quick else 12
    model = ModelInfo("test:bench", context_limit=200_000, max_output_tokens=4_000)
    medians: dict[bool, float] = {}
    undo_time = 0.0
    for on in (False, True):
        with tempfile.TemporaryDirectory(prefix="codling-bench-") as tmp:
            root, home = Path(tmp) / "project", Path(tmp) / "home"
            checkpoint_workspace(root, git)
            settings = Settings(home=home, env={"CODLING_HOME": str(home)}, checkpoints=on)
            store = SessionStore(home)
            header = SessionHeader(new_session_id(), root, model.id, "yolo")
            responses: list[list[object]] = []
            for turn in range(turns + 1):  # the first turn is the session's first checkpoint: not counted
                names = " ".join(f"pkg{k}/module_{k * 100 + turn}.py" for k in range(CHECKPOINT_CHANGED))
                command = f"for f in {names}; do echo '# turn {turn}' >> $f; done"
                responses += [[Call("run_command", {"command": command}, f"c{turn}")], [Say("done")]]
            script = Script(responses)  # type: ignore[arg-type]
            live = start_session(store, settings, model, header, approver=None, model_factory=script.factory())
            times: list[float] = []
            for turn in range(turns + 1):
                started = time.perf_counter()
                result = await live.brain.run(f"turn {turn}")
                times.append(time.perf_counter() - started)
                assert result.tool_calls and result.tool_calls[0].finished is not None
            medians[on] = median(times[1:])
            if on:
                started = time.perf_counter()
                undone = await live.brain.run("/undo")
                undo_time = time.perf_counter() - started
                assert "Rewound" in undone.text, undone.text
            await live.close()
    off = medians[False]
    ratio, cost = medians[True] / off, medians[True] - off
    return [
        Row(
            f"turn (a command changing {CHECKPOINT_CHANGED} files), no checkpoints (median of {turns})",
            ms(medians[False]),
        ),
        Row("  the same with checkpoints (before, before the command, after)", ms(medians[True])),
        Row("  cost of the turn's three checkpoints", ms(cost), "≤ 150 ms", cost <= 0.15),
        Row("  ratio", f"{ratio:.2f}×"),
        Row("/undo of the last turn (preview, rewind, conversation rebuilt)", ms(undo_time)),
    ]


# --- 15: sandbox -------------------------------------------------------------------------------------------


SANDBOX_TURNS: tuple[tuple[str, ...], ...] = (
    ("git status", "ls"),
    ("cat README.md",),
    ("cat src/calc.py",),
    ("pytest -q",),
    ("grep -rn 'def ' src", "cat src/calc.py | grep -c def"),
    ("python -c \"import sys; sys.path.insert(0, 'src'); import calc; print(calc.add(2, 3))\"",),
    ("git diff",),
    ("pytest -q tests/test_calc.py", "git diff --stat"),
    ("make test",),
    ("grep -rn TODO src tests | head -20",),
    ("cat tests/test_calc.py", "pytest -q tests/test_calc.py::test_add"),
    ("python -m pytest -q -x",),
    ("git log --oneline -5", "git status --short"),
    ("wc -l src/calc.py tests/test_calc.py",),
    ("make lint",),
    ("pytest -q -k add",),
    ("sed -i 's/# TODO: negative numbers/# negative numbers work/' src/calc.py",),
    ("head -20 src/calc.py",),
    ("find . -name '*.py' -not -path './.git/*'",),
    ("pytest -q 2>&1 | tail -5",),
    ("git add -A", "git add -A"),  # .git is read-only in the sandbox: blocked, then again outside it
    ("grep -rn import src tests",),
    ("{fetch}", "{fetch}"),  # the dev server on the host's loopback: blocked, then again with the network lifted
    ("make test", "git diff --cached --stat"),
    ("cat Makefile",),
    ("pytest -q", "git status"),
    ("sed -n 1,10p src/calc.py",),
    ("git diff --cached",),
    ("make check && echo ok",),
    ("pytest -q", "git status --short"),
)
"""The scripted session's commands, turn by turn (30 turns, 40 run_command calls)."""

SANDBOX_FILES = {
    "README.md": "# calc\n\nA tiny calculator. `make test` runs the tests.\n",
    "src/calc.py": (
        "def add(a, b):\n    # TODO: negative numbers\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n"
    ),
    "tests/test_calc.py": (
        "import sys\nfrom pathlib import Path\n\nsys.path.insert(0, str(Path(__file__).parent.parent / 'src'))\n\n"
        "import calc\n\n\ndef test_add():\n    assert calc.add(2, 3) == 5\n\n\n"
        "def test_mul():\n    assert calc.mul(2, 3) == 6\n"
    ),
    "pyproject.toml": '[tool.pytest.ini_options]\nasyncio_default_fixture_loop_scope = "function"\n',
    ".gitignore": "__pycache__/\n.pytest_cache/\n",
    "Makefile": (
        "test:\n\tpytest -q\n\nlint:\n\tpython -m compileall -q src tests\n\n"
        "check: lint test\n\n.PHONY: test lint check\n"
    ),
}


def sandbox_workspace(root: Path) -> None:
    """A small git project (a module, its tests, a Makefile), committed."""
    for name, text in SANDBOX_FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    commit = ["-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "start"]
    for args in (["init", "-q"], ["add", "-A"], commit):
        subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


@dataclass
class AlwaysUser(RecordingClient):
    """An editor's user who answers "always allow" when it covers a whole program (``pytest``, ``git status``)
    and "allow" (once) otherwise (an exact command line, a lifted sandbox); ``kinds`` counts the questions by
    what they were about: ``program``, ``exact`` (a command line with pipes or ``&&``) or ``lift``."""

    kinds: dict[str, int] = field(default_factory=dict)

    async def request_permission(self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any) -> Any:
        from acp.schema import AllowedOutcome, RequestPermissionResponse

        from tests.fakes.acp_client import PermissionCall

        self.permissions.append(PermissionCall(session_id, tool_call, options, len(self.updates)))
        if "network on" in (tool_call.title or "") or "outside the sandbox" in (tool_call.title or ""):
            kind = "lift"
        elif any(o.option_id == "allow_always" and "every `" in o.name for o in options):
            kind = "program"
        else:
            kind = "exact"
        self.kinds[kind] = self.kinds.get(kind, 0) + 1
        answer = "allow_always" if kind == "program" else "allow_once"
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=answer))


@contextmanager
def loopback_http() -> Iterator[str]:
    """A tiny HTTP server on the host's 127.0.0.1 (a developer's dev server); its URL."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def venv_on_path() -> Iterator[None]:
    """This interpreter's bin directory first on PATH (``python``, ``pytest`` and ``make test`` find the
    bench's venv), restored after."""
    old = os.environ.get("PATH", "")
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{old}"
    try:
        yield
    finally:
        os.environ["PATH"] = old


def sandbox_script(url: str) -> Any:
    """The scripted session: each turn's commands one request at a time, then a reply."""
    from tests.fakes.scenarios import Call, Say, Script

    fetch = f"python -c \"import urllib.request as u; print(u.urlopen('{url}', timeout=5).status)\""
    responses: list[list[Any]] = []
    n = 0
    for turn, commands in enumerate(SANDBOX_TURNS):
        fetched = False
        for command in commands:
            args: dict[str, Any] = {"command": command.replace("{fetch}", fetch)}
            if command in ("{fetch}", "git add -A"):
                if fetched:
                    lift = "network" if command == "{fetch}" else "all"
                    args |= {"lift_sandbox": lift, "reason": "the sandbox blocked it and the task needs it"}
                fetched = True
            responses.append([Call("run_command", args, f"c{n}")])
            n += 1
        responses.append([Say(f"turn {turn} done")])
    return Script(responses)  # type: ignore[arg-type]


def command_results(script: Any) -> dict[str, str]:
    """What each run_command call returned to the model, by call id (as the request right after it sent it)."""
    from pydantic_ai.messages import ModelRequest, ToolReturnPart

    results: dict[str, str] = {}
    for request in script.requests:
        for message in request:
            if isinstance(message, ModelRequest):
                for part in message.parts:
                    if isinstance(part, ToolReturnPart) and part.tool_name == "run_command":
                        results.setdefault(part.tool_call_id, str(part.content))
    return results


async def sandbox_session(mode: str, url: str) -> tuple[dict[str, int], dict[str, str], float]:
    """The scripted session in ``mode`` through an in-process agent: the questions asked (by kind, see
    ``AlwaysUser``), what each command returned, and the seconds it took."""
    from tests.fakes.acp_client import connected

    script = sandbox_script(url)
    client = AlwaysUser()
    with tempfile.TemporaryDirectory(prefix="codling-bench-") as tmp:
        home, project = Path(tmp) / "home", Path(tmp) / "project"
        home.mkdir()
        project.mkdir()
        sandbox_workspace(project)
        async with connected(inproc_agent(script, home), client) as conn:
            await rpc(conn.initialize(protocol_version=PROTOCOL_VERSION), "initialize")
            session = await rpc(conn.new_session(cwd=str(project)), "session/new")
            await rpc(conn.set_session_mode(session_id=session.session_id, mode_id=mode), "set_mode")
            started = time.perf_counter()
            for turn in range(len(SANDBOX_TURNS)):
                await prompt(conn, session.session_id, f"step {turn}")
            elapsed = time.perf_counter() - started
    return client.kinds, command_results(script), elapsed


async def bench_sandbox(config: Config) -> list[Row]:
    """Permission prompts of a scripted session in ask and in auto mode, and the sandbox's cost per command."""
    calls = sum(len(commands) for commands in SANDBOX_TURNS)
    asked: dict[str, int] = {}
    kinds: dict[str, dict[str, int]] = {}
    took: dict[str, float] = {}
    with venv_on_path(), loopback_http() as url:
        for mode in ("ask", "auto"):
            kinds[mode], results, took[mode] = await sandbox_session(mode, url)
            asked[mode] = sum(kinds[mode].values())
            ran = [r for r in results.values() if r.startswith(("exit code", "timed out"))]
            if len(ran) != calls:
                raise RuntimeError(f"{mode}: {len(ran)} of {calls} commands ran: {sorted(results.items())[:3]}")
            fetches = [results[f"c{n}"] for n in range(calls) if "urlopen" in sandbox_command(n)]
            if not (
                fetches[0].startswith("exit code 1")
                and fetches[1].startswith("exit code 0\n(ran with the network on, as the user allowed)\n200")
            ):
                raise RuntimeError(f"{mode}: the sandbox did not cut the network, or lifting it failed: {fetches}")
            failed = sum(not r.startswith("exit code 0") for r in ran)
            progress(f"{mode}: {asked[mode]} questions, {calls - failed} of {calls} commands exited 0")
    reduction = 1 - asked["auto"] / asked["ask"] if asked["ask"] else 0.0
    rows = [
        Row(f'permission prompts, {len(SANDBOX_TURNS)} turns, {calls} commands ("always" for whole programs)', ""),
        *(Row(f"  {mode} mode: questions", f"{asked[mode]} ({said(kinds[mode])})") for mode in ("ask", "auto")),
        Row(
            "  the session's time, ask / auto (scripted model, commands run)",
            f"{took['ask']:.1f} s / {took['auto']:.1f} s",
        ),
        Row("  auto: fewer prompts than ask", f"{reduction:.0%}", "≥ 80% fewer", reduction >= 0.8),
    ]
    return rows + await bench_sandbox_overhead(config)


def said(kinds: dict[str, int]) -> str:
    """What the questions were about, in words."""
    words = {"program": "a program", "exact": "an exact command line", "lift": "lifting the sandbox"}
    return ", ".join(f"{kinds[k]} {w}" for k, w in words.items() if kinds.get(k)) or "none"


def sandbox_command(n: int) -> str:
    """The ``n``-th command of ``SANDBOX_TURNS`` (``{fetch}`` as written there, not filled in)."""
    return [c for commands in SANDBOX_TURNS for c in commands][n].replace("{fetch}", "urlopen")


async def bench_sandbox_overhead(config: Config) -> list[Row]:
    """``true`` and ``git status`` through ``LocalTerminal.run``, unconfined and confined, interleaved; the
    reaper runs in both, so the difference is the confinement alone."""
    from codling.tools.local import LocalTerminal
    from codling.tools.sandbox.policy import build_sandbox

    runs = 15 if config.quick else 40
    terminal = LocalTerminal()
    if not terminal.reaper:
        raise RuntimeError("commands cannot run under the reaper here (Linux with /proc is needed)")
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="codling-bench-") as tmp:
        root = Path(tmp) / "project"
        root.mkdir()
        sandbox_workspace(root)
        policy = build_sandbox([root], home=Path.home(), codling_home=Path(tmp) / "home").policy()
        for command, n in (("true", runs), ("git status", max(runs // 2, 8))):
            times: dict[bool, list[float]] = {False: [], True: []}
            for i in range(n + 1):  # the first pair warms the caches: not counted
                for confined in (False, True) if i % 2 == 0 else (True, False):
                    started = time.perf_counter()
                    result = await terminal.run(
                        command, cwd=root, timeout=30, output_limit=10_000, sandbox=policy if confined else None
                    )
                    if i:
                        times[confined].append(time.perf_counter() - started)
                    if result.exit_code != 0:
                        raise RuntimeError(f"{command!r} (confined: {confined}) exited {result.exit_code}")
            off, on = median(times[False]), median(times[True])
            ratio = on / off
            rows += [
                Row(f"`{command}` through LocalTerminal.run, unconfined (reaper alone), median of {n}", ms(off)),
                Row("  p95", ms(p95(times[False]))),
                Row("  confined (namespaces, covers, read-only binds, Landlock)", ms(on)),
                Row("  p95", ms(p95(times[True]))),
                Row(
                    "  ratio of medians",
                    f"{ratio:.2f}×",
                    "≤ 1.2×" if command == "true" else "",
                    ratio <= 1.2 if command == "true" else None,
                ),
                Row("  cost per command", ms(on - off)),
            ]
    return rows


# --- driver ------------------------------------------------------------------------------------------------


Section = Callable[[], Awaitable[list[Row]]]


async def run_section(name: str, section: Section, env: Env | None = None) -> list[Row]:
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

    async def guarded(name: str, section: Section, env: Env | None = None) -> list[Row]:
        return await run_section(name, section, env) if config.runs(name) else []

    with running_server() as server, agent_env(server) as env:
        rows += await guarded("spawn → initialize", lambda: bench_initialize(config, env), env)
        rows += await guarded("spawn → session/new", lambda: bench_new_session(config, env), env)
        rows += await guarded("first answer", lambda: bench_first_answer(config, server, env), env)
        rows += await guarded("memory at rest", lambda: bench_memory(config, server, env), env)
        rows += await guarded("light commands", lambda: bench_light_commands(config, env), env)
        rows += await guarded("per-prompt overhead", lambda: bench_prompt_overhead(config))
        rows += await guarded("stream in-process", lambda: bench_stream_inproc(config))
        rows += await guarded("stream via process", lambda: bench_stream_process(config, server, env), env)
        rows += await guarded("first delta", lambda: bench_first_delta(config, server, env), env)
        rows += await guarded("session/load", lambda: bench_session_load(config))
        rows += await guarded("session/list", lambda: bench_session_list(config))
        rows += await guarded("session/list paging", lambda: bench_list_paging(config))
        rows += await guarded("history append", lambda: bench_append(config))
        rows += await guarded("token accounting", lambda: bench_accounting(config))
        rows += await guarded("big text", lambda: bench_big_text(config))
        rows += await guarded("compaction", lambda: bench_compaction(config))
        rows += await guarded("context fidelity", lambda: bench_fidelity(config))
        rows += await guarded("what the model reads", lambda: bench_model_reads(config))
        rows += await guarded("pins", lambda: bench_pins(config))
        rows += await guarded("facts over 100 turns", lambda: bench_facts(config))
        rows += await guarded("hostile repositories", lambda: bench_hostile_repos(config))
        rows += await guarded("anthropic prompt cache", lambda: bench_anthropic_cache(config))
        rows += await guarded("checkpoints", lambda: bench_checkpoints(config))
        rows += await guarded("sandbox", lambda: bench_sandbox(config))
    return rows


def parse_args(argv: Sequence[str] | None = None) -> Config:
    """``--quick`` for fewer repetitions (about 30 s instead of about a minute); ``--only NAME`` for some sections."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="fewer repetitions, for a fast check")
    parser.add_argument(
        "--only", action="append", default=[], metavar="NAME", help="run the sections whose name contains NAME"
    )
    args = parser.parse_args(argv)
    return Config.make(args.quick, args.only)


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
