"""The context-fidelity harness: the scripted long session (``tests/fakes/long_session.py``) run through a spawned
``codling acp``, live or restarted before every turn, and what the model received, measured.

A run (:func:`run_session`) gets its own loopback server, ``CODLING_HOME`` and repository. Its model id,
``openai-chat:ctx-<window>``, is added to the user catalog (``$CODLING_HOME/models.json``) with the run's window
and maximum output; ``config.toml`` sets ``mode = "yolo"`` so nothing waits for approval. The client is the ACP
SDK's own (``spawn_agent_process`` with a ``RecordingClient``). Live, one process runs every turn; restarted,
each turn gets a new process that loads the session (``session/load``, or ``session/resume``) and sends the
prompt, then is shut down by closing its stdin.

:func:`measure` turns the requests the model received (the responder's log) and the client's updates into a
:class:`Fidelity`; :func:`identical_turns` compares a restarted run's lead requests with a live run's, turn by
turn.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import statistics
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from acp import PROTOCOL_VERSION, RequestError, helpers, spawn_agent_process
from acp.core import DEFAULT_STDIO_BUFFER_LIMIT_BYTES

from codling.brain.state import SUMMARY_PREFIX
from tests.fakes import warm
from tests.fakes.acp_client import RecordingClient, ZedReading
from tests.fakes.deadlines import deadline
from tests.fakes.long_session import SESSION, LongSessionModel, RequestLog, Summarizer, UserTurn, make_repo
from tests.fakes.openai_server import OpenAIServer
from tests.fakes.processes import measured

__all__ = ["Fidelity", "RunResult", "RunSpec", "identical_turns", "measure", "run_session"]

RPC_TIMEOUT = 120.0
"""Seconds one ACP request (a whole turn, with its compactions) may take."""

COMPACTED = "Compacted context"
"""How the title of a finished compaction starts (``compaction.title``)."""


@dataclass(frozen=True)
class RunSpec:
    """One run of the session."""

    window: int
    max_output: int
    summarizer: Summarizer
    turns: int = len(SESSION)
    restart: bool = False
    restore: Literal["load", "resume"] = "load"
    restart_every: int = 1
    """Restarted, how many turns each process runs before the next one loads the session."""

    @property
    def model_id(self) -> str:
        return f"openai-chat:ctx-{self.window}"

    @property
    def label(self) -> str:
        every = "" if self.restart_every == 1 else f" every {self.restart_every} turns"
        how = f"restarted{every} ({self.restore})" if self.restart else "live"
        return f"{self.window:,}-token window, {self.summarizer} summarizer, {self.turns} turns, {how}"


@dataclass(frozen=True)
class TurnOutcome:
    """How one user turn ended, seen from the client."""

    number: int
    stop_reason: str
    error: bool
    """The turn's reply carries an error (a failed turn)."""
    compactions: int
    """Finished compactions the client was shown during the turn (``Compacted context…`` tool calls)."""
    first_request: int
    """Index in the request log of the turn's first request; the turn's requests end where the next begins."""


@dataclass(frozen=True)
class RunResult:
    """What a run left: the turns' outcomes and every request the model received, with the paths to normalise."""

    spec: RunSpec
    turns: tuple[TurnOutcome, ...]
    requests: tuple[RequestLog, ...]
    project: str
    home: str
    stderr_tail: str = ""

    def turn_requests(self, number: int, kind: str = "main") -> list[RequestLog]:
        """The requests of one kind made during turn ``number``."""
        index = number - 1
        start = self.turns[index].first_request
        end = self.turns[index + 1].first_request if index + 1 < len(self.turns) else len(self.requests)
        return [r for r in self.requests[start:end] if r.kind == kind]


async def run_session(spec: RunSpec, script: Sequence[UserTurn] = SESSION, root: Path | None = None) -> RunResult:
    """Run the first ``spec.turns`` turns of ``script`` through ``codling acp`` (see the module docstring), in
    ``root`` (emptied first; a temporary directory if None). Runs compared request by request must use the same
    ``root``: paths are part of what the model is sent, and their length decides where long text is cut."""
    turns = list(script[: spec.turns])
    model = LongSessionModel(window=spec.window, summarizer=spec.summarizer, turns=script)
    with tempfile.TemporaryDirectory(prefix="codling-fidelity-") as tmp, OpenAIServer(responder=model) as server:
        root = Path(tmp) if root is None else root
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        home, project = root / "home", make_repo(root / "project")
        home.mkdir()
        (home / "models.json").write_text(
            json.dumps(
                {"models": {spec.model_id: {"context_limit": spec.window, "max_output_tokens": spec.max_output}}}
            )
        )
        (home / "config.toml").write_text('mode = "yolo"\n')
        env = {
            "CODLING_HOME": str(home),
            "CODLING_MODEL": spec.model_id,
            "CODLING_LOG_FILE": str(home / "codling.log"),
            **server.env(),
        }
        stderr_path = root / "stderr.log"
        outcomes: list[TurnOutcome] = []
        try:
            if spec.restart:
                session_id = ""
                for first in range(0, len(turns), spec.restart_every):
                    async with _agent(env, project, stderr_path) as (conn, client):
                        if session_id:
                            if spec.restore == "load":
                                await _rpc(conn.load_session(cwd=str(project), session_id=session_id))
                            else:
                                await _rpc(conn.resume_session(cwd=str(project), session_id=session_id))
                        else:
                            session_id = (await _rpc(conn.new_session(cwd=str(project)))).session_id
                        for turn in turns[first : first + spec.restart_every]:
                            outcomes.append(await _turn(conn, client, session_id, turn, model))
            else:
                async with _agent(env, project, stderr_path) as (conn, client):
                    session_id = (await _rpc(conn.new_session(cwd=str(project)))).session_id
                    for turn in turns:
                        outcomes.append(await _turn(conn, client, session_id, turn, model))
        finally:
            tail = stderr_path.read_text(errors="replace")[-3000:] if stderr_path.exists() else ""
        return RunResult(spec, tuple(outcomes), tuple(model.snapshot()), str(project), str(home), tail)


class _agent:
    """A spawned ``codling acp``, initialized; shut down by closing its stdin (killed if it lingers)."""

    def __init__(self, env: dict[str, str], project: Path, stderr_path: Path) -> None:
        self._env, self._project, self._stderr_path = env, project, stderr_path
        self._stack: Any = None

    async def __aenter__(self) -> tuple[Any, RecordingClient]:
        client = RecordingClient()
        self._stderr = self._stderr_path.open("ab")
        self._spawn = spawn_agent_process(
            client,
            *warm.codling(),
            "acp",
            env=measured(self._env),
            cwd=self._project,
            transport_kwargs={"stderr": self._stderr, "limit": DEFAULT_STDIO_BUFFER_LIMIT_BYTES},
            observers=[ZedReading(client.problems)],  # what Zed would render wrong, checked on the way out
        )
        self._client = client
        conn, self._process = await self._spawn.__aenter__()
        await _rpc(conn.initialize(protocol_version=PROTOCOL_VERSION))
        return conn, client

    async def __aexit__(self, *exc: Any) -> None:
        try:
            await self._spawn.__aexit__(*exc)
        except ProcessLookupError:
            pass  # the SDK's shutdown timed out, then tried to terminate a process that had exited meanwhile
        finally:
            if self._process.returncode is None:
                self._process.kill()
                await asyncio.wait_for(self._process.wait(), deadline(10))
            self._stderr.close()
        if exc[0] is None:
            assert self._client.problems == [], "the client saw updates an editor would reject"


async def _rpc(awaitable: Any) -> Any:
    return await asyncio.wait_for(awaitable, RPC_TIMEOUT)


async def _turn(
    conn: Any, client: RecordingClient, session_id: str, turn: UserTurn, model: LongSessionModel
) -> TurnOutcome:
    seen = {getattr(u, "tool_call_id", None) for _, u in client.updates}  # a load's replay is not this turn's
    before = len(client.updates)
    first = len(model.snapshot())
    try:
        response = await _rpc(conn.prompt(session_id=session_id, prompt=[helpers.text_block(turn.prompt)]))
        stop, failed = str(response.stop_reason), False
    except RequestError:  # a failed turn (recorded, and the session goes on)
        stop, failed = "error", True
    updates = [u for _, u in client.updates[before:]]
    compacted = {
        u.tool_call_id
        for u in updates
        if u.session_update in ("tool_call", "tool_call_update")
        and (u.title or "").startswith(COMPACTED)
        and u.tool_call_id not in seen
    }
    return TurnOutcome(turn.number, stop, failed, len(compacted), first)


# --- measuring ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fidelity:
    """What a run shows about the context engine (see :func:`measure`)."""

    requests: int
    over_budget: int
    """Requests (of any kind) over the window minus the maximum output."""
    rejected: int
    """Requests the model rejected as over the window."""
    compactions: int
    failed_turns: int
    after_compaction: tuple[int, ...]
    """The size of the lead's first request after each compaction."""
    facts_kept: int
    facts: int
    pins_kept: int
    pins: int
    lost: tuple[str, ...] = ()
    """The keys of the facts and constraints missing from some later request."""
    peak: int = 0

    @property
    def median_after_compaction(self) -> float | None:
        return statistics.median(self.after_compaction) if self.after_compaction else None


def measure(result: RunResult, script: Sequence[UserTurn] = SESSION) -> Fidelity:
    """The run's numbers.

    * A request is over budget when its tokens (as the model counts them) exceed window − max output.
    * Compactions are the ``Compacted context…`` tool calls the client was shown.
    * "After compaction" is the lead's first request after a compaction: after a summary request, or one whose
      summary (the text from ``SUMMARY_PREFIX`` to the end of its message) differs from the previous one's.
    * A fact (or constraint) stated in turn *t* is kept when its key appears (case-insensitively) in every lead
      request of the turns after *t* (its own turn's carry it in the prompt); facts of the last turn are not
      counted. Delegates and summary requests are left out: they never get the whole conversation by design.
    """
    spec = result.spec
    requests = result.requests
    main = [r for r in requests if r.kind == "main"]
    after: list[int] = []
    previous_summary: str | None = None
    summarized = False
    for r in requests:
        if r.kind == "summary":
            summarized = True
            continue
        if r.kind != "main":
            continue
        summary = _summary_of(r.body)
        if summarized or (summary is not None and summary != previous_summary):
            after.append(r.tokens)
        summarized, previous_summary = False, summary
    texts = [(r.turn, _lowered(r.body)) for r in main]
    lost: list[str] = []
    counted = {True: [0, 0], False: [0, 0]}
    for turn in script[: spec.turns - 1]:
        for fact in turn.facts:
            later = [text for number, text in texts if number > turn.number]
            kept = all(fact.key.lower() in text for text in later)
            counted[fact.pin][0] += kept
            counted[fact.pin][1] += 1
            if not kept:
                lost.append(fact.key)
    return Fidelity(
        requests=len(requests),
        over_budget=sum(r.tokens > spec.window - spec.max_output for r in requests),
        rejected=sum(r.rejected for r in requests),
        compactions=sum(t.compactions for t in result.turns),
        failed_turns=sum(t.error or t.stop_reason != "end_turn" for t in result.turns),
        after_compaction=tuple(after),
        facts_kept=counted[False][0],
        facts=counted[False][1],
        pins_kept=counted[True][0],
        pins=counted[True][1],
        lost=tuple(lost),
        peak=max((r.tokens for r in requests), default=0),
    )


def _lowered(body: dict[str, Any]) -> str:
    from tests.fakes.long_session import request_text

    return request_text(body).lower()


_SUMMARY_START = SUMMARY_PREFIX.strip().split("\n", 1)[0]


def _summary_of(body: dict[str, Any]) -> str | None:
    for message in body.get("messages") or ():
        content = message.get("content")
        text = content if isinstance(content, str) else json.dumps(content)
        if (at := text.find(_SUMMARY_START)) >= 0:
            return text[at:]
    return None


def normalized(body: dict[str, Any], result: RunResult) -> str:
    """A lead request as compared across runs: its messages and tools as JSON, with the run's repository and
    home paths replaced by ``<project>`` and ``<home>``, and a session's id in a path (a saved prompt's, in the
    note of a cut paste) by ``<session>``. Nothing else is normalised: the script's tool-call ids are
    deterministic, and no other random id reaches the model."""
    text = json.dumps({"messages": body.get("messages"), "tools": body.get("tools")}, sort_keys=True)
    text = text.replace(result.project, "<project>").replace(result.home, "<home>")
    return _SESSION_IN_PATH.sub(r"\1<session>/", text)


_SESSION_IN_PATH = re.compile(r"(sessions/)\d{8}-[0-9a-f]{12}/")


@dataclass(frozen=True)
class Comparison:
    """Turns whose lead requests were identical in both runs, and the first turn that differed."""

    identical: int
    turns: int
    first_difference: int | None = None
    differing: tuple[int, ...] = field(default=())


def identical_turns(restarted: RunResult, live: RunResult) -> Comparison:
    """Compare, turn by turn, the lead requests (messages + tools, :func:`normalized`) of two runs."""
    count = min(len(restarted.turns), len(live.turns))
    differing = [
        n
        for n in range(1, count + 1)
        if [normalized(r.body, restarted) for r in restarted.turn_requests(n)]
        != [normalized(r.body, live) for r in live.turn_requests(n)]
    ]
    return Comparison(count - len(differing), count, differing[0] if differing else None, tuple(differing))
