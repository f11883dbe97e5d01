"""The suite's time limits: a hang fails its own test, never the run (a pytest plugin; tests/conftest.py loads it).

pytest-timeout's SIGALRM raises wherever the process happens to be. Armed for a test's whole protocol (its
default), it once fired while pytest was formatting a failure on a busy machine: the xdist worker raised
INTERNALERROR and 1,500 tests never ran. So the alarm is armed only around the phases that run the suite's
code — the test function (``timeout_func_only``) and, here, its fixtures' setup and teardown, one alarm each —
and never while pytest makes or sends a report. The thread method was the other choice: it ends a hang by
``os._exit``, which takes the worker down with every test it had left (all of them without xdist).

A failure pytest cannot format (``ast.parse`` of the test's source raising ``SystemError`` on CPython 3.11, as
it once did on a busy worker after a timeout) fails its own test with a plain traceback
(``pytest_runtest_makereport`` below) rather than raising INTERNALERROR, which would end the worker's run.

Every limit is scaled by ``CODLING_TEST_TIME_FACTOR`` (``tests/fakes/deadlines.deadline``), as the tests' own
deadlines are: the ini's ``timeout`` and ``session_timeout`` (a ``--timeout`` on the command line or
``PYTEST_TIMEOUT`` is taken as given). ``session_timeout`` stops a run from starting tests once it has run too
long; a hang no alarm can break (SIGALRM ignored, or delivered to another thread while the main one waits) is
ended by the session guard, a thread that dumps every stack and exits the process once the session limit and a
test's three phases have passed, so a run can never block CI forever.
"""

from __future__ import annotations

import faulthandler
import os
import sys
import threading
import traceback
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from pytest_timeout import Settings

from tests.fakes.deadlines import deadline

GUARD_EXIT_STATUS = 7
"""The exit status of a process the session guard ends (pytest's own statuses stop at 5)."""

_TEST_LIMIT = pytest.StashKey[float]()
_GUARD = pytest.StashKey[threading.Timer]()


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Scale the ini's limits before pytest-timeout reads them, and start the session guard."""
    limit = config.getoption("timeout", None)
    if limit is None and not os.environ.get("PYTEST_TIMEOUT"):
        ini = config.getini("timeout")
        if ini:
            config.option.timeout = limit = deadline(float(ini))
    elif limit is None:
        limit = float(os.environ["PYTEST_TIMEOUT"])
    config.stash[_TEST_LIMIT] = float(limit or 0)
    session = config.getoption("session_timeout", None)
    if session is None and config.getini("session_timeout"):
        config.option.session_timeout = session = deadline(float(config.getini("session_timeout")))
    if session:
        _start_guard(config, float(session) + 3 * float(limit or 0))


def pytest_unconfigure(config: pytest.Config) -> None:
    """Stop the session guard: the session ended."""
    guard = config.stash.get(_GUARD, None)
    if guard is not None:
        guard.cancel()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    """Bound the test's fixtures' setup as its function is bounded."""
    with _alarm(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, None, None]:
    """Bound the test's fixtures' teardown as its function is bounded."""
    with _alarm(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    """A failure pytest cannot format fails its test with a plain traceback instead of ending the run.

    pytest formats a failure with ``ast.parse`` of the test's source; on a busy machine CPython 3.11 once
    raised ``SystemError: AST constructor recursion depth mismatch`` there, the xdist worker raised
    INTERNALERROR and the rest of its tests never ran."""
    try:
        return (yield)
    except Exception as broken:
        excinfo, when = call.excinfo, call.when
        assert when != "collect"  # a test's report, not a collector's
        shown = "".join(traceback.format_exception(excinfo.value)) if excinfo is not None else ""
        return pytest.TestReport(
            item.nodeid,
            item.location,
            dict.fromkeys(item.keywords, 1),
            "failed",
            f"{shown}\n(pytest could not format this failure: {broken!r})",
            when,
            duration=call.duration,
            start=call.start,
            stop=call.stop,
            user_properties=item.user_properties,
        )


@contextmanager
def _alarm(item: pytest.Item) -> Iterator[None]:
    """pytest-timeout's own timer, armed for one phase (the limit: the test's marker's, else the suite's)."""
    marker = item.get_closest_marker("timeout")
    limit, func_only = item.config.stash.get(_TEST_LIMIT, 0.0), bool(item.config.getini("timeout_func_only"))
    if marker is not None:
        given = marker.kwargs.get("timeout", marker.args[0] if marker.args else None)
        limit = limit if given is None else float(given)
        func_only = bool(marker.kwargs.get("func_only", func_only))
    # Without func_only pytest-timeout's one alarm spans the whole protocol: a second would cancel it.
    armed = limit > 0 and func_only
    if armed:
        item.ihook.pytest_timeout_set_timer(item=item, settings=Settings(limit, "signal", True, False))
    try:
        yield
    finally:
        if armed:
            item.ihook.pytest_timeout_cancel_timer(item=item)


def _start_guard(config: pytest.Config, seconds: float) -> None:
    # Written to a copy of the real stderr: by the time the guard fires, pytest's capture may own fd 2.
    out = os.dup(sys.__stderr__.fileno() if sys.__stderr__ is not None else 2)

    def abandon() -> None:
        os.write(out, f"\ncodling suite guard: the session ran past {seconds:g} s; every thread's stack:\n".encode())
        faulthandler.dump_traceback(file=out, all_threads=True)
        os._exit(GUARD_EXIT_STATUS)

    guard = threading.Timer(seconds, abandon)
    guard.name = "codling suite guard"
    guard.daemon = True
    config.stash[_GUARD] = guard
    guard.start()
