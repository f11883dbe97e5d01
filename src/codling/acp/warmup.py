"""The background import of what sessions and turns need, started once ``initialize`` has been answered.

One thread, two stages. First what opening a session needs (the brain and the store, no pydantic-ai): a new
session is answered before it is made, and made once this stage is done (:meth:`WarmUp.session_path`). Then
the tokenizer's tables and the model stack (pydantic-ai, the provider SDK of the model a new session would
use, the tools' schemas), and what the session path defers (the pin patterns, the history records'
validators), so the first prompt does not wait for them. The second stage starts only when released: after
the first new session has been answered, or as soon as anything needs the model stack. Started earlier, it
competed for the GIL with ``session/new`` and made it 2–3× slower.

Before each stage the objects made so far are frozen out of the cyclic garbage collector (``gc.freeze``): the
modules' objects live as long as the process, and a full collection over the acp SDK's schemas alone took
30 ms, landing inside ``session/new``; over pydantic-ai's, it would land inside a prompt.

Importing pydantic-ai from two threads at once can fail (its modules import each other), so the loop waits for
the whole warm-up (:meth:`WarmUp.wait`) before anything that imports it: a turn, a restore, MCP servers.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import gc
import logging
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)


class WarmUp:
    """The warm-up thread of one agent; ``likely_model`` (called from the thread) names the model to load."""

    def __init__(self, likely_model: Callable[[], str | None]) -> None:
        self._likely_model = likely_model
        self._released = threading.Event()
        self._session_path: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._done: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._thread = threading.Thread(target=self._run, name="codling-warm-up", daemon=True)

    def start(self) -> None:
        """Start the thread (the session path is imported at once)."""
        gc.freeze()
        self._thread.start()

    def release(self) -> None:
        """Let the thread go on to the model stack."""
        self._released.set()

    async def session_path(self) -> None:
        """Return once the first stage (what opening a session imports) is done; the thread is not released."""
        if not self._session_path.done():
            await asyncio.wrap_future(self._session_path)

    async def wait(self) -> None:
        """Release the thread and return once it is done."""
        self.release()
        if not self._done.done():
            await asyncio.wrap_future(self._done)

    def _run(self) -> None:
        from codling.startup import imports_without_gc, release_free_memory

        try:
            with imports_without_gc():
                import codling.acp.client_ports
                import codling.acp.mcp_specs
                import codling.acp.translate
                import codling.store.index
                import codling.store.live
        except Exception:  # best effort: the real import reports errors
            log.debug("warm-up import failed", exc_info=True)
        finally:
            self._session_path.set_result(None)
        try:
            self._released.wait()
            with imports_without_gc():
                # The tokenizer first: its tables are built from ~35 MB of Python scaffolding, freed at once, which
                # the model stack's modules then reuse; built last, that scaffolding came on top of the whole stack
                # (the process's peak was 172 MB, 25 more than it holds after).
                from codling.llm.tokens import warm_up

                warm_up()
                from codling.llm.providers import warm_up_provider

                if model_id := self._likely_model():
                    warm_up_provider(model_id)
                from codling.tools.toolset import build_toolset

                build_toolset()
                # What opening a session leaves for later: the pin patterns and the records' validators.
                import codling.brain.context.pin_capture  # noqa: F401
                from codling.store.records import build_records

                build_records()
        except Exception:  # best effort: the real import reports errors
            log.debug("warm-up import failed", exc_info=True)
        finally:
            gc.freeze()
            release_free_memory()
            self._done.set_result(None)
