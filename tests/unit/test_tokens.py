"""Token counting with the shipped o200k_base encoding (DESIGN.md section 7)."""

from __future__ import annotations

import ast
import gzip
import hashlib
import json
import subprocess
import sys
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

import pytest

from codling.errors import ConfigError
from codling.llm import tokens
from codling.llm.tokens import count_tokens, tail_tokens, truncate_to_tokens
from tests.fakes.deadlines import deadline

SHIPPED = resources.files("codling.llm").joinpath("data/o200k_base.tiktoken.gz")
O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"

# Token ids the real o200k_base gives, as published with tiktoken's ports (js-tiktoken's o200k test cases).
KNOWN_IDS = [
    ("", []),
    ("hello world", [24912, 2375]),
    (" 日本語とEnglish 12345!\n", [17428, 40909, 5330, 28881, 220, 7633, 2548, 4175]),
    ("\x1ca", [216, 64]),
    ("a\n\n", [64, 279]),
    ("<|endoftext|>", [27, 91, 419, 1440, 919, 91, 29]),
    ("a\ud800b", [64, 3251, 65]),  # a lone surrogate is replaced, not an error
]

# Counts computed once with the loaded encoding; they must never drift.
KNOWN_COUNTS = [
    ("Hello, world!", 4),
    ("def add(a, b):\n    return a + b\n", 12),
    ("日本語のテキスト", 6),
    ("🙂🙃 emoji", 4),
    ("   leading spaces", 3),
    ("1234567890", 4),
    ("x" * 1000, 125),
]

SAMPLES = [
    "The quick brown fox jumps over the lazy dog. " * 40,
    "def f(x):\n    return x * 2  # doubles\n" * 50,
    "日本語のテキストと🙂絵文字、そして English words. " * 30,
    "🙂" * 300,
    " " * 500 + "end",
]


@pytest.mark.parametrize(("text", "ids"), KNOWN_IDS)
def test_ids_match_the_real_o200k_base(text: str, ids: list[int]) -> None:
    assert count_tokens(text) == len(ids)
    if text:
        assert tokens._get_encoding().encode_ordinary(text) == ids


@pytest.mark.parametrize(("text", "count"), KNOWN_COUNTS)
def test_known_counts(text: str, count: int) -> None:
    assert count_tokens(text) == count


def test_encoding_matches_tiktokens_own_definition(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Feed tiktoken's own o200k_base() the shipped ranks through its download cache, so it cannot go online.
    from tiktoken.load import check_hash
    from tiktoken_ext import openai_public

    url = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
    data = gzip.decompress(SHIPPED.read_bytes())
    assert check_hash(data, O200K_SHA256)
    (tmp_path / hashlib.sha1(url.encode()).hexdigest()).write_bytes(data)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    spec = openai_public.o200k_base()

    ours = tokens._get_encoding()
    assert ours.name == spec["name"]
    assert ours._pat_str == spec["pat_str"]
    assert ours._special_tokens == spec["special_tokens"]
    assert tokens._read_ranks() == spec["mergeable_ranks"]


def test_round_trip() -> None:
    enc = tokens._get_encoding()
    for text in SAMPLES:
        assert enc.decode(enc.encode_ordinary(text)) == text


def test_special_token_text_counts_as_plain_text() -> None:
    text = "before <|endoftext|> middle <|endofprompt|> after"
    enc = tokens._get_encoding()
    assert count_tokens(text) == len(enc.encode(text, disallowed_special=()))
    assert 199999 not in enc.encode_ordinary(text)
    assert truncate_to_tokens(text, 100) == text
    assert tail_tokens(text, 100) == text


@pytest.mark.parametrize("text", SAMPLES)
@pytest.mark.parametrize("limit", [1, 2, 3, 7, 50, 199])
def test_truncate_keeps_the_beginning_within_the_limit(text: str, limit: int) -> None:
    head = truncate_to_tokens(text, limit)
    assert text.startswith(head)
    assert 0 < count_tokens(head) <= limit or (head == "" and count_tokens(text) > limit)
    assert "\ufffd" not in head


@pytest.mark.parametrize("text", SAMPLES)
@pytest.mark.parametrize("limit", [1, 2, 3, 7, 50, 199])
def test_tail_keeps_the_end_within_the_limit(text: str, limit: int) -> None:
    tail = tail_tokens(text, limit)
    assert text.endswith(tail)
    assert 0 < count_tokens(tail) <= limit or (tail == "" and count_tokens(text) > limit)
    assert "\ufffd" not in tail


def test_cuts_use_nearly_the_whole_budget() -> None:
    text = SAMPLES[0]
    assert count_tokens(truncate_to_tokens(text, 100)) >= 99
    assert count_tokens(tail_tokens(text, 100)) >= 99


def test_cuts_at_the_limit_or_without_budget() -> None:
    text = "hello world"
    assert truncate_to_tokens(text, 2) == text
    assert tail_tokens(text, 2) == text
    assert truncate_to_tokens(text, 1) == "hello"
    assert tail_tokens(text, 1) == " world"
    for cut in (truncate_to_tokens, tail_tokens):
        assert cut(text, 0) == ""
        assert cut(text, -5) == ""
        assert cut("", 10) == ""


def test_shipped_file_is_verified_and_complete() -> None:
    assert hashlib.sha256(gzip.decompress(SHIPPED.read_bytes())).hexdigest() == O200K_SHA256 == tokens.EXPECTED_SHA256
    ranks = tokens._read_ranks()
    assert len(ranks) == 199_998
    assert sorted(ranks.values()) == list(range(199_998))
    assert ranks[b"hello"] == 24912


def test_altered_ranks_are_reported_as_damaged(tmp_path: Path) -> None:
    data = gzip.decompress(SHIPPED.read_bytes())
    bad = tmp_path / "o200k_base.tiktoken.gz"
    bad.write_bytes(gzip.compress(data.replace(b" 24912\n", b" 24913\n", 1)))
    with pytest.raises(ConfigError, match=r"damaged \(sha256 [0-9a-f]{64}, expected 446a95.*reinstall codling"):
        tokens._load_encoding(bad)


def test_corrupted_gzip_is_reported_as_damaged(tmp_path: Path) -> None:
    raw = bytearray(SHIPPED.read_bytes())
    raw[len(raw) // 2 : len(raw) // 2 + 64] = bytes(64)
    bad = tmp_path / "o200k_base.tiktoken.gz"
    bad.write_bytes(bytes(raw))
    with pytest.raises(ConfigError, match=r"damaged.*reinstall codling"):
        tokens._load_encoding(bad)

    truncated = tmp_path / "truncated.gz"
    truncated.write_bytes(bytes(raw[:1000]))
    with pytest.raises(ConfigError, match=r"damaged.*reinstall codling"):
        tokens._load_encoding(truncated)


def test_missing_file_is_reported_as_damaged(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"missing.*reinstall codling"):
        tokens._load_encoding(tmp_path / "nope.gz")


def test_warm_up_then_count() -> None:
    tokens.warm_up()
    assert count_tokens("hello world") == 2


PROBE = """
import json, sys, threading
import codling.llm.tokens as tokens
imported_early = "tiktoken" in sys.modules
barrier = threading.Barrier(7)
seen = []
def worker():
    barrier.wait()
    seen.append(id(tokens._get_encoding()))
threads = [threading.Thread(target=worker) for _ in range(7)] + [threading.Thread(target=tokens.warm_up)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(json.dumps({"imported_early": imported_early, "distinct": len(set(seen)), "calls": len(seen),
                  "same_as_later": id(tokens._get_encoding()) == seen[0]}))
"""


def test_lazy_and_loaded_once_across_threads() -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=deadline(60), check=True
    )
    assert json.loads(out.stdout) == {"imported_early": False, "distinct": 1, "calls": 7, "same_as_later": True}


def test_never_calls_get_encoding() -> None:
    tree = ast.parse(Path(tokens.__file__).read_text())
    called = {n.func.attr for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)}
    assert not called & {"get_encoding", "encoding_for_model"}


class RecordingEncoder:
    """The real encoding, recording the length of every piece handed to it."""

    def __init__(self) -> None:
        self.pieces: list[int] = []
        self.real = tokens.encoder()

    def encode_ordinary(self, text: str) -> list[int]:
        self.pieces.append(len(text))
        return self.real.encode_ordinary(text)

    def decode_bytes(self, tokens: Sequence[int]) -> bytes:
        return self.real.decode_bytes(tokens)


def test_counting_and_cutting_4_mb_without_whitespace_hands_the_encoder_bounded_pieces() -> None:
    # (issue 29 D1) tiktoken's merge is superlinear in one piece's length: 1-2 MB of base64 froze the loop.
    text = "x" * 4_000_000
    enc = RecordingEncoder()
    assert tokens.count_tokens(text, enc) == 500_000  # 8 x's a token; the middle estimated at that rate
    assert tokens.count_wire_tokens(text, enc) > 500_000
    head = tokens.truncate_to_tokens(text, 25_000, enc)
    tail = tokens.tail_tokens(text, 25_000, enc)
    assert head == tail == "x" * 200_000
    assert max(enc.pieces) <= tokens.CHUNK_CHARS
    # Work bounded by what is counted or kept, not by the text's size.
    assert sum(enc.pieces) <= 2 * tokens.EXACT_MAX_CHARS + 4 * 2 * 200_000


def test_chunked_counts_stay_within_a_token_per_chunk_of_the_whole() -> None:
    text = Path(__file__).read_text() * 10
    exact = len(tokens.encoder().encode_ordinary(text))
    chunks = list(tokens.chunks(text))
    assert "".join(chunks) == text and max(map(len, chunks)) <= tokens.CHUNK_CHARS
    assert abs(tokens.count_tokens(text) - exact) <= len(chunks)


def test_the_encoding_keeps_no_python_copy_of_the_ranks() -> None:
    # The Rust core holds the ranks; a Python copy beside it was a third of an idle `codling acp` (issue 33 D7).
    enc = tokens._load_encoding()
    assert not [name for name, value in vars(enc).items() if isinstance(value, dict) and len(value) > 100]
    assert enc.encode_ordinary("hello world") == [24912, 2375]
    assert enc.decode_bytes([24912, 2375]) == b"hello world"
