"""The chat's model stack, loaded in a thread while its input line waits for the user.

Building the model imports pydantic-ai and the provider's SDK: about a second, most of what the chat took
before its input line appeared; the session store's check imports its pydantic records. The cheap checks (a
model id, the provider's credentials) still run before the chat starts; the build and the store's check run
here, and the chat waits for them before its first turn. A model that cannot be built, or a store that cannot
be written, is reported as soon as it is known (``Chat`` leaves with exit 2, as ``codling run`` does before
any turn).

The thread also imports what the first turn needs (the store's live session, the tools' schemas, the
tokenizer's tables). Importing pydantic-ai from two threads at once can fail (its modules import each other),
so nothing on the chat's loop imports it before :attr:`Preload.done` is.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading

from codling.config import Settings
from codling.errors import CodlingError

log = logging.getLogger(__name__)


class Preload:
    """Builds ``model_id`` with the settings' credentials and checks their session store, in a daemon thread;
    :attr:`done` resolves to the error that makes either unusable, or None."""

    def __init__(self, settings: Settings, model_id: str) -> None:
        self.done: concurrent.futures.Future[CodlingError | None] = concurrent.futures.Future()
        self._settings = settings
        self._model_id = model_id
        self._thread = threading.Thread(target=self._run, name="codling-preload", daemon=True)
        self._starting = threading.Lock()

    def start(self) -> None:
        """Start the thread, unless it was started already."""
        with self._starting:
            if self._thread.ident is None:
                self._thread.start()

    def _run(self) -> None:
        try:
            failure = self._load()
        except Exception:  # best effort: the first turn builds and imports it all again, and says what fails
            log.debug("preloading the model stack failed", exc_info=True)
            failure = None
        self.done.set_result(failure)

    def _load(self) -> CodlingError | None:
        from codling.cli.home import open_store
        from codling.llm.providers import build_model
        from codling.startup import imports_without_gc

        try:
            build_model(self._model_id, env=self._settings.env)
            open_store(self._settings).check()
        except CodlingError as e:
            return e
        with imports_without_gc():
            import codling.store.live
            from codling.llm.tokens import warm_up
            from codling.tools.toolset import build_toolset

            build_toolset()
            warm_up()
            import codling.brain.context.pin_capture  # noqa: F401
            from codling.store.records import build_records

            build_records()
        return None
