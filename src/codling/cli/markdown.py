"""Streamed markdown cut into blocks that are complete, so each can be rendered once (with rich) as it ends.

A block ends at a blank line outside a fenced code block, or with the fence that closes one; what follows is
held until its block ends or the segment does (``flush``). Rendering a block only when it is whole means a
heading, a list or a highlighted code block is drawn once, right, rather than redrawn as it grows.
"""

from __future__ import annotations

import re

_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")


class MarkdownBlocks:
    """Collects streamed text and hands back the blocks that are complete."""

    def __init__(self) -> None:
        self._pending = ""

    @property
    def pending(self) -> bool:
        """Whether text is held that no complete block has taken yet."""
        return bool(self._pending.strip())

    def feed(self, text: str) -> list[str]:
        """Add streamed ``text``; the blocks it completed, in order (without their blank separating lines)."""
        self._pending += text
        blocks: list[str] = []
        while (cut := self._block_end()) is not None:
            block, self._pending = self._pending[:cut], self._pending[cut:]
            if block.strip():
                blocks.append(block.strip("\n"))
        return blocks

    def flush(self) -> str:
        """Whatever is held (the segment ended): a last, perhaps unfinished, block; empty if none."""
        rest, self._pending = self._pending, ""
        return rest.strip("\n") if rest.strip() else ""

    def _block_end(self) -> int | None:
        """Where the first complete block of the held text ends (just past the line that ends it), if any."""
        fence: str | None = None
        offset = 0
        content = False
        for line in self._pending.splitlines(keepends=True):
            if not line.endswith("\n"):
                return None  # the last line is still streaming
            offset += len(line)
            opened = _FENCE.match(line)
            if fence is not None:
                if opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence):
                    return offset  # the fence closed: the code block is whole
                continue
            if opened:
                fence = opened.group(1)
                content = True
            elif not line.strip():
                if content:
                    return offset
            else:
                content = True
        return None
