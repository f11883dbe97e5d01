"""The terminal's start-up (a part of ``bench.py``): the light commands ``--version``, ``--help``, ``models``,
``sessions list`` and ``sessions show``, each spawned as a user runs it (the ``codling`` entry point of this
interpreter's environment) with a provider key in the environment, alternately with a bare ``python -c pass``
and ``python -c "import typer"`` of the same interpreter, so all see the same machine; and the chat's input line.

Each light command must answer in under 0.5 s, import neither pydantic-ai nor a provider SDK and start Python
once (the key is erased in place, not hidden by a restart: ``codling.seal``), checked once per command with
``python -X importtime``. The chat must offer its input line within twice the time of ``--version``, having
imported none of :data:`CHAT_NEVER_BEFORE_INPUT` (issue 32 D2).
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

LIGHT_COMMANDS: tuple[tuple[str, ...], ...] = (
    ("--version",),
    ("--help",),
    ("models",),
    ("sessions", "list"),
    ("sessions", "show", "20261122-901de5e55e01"),
)
"""The commands timed; the session shown is the golden one, copied into the bench's home."""

HEAVY = ("pydantic_ai", "openai", "anthropic", "google", "tiktoken", "httpx", "httpx2")
"""Top-level packages none of them may import."""

KEY = {"OPENAI_API_KEY": "sk-bench-0123456789"}
"""A provider key, as most users have one in their environment: it must cost the light commands nothing."""

CHAT_NEVER_BEFORE_INPUT = ("pydantic", "pydantic_ai", "openai", "rich", "codling.store.history", "codling.brain.events")
"""What the chat must not import before its input line: the model stack loads while the user types."""

TARGET_SECONDS = 0.5

GOLDEN = Path(__file__).resolve().parent.parent / "tests" / "golden"


def entry_point() -> list[str]:
    """How a user starts codling here: the ``codling`` script beside this interpreter (else ``python -m codling``)."""
    script = Path(sys.executable).with_name("codling")
    return [str(script)] if script.exists() else [sys.executable, "-m", "codling"]


def install_golden(home: Path) -> None:
    """Give ``home`` one recorded session for ``sessions list`` and ``sessions show``."""
    target = home / "sessions" / "20261122-901de5e55e01"
    target.mkdir(parents=True, exist_ok=True)
    shutil.copy(GOLDEN / "history.jsonl", target / "history.jsonl")


def bare_typer() -> list[str]:
    """``python -c "import typer"`` of this interpreter: the floor of any typer command."""
    return [sys.executable, "-c", "import typer"]


def timed(argv: Sequence[str], env: Mapping[str, str]) -> float:
    """Seconds from spawn to exit; the command must succeed."""
    start = time.perf_counter()
    subprocess.run(list(argv), env=dict(env), capture_output=True, timeout=60, check=True)
    return time.perf_counter() - start


def heavy_imports(command: Sequence[str], env: Mapping[str, str]) -> tuple[list[str], int]:
    """The packages of ``HEAVY`` the command imports, and how many times Python started (a restart imports
    ``codling.seal`` again)."""
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "codling", *command],
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    lines = [line.split("|")[-1].strip() for line in result.stderr.splitlines() if "|" in line]
    starts = sum(name == "codling.seal" for name in lines)
    return sorted({name.split(".")[0] for name in lines} & set(HEAVY)), starts


def light_command_times(
    runs: int, env: Mapping[str, str]
) -> tuple[list[float], list[float], dict[tuple[str, ...], list[float]]]:
    """``runs`` alternating rounds: bare Python, ``import typer``, then each command; (bare times, typer times,
    times per command)."""
    codling = entry_point()
    bare: list[float] = []
    typer: list[float] = []
    times: dict[tuple[str, ...], list[float]] = {command: [] for command in LIGHT_COMMANDS}
    for command in LIGHT_COMMANDS:  # once untimed: the page cache and .pyc files are warm for every round
        timed([*codling, *command], env)
    for _ in range(runs):
        bare.append(timed([sys.executable, "-c", "pass"], env))
        typer.append(timed(bare_typer(), env))
        for command in LIGHT_COMMANDS:
            times[command].append(timed([*codling, *command], env))
    return bare, typer, times


def summary(runs: int, env: Mapping[str, str]) -> list[tuple[str, float, list[str], int]]:
    """(label, median seconds, heavy packages imported, Python starts) for bare Python, ``import typer`` and
    each command, run with :data:`KEY` in the environment."""
    env = {**env, **KEY}
    bare, typer, times = light_command_times(runs, env)
    rows = [
        ("python -c pass", statistics.median(bare), [], 1),
        ('python -c "import typer"', statistics.median(typer), [], 1),
    ]
    for command, samples in times.items():
        label = "codling " + " ".join(command[:2])
        rows.append((label, statistics.median(samples), *heavy_imports(command, env)))
    return rows


CHAT_TARGET_RATIO = 2.0
"""How many times ``--version``'s time ``codling chat`` may take to offer its input line."""


def _chat_env(env: Mapping[str, str]) -> dict[str, str]:
    return {
        **env,
        **KEY,
        "CODLING_MODEL": "openai-chat:bench",
        "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
        "TERM": "xterm",
        "PROMPT_TOOLKIT_NO_CPR": "1",  # nothing here answers a terminal's cursor-position query
    }


def chat_prompt_times(runs: int, env: Mapping[str, str], cwd: Path) -> list[float]:
    """Seconds from spawning ``codling chat`` on a pseudo-terminal to its input line appearing, ``runs`` times
    (after one untimed run). The model stack loads while the input line waits (``cli/preload.py``); the model
    server is never contacted."""
    from tests.fakes.pty_process import PtyProcess

    variables = _chat_env(env)
    times: list[float] = []
    for run in range(runs + 1):
        start = time.perf_counter()
        chat = PtyProcess([*entry_point(), "chat"], env=variables, cwd=cwd)
        try:
            chat.expect("›", timeout=60)
            if run:
                times.append(time.perf_counter() - start)
            chat.send("\x04")  # Ctrl-D: leave
            chat.wait()
        finally:
            chat.close()
    return times


def chat_imports_before_input(env: Mapping[str, str], cwd: Path) -> list[str]:
    """The names of :data:`CHAT_NEVER_BEFORE_INPUT` ``codling chat`` imports before its input line appears (the
    imports Python reports on stderr before the ``›`` on stdout: both share the terminal)."""
    from tests.fakes.pty_process import PtyProcess

    chat = PtyProcess([*entry_point(), "chat"], env={**_chat_env(env), "PYTHONPROFILEIMPORTTIME": "1"}, cwd=cwd)
    try:
        at = chat.expect("›", timeout=60)
        before = chat.output[:at]
        chat.send("\x04")
        chat.wait()
    finally:
        chat.close()
    imported = {line.rpartition("|")[2].strip() for line in before.splitlines() if line.startswith("import time:")}
    return [name for name in CHAT_NEVER_BEFORE_INPUT if name in imported]
