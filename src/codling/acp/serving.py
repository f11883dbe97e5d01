"""Serving ACP on stdin and stdout: the streams, the transport, signals and the end of the connection.

:func:`serve` runs a :class:`~codling.acp.server.CodlingAgent` until the client closes stdin (or stops reading
stdout) or a stop signal arrives; either way the running turns end as cancelled and recorded first.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, cast

from codling.acp.server import CodlingAgent
from codling.shutdown import SHUTDOWN_SECONDS, handling

if TYPE_CHECKING:
    from acp.interfaces import Agent

    from codling.acp.streams import FileWriter, PipeWriter
    from codling.acp.transport import TolerantTransport

log = logging.getLogger(__name__)


STOP_SIGNALS = ("SIGTERM", "SIGHUP", "SIGINT")


async def serve(cli_model: str | None = None) -> int | None:
    """Serve ACP on stdin/stdout until the client closes the connection, or until SIGTERM, SIGHUP or SIGINT.

    On a signal every session is closed: its running turn is cancelled (commands' processes are stopped) and
    ends as ``cancelled``, with its ``turn_end`` recorded, within :data:`SHUTDOWN_SECONDS`; the signal's
    number is returned (None when the client closed the connection)."""
    import signal

    from acp.core import DEFAULT_STDIO_BUFFER_LIMIT_BYTES
    from acp.task import MessageSender
    from acp.task.supervisor import TaskSupervisor

    from codling.acp.streams import either_is_a_file, file_streams, pipe_streams
    from codling.acp.transport import TolerantTransport

    writer: PipeWriter | FileWriter
    if either_is_a_file():  # e.g. `codling acp < requests.jsonl > replies.jsonl`
        reader, writer = file_streams(DEFAULT_STDIO_BUFFER_LIMIT_BYTES)
    else:
        reader, writer = await pipe_streams(DEFAULT_STDIO_BUFFER_LIMIT_BYTES)
    codling = CodlingAgent(cli_model=cli_model)
    # The sender only writes and drains, which a FileWriter does as a StreamWriter would.
    sender = MessageSender(cast(asyncio.StreamWriter, writer), TaskSupervisor(source="codling.acp"))

    async def end_of_input() -> None:
        """The client closed stdin: its running turns end as cancelled, recorded, as on a signal."""
        closing = asyncio.ensure_future(codling.shutdown())
        await asyncio.wait([closing], timeout=SHUTDOWN_SECONDS)

    transport = TolerantTransport(reader, sender, on_cancel_prompt=codling.cancel_prompt, on_end=end_of_input)
    # The agent implements every Agent protocol method it advertises; the SDK router answers the rest
    # with method-not-found.
    loop = asyncio.get_running_loop()
    received: asyncio.Future[int] = loop.create_future()
    stop_signals = [getattr(signal, name) for name in STOP_SIGNALS]

    def on_signal(sig: int) -> None:
        if not received.done():
            received.set_result(sig)

    with handling({sig: functools.partial(on_signal, sig) for sig in stop_signals}):
        return await _serving(codling, transport, writer, received, end_of_input)


async def _serving(
    codling: CodlingAgent,
    transport: TolerantTransport,
    writer: PipeWriter | FileWriter,
    received: asyncio.Future[int],
    end_of_input: Callable[[], Awaitable[None]],
) -> int | None:
    """Serve until the client leaves (None) or a stop signal arrives (its number), then close every session."""
    from acp import run_agent

    wrapped = codling.newer.wrap(transport)
    serving = asyncio.ensure_future(run_agent(cast("Agent", codling), wrapped, use_unstable_protocol=True))
    gone = asyncio.ensure_future(writer.gone.wait())
    try:
        waited = [serving, gone, cast("asyncio.Future[Any]", received)]
        await asyncio.wait(waited, return_when=asyncio.FIRST_COMPLETED)
        if gone.done() and not received.done():
            # The client stopped reading (it closed stdout but not stdin): nobody hears the turns any more.
            log.info("the client closed codling's stdout; ending the turns and exiting")
            await end_of_input()
            return None
        if not received.done():
            await serving  # the client is gone (or serving failed: raise it)
            return None
        # While the connection is still up, so the client hears how its turns ended.
        closing = asyncio.ensure_future(codling.shutdown())
        await asyncio.wait([closing], timeout=SHUTDOWN_SECONDS)
        if not closing.done():
            log.warning("shutdown: sessions still closing after %gs; exiting anyway", SHUTDOWN_SECONDS)
        return received.result()
    finally:
        gone.cancel()
        serving.cancel()
        await asyncio.wait([serving], timeout=1)
        await asyncio.wait([asyncio.ensure_future(codling.shutdown())], timeout=SHUTDOWN_SECONDS)
