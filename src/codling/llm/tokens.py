"""Token counting with tiktoken's o200k_base encoding, loaded offline (DESIGN.md section 7).

This is the only module of codling that imports tiktoken, and it does so lazily: importing it is cheap, and the
encoding is built on first use (or by :func:`warm_up` in a background thread), once per process. The ranks come
from ``data/o200k_base.tiktoken.gz`` shipped inside the package and are checked against their known sha256, so
nothing is ever downloaded; ``tiktoken.get_encoding`` is never called because it may fetch the file.

Counting is done by tiktoken's Rust core, by chunks of at most :data:`CHUNK_CHARS` characters (its merge is
superlinear in a long run without whitespace), and estimated past :data:`EXACT_MAX_CHARS` characters; cuts
encode only a few times what they keep. So no count or cut costs more than a bounded amount of encoding, whatever
the text's size (issue 29 D1). Counts are not cached here: callers count each message once, when it is
added, and keep the number with it (see ``HistoryEntry`` in ``codling.brain.state``).
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from codling.errors import CodlingError, ConfigError

if TYPE_CHECKING:
    import tiktoken

log = logging.getLogger(__name__)

ENCODING_NAME = "o200k_base"
DATA_FILE = "data/o200k_base.tiktoken.gz"
"""Where the gzipped ranks live, relative to the ``codling.llm`` package."""
EXPECTED_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
"""sha256 of the decompressed ranks; the same hash tiktoken checks when it downloads them."""

# The pattern and special tokens are copied from ``o200k_base()`` in tiktoken_ext/openai_public.py (tiktoken
# 0.14). They cannot be read from there: that function builds them inline, next to a call that downloads the
# ranks. tests/unit/test_tokens.py checks them against tiktoken's own definition, offline.
_PAT_STR = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
_SPECIAL_TOKENS = {"<|endoftext|>": 199999, "<|endofprompt|>": 200018}

_MAX_UTF8_BYTES_PER_CHAR = 4
"""Every token covers at least one byte, so a text has at most this many tokens per character."""

_lock = threading.Lock()
_encoding: tiktoken.Encoding | None = None


def _damaged(path: object, what: str) -> ConfigError:
    return ConfigError(
        f"codling's token data file {path} is damaged ({what}); reinstall codling "
        "(for example `pip install --force-reinstall codling`) to restore it."
    )


def _read_ranks(path: Path | None = None) -> dict[bytes, int]:
    """The mergeable ranks from the gzipped ranks file (the shipped one unless ``path`` is given), verified."""
    import binascii
    import gzip
    import hashlib
    import zlib
    from importlib import resources

    source = resources.files("codling.llm").joinpath(DATA_FILE) if path is None else path
    try:
        data = gzip.decompress(source.read_bytes())
    except FileNotFoundError as e:
        raise _damaged(source, "the file is missing") from e
    except (OSError, EOFError, zlib.error) as e:  # gzip.BadGzipFile is an OSError
        raise _damaged(source, f"cannot decompress it: {e}") from e
    digest = hashlib.sha256(data).hexdigest()
    if digest != EXPECTED_SHA256:
        raise _damaged(source, f"sha256 {digest}, expected {EXPECTED_SHA256}")
    # Lines are "<base64 token> <rank>"; the hash pins the content, so splitting on whitespace is safe and about
    # twice as fast as tiktoken's line-by-line parse, and the ranks it pins are the line numbers 0, 1, 2…, so they
    # are not parsed (a quarter of the load's Python time; tests/unit/test_tokens.py compares with tiktoken's).
    tokens = data.split()[0::2]
    return dict(zip(map(binascii.a2b_base64, tokens), range(len(tokens)), strict=True))


def _load_encoding(path: Path | None = None) -> tiktoken.Encoding:
    """Build the o200k_base encoding from the ranks file; raises :class:`ConfigError` if the file is damaged.

    The Python ranks are emptied once the encoding is built: its Rust core keeps its own copy, which is all
    encoding and decoding use, while ``Encoding`` would hold the dict it was given (200,000 bytes objects, about
    a third of a ``codling acp`` process at rest) only for pickling and ``token_byte_values``, which codling never
    calls.
    """
    import tiktoken

    ranks = _read_ranks(path)
    encoding = tiktoken.Encoding(
        ENCODING_NAME, pat_str=_PAT_STR, mergeable_ranks=ranks, special_tokens=dict(_SPECIAL_TOKENS)
    )
    ranks.clear()
    return encoding


def _get_encoding() -> tiktoken.Encoding:
    """The process-wide encoding, built on first use; concurrent first callers wait for one build."""
    global _encoding
    enc = _encoding
    if enc is None:
        with _lock:
            enc = _encoding
            if enc is None:
                enc = _encoding = _load_encoding()
    return enc


def warm_up() -> None:
    """Load the encoding now (meant for a background thread); a damaged file is reported on first real use."""
    try:
        _get_encoding()
    except CodlingError:
        log.debug("token encoding warm-up failed", exc_info=True)


CHUNK_CHARS = 8192
"""The most characters handed to the encoder at once. tiktoken's byte-pair merge is superlinear in the length
of one piece (a run without whitespace: 1 MB of base64 took seconds), so longer text is encoded by chunks, cut
after a word where one ends in the chunk's second half, else at the chunk's end: linear, and within about a
token per chunk of the whole text's count."""

EXACT_MAX_CHARS = 131_072
"""Above this, :func:`count_tokens` counts the first and last ``EXACT_MAX_CHARS // 2`` characters exactly and
estimates the middle at their rate of tokens per character, so no count costs more than this much encoding."""

_WORD_END = re.compile(r"(?s).*\S(?=\s)")
"""Within a chunk's window, the longest stretch ending with a word that whitespace follows."""


class Encoder(Protocol):
    """What counting needs of a tiktoken ``Encoding`` (a seam: tests pass one that records its pieces)."""

    def encode_ordinary(self, text: str) -> list[int]:
        """The tokens of ``text``, special-token text counted as plain text."""
        ...

    def decode_bytes(self, tokens: Sequence[int]) -> bytes:
        """The bytes ``tokens`` stand for."""
        ...


def encoder() -> Encoder:
    """The process-wide o200k_base encoding."""
    return _get_encoding()


def chunks(text: str) -> Iterator[str]:
    """``text`` in pieces of at most :data:`CHUNK_CHARS` characters, cut after a word where possible; joined
    they are ``text``."""
    if len(text) <= CHUNK_CHARS:
        yield text
        return
    start = 0
    while len(text) - start > CHUNK_CHARS:
        end = start + CHUNK_CHARS
        word = _WORD_END.match(text, start + CHUNK_CHARS // 2, end)
        cut = word.end() if word else end
        yield text[start:cut]
        start = cut
    yield text[start:]


def encode(text: str, enc: Encoder | None = None) -> list[int]:
    """The tokens of ``text``, encoded by :func:`chunks` (never a piece longer than :data:`CHUNK_CHARS`)."""
    enc = enc or _get_encoding()
    if len(text) <= CHUNK_CHARS:
        return enc.encode_ordinary(text)
    tokens: list[int] = []
    for chunk in chunks(text):
        tokens += enc.encode_ordinary(chunk)
    return tokens


def count_tokens(text: str, enc: Encoder | None = None) -> int:
    """How many o200k_base tokens ``text`` takes; special-token text such as ``<|endoftext|>`` counts as plain
    text. Exact up to :data:`EXACT_MAX_CHARS` characters (within a token per chunk), estimated beyond."""
    if not text:
        return 0
    if len(text) <= EXACT_MAX_CHARS:
        return len(encode(text, enc))
    half = EXACT_MAX_CHARS // 2
    counted = len(encode(text[:half], enc)) + len(encode(text[-half:], enc))
    return counted + round((len(text) - 2 * half) * counted / (2 * half))


def count_wire_tokens(text: str, enc: Encoder | None = None) -> int:
    """How many tokens ``text`` takes as chat APIs carry it: a JSON string, quoted, with its newlines, quotes
    and backslashes escaped (a few percent more than the text itself for code and logs)."""
    if not text:
        return 0
    import json

    return count_tokens(json.dumps(text, ensure_ascii=False), enc)


def truncate_to_tokens(text: str, max_tokens: int, enc: Encoder | None = None) -> str:
    """The beginning of ``text`` in at most ``max_tokens`` tokens, cut at a token boundary (all of it if it fits)."""
    return _cut(text, max_tokens, keep_end=False, enc=enc)


def tail_tokens(text: str, max_tokens: int, enc: Encoder | None = None) -> str:
    """The end of ``text`` in at most ``max_tokens`` tokens, cut at a token boundary (all of it if it fits)."""
    return _cut(text, max_tokens, keep_end=True, enc=enc)


_FIRST_SPAN_CHARS_PER_TOKEN = 8
"""How many characters per wanted token a cut encodes first (typical text has about four); it takes four times
more as long as that holds too few tokens, so a cut encodes a few times what it keeps, whatever the text's size."""


def _cut(text: str, max_tokens: int, *, keep_end: bool, enc: Encoder | None) -> str:
    if max_tokens <= 0:
        return ""
    if len(text) * _MAX_UTF8_BYTES_PER_CHAR <= max_tokens:
        return text
    enc = enc or _get_encoding()
    span = max_tokens * _FIRST_SPAN_CHARS_PER_TOKEN
    while True:
        whole = span >= len(text)
        part = text if whole else text[-span:] if keep_end else text[:span]
        tokens = encode(part, enc)
        if whole or len(tokens) >= max_tokens:
            break
        span *= 4
    keep = max_tokens
    while keep > 0:
        if len(tokens) <= keep:
            return part
        piece_tokens = tokens[-keep:] if keep_end else tokens[:keep]
        # A cut may split a multi-byte character; drop its stray bytes rather than insert U+FFFD.
        piece = enc.decode_bytes(piece_tokens).decode("utf-8", errors="ignore")
        # Re-tokenizing a piece can, rarely, take more tokens than the slice it came from; shrink until it fits.
        count = len(encode(piece, enc))
        if count <= max_tokens:
            return piece
        keep -= count - max_tokens
    return ""
