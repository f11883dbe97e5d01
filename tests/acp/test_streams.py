"""stdout's writers notice a client that stopped reading (``gone``) and drop what comes after, never raising."""

from __future__ import annotations

import os

from codling.acp.streams import FileWriter


async def test_a_file_writer_to_a_closed_pipe_is_gone_and_drops_later_writes() -> None:
    read_end, write_end = os.pipe()
    writer = FileWriter(write_end)
    try:
        writer.write(b"first\n")
        assert os.read(read_end, 100) == b"first\n" and not writer.gone.is_set()
        os.close(read_end)
        writer.write(b"nobody reads this\n")  # EPIPE (SIGPIPE is ignored in Python): no exception
        assert writer.gone.is_set()
        writer.write(b"nor this\n")
        await writer.drain()
    finally:
        os.close(write_end)
