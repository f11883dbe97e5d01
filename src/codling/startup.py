"""Start-up imports without the cyclic garbage collector.

Importing the model stack (pydantic-ai and a provider SDK) and the ACP SDK makes some 150,000 objects that live as
long as the process, and the collector kept walking them while they were made: several hundred young collections
and two full ones, about 0.4 CPU-s of a ``codling run``'s 4 (a loaded 2-core machine). :func:`imports_without_gc`
turns the collector off for such a stretch and on again when it ends. When the stretch imported modules, what
exists then is first moved out of the collector's reach for good (``gc.freeze``), so nothing walks the modules'
objects again either; a stretch that imported nothing (a model built again later in a long session) is not
frozen, so no cyclic garbage of the moment is kept forever, and modules are imported once, so what freezing
keeps is bounded. Collection is only postponed, never given up: the stretches are imports and model
construction, so nothing runs unbounded while it is off.

Stretches may overlap, also from two threads (the ACP warm-up thread imports while the event loop serves): the
collector comes back when the last one ends, and only if it was on when the first began.

A stretch also keeps out modules a dependency imports only in case they are installed and codling never runs
(:data:`UNUSED_MODULES`), since every heavy import of codling's goes through one.
"""

from __future__ import annotations

import gc
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_lock = threading.Lock()
_depth = 0
_was_enabled = False
_modules_before = 0

UNUSED_MODULES = ("httpx._main",)
"""Modules whose dependents treat them as optional (an ``ImportError`` is expected) and codling never uses.
httpx's ``__init__`` imports its command-line client whenever click and rich are installed: about 80 modules
(rich, click, pygments) and 5 MB of an idle ``codling acp``, for a ``main`` that only ``python -m httpx`` runs."""


def skip_unused_modules() -> None:
    """Make importing :data:`UNUSED_MODULES` fail as if they were absent, unless one is already imported."""
    for name in UNUSED_MODULES:
        sys.modules.setdefault(name, None)  # type: ignore[arg-type]  # None in sys.modules: an ImportError


@contextmanager
def imports_without_gc() -> Iterator[None]:
    """Run the block with the cyclic garbage collector off, and turn it back on after (freezing what exists
    first if modules were imported meanwhile)."""
    global _depth, _was_enabled, _modules_before
    skip_unused_modules()
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            _modules_before = len(sys.modules)
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _was_enabled:
                if len(sys.modules) > _modules_before:
                    gc.freeze()
                gc.enable()


_M_ARENA_MAX = -8
"""glibc's ``mallopt`` parameter for the most malloc arenas (``malloc.h``)."""


def _libc() -> Any:
    """glibc, or None elsewhere (another C library, another system)."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        libc = ctypes.CDLL(None)
        libc.malloc_trim  # noqa: B018  # musl has none
        libc.mallopt  # noqa: B018
    except (OSError, AttributeError):
        return None
    return libc


def one_malloc_arena() -> bool:
    """Make every thread allocate from the process's one C heap (glibc; elsewhere False); call it before threads.

    glibc gives each thread that allocates while another does an arena of its own, and the memory a thread freed
    stays in its arena: the ACP warm-up thread builds the tokenizer's tables (and frees their 50 MB of Python
    scaffolding) in one. Threads in codling hold the GIL for most allocations, so they do not contend for one.
    """
    libc = _libc()
    return libc is not None and libc.mallopt(_M_ARENA_MAX, 1) == 1


def release_free_memory() -> None:
    """Return the C heap's free pages to the system (glibc's ``malloc_trim``; no-op elsewhere).

    Called after start-up's big transient allocations (the tokenizer's ranks): glibc keeps freed memory below
    the top of its heap resident until asked.
    """
    if (libc := _libc()) is not None:
        libc.malloc_trim(0)
