"""Liveness deadlines for tests: how long to wait for something that should happen, never a measure of speed.

A deadline is only reached when something is stuck, so it is generous, and scaled by ``CODLING_TEST_TIME_FACTOR``
(default 1) so a slow or busy machine waits longer instead of failing.
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
