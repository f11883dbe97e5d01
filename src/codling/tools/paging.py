"""Files too large to hold: the cap on whole-file reads, and read_file's page of a large file, streamed.

Edits, writes, patches and attachments need a file's whole text (to match, diff and write it back); they hold
at most :data:`WHOLE_FILE_MAX_BYTES` and refuse a larger file with what to do instead
(:func:`refuse_too_large`), so a 10 GB log never becomes 10 GB of memory. ``read_file`` reads a file above
that size from disk block by block (:func:`read_page`): it keeps only the lines it shows (each cut at the line
cap), counts the others' newlines as they pass, and stops counting after :data:`COUNT_MAX_BYTES` past the
page, saying "at least" then. Memory stays a block plus the page, whatever the file's size or its lines'.
"""

from __future__ import annotations

import os
import stat
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from codling.errors import PathError, ToolError
from codling.tools.matcher import BINARY_SNIFF_BYTES, looks_binary

WHOLE_FILE_MAX_BYTES = 8 * 1024 * 1024
"""The largest file read whole (8 MiB: a generated source file or a large data file fits, a log or dump may
not); a larger one is read by pages only."""

COUNT_MAX_BYTES = 256 * 1024 * 1024
"""How far past the page (or into one cut line) newlines and characters are counted: 256 MiB, a quarter to one
second of a turn (1 GiB cost 1–4 s a page of a huge log, for a count the note gives as "at least" anyway)."""

_BLOCK = 1024 * 1024
_UTF8_BYTES_PER_CHAR = 4
_CONTINUATION = bytes(range(0x80, 0xC0))
"""UTF-8 continuation bytes: a character is one byte that is not one of these."""


def refuse_too_large(path: Path, size: int, shown: object | None = None) -> None:
    """Raise ``PathError`` when a file of ``size`` bytes is over :data:`WHOLE_FILE_MAX_BYTES`, saying how to
    work with it instead."""
    if size > WHOLE_FILE_MAX_BYTES:
        raise PathError(
            f"{shown or path} is {size:,} bytes, more than the {WHOLE_FILE_MAX_BYTES:,} bytes (8 MiB) codling reads "
            "whole for an edit, a write or an attachment, so it was not read. Read it in pages with read_file "
            "(start_line, end_line) or search it; change it with a command (sed, a script)."
        )


def size_on_disk(path: Path) -> int | None:
    """The size of the regular file at ``path`` (following links), None if there is none."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_size if stat.S_ISREG(st.st_mode) else None


@dataclass(frozen=True)
class PageLine:
    """One line of a page: its text (without line ending), at most the line cap long, and how many
    characters of it were left out."""

    text: str
    more: int = 0
    more_at_least: bool = False
    """``more`` is a lower bound: counting the cut line's characters stopped at :data:`COUNT_MAX_BYTES`."""


@dataclass(frozen=True)
class Page:
    """The lines of a file from ``first`` on, as many as a read may show, and how many lines the file has."""

    lines: tuple[PageLine, ...]
    first: int
    total: int
    exact: bool = True
    """False when counting stopped early: the file has at least ``total`` lines."""
    counted_bytes: int = 0
    """How many bytes of the file were looked at (when the count is not exact)."""
    size: int = 0


def page_of_text(text: str, first: int, last: int | None, max_lines: int, max_line_chars: int) -> Page:
    """The page of a text already held whole (a small file, or the editor's buffer)."""
    lines = text.split("\n")
    if lines[-1] == "":  # a final newline ends the last line; it does not start another
        lines.pop()
    end = len(lines) if last is None else min(last, len(lines))
    end = min(end, first + max_lines - 1)
    page = []
    for line in lines[first - 1 : end]:
        line = line.removesuffix("\r")
        if len(line) > max_line_chars:
            page.append(PageLine(line[:max_line_chars], len(line) - max_line_chars))
        else:
            page.append(PageLine(line))
    return Page(tuple(page), first, len(lines), size=len(text))


def read_page(
    path: Path,
    first: int,
    last: int | None,
    *,
    max_lines: int,
    max_chars: int,
    max_line_chars: int,
    stop: threading.Event | None = None,
) -> Page:
    """The page of the file at ``path`` from line ``first`` to ``last`` (or the end), at most ``max_lines``
    lines and about ``max_chars`` characters, read block by block; ``PathError`` if it is binary or unreadable.

    Lines before ``first`` are only counted; the page's lines keep at most ``max_line_chars`` characters; after
    the page, newlines are counted for at most :data:`COUNT_MAX_BYTES`. ``stop`` (set when the turn is
    cancelled) ends the read between blocks with ``ToolError``."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as e:
        raise PathError(f"{path} cannot be read: {e.strerror or e}") from e
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise PathError(f"{path} is not a regular file, so it is not read in pages")
        with open(fd, "rb", buffering=0, closefd=False) as f:
            reader = _PageReader(f, first, last, max_lines, max_chars, max_line_chars, stop)
            return reader.read(path, st.st_size)
    finally:
        os.close(fd)


class _PageReader:
    """The state of one streamed read (see :func:`read_page`)."""

    def __init__(
        self,
        f: BinaryIO,
        first: int,
        last: int | None,
        max_lines: int,
        max_chars: int,
        max_line_chars: int,
        stop: threading.Event | None,
    ) -> None:
        self.f = f
        self.first = first
        self.end = first + max_lines - 1 if last is None else min(last, first + max_lines - 1)
        self.max_chars = max_chars
        self.max_line_chars = max_line_chars
        self.keep_bytes = max_line_chars * _UTF8_BYTES_PER_CHAR
        self.stop = stop
        self.number = 1
        """The line the next byte belongs to."""
        self.started = False
        """Whether the current line has a byte yet."""
        self.kept = bytearray()
        self.tail_bytes = 0
        """Bytes of the current (page) line past ``kept``, counted, not held."""
        self.tail_chars = 0
        """Of those, the ones that start a UTF-8 character."""
        self.tail_last = 0
        self.raw: list[tuple[bytes, int, int, int]] = []
        """The page's lines as read: kept bytes, tail bytes, tail characters, last byte."""
        self.chars = 0
        self.counted = 0

    def read(self, path: Path, size: int) -> Page:
        read = self.f.read
        head = read(BINARY_SNIFF_BYTES)
        if looks_binary(head):
            raise PathError(f"{path} is a binary file (it holds NUL bytes), so it cannot be read as text")
        block = head
        exact = True
        while block:
            if self.stop is not None and self.stop.is_set():
                raise ToolError("the read was stopped")
            if not self._take(block):
                exact = False
                break
            block = read(_BLOCK)
        total = self.number if self.started else self.number - 1
        if exact and self.started and self._on_page():
            self._end_line()  # the last line, which no newline ends
        if self.first > total and exact:
            return Page((), self.first, total, size=size)
        return Page(self._decoded(), self.first, total, exact, self.counted, size)

    def _on_page(self) -> bool:
        return self.first <= self.number <= self.end and self.chars < self.max_chars

    def _take(self, block: bytes) -> bool:
        """Take one block; False when counting has gone as far as it may."""
        start = 0
        length = len(block)
        while start < length:
            if self.number < self.first:
                # Skipping to the page: count whole blocks while the page is not in them.
                newlines = block.count(b"\n", start)
                if self.number + newlines < self.first:
                    self.number += newlines
                    self.started = block[-1:] != b"\n"
                    return True
                while self.number < self.first:
                    start = block.index(b"\n", start) + 1
                    self.number += 1
                self.started = False
                continue
            if self._on_page():
                newline = block.find(b"\n", start)
                stop_at = length if newline < 0 else newline
                if not self._add(block, start, stop_at):
                    return False
                if newline < 0:
                    return True
                self._end_line()
                self.number += 1
                self.started = False
                start = newline + 1
                continue
            # After the page: count the rest, within the counting cap.
            rest = block[start:] if start else block
            self.counted += len(rest)
            self.number += rest.count(b"\n")
            if rest:
                self.started = rest[-1:] != b"\n"
            return self.counted <= COUNT_MAX_BYTES
        return True

    def _add(self, block: bytes, start: int, stop_at: int) -> bool:
        """Add ``block[start:stop_at]`` to the page's current line; False when its tail outgrew the count cap."""
        if stop_at > start:
            self.started = True
        room = self.keep_bytes - len(self.kept)
        if room > 0:
            self.kept += block[start : min(stop_at, start + room)]
            start = min(stop_at, start + room)
        if stop_at > start:
            part = block[start:stop_at]
            self.tail_bytes += len(part)
            self.tail_chars += len(part.translate(None, _CONTINUATION))
            self.tail_last = part[-1]
            self.counted += len(part)
            if self.counted > COUNT_MAX_BYTES:
                self._end_line(at_least=True)
                return False
        return True

    def _end_line(self, *, at_least: bool = False) -> None:
        last = self.tail_last if self.tail_bytes else (self.kept[-1] if self.kept else 0)
        self.raw.append((bytes(self.kept), self.tail_bytes, self.tail_chars, last | (0x100 if at_least else 0)))
        self.chars += min(len(self.kept), self.max_line_chars)
        self.kept = bytearray()
        self.tail_bytes = self.tail_chars = self.tail_last = 0

    def _decoded(self) -> tuple[PageLine, ...]:
        """The page's lines as text: UTF-8 when every line is (a character cut at the keep limit aside), else
        Windows-1252 or Latin-1, byte for character, as ``tools/encoding.py`` reads a legacy file."""
        utf8 = all(_utf8(kept, cut=tail > 0) is not None for kept, tail, _, _ in self.raw)
        legacy = "cp1252"
        if not utf8:
            try:
                b"".join(kept for kept, _, _, _ in self.raw).decode("cp1252")
            except UnicodeDecodeError:
                legacy = "latin-1"
        lines = []
        for kept, tail_bytes, tail_chars, last in self.raw:
            at_least = bool(last & 0x100)
            crlf = (last & 0xFF) == 0x0D and not at_least  # a CRLF line ending's CR is not the line's
            if utf8:
                decoded = _utf8(kept, cut=tail_bytes > 0)
                assert decoded is not None
                text, dropped = decoded
                more = dropped + tail_chars
            else:
                text, more = kept.decode(legacy), tail_bytes
            if crlf:
                if more:
                    more -= 1
                else:
                    text = text.removesuffix("\r")
            if len(text) > self.max_line_chars:
                more += len(text) - self.max_line_chars
                text = text[: self.max_line_chars]
            lines.append(PageLine(text, more, at_least))
        return tuple(lines)


def _utf8(data: bytes, *, cut: bool) -> tuple[str, int] | None:
    """``data`` as UTF-8 text and how many characters a cut at its end left out (a character split by the
    cut), or None when it is not UTF-8."""
    try:
        return data.decode("utf-8"), 0
    except UnicodeDecodeError as e:
        if not cut or e.end != len(data) or len(data) - e.start >= _UTF8_BYTES_PER_CHAR:
            return None
        try:
            return data[: e.start].decode("utf-8"), 1
        except UnicodeDecodeError:
            return None
