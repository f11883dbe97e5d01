"""The chat's model stack, loaded in a thread while its input line waits for the user.

Building the model imports pydantic-ai and the provider's SDK: about a second, most of what the chat took
before its input line appeared. The cheap checks (a model id, the provider's credentials) still run before the
chat starts; the build itself runs here, and the chat waits for it before its first turn. A model that cannot
be built is reported as soon as the build fails (``Chat`` leaves with exit 2, as ``codling run`` does before
any turn).

The thread also imports what the first turn needs (the store's live session, the tools' schemas, the
tokenizer's tables). Importing pydantic-ai from two threads at once can fail (its modules import each other),
so nothing on the chat's loop imports it before :attr:`Preload.done` is.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
from collections.abc import Mapping

from codling.errors import CodlingError

log = logging.getLogger(__name__)


class Preload:
    """Builds ``model_id`` with ``env``'s credentials in a daemon thread; :attr:`done` resolves to the
    configuration error that makes the model unusable, or None."""

    def __init__(self, model_id: str, env: Mapping[str, str]) -> None:
        self.done: concurrent.futures.Future[CodlingError | None] = concurrent.futures.Future()
        self._model_id = model_id
        self._env = env
        self._thread = threading.Thread(target=self._run, name="codling-preload", daemon=True)

    def start(self) -> Preload:
        """Start the thread; this preload."""
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            failure = self._load()
        except Exception:  # best effort: the first turn builds and imports it all again, and says what fails
            log.debug("preloading the model stack failed", exc_info=True)
            failure = None
        self.done.set_result(failure)

    def _load(self) -> CodlingError | None:
        from codling.llm.providers import build_model
        from codling.startup import imports_without_gc

        try:
            build_model(self._model_id, env=self._env)
        except CodlingError as e:
            return e
        with imports_without_gc():
            import codling.store.live  # noqa: F401
            from codling.llm.tokens import warm_up
            from codling.tools.toolset import build_toolset

            build_toolset()
            warm_up()
        return None
