"""A scripted 30-turn coding session against a small-window model, served by :class:`OpenAIServer`.

:class:`LongSessionModel` is a ``responder`` for ``tests/fakes/openai_server.py``. It behaves like a model with
a fixed context window, as a provider does:

* **Token counting.** Every request is counted with o200k (``codling.llm.tokens.count_tokens``), as a
  provider counts it, not as codling estimates it: for each message, its role, its text content, and the name
  and arguments of each tool call, plus ``MESSAGE_OVERHEAD`` tokens (OpenAI's per-message framing); plus the
  tool definitions (``tools``) as compact JSON. A request over ``window`` tokens is rejected with HTTP 400,
  ``code: context_length_exceeded`` and the message ``overflow_message`` (OpenAI's wording by default;
  ``{window}`` and ``{tokens}`` are filled in). Every other reply reports that count as its usage.
* **Compaction summaries** are recognised by their system prompt (the first line of codling's
  ``brain/prompts/compact.md``). A *working* summarizer answers with a deterministic handoff summary: a Goal
  section (the first user request of the transcript) and every sentence of the transcript, user messages and
  earlier summaries alike, that holds one of the session's stated facts or constraints (as a good model would
  carry them forward). A *failing* one answers HTTP 500 every time.
* **Titles** never reach the responder (the server answers them itself).
* **Delegates** are recognised by their system prompt (``# Your role:``, from ``brain/prompts/<role>.md``) and
  by the task marker ``[task dNN]`` the lead's ``delegate`` call put in the task; they follow the delegate
  script of turn NN.
* **Everything else** is the lead agent's turn. Which turn a request belongs to is read from its content: the
  highest-numbered scripted prompt whose key (the start of its first line) appears in the request (later
  prompts have not been sent yet, earlier ones may linger in the history). Which step of the turn it is comes
  from the tool-call ids already in the request: the script's ids are ``tNNsKcI`` (turn, step, call), so the
  next step is one past the highest ``K`` present. A compaction, a rejected request or a retry therefore
  never shifts the script; a retry that no longer carries the turn's earlier tool calls starts the turn over.

:data:`SESSION` is the script: 30 user turns stating facts and standing constraints (:class:`Fact`), pasting
two 20 KB CI logs, and asking for ordinary work that makes the model read files (one of 138 KB), run commands
printing 10–50 KB (``tools/fake_check.py`` in the repository :func:`make_repo` writes), edit, write, patch and
delegate. Its first eight turns already hold every kind of step, so a short run exercises all of them.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from codling.llm.tokens import count_tokens
from tests.fakes.openai_server import ErrorReply, Reply, ScriptedReply, ToolCall, Usage, text_of
from tests.fakes.summarizer import is_summary_body, transcript_of_body

__all__ = [
    "SESSION",
    "Fact",
    "LongSessionModel",
    "RequestLog",
    "Step",
    "UserTurn",
    "make_repo",
    "request_text",
    "request_tokens",
]

MESSAGE_OVERHEAD = 4
"""Tokens a provider adds per message for its framing (role markers)."""

OPENAI_OVERFLOW = (
    "This model's maximum context length is {window} tokens. However, your messages resulted in {tokens} tokens. "
    "Please reduce the length of the messages."
)

Summarizer = Literal["working", "failing"]
RequestKind = Literal["main", "delegate", "summary"]


# --- the script ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fact:
    """Something the user states once and expects to be remembered; ``key`` is what must reappear in every
    later request (matched case-insensitively); a ``pin`` is a standing constraint."""

    key: str
    pin: bool = False


@dataclass(frozen=True)
class Step:
    """One model response of a turn: the tool calls it makes (their ids are added by the script)."""

    calls: tuple[ToolCall, ...]


@dataclass(frozen=True)
class UserTurn:
    """One user turn: the prompt, the facts it states, the lead's steps and final reply, and the steps and
    reply of the delegate it starts (if any)."""

    number: int
    prompt: str
    facts: tuple[Fact, ...] = ()
    steps: tuple[Step, ...] = ()
    reply: str = "Done."
    delegate_steps: tuple[Step, ...] = ()
    delegate_reply: str = ""

    @property
    def key(self) -> str:
        """What identifies this turn's prompt in a request: the start of its first line."""
        return self.prompt.split("\n", 1)[0][:60]


def _call(name: str, **arguments: Any) -> ToolCall:
    return ToolCall(name, arguments)


def _check(kind: str, kb: int, failures: int, seed: int) -> ToolCall:
    """A run_command printing a fake pytest run or lint report of about ``kb`` KB."""
    command = f"{shlex.quote(sys.executable)} tools/fake_check.py {kind} --kb {kb} --fail {failures} --seed {seed}"
    return _call("run_command", command=command)


def _read(path: str, start: int | None = None, end: int | None = None) -> ToolCall:
    if start is None:
        return _call("read_file", path=path)
    return _call("read_file", path=path, start_line=start, end_line=end)


def _edit_slot(path: str, slot: str, new: str) -> ToolCall:
    return _call("edit_file", path=path, old_text=f"# EDIT-SLOT-{slot}", new_text=new)


def _patch_slot(path: str, slot: str, lines: Sequence[str], add: tuple[str, str] | None = None) -> ToolCall:
    body = ["*** Begin Patch", f"*** Update File: {path}", "@@", f"-# PATCH-SLOT-{slot}"]
    body += [f"+{line}" for line in lines]
    if add is not None:
        body += [f"*** Add File: {add[0]}", *(f"+{line}" for line in add[1].splitlines())]
    body.append("*** End Patch")
    return _call("apply_patch", patch="\n".join(body))


def _steps(*steps: Sequence[ToolCall]) -> tuple[Step, ...]:
    return tuple(Step(tuple(calls)) for calls in steps)


def ci_log(seed: int, size: int = 20_000) -> str:
    """A deterministic CI log of about ``size`` characters whose end holds the failure."""
    lines: list[str] = []
    n = 0
    while sum(len(line) + 1 for line in lines) < size - 600:
        second = (seed * 37 + n) % 3600
        stamp = f"2025-03-{10 + seed:02d}T09:{second // 60:02d}:{second % 60:02d}.{(n * 7919) % 1000:03d}Z"
        stage = ("checkout", "setup-python", "install", "build", "unit-tests")[min(4, n // 60)]
        lines.append(
            f"{stamp} [{stage}] step {n:04d}: processing module pkg_{(seed + n) % 89:02d} ({n * 13 % 997} ms) ok"
        )
        n += 1
    lines += [
        f"2025-03-{10 + seed:02d}T09:59:58.000Z [unit-tests] FAILED tests/test_app.py::test_parse_empty",
        "E       AssertionError: assert parse('') == []",
        "E        +  where ['',] = parse('')",
        f"2025-03-{10 + seed:02d}T09:59:59.000Z [unit-tests] ==== 1 failed, 212 passed in 48.12s ====",
        "##[error]Process completed with exit code 1.",
    ]
    return "\n".join(lines)


def _turns() -> tuple[UserTurn, ...]:
    util, app, config, make = "src/util.py", "src/app.py", "src/config.py", "Makefile"
    t: list[UserTurn] = [
        UserTurn(
            1,
            "Hi! Two ground rules first. Never touch migrations/. The staging port is 8431. "
            "Please read src/app.py and tell me what it does.",
            (Fact("never touch migrations/", pin=True), Fact("8431")),
            _steps([_read(app)]),
            "src/app.py defines greet() and parse(); parse splits a comma-separated string into fields.",
        ),
        UserTurn(
            2,
            "Remember the codeword PELICAN-7. Run the test suite and tell me what fails.",
            (Fact("PELICAN-7"),),
            _steps([_check("pytest", 30, 3, 2)]),
            "Three tests fail: test_parse_empty, test_total_rounding and test_config_port. The rest pass.",
        ),
        UserTurn(
            3,
            "Always use tabs in Makefiles. Now look at src/big_table.py, I think the lookup table is wrong near "
            "the end.",
            (Fact("always use tabs in Makefiles", pin=True),),
            _steps([_read("src/big_table.py")]),
            "The table is long; its last entries repeat the codes of the first ones, which looks wrong.",
        ),
        UserTurn(
            4,
            "Fix the failing test_parse_empty: edit src/app.py so that parse('') returns an empty list.",
            (),
            _steps(
                [_read(app)],
                [_edit_slot(app, "4", "    if not text:\n        return []")],
                [_check("pytest", 12, 2, 4)],
            ),
            "parse('') now returns []; test_parse_empty passes, two other failures remain.",
        ),
        UserTurn(
            5,
            "From now on answer in English only. The on-call engineer is Marisol Okafor. "
            "Add a `lint` target to the Makefile.",
            (Fact("answer in English only", pin=True), Fact("Marisol Okafor")),
            _steps(
                [_read(make)],
                [_call("write_file", path=make, content=MAKEFILE + "\nlint:\n\truff check src tests\n")],
            ),
            "Added a lint target (indented with a tab) that runs ruff on src and tests.",
        ),
        UserTurn(
            6,
            "CI failed on my branch, here is the log:\n```\n" + ci_log(1) + "\n```\nWhat broke?",
            (),
            (),
            "The unit-test stage failed on test_parse_empty (parse('') returned ['']); the fix from before covers it.",
        ),
        UserTurn(
            7,
            "Our release branch is called release/quokka. Ask a coder sub-agent to add a docstring to greet() in "
            "src/app.py.",
            (Fact("release/quokka"),),
            _steps(
                [_call("delegate", agent="coder", task="[task d07] Add a one-line docstring to greet() in src/app.py.")]
            ),
            "The coder added a docstring to greet().",
            _steps([_read(app)], [_edit_slot(app, "7", '    """Say hello."""')]),
            "Added a one-line docstring to greet() in src/app.py; nothing else changed.",
        ),
        UserTurn(
            8,
            "Apply a patch that adds compute_total() to src/util.py and a changelog entry, then run the tests.",
            (),
            _steps(
                [
                    _patch_slot(
                        util,
                        "8",
                        ["def compute_total(items):", "    return sum(items)"],
                        ("CHANGELOG.md", "# Changelog\n\n- compute_total() added to src/util.py"),
                    )
                ],
                [_check("pytest", 45, 1, 8)],
            ),
            "compute_total() is in src/util.py and CHANGELOG.md notes it; one test still fails (test_config_port).",
        ),
        UserTurn(
            9,
            "The database replica lives at db-replica-17.internal. Run the full test suite with verbose output.",
            (Fact("db-replica-17.internal"),),
            _steps([_check("pytest", 50, 1, 9)]),
            "One failure left: test_config_port expects the staging port in src/config.py.",
        ),
        UserTurn(
            10,
            "Never commit directly to main. Read tests/test_app.py and tell me what it covers.",
            (Fact("never commit directly to main", pin=True),),
            _steps([_read("tests/test_app.py")]),
            "tests/test_app.py covers greet(), parse() and the config port.",
        ),
        UserTurn(
            11,
            "Update docs/notes.md with a short section on the staging setup.",
            (),
            _steps([_read("docs/notes.md")], [_call("write_file", path="docs/notes.md", content=NOTES + STAGING)]),
            "docs/notes.md now has a Staging section.",
        ),
        UserTurn(
            12,
            "The API rate limit is 275 requests per minute. Add a RATE_LIMIT constant to src/config.py and run "
            "the tests.",
            (Fact("275 requests per minute"),),
            _steps([_read(config)], [_edit_slot(config, "12", "RATE_LIMIT = 275")], [_check("pytest", 10, 1, 12)]),
            "RATE_LIMIT = 275 is in src/config.py; the one known failure remains.",
        ),
        UserTurn(13, "Run the linter.", (), _steps([_check("lint", 15, 4, 13)]), "The linter reports four issues."),
        UserTurn(
            14,
            "Always run the linter before you say you are done. Ask a reviewer to look at src/util.py.",
            (Fact("always run the linter before you say you are done", pin=True),),
            _steps([_call("delegate", agent="reviewer", task="[task d14] Review src/util.py for bugs.")]),
            "The reviewer found one issue: compute_total() ignores None items.",
            _steps([_read(util)]),
            "src/util.py:3 compute_total() fails on None items; filter them out.",
        ),
        UserTurn(
            15,
            "Read the middle of src/big_table.py, lines 1000 to 1400.",
            (),
            _steps([_read("src/big_table.py", 1000, 1400)]),
            "Lines 1000-1400 look consistent.",
        ),
        UserTurn(
            16,
            "The customer ticket number is ZX-40912. Search for TODO in src.",
            (Fact("ZX-40912"),),
            _steps([_call("search", pattern="TODO", path="src")]),
            "There is one TODO, in src/util.py.",
        ),
        UserTurn(
            17,
            "Fix the TODO in src/util.py and run the tests.",
            (),
            _steps(
                [_read(util)],
                [_patch_slot(util, "17", ["def clamp(value, low, high):", "    return max(low, min(value, high))"])],
                [_check("pytest", 20, 1, 17)],
            ),
            "Added clamp() for the TODO; tests unchanged (one known failure).",
        ),
        UserTurn(18, "Run the tests again.", (), _steps([_check("pytest", 40, 1, 18)]), "Same single failure."),
        UserTurn(
            19,
            "Use snake_case for every new function name. Add a function format_price to src/util.py.",
            (Fact("use snake_case for every new function name", pin=True),),
            _steps(
                [_edit_slot(util, "19", 'def format_price(cents):\n    return f"{cents / 100:.2f}"')],
                [_check("pytest", 10, 1, 19)],
            ),
            "format_price() added.",
        ),
        UserTurn(
            20,
            "The feature flag is named enable_turbo_cart. Write src/flags.py defining that flag as False.",
            (Fact("enable_turbo_cart"),),
            _steps(
                [_call("write_file", path="src/flags.py", content="ENABLE_TURBO_CART = False  # enable_turbo_cart\n")]
            ),
            "src/flags.py defines the flag, off by default.",
        ),
        UserTurn(
            21,
            "Read src/big_table.py again, the whole file.",
            (),
            _steps([_read("src/big_table.py")]),
            "Read it; the tail still repeats the first codes.",
        ),
        UserTurn(
            22,
            "Ask a coder to add tests for format_price.",
            (),
            _steps(
                [_call("delegate", agent="coder", task="[task d22] Add tests for format_price in tests/test_price.py.")]
            ),
            "The coder added tests/test_price.py; they pass.",
            _steps(
                [_call("write_file", path="tests/test_price.py", content=PRICE_TESTS)],
                [_check("pytest", 10, 0, 22)],
            ),
            "Wrote tests/test_price.py with two tests; both pass.",
        ),
        UserTurn(23, "Run the full suite one more time.", (), _steps([_check("pytest", 50, 1, 23)]), "One failure."),
        UserTurn(
            24,
            "Here is the log of last night's nightly run:\n```\n" + ci_log(2) + "\n```\nIs it the same failure?",
            (),
            (),
            "Yes: the same test_parse_empty failure, from before the fix.",
        ),
        UserTurn(
            25,
            "Edit the Makefile: add a `test` target that runs pytest.",
            (),
            _steps(
                [_read(make)], [_call("edit_file", path=make, old_text="lint:", new_text="test:\n\tpytest -q\n\nlint:")]
            ),
            "Added a test target, indented with a tab.",
        ),
        UserTurn(26, "Summarise what we changed today.", (), (), "We fixed parse(), added helpers, flags and tests."),
        UserTurn(
            27,
            "Run the linter and the tests.",
            (),
            _steps([_check("lint", 15, 2, 27)], [_check("pytest", 30, 1, 27)]),
            "Two lint issues and one test failure remain.",
        ),
        UserTurn(
            28,
            "Rename clamp to clamp_value in src/util.py.",
            (),
            _steps(
                [_call("edit_file", path=util, old_text="def clamp(", new_text="def clamp_value(")],
                [_check("pytest", 10, 1, 28)],
            ),
            "Renamed.",
        ),
        UserTurn(29, "Read src/app.py one last time.", (), _steps([_read(app)]), "src/app.py is in its final state."),
        UserTurn(
            30,
            "Final check: what is the staging port, what is the codeword, and which directory must we never touch?",
            (),
            (),
            "See above.",
        ),
    ]
    return tuple(t)


MAKEFILE = "all: test\n\nbuild:\n\tpython -m build\n"
NOTES = "# Notes\n\nProject notes.\n"
STAGING = "\n## Staging\n\nDeploy to staging before every release and check the health page.\n"
PRICE_TESTS = (
    "from src.util import format_price\n\n\ndef test_whole():\n    assert format_price(100) == '1.00'\n\n\n"
    "def test_cents():\n    assert format_price(5) == '0.05'\n"
)


# --- the repository ------------------------------------------------------------------------------------------

FAKE_CHECK = r'''"""A fake pytest run or lint report: fake_check.py pytest|lint --kb N --fail K --seed S."""
import sys

kind, kb, fail, seed = sys.argv[1], int(sys.argv[3]), int(sys.argv[5]), int(sys.argv[7])
size = kb * 1024
out = []
n = 0
total = 0
while total < size - 400 * max(fail, 1):
    if kind == "pytest":
        pad = " " * (n % 7)
        line = f"tests/test_mod_{(seed + n) % 47:02d}.py::test_case_{n:04d} PASSED{pad}[{n % 100:3d}%]"
    else:
        where = f"src/pkg_{(seed + n) % 31:02d}/module_{n % 17}.py:{n % 400 + 1}:{n % 79 + 1}"
        line = f"{where}: checked {n * 7 % 1000} names"
    out.append(line)
    total += len(line) + 1
    n += 1
for i in range(fail):
    if kind == "pytest":
        out += [
            f"____________________ test_failure_{seed}_{i} ____________________",
            f"tests/test_app.py:{10 + i}: in test_failure_{seed}_{i}",
            f"    assert compute({i}) == {i + 1}",
            f"E   AssertionError: assert {i} == {i + 1}",
            f"FAILED tests/test_app.py::test_failure_{seed}_{i} - AssertionError: assert {i} == {i + 1}",
        ]
    else:
        out.append(f"src/util.py:{3 + i}:1: E{501 + i} line too long ({120 + i} > 100)")
if kind == "pytest":
    out.append(f"==== {fail} failed, {n} passed in {seed}.{n % 100:02d}s ====")
else:
    out.append(f"Found {fail} errors.")
print("\n".join(out))
sys.exit(1 if fail else 0)
'''

APP = '''"""The demo application."""


def greet(name):
    # EDIT-SLOT-7
    return f"hello {name}"


def parse(text):
    # EDIT-SLOT-4
    return text.split(",")
'''

UTIL = '''"""Helpers."""

# TODO: add clamp()
# PATCH-SLOT-8
# PATCH-SLOT-17
# EDIT-SLOT-19
'''

CONFIG = '''"""Settings."""

PORT = 8000
# EDIT-SLOT-12
'''

TEST_APP = """from src.app import greet, parse


def test_greet():
    assert greet("a") == "hello a"


def test_parse_empty():
    assert parse("") == []
"""


def big_table(size: int = 138 * 1024) -> str:
    """A Python module of about ``size`` characters: one long lookup table."""
    lines = ['"""A generated lookup table."""', "", "TABLE = ["]
    n = 0
    while sum(len(line) + 1 for line in lines) < size - 2:
        lines.append(f'    ("code_{n % 1500:05d}", {(n * 7919) % 100_000:6d}, "entry number {n:05d} of the table"),')
        n += 1
    lines.append("]")
    return "\n".join(lines) + "\n"


def make_repo(root: Path) -> Path:
    """Write the session's repository under ``root`` (created) and return it."""
    files = {
        "src/app.py": APP,
        "src/util.py": UTIL,
        "src/config.py": CONFIG,
        "src/big_table.py": big_table(),
        "tests/test_app.py": TEST_APP,
        "docs/notes.md": NOTES,
        "Makefile": MAKEFILE,
        "tools/fake_check.py": FAKE_CHECK,
        "README.md": "# shop\n\nA small demo shop.\n",
    }
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


SESSION: tuple[UserTurn, ...] = _turns()
"""The 30 user turns."""


# --- reading requests ----------------------------------------------------------------------------------------


def request_text(body: Mapping[str, Any]) -> str:
    """Everything a request's messages say: each message's text and its tool calls' names and arguments."""
    parts: list[str] = []
    for message in body.get("messages") or ():
        parts.append(text_of(message.get("content")))
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {}
            parts.append(f"{function.get('name', '')} {function.get('arguments', '')}")
    return "\n".join(parts)


def request_tokens(body: Mapping[str, Any]) -> int:
    """The request's size as a provider counts it (see the module docstring)."""
    total = 0
    for message in body.get("messages") or ():
        total += MESSAGE_OVERHEAD + count_tokens(str(message.get("role", "")))
        total += count_tokens(text_of(message.get("content")))
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {}
            total += count_tokens(f"{function.get('name', '')}{function.get('arguments', '')}")
    tools = body.get("tools")
    if tools:
        total += count_tokens(json.dumps(tools, separators=(",", ":"), ensure_ascii=False))
    return total


def _system_text(body: Mapping[str, Any]) -> str:
    return "\n".join(
        text_of(m.get("content"))
        for m in body.get("messages") or ()
        if isinstance(m, dict) and m.get("role") in ("system", "developer")
    )


_TASK = re.compile(r"\[task d(\d\d)\]")


# --- the model -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RequestLog:
    """One chat-completion request the model received (titles excepted), as the model saw it."""

    kind: RequestKind
    turn: int
    """The scripted turn it belongs to (0 for a summary request: it names none)."""
    step: int
    tokens: int
    rejected: bool
    body: dict[str, Any] = field(repr=False)


@dataclass
class LongSessionModel:
    """The responder (see the module docstring); ``log`` records every request it answered, in order."""

    window: int
    summarizer: Summarizer = "working"
    turns: Sequence[UserTurn] = SESSION
    overflow_message: str = OPENAI_OVERFLOW
    log: list[RequestLog] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __call__(self, body: dict[str, Any]) -> ScriptedReply:
        tokens = request_tokens(body)
        kind, turn, step = self.classify(body)
        rejected = tokens > self.window
        with self._lock:
            self.log.append(RequestLog(kind, turn, step, tokens, rejected, body))
        if rejected:
            return ErrorReply.context_length_exceeded(self.overflow_message.format(window=self.window, tokens=tokens))
        if kind == "summary":
            if self.summarizer == "failing":
                return ErrorReply.server_error("The summarizer is down (scripted failure).")
            return self._reply(
                text=summarize(transcript_of_body(body), self.facts),
                tokens=tokens,
            )
        script = self.turns[turn - 1]
        steps, reply = (
            (script.delegate_steps, script.delegate_reply) if kind == "delegate" else (script.steps, script.reply)
        )
        if step < len(steps):
            prefix = "d" if kind == "delegate" else "t"
            calls = [
                ToolCall(c.name, c.arguments, f"{prefix}{turn:02d}s{step}c{i}") for i, c in enumerate(steps[step].calls)
            ]
            return Reply(tool_calls=calls, usage=Usage(tokens, sum(count_tokens(c.arguments_json) for c in calls)))
        return self._reply(text=reply, tokens=tokens)

    @staticmethod
    def _reply(*, text: str, tokens: int) -> Reply:
        return Reply(text=[text], usage=Usage(tokens, count_tokens(text)))

    @property
    def facts(self) -> tuple[Fact, ...]:
        """Every fact and constraint the script states."""
        return tuple(f for t in self.turns for f in t.facts)

    def classify(self, body: Mapping[str, Any]) -> tuple[RequestKind, int, int]:
        """What a request is: its kind, its scripted turn and its step (see the module docstring)."""
        if is_summary_body(body):
            return "summary", 0, 0
        system = _system_text(body)
        text = request_text(body)
        raw = json.dumps(body.get("messages") or [])
        if "# Your role:" in system and (tasks := _TASK.findall(text)):
            turn = max(int(t) for t in tasks)
            return "delegate", turn, _step(raw, f"d{turn:02d}")
        turn = max((t.number for t in self.turns if t.key in text), default=1)
        return "main", turn, _step(raw, f"t{turn:02d}")

    def of_kind(self, kind: RequestKind) -> list[RequestLog]:
        """The logged requests of one kind, in order."""
        with self._lock:
            return [r for r in self.log if r.kind == kind]

    def snapshot(self) -> list[RequestLog]:
        """The log so far (a copy)."""
        with self._lock:
            return list(self.log)


def _step(raw: str, prefix: str) -> int:
    done = [int(m) for m in re.findall(rf"\b{prefix}s(\d+)c\d+\b", raw)]
    return max(done) + 1 if done else 0


_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def summarize(transcript: str, facts: Sequence[Fact]) -> str:
    """A working summarizer's deterministic handoff summary of a compaction transcript: the goal (the first
    user message it shows) and every sentence holding a stated fact or constraint, each once."""
    goal = "Continue the user's coding session."
    lines = transcript.splitlines()
    for i, line in enumerate(lines):
        if line.strip() == "### User" and i + 1 < len(lines) and lines[i + 1].strip():
            goal = lines[i + 1].strip()[:300]
            break
    kept: list[str] = []
    for line in lines:
        for sentence in _SENTENCE.split(line.strip().lstrip("-* ").strip()):
            lowered = sentence.lower()
            if any(f.key.lower() in lowered for f in facts) and sentence[:300] not in kept:
                kept.append(sentence[:300])
    noted = "\n".join(f"- {s}" for s in kept) or "- (none stated)"
    return (
        f"## Goal\n{goal}\n\n## Progress and decisions\nWorked through the user's requests in order.\n\n"
        f"## User constraints and preferences\n{noted}\n\n## Files and commands that matter\nsrc/app.py, src/util.py, "
        "src/config.py, Makefile, docs/notes.md.\n\n## Next steps\nContinue with the user's latest request."
    )
