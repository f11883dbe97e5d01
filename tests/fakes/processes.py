"""Watching real processes from tests: whether one still runs, and waiting (with a liveness deadline) for one
to be gone."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path


def alive(pid: int) -> bool:
    """Whether ``pid`` runs; a zombie (killed, not yet reaped) counts as gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


async def gone(pid: int, within: float = 5.0) -> bool:
    """Whether ``pid`` is gone within ``within`` seconds (polled: another process decides when)."""
    deadline = time.monotonic() + within
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True
