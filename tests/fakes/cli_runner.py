"""The `codling` command line run in the test process with typer's runner, and the recorded session the `sessions`
commands are tested on.

:func:`codling` runs one command as a process started from a pipe would: its stdin is the given text (or empty), its
stdout and stderr are kept apart, and logging starts as in a new process and is left as it was. :func:`clean_env` is
the environment the e2e tests start a real codling with, for a run in process.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

from typer.testing import CliRunner, Result

from codling.cli.app import app

MODEL = "openai-chat:fake-model"

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
"""A recorded session (`history.jsonl`: a tool call, a provider error, an interrupted turn) and its replay."""
GOLDEN_ID = "20261122-901de5e55e01"


@contextlib.contextmanager
def process_logging() -> Iterator[None]:
    """Inside, the root logger as a new process has it: no handlers and level WARNING, so that a warning reaches
    stderr through logging's last resort (not pytest's capture). After, the root logger as it was, whatever ran
    inside (`codling run` points it at the runner's stderr, which the runner closes when the command returns)."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    root.handlers[:] = []
    root.setLevel(logging.WARNING)
    try:
        yield
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)


def codling(env: dict[str, str | None], *args: str, stdin: str | None = None) -> Result:
    """``codling *args`` in process with ``env`` (a ``None`` value unsets the variable), its exit code, stdout and
    stderr."""
    with process_logging():
        return CliRunner().invoke(app, list(args), input=stdin, env=env, catch_exceptions=False)


def clean_env(home: Path, **variables: str) -> dict[str, str | None]:
    """The environment `tests/e2e/test_cli.py` starts a real codling with, for a run in process: none of this
    machine's variables (no credentials, proxies or terminal settings leak in), a private home, the 80 columns a
    process writing to a pipe gets, and ``variables``."""
    return {
        **dict.fromkeys(os.environ),
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "CODLING_HOME": str(home),
        "COLUMNS": "80",
        **variables,
    }


def install_golden(home: Path) -> None:
    """The golden session, recorded under ``home`` as session ``GOLDEN_ID``."""
    target = home / "sessions" / GOLDEN_ID
    target.mkdir(parents=True)
    shutil.copy(GOLDEN / "history.jsonl", target / "history.jsonl")
