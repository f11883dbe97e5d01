"""How codling stops on a signal, the same in ``codling acp``, ``codling run`` and the chat.

SIGTERM and SIGHUP (and SIGINT for ``codling acp``) end every running turn as ``cancelled``, its commands
stopped and its ``turn_end`` recorded; codling waits :data:`SHUTDOWN_SECONDS` for that, then leaves anyway with
128 + the signal's number (every record already written is whole on disk). :func:`handling` installs a
command's handlers on the running loop for as long as it runs; :func:`exit_after_grace` sets the deadline.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager

SHUTDOWN_SECONDS = 5.0
"""How long a signal's shutdown waits for the turns to end and be recorded before codling exits anyway."""


@contextmanager
def handling(handlers: Mapping[signal.Signals, Callable[[], object]]) -> Iterator[None]:
    """While inside, the running loop calls ``handlers[sig]`` for each signal ``sig`` (a handler set again inside
    replaces it); every one of them is removed on the way out."""
    loop = asyncio.get_running_loop()
    for sig, handler in handlers.items():
        loop.add_signal_handler(sig, handler)
    try:
        yield
    finally:
        for sig in handlers:
            loop.remove_signal_handler(sig)


def exit_after_grace(sig: int) -> None:
    """Leave the process with 128 + ``sig`` once :data:`SHUTDOWN_SECONDS` have passed, whatever still runs."""
    asyncio.get_running_loop().call_later(SHUTDOWN_SECONDS, os._exit, 128 + sig)
