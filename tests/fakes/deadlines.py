"""Liveness deadlines for tests: how long to wait for something that should happen, never a measure of speed.

A deadline is only reached when something is stuck, so it is generous, and scaled by ``CODLING_TEST_TIME_FACTOR``
(default 1) so a slow or busy machine waits longer instead of failing. Every liveness wait in the suite goes through
it: a test wraps its own (``asyncio.wait_for(x, deadline(10))``, ``subprocess.run(..., timeout=deadline(60))``,
``pytest.mark.timeout(deadline(90))``); the fakes' waiting helpers (``expect``, ``wait_for``, ``gone``, ``within=``
…) take plain seconds and scale them themselves, so a test passes them a number, never a ``deadline``. pytest's own
per-test limit is scaled by the same factor (tests/time_limits.py).
"""

from __future__ import annotations

import os


def deadline(seconds: float) -> float:
    """``seconds`` scaled by the environment's ``CODLING_TEST_TIME_FACTOR``."""
    try:
        factor = float(os.environ.get("CODLING_TEST_TIME_FACTOR", "1"))
    except ValueError:
        factor = 1.0
    return seconds * max(factor, 1.0)
