"""Streamed markdown is cut into complete blocks: paragraphs at blank lines, code blocks at their closing fence."""

from __future__ import annotations

import pytest

from codling.cli.markdown import MarkdownBlocks

TEXT = (
    "# Plan\n\nFirst **read** the file,\nthen edit it.\n\n"
    "```python\nx = 1\n\ny = 2\n```\nAfter the code.\n\n- one\n- two\n"
)
BLOCKS = ["# Plan", "First **read** the file,\nthen edit it.", "```python\nx = 1\n\ny = 2\n```", "After the code."]


def test_blocks_come_out_as_they_complete_and_the_rest_on_flush() -> None:
    stream = MarkdownBlocks()
    assert stream.feed(TEXT) == BLOCKS
    assert stream.pending
    assert stream.flush() == "- one\n- two"
    assert not stream.pending and stream.flush() == ""


@pytest.mark.parametrize("size", [1, 2, 3, 7, 50])
def test_any_chunking_gives_the_same_blocks(size: int) -> None:
    stream = MarkdownBlocks()
    blocks = [b for i in range(0, len(TEXT), size) for b in stream.feed(TEXT[i : i + size])]
    assert blocks == BLOCKS and stream.flush() == "- one\n- two"


def test_a_blank_line_inside_a_fence_does_not_end_the_block_and_an_unclosed_fence_waits() -> None:
    stream = MarkdownBlocks()
    assert stream.feed("~~~~\na\n\n```\nb\n") == []  # a shorter or other fence does not close it
    assert stream.feed("~~~~\n") == ["~~~~\na\n\n```\nb\n~~~~"]


def test_blank_lines_alone_are_not_blocks() -> None:
    stream = MarkdownBlocks()
    assert stream.feed("\n\n\nHi\n\n") == ["Hi"]
    assert stream.flush() == ""
