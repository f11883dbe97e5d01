"""How file bytes become text and back: UTF-8, or a legacy 8-bit encoding kept as it was.

Text that is not UTF-8 but holds no NUL byte (ripgrep's test for binary, over the first 8 KiB) is read as
Windows-1252, or Latin-1 where Windows-1252 leaves a byte undefined: both map each byte to one character and
back, so an edit changes only the text it replaces. A write to such a file encodes in the file's own
encoding; new text that encoding cannot hold is refused with a way out, rather than silently re-encoding the
whole file as UTF-8.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from codling.errors import PathError
from codling.tools.matcher import looks_binary

Encoding = Literal["utf-8", "cp1252", "latin-1"]


def sniff(data: bytes) -> Encoding | None:
    """The encoding ``data`` reads in: UTF-8 when it is valid UTF-8, else a legacy 8-bit one; None if binary."""
    if looks_binary(data):
        return None
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        try:
            data.decode("cp1252")
        except UnicodeDecodeError:
            return "latin-1"
        return "cp1252"
    return "utf-8"


def decode(data: bytes, path: Path) -> str:
    """The text of the file ``path`` held ``data``; ``PathError`` if it is binary."""
    encoding = sniff(data)
    if encoding is None:
        raise PathError(f"{path} is a binary file (it holds NUL bytes), so it cannot be read as text")
    return data.decode(encoding)


def encode(content: str, path: Path, existing: bytes | None) -> bytes:
    """``content`` as bytes for ``path``: in the encoding of its ``existing`` bytes when those are legacy 8-bit
    text, else UTF-8; ``PathError`` saying what to do when the content cannot be written so."""
    encoding = sniff(existing) if existing is not None else "utf-8"
    if encoding is None:
        encoding = "utf-8"  # a binary file replaced by text becomes UTF-8 text
    try:
        return content.encode(encoding)
    except UnicodeEncodeError as e:
        bad = content[e.start : e.end]
        if encoding == "utf-8":  # a lone surrogate ("\ud800") has no UTF-8 form
            raise PathError(
                f"{path} was not written: the content holds a character that cannot be written as UTF-8 "
                f"({bad!r} at index {e.start}); remove it"
            ) from e
        raise PathError(
            f"{path} was not written: it is {encoding} text (not UTF-8), which cannot hold {bad!r} (at index "
            f"{e.start}); leave such characters out, or convert the file to UTF-8 first "
            f"(iconv -f {encoding} -t utf-8)"
        ) from e
