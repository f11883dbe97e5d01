"""A scripted 30-turn coding session for measuring how the context engine holds under pressure.

The model is a responder for :class:`tests.fakes.openai_server.OpenAIServer` (so codling's real provider path
is used): it counts every request with o200k (the JSON of its messages and tools), rejects one larger than
the window as a provider would (HTTP 400, OpenAI's wording), answers compaction requests as a working or a
failing summarizer, and plays each user turn's steps (reads, commands with 10–50 KB of output, edits,
patches, a delegate) by looking at the request itself, so a compaction or a retry never shifts the script.
The user states facts and constraints along the way; ``measure`` says which of them every later request
still carries.

``run_session`` drives it through codling's session store (the ``history.jsonl`` a restart reads back),
live or restarting before every turn. scripts/bench.py prints the table; tests/e2e/test_context_fidelity.py
runs a short version.
"""

from __future__ import annotations

import json
import re
import shutil
import statistics
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from codling.brain.context.budget import Budget
from codling.brain.context.compaction import DEFAULT_THRESHOLD
from codling.llm.tokens import count_tokens
from tests.fakes.openai_server import ErrorReply, OpenAIServer, Reply, ScriptedReply, ToolCall, Usage, text_of
from tests.fakes.scenarios import user_prompt
from tests.fakes.summarizer import is_summary_body, transcript_of_body

MODEL_NAME = "fidelity-model"
MAX_OUTPUT = 1_000


@dataclass(frozen=True)
class Fact:
    """Something the user states that every later request should still carry (``key`` is looked for)."""

    turn: int
    key: str
    constraint: bool = False


@dataclass(frozen=True)
class Turn:
    """One user turn: the prompt, the tool calls the model makes in order, and its final reply."""

    prompt: str
    calls: tuple[ToolCall, ...] = ()
    reply: str = "Done."


def _pytest_output(size_kb: int) -> str:
    """A python3 command printing a pytest-like run of about ``size_kb`` KB with two failures."""
    lines = max(10, size_kb * 1024 // 60)
    program = (
        "import sys\n"
        f"for i in range({lines}): print(f'tests/test_mod.py::test_case_{{i}} PASSED  [{{i%100:3d}}%]')\n"
        "print('FAILED tests/test_parser.py::test_unicode - AssertionError: expected 3, got 4')\n"
        "print('FAILED tests/test_lexer.py::test_eof - IndexError: list index out of range')\n"
        f"print('==== 2 failed, {lines} passed in 4.20s ====')"
    )
    return f'python3 -c "{program}"'


CI_LOG = "\n".join(
    f"2026-11-23T10:{i // 60:02d}:{i % 60:02d} step {i}: compiling module_{i}.c ... ok" for i in range(330)
)

FACTS = (
    Fact(1, "PELICAN-7"),
    Fact(1, "never touch migrations/", constraint=True),
    Fact(3, "8431"),
    Fact(5, "Always use tabs in Makefiles", constraint=True),
    Fact(8, "Postgres 16"),
    Fact(11, "rel-2.4"),
    Fact(14, "From now on, answer in English only", constraint=True),
    Fact(17, "Dana Whitfield"),
    Fact(21, "Friday the 27th"),
)


STYLE = (
    " Keep the change small and in the style of the surrounding code, and when you are done explain what you "
    "changed and why in two or three sentences, with the tests you ran and how they went."
)
"""What a user tends to add to a request (it makes the prompts as long as real ones)."""


def turns() -> list[Turn]:
    """The 30 turns (numbered from 1)."""
    t: list[Turn] = [
        Turn(
            "Turn 1: We are porting the lexer of this project to a table-driven design; never touch migrations/. "
            "The release codeword is PELICAN-7. Start by reading the README.",
            (ToolCall("read_file", {"path": "README.md"}),),
            "The README describes the lexer and the parser.",
        ),
        Turn(
            "Turn 2: Read the lexer.", (ToolCall("read_file", {"path": "src/lexer.py"}),), "The lexer is hand-written."
        ),
        Turn(
            "Turn 3: Run the test suite. The staging port is 8431, by the way.",
            (ToolCall("run_command", {"command": _pytest_output(12)}),),
            "Two tests fail: test_unicode and test_eof.",
        ),
        Turn("Turn 4: Read the big data table.", (ToolCall("read_file", {"path": "data/table.txt"}),), "It is large."),
        Turn(
            "Turn 5: Always use tabs in Makefiles. Add a lint target to the Makefile.",
            (
                ToolCall(
                    "edit_file", {"path": "Makefile", "old_text": "test:", "new_text": "lint:\n\truff check .\n\ntest:"}
                ),
            ),
            "Added the lint target.",
        ),
        Turn(
            "Turn 6: Fix test_eof in the lexer.",
            (
                ToolCall("read_file", {"path": "src/lexer.py"}),
                ToolCall(
                    "edit_file",
                    {"path": "src/lexer.py", "old_text": "return tokens", "new_text": "return tokens or []"},
                ),
                ToolCall("run_command", {"command": _pytest_output(30)}),
            ),
            "test_eof passes now; test_unicode still fails.",
        ),
        Turn("Turn 7: Search for TODO markers.", (ToolCall("search", {"pattern": "TODO"}),), "There are a few TODOs."),
        Turn(
            "Turn 8: Write a config file for the database. It is Postgres 16.",
            (
                ToolCall(
                    "write_file", {"path": "config/db.toml", "content": '[db]\nengine = "postgres"\nversion = 16\n'}
                ),
            ),
            "Wrote config/db.toml.",
        ),
        Turn(
            "Turn 9: Run the suite again.",
            (ToolCall("run_command", {"command": _pytest_output(45)}),),
            "Still one failure.",
        ),
        Turn(
            "Turn 10: Here is the CI log from the last run, what broke?\n```\n" + CI_LOG + "\n```",
            (),
            "The CI log shows every step passing; the failure is local.",
        ),
        Turn(
            "Turn 11: Read the parser. The release branch is rel-2.4.",
            (ToolCall("read_file", {"path": "src/parser.py"}),),
            "Read it.",
        ),
        Turn(
            "Turn 12: Patch the parser to handle unicode.",
            (
                ToolCall(
                    "apply_patch",
                    {
                        "patch": "*** Begin Patch\n*** Update File: src/parser.py\n@@\n-def parse(text):\n"
                        "+def parse(text: str):\n*** End Patch\n"
                    },
                ),
            ),
            "Patched the parser.",
        ),
        Turn(
            "Turn 13: Run the tests.", (ToolCall("run_command", {"command": _pytest_output(20)}),), "One failure left."
        ),
        Turn(
            "Turn 14: From now on, answer in English only. Ask the coder to fix test_unicode.",
            (
                ToolCall(
                    "delegate",
                    {"agent": "coder", "task": "Fix test_unicode in src/lexer.py", "context": "", "carryover": False},
                ),
            ),
            "The coder fixed test_unicode.",
        ),
        Turn("Turn 15: Read the lexer again.", (ToolCall("read_file", {"path": "src/lexer.py"}),), "It looks right."),
    ]
    for n in range(16, 31):
        extra = {
            17: " The owner of the parser is Dana Whitfield.",
            21: " The deadline is Friday the 27th.",
        }.get(n, "")
        if n % 3 == 0:
            calls: tuple[ToolCall, ...] = (ToolCall("run_command", {"command": _pytest_output(10 + n)}),)
        elif n % 3 == 1:
            calls = (ToolCall("read_file", {"path": f"src/module_{n % 5}.py"}),)
        else:
            calls = (ToolCall("search", {"pattern": "def "}), ToolCall("read_file", {"path": "src/parser.py"}))
        prompt = f"Turn {n}: Continue with step {n} of the port: check module {n % 5}.{extra}"
        t.append(Turn(prompt, calls, f"Step {n} done."))
    return [Turn(turn.prompt + STYLE, turn.calls, turn.reply) if "```" not in turn.prompt else turn for turn in t]


def make_repo(root: Path) -> None:
    """The project the session works in."""
    (root / "src").mkdir(parents=True, exist_ok=True)
    (root / "data").mkdir(exist_ok=True)
    (root / "migrations").mkdir(exist_ok=True)
    (root / "README.md").write_text("# Lexer port\n\nA lexer and a parser.\n" + "Some prose about it.\n" * 40)
    (root / "src/lexer.py").write_text(
        "TOKENS = ['NUM', 'ID']\n\n\ndef lex(text):\n    tokens = text.split()\n    return tokens\n"
        + "# padding\n" * 200
    )
    (root / "src/parser.py").write_text(
        "def parse(text):\n    return text\n" + "\n".join(f"RULE_{i} = {i}" for i in range(300))
    )
    for i in range(5):
        (root / f"src/module_{i}.py").write_text("\n".join(f"def f{j}(x):\n    return x + {j}" for j in range(120)))
    (root / "data/table.txt").write_text("\n".join(f"row {i}: " + "cell " * 22 for i in range(1_100)))  # ~138 KB
    (root / "Makefile").write_text("test:\n\tpytest -q\n")


# --- the model ---------------------------------------------------------------------------------------------


def request_tokens(body: dict[str, Any]) -> int:
    """A request's size as a provider counts it here: o200k over the JSON of its messages and tools."""
    return count_tokens(json.dumps(body.get("messages", []))) + count_tokens(json.dumps(body.get("tools", [])))


def _system(body: dict[str, Any]) -> str:
    return "\n".join(
        str(m.get("content")) for m in body.get("messages", []) if m.get("role") in ("system", "developer")
    )


def _text(message: dict[str, Any]) -> str:
    return text_of(message.get("content"))


_TURN = re.compile(r"Turn (\d+):")


@dataclass
class Request:
    """One request the model received."""

    kind: str
    """"turn", "summary", "delegate"."""
    tokens: int
    body: dict[str, Any]
    turn: int = 0
    rejected: bool = False


@dataclass
class Model:
    """The scripted model (see the module's docstring)."""

    window: int
    summarizer_works: bool
    script: list[Turn] = field(default_factory=turns)
    requests: list[Request] = field(default_factory=list)
    truncates: bool = False
    """Like Ollama with its default context: a request over the window is cut to it silently (the prompt
    tokens reported are the window's), never rejected."""

    def __call__(self, body: dict[str, Any]) -> ScriptedReply:
        tokens = request_tokens(body)
        system = _system(body)
        kind = "summary" if is_summary_body(body) else "delegate" if "Your role:" in system else "turn"
        record = Request(kind, tokens, body)
        self.requests.append(record)
        if tokens > self.window and not self.truncates:
            record.rejected = True
            return ErrorReply.context_length_exceeded(
                f"This model's maximum context length is {self.window} tokens. However, your messages resulted "
                f"in {tokens} tokens. Please reduce the length of the messages."
            )
        usage = Usage(min(tokens, self.window), 30)
        if kind == "summary":
            if not self.summarizer_works:
                return ErrorReply.server_error("the summarizer is down")
            return Reply(text=[self._summary(body)], usage=usage)
        if kind == "delegate":
            return Reply(text=["Fixed test_unicode by normalising input to NFC; the tests pass."], usage=usage)
        messages = body.get("messages", [])
        last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
        prompt = user_prompt(_text(messages[last_user])) if last_user >= 0 else ""
        found = _TURN.findall(prompt)
        if not found:
            return Reply(text=["ok"], usage=usage)
        number = int(found[-1])
        record.turn = number
        turn = self.script[number - 1]
        done = sum(1 for m in messages[last_user + 1 :] if m.get("role") == "tool")
        offered = {t.get("function", {}).get("name") for t in body.get("tools", [])}
        calls = [c for c in turn.calls if c.name in offered]
        if done < len(calls):
            call = calls[done]
            return Reply(tool_calls=[ToolCall(call.name, call.arguments, f"call-{number}-{done}")], usage=usage)
        return Reply(text=[turn.reply], usage=usage)

    @staticmethod
    def _summary(body: dict[str, Any]) -> str:
        """A working summarizer's answer, as a good model writes one: the goal, then every sentence of the user's
        messages (and of earlier summaries) that states a rule or a concrete value, newest last, within about
        800 tokens."""
        transcript = transcript_of_body(body)
        kept: list[str] = []
        for section in re.split(r"^### ", transcript, flags=re.MULTILINE)[1:]:
            role, _, text = section.partition("\n")
            if role.strip() not in ("User", "Earlier summary"):
                continue
            for sentence in re.split(r"(?<=[.!;])\s+|\n+", text):
                sentence = sentence.strip(" -")
                if sentence and sentence not in kept and _WORTH_KEEPING.search(sentence):
                    kept.append(sentence)
        lines: list[str] = []
        size = 0
        for sentence in reversed(kept):
            size += count_tokens(sentence) + 2
            if size > 800:
                break
            lines.insert(0, f"- {sentence}")
        return "## Goal\nPort the lexer to a table-driven design.\n\n## What the user stated\n" + "\n".join(lines)


_WORTH_KEEPING = re.compile(r"\d|\b[A-Z][A-Z0-9-]{2,}\b|\b(?:never|always|from now on)\b|[A-Z][a-z]+ [A-Z][a-z]+", re.I)


# --- measuring ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Result:
    """What one run measured."""

    window: int
    summarizer: str
    restarts: bool
    requests: int
    over_budget: int
    """User-turn requests larger than the window minus the maximum output."""
    rejected: int
    compactions: int
    median_after_compaction: int
    facts_kept: float
    """The share of (fact, later request) pairs where the request carries the fact."""
    constraints_kept: float
    turn_bodies: tuple[str, ...] = ()
    """The user-turn requests as JSON (to compare a restarted run with a live one)."""
    truncated: int = 0
    bodies: tuple[dict[str, Any], ...] = ()
    """Every request the model received, in order (user turns, summaries, delegates)."""
    compacted_to: tuple[int, ...] = ()
    """What each compaction left: its next request as codling counts it (``ContextCompacted.tokens_after``:
    the system prompt and tools, the kept messages, the summary, the pending prompt) less the turn's own prompt,
    which only has to fit beside (a pasted log is what it is)."""
    """Requests larger than the window that a truncating server cut silently."""


def measure(
    model: Model, window: int, summarizer: str, restarts: bool, compactions: int, root: Path | None = None
) -> Result:
    """The measures of one run from the requests the model received (``root``, where the run's files were, is
    written as ``<root>`` in the bodies it keeps, so runs in different directories compare)."""
    turn_requests = [r for r in model.requests if r.kind == "turn" and r.turn]
    over = sum(1 for r in turn_requests if r.tokens > window - MAX_OUTPUT)
    rejected = sum(1 for r in model.requests if r.rejected)
    truncated = sum(1 for r in model.requests if model.truncates and r.tokens > window)
    after: list[int] = []
    for index, r in enumerate(model.requests):
        if r.kind == "summary" and index + 1 < len(model.requests):
            after.append(model.requests[index + 1].tokens)
    kept: dict[bool, list[bool]] = {True: [], False: []}
    for fact in FACTS:
        for r in turn_requests:
            if r.turn > fact.turn:
                kept[fact.constraint].append(fact.key.lower() in json.dumps(r.body["messages"]).lower())
    bodies = tuple(
        json.dumps({"messages": r.body["messages"], "tools": r.body.get("tools")}).replace(str(root), "<root>")
        if root is not None
        else json.dumps({"messages": r.body["messages"], "tools": r.body.get("tools")})
        for r in turn_requests
    )
    return Result(
        window=window,
        summarizer=summarizer,
        restarts=restarts,
        requests=len(turn_requests),
        over_budget=over,
        rejected=rejected,
        compactions=compactions,
        median_after_compaction=int(statistics.median(after)) if after else 0,
        facts_kept=sum(kept[False]) / len(kept[False]) if kept[False] else 1.0,
        constraints_kept=sum(kept[True]) / len(kept[True]) if kept[True] else 1.0,
        turn_bodies=bodies,
        truncated=truncated,
    )


async def run_session(
    window: int,
    summarizer_works: bool,
    *,
    restarts: bool,
    turn_count: int = 30,
    root: Path | None = None,
    catalog: int | None = None,
    truncates: bool = False,
) -> Result:
    """Run the scripted session on a ``window``-token model and measure it (see the module's docstring). It
    works in ``root`` (emptied first; a temporary directory if None): runs to be compared request by request
    must use the same one, since paths are part of what the model is sent. ``catalog`` is the window codling's
    catalog gives the model (None: the real one); a server that ``truncates`` cuts a request over its window
    silently instead of rejecting it."""
    from codling.brain.events import ContextCompacted
    from codling.config import Settings
    from codling.llm.catalog import ModelInfo
    from codling.llm.providers import build_model
    from codling.store.header import SessionHeader
    from codling.store.ids import new_session_id
    from codling.store.index import SessionStore
    from codling.store.live import start_session

    model = Model(window, summarizer_works, truncates=truncates)
    with tempfile.TemporaryDirectory() as tmp, OpenAIServer(responder=model, model=MODEL_NAME) as server:
        root = Path(tmp) if root is None else root
        shutil.rmtree(root, ignore_errors=True)
        project = root / "project"
        make_repo(project)
        settings = Settings(home=root / "home", mode="yolo", titles=False)
        store = SessionStore(settings.home)
        info = ModelInfo(f"openai-chat:{MODEL_NAME}", context_limit=catalog or window, max_output_tokens=MAX_OUTPUT)
        env = server.env()

        def factory(model_id: str) -> Any:
            return build_model(model_id, env=env)

        header = SessionHeader(new_session_id(), project, info.id, "yolo")
        compactions = 0
        compacted_to: list[int] = []
        live = None
        for index, turn in enumerate(model.script[:turn_count]):
            if live is None or restarts:
                if live is not None:
                    await live.close()
                stored = store.read(header.session_id) if index else None
                live = start_session(store, settings, info, header, stored, approver=None, model_factory=factory)
            async for event in live.brain.stream(turn.prompt):
                if isinstance(event, ContextCompacted):
                    compactions += 1
                    prompt = min(count_tokens(turn.prompt), Budget.of(info, DEFAULT_THRESHOLD).prompt)
                    compacted_to.append(event.tokens_after - prompt)
        if live is not None:
            await live.close()
        result = measure(model, window, "working" if summarizer_works else "failing", restarts, compactions, root)
        result = replace(
            result,
            compacted_to=tuple(compacted_to),
            bodies=tuple(r.body for r in model.requests),
            # A saved prompt's path holds the session's id, which each run draws anew.
            turn_bodies=tuple(body.replace(header.session_id, "<session>") for body in result.turn_bodies),
        )
        shutil.rmtree(root, ignore_errors=True)
        return result


def table(results: Sequence[Result]) -> str:
    """The results as a plain-text table."""
    head = (
        f"{'window':>7} {'summarizer':>10} {'restarts':>8} {'requests':>8} {'over':>5} {'rejected':>8} "
        f"{'compactions':>11} {'after (median)':>14} {'facts':>6} {'pins':>6}"
    )
    lines = [head]
    for r in results:
        lines.append(
            f"{r.window:>7,} {r.summarizer:>10} {'yes' if r.restarts else 'no':>8} {r.requests:>8} "
            f"{r.over_budget:>5} {r.rejected:>8} {r.compactions:>11} {r.median_after_compaction:>14,} "
            f"{r.facts_kept:>6.0%} {r.constraints_kept:>6.0%}"
        )
    return "\n".join(lines)
