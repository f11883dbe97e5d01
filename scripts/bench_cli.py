"""The terminal's light commands (a part of ``bench.py``): ``--version``, ``--help``, ``models``, ``sessions list``
and ``sessions show``, each spawned as a user runs it (the ``codling`` entry point of this interpreter's
environment), alternately with a bare ``python -c pass`` of the same interpreter, so both see the same machine.

Each must answer in under 0.5 s and import neither pydantic-ai nor a provider SDK (checked once per command with
``python -X importtime``).
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


def timed(argv: Sequence[str], env: Mapping[str, str]) -> float:
    """Seconds from spawn to exit; the command must succeed."""
    start = time.perf_counter()
    subprocess.run(list(argv), env=dict(env), capture_output=True, timeout=60, check=True)
    return time.perf_counter() - start


def heavy_imports(command: Sequence[str], env: Mapping[str, str]) -> list[str]:
    """The packages of ``HEAVY`` the command imports."""
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "codling", *command],
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    imported = {line.split("|")[-1].strip().split(".")[0] for line in result.stderr.splitlines() if "|" in line}
    return sorted(imported & set(HEAVY))


def light_command_times(runs: int, env: Mapping[str, str]) -> tuple[list[float], dict[tuple[str, ...], list[float]]]:
    """``runs`` alternating rounds: bare Python, then each command; (bare times, times per command)."""
    codling = entry_point()
    bare: list[float] = []
    times: dict[tuple[str, ...], list[float]] = {command: [] for command in LIGHT_COMMANDS}
    for command in LIGHT_COMMANDS:  # once untimed: the page cache and .pyc files are warm for every round
        timed([*codling, *command], env)
    for _ in range(runs):
        bare.append(timed([sys.executable, "-c", "pass"], env))
        for command in LIGHT_COMMANDS:
            times[command].append(timed([*codling, *command], env))
    return bare, times


def summary(runs: int, env: Mapping[str, str]) -> list[tuple[str, float, list[str]]]:
    """(label, median seconds, heavy packages imported) for bare Python and each command."""
    bare, times = light_command_times(runs, env)
    rows = [("python -c pass", statistics.median(bare), [])]
    for command, samples in times.items():
        label = "codling " + " ".join(command[:2])
        rows.append((label, statistics.median(samples), heavy_imports(command, env)))
    return rows


CHAT_TARGET_SECONDS = 2.0
"""How long ``codling chat`` may take to offer its input line."""


def chat_prompt_times(runs: int, env: Mapping[str, str], cwd: Path) -> list[float]:
    """Seconds from spawning ``codling chat`` on a pseudo-terminal to its input line appearing, ``runs`` times
    (after one untimed run). Its model is checked before the prompt, so the model stack is loaded; the model
    server is never contacted."""
    from tests.fakes.pty_process import PtyProcess

    variables = {
        **env,
        "CODLING_MODEL": "openai-chat:bench",
        "OPENAI_API_KEY": "sk-bench",
        "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
        "TERM": "xterm",
        "PROMPT_TOOLKIT_NO_CPR": "1",  # nothing here answers a terminal's cursor-position query
    }
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
