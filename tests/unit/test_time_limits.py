"""The suite's time limits fail the test that hangs, never the run (tests/time_limits.py, pyproject's ini).

Each test runs pytest in a subprocess on a small generated test file, with the repository's timeout settings
(read from pyproject.toml) but limits of a second or two, so the hang is short; no codling is imported there.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

from tests.fakes.deadlines import deadline
from tests.time_limits import GUARD_EXIT_STATUS

ROOT = Path(__file__).resolve().parents[2]

SLOW_REPORTS = """
import time

import pytest


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if call.when == "call" and report.failed and "slow_report" in item.name:
        report.longreprtext  # the failure formatted, as a worker does before it sends the report
        time.sleep(LIMIT * 2)  # the input under test: pytest's report work outlasting the test's limit (a busy machine)
    return report
"""

HANGS = """
import threading

import pytest


@pytest.fixture
def hanging_fixture():
    threading.Event().wait()
    yield


def test_1_hangs():
    threading.Event().wait()


def test_2_fails_with_a_slow_report():
    assert 1 == 2


def test_3_fixture_hangs(hanging_fixture):
    pass


def test_4_passes():
    assert True


def test_5_fails_where_pytest_cannot_format_it():
    import ast

    def broken(*args, **kwargs):
        raise SystemError("AST constructor recursion depth mismatch (before=1, after=2)")

    ast.parse = broken  # the input under test: CPython 3.11's broken AST state, as a busy worker once met it
    assert 2 == 3


def test_6_passes_after_it():
    assert True
"""

UNSTOPPABLE = """
import signal, threading


def test_1_passes():
    assert True


def test_2_hangs_past_every_alarm():
    signal.signal(signal.SIGALRM, signal.SIG_IGN)
    threading.Event().wait()


def test_3_never_starts():
    assert True
"""


def run_pytest(
    tmp_path: Path, source: str, timeout: float, session_timeout: float, conftest: str = ""
) -> subprocess.CompletedProcess[str]:
    """pytest on `source` (and `conftest`) with the repository's ini but the given limits, and the suite's
    time-limit plugin."""
    ini = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\n"
        f"timeout = {timeout}\n"
        f"timeout_func_only = {str(ini.get('timeout_func_only', False)).lower()}\n"
        f"session_timeout = {session_timeout}\n"
    )
    (tmp_path / "test_generated.py").write_text(f"LIMIT = {deadline(timeout)}\n" + source)
    if conftest:
        (tmp_path / "conftest.py").write_text(f"LIMIT = {deadline(timeout)}\n" + conftest)
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1"}
    if factor := os.environ.get("CODLING_TEST_TIME_FACTOR"):
        env["CODLING_TEST_TIME_FACTOR"] = factor
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-v",
            "-rA",
            "-p",
            "tests.time_limits",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:xdist",
            "-p",
            "no:asyncio",
            "test_generated.py",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=deadline(40),
    )


def test_a_hang_or_a_slow_failure_report_fails_its_own_test_and_the_run_goes_on(tmp_path: Path) -> None:
    result = run_pytest(tmp_path, HANGS, timeout=0.5, session_timeout=600, conftest=SLOW_REPORTS)
    out = result.stdout + result.stderr
    assert "INTERNALERROR" not in out, out
    assert result.returncode == 1, out
    assert "FAILED test_generated.py::test_1_hangs - Failed: Timeout" in out, out
    slow = next(line for line in out.splitlines() if line.startswith("FAILED test_generated.py::test_2_"))
    assert "Timeout" not in slow, out  # failed for its own error, however long its report took
    assert "E       assert 1 == 2" in out, out
    assert "ERROR test_generated.py::test_3_fixture_hangs - Failed: Timeout" in out, out
    assert "PASSED test_generated.py::test_4_passes" in out, out
    assert "FAILED test_generated.py::test_5_fails_where_pytest_cannot_format_it" in out, out
    assert "assert 2 == 3" in out and "pytest could not format this failure: SystemError" in out, out
    assert "PASSED test_generated.py::test_6_passes_after_it" in out, out


def test_the_session_guard_ends_a_run_no_alarm_can_stop(tmp_path: Path) -> None:
    result = run_pytest(tmp_path, UNSTOPPABLE, timeout=0.5, session_timeout=0.5)
    out = result.stdout + result.stderr
    assert result.returncode == GUARD_EXIT_STATUS, out
    assert "test_generated.py::test_1_passes PASSED" in out, out
    assert "codling suite guard: the session ran past" in out, out
    assert "test_2_hangs_past_every_alarm" in out, out  # the stack shows where it hung
    assert "test_3_never_starts" not in out, out
