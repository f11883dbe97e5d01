"""read_file on files too large to hold (issue 29 D5): streamed pages, flat memory, and whole reads refused."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from codling.errors import PathError, ToolError
from codling.tools.files import READ_MAX_CHARS, READ_MAX_LINE_CHARS, READ_MAX_LINES, edit_file, read_file, write_file
from codling.tools.local import LocalFileSystem
from codling.tools.paging import WHOLE_FILE_MAX_BYTES, page_of_text, read_page
from codling.tools.patch import apply_patch
from tests.fakes.deadlines import deadline
from tests.unit.test_tools_files import ctx_in

GIB = 1024 * 1024 * 1024


def mixed_lines(count: int) -> list[str]:
    """Lines of every kind a page must keep exactly: UTF-8, CRLF, empty, and longer than the line cap (with a
    two-byte character split by the byte limit the stream keeps)."""
    kinds = [
        "plain {i}",
        "héllo wörld {i} — ünïcode",
        "crlf {i}\r",
        "",
        "é" * 3001 + " {i}",
        "z" * 1999 + "é{i}",
    ]
    return [kinds[i % len(kinds)].format(i=i) for i in range(1, count + 1)]


@pytest.fixture(scope="module")
def big_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A real file just over the whole-read cap, and its text."""
    text = ""
    chunk = "\n".join(mixed_lines(6000)) + "\n"
    while len(text.encode()) <= WHOLE_FILE_MAX_BYTES:
        text += chunk
    text += "no newline at the end"
    path = tmp_path_factory.mktemp("big") / "big.txt"
    path.write_bytes(text.encode())
    return path, text


@pytest.mark.parametrize(
    ("first", "last"),
    [(1, None), (5, 9), (2001, None), (5999, 6003), (9_001, None), ("last", None), (1, 1)],
)
def test_a_streamed_page_is_the_page_of_the_whole_text(
    big_file: tuple[Path, str], first: int | str, last: int | None
) -> None:
    path, text = big_file
    total = text.count("\n") + 1
    start = total if first == "last" else first
    assert isinstance(start, int)
    whole = page_of_text(text, start, last, READ_MAX_LINES, READ_MAX_LINE_CHARS)
    streamed = read_page(
        path, start, last, max_lines=READ_MAX_LINES, max_chars=READ_MAX_CHARS, max_line_chars=READ_MAX_LINE_CHARS
    )
    assert streamed.total == whole.total == total and streamed.exact
    # The stream stops collecting once the page's characters are enough: every line it has is the same.
    assert streamed.lines and streamed.lines == whole.lines[: len(streamed.lines)]


async def test_read_file_pages_a_file_over_the_cap_with_a_true_note(big_file: tuple[Path, str]) -> None:
    path, text = big_file
    total = text.count("\n") + 1
    result = await read_file(ctx_in(path.parent), "big.txt", start_line=6001, end_line=6005)
    assert result.text.split("\n") == [
        "  6001\théllo wörld 1 — ünïcode",
        "  6002\tcrlf 2",
        "  6003\t",
        "  6004\t" + "é" * 2000 + " [… 1003 more characters]",
        "  6005\t" + "z" * 1999 + "é [… 1 more characters]",
    ]
    result = await read_file(ctx_in(path.parent), "big.txt", start_line=total - 1)
    assert result.text.split("\n")[-1] == f"{total:>6}\tno newline at the end"
    assert result.summary.startswith(f"Read big.txt: lines {total - 1}-{total} of {total}\n")
    with pytest.raises(ToolError, match=f"start_line {total + 1} is past the end of big.txt, which has {total} lines"):
        await read_file(ctx_in(path.parent), "big.txt", start_line=total + 1)


async def test_a_legacy_8_bit_page_reads_as_it_would_whole(tmp_path: Path) -> None:
    data = b"caf\xe9 cr\xe8me\n" * 10 + b"x" * (WHOLE_FILE_MAX_BYTES + 1) + b"\n"
    (tmp_path / "old.txt").write_bytes(data)
    result = await read_file(ctx_in(tmp_path), "old.txt", end_line=2)
    assert result.text.split("\n") == ["     1\tcafé crème", "     2\tcafé crème"]


async def test_whole_reads_of_a_file_over_the_cap_are_refused_and_nothing_changes(tmp_path: Path) -> None:
    path = tmp_path / "dump.sql"
    with path.open("wb") as f:
        f.write(b"INSERT INTO t VALUES (1);\n" * 400)  # (text for its first 8 KiB: not binary)
        f.truncate(WHOLE_FILE_MAX_BYTES + 1)
    ctx = ctx_in(tmp_path)
    message = (
        f"dump.sql is {WHOLE_FILE_MAX_BYTES + 1:,} bytes, more than the {WHOLE_FILE_MAX_BYTES:,} bytes (8 MiB) "
        "codling reads whole for an edit, a write or an attachment, so it was not read. Read it in pages with "
        "read_file (start_line, end_line) or search it; change it with a command (sed, a script)."
    )
    calls = [
        lambda: edit_file(ctx, "dump.sql", "(1)", "(2)"),
        lambda: write_file(ctx, "dump.sql", "small\n"),
        lambda: apply_patch(ctx, "*** Begin Patch\n*** Delete File: dump.sql\n*** End Patch"),
    ]
    for call in calls:
        with pytest.raises(PathError) as e:
            await call()
        assert str(e.value) == message
    with pytest.raises(PathError, match=r"more than the 8,388,608 bytes \(8 MiB\) codling reads whole"):
        await LocalFileSystem().read_text(path)  # a resource link or @mention reads through the port
    assert path.stat().st_size == WHOLE_FILE_MAX_BYTES + 1
    assert (await read_file(ctx, "dump.sql", end_line=1)).text == "     1\tINSERT INTO t VALUES (1);"


_PROBE = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from tests.unit.test_tools_files import ctx_in

    def peak() -> int:
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
        raise AssertionError("no VmHWM")

    ctx = ctx_in(Path(sys.argv[1]))
    head = asyncio.run(read_file(ctx, "huge.log"))
    print(head.text.split("\\n")[0])
    print(head.text.split("\\n")[-1])
    tail = asyncio.run(read_file(ctx, "huge.log", start_line=1001))
    print(tail.text.split("\\n")[0][-60:])
    print(peak())
    """
)


def test_memory_stays_flat_reading_a_10_gb_file(tmp_path: Path) -> None:
    # 1,000 lines, then 10 GiB of nothing: sparse, so it costs no disk, and one line of 10 GiB without a newline.
    path = tmp_path / "huge.log"
    with path.open("wb") as f:
        f.write(b"".join(f"log line {i}\n".encode() for i in range(1, 1001)))
        f.truncate(10 * GIB)
    probe = "from codling.tools.files import read_file\n" + _PROBE
    done = subprocess.run(
        [sys.executable, "-c", probe, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=deadline(120),
        cwd=Path(__file__).parents[2],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    first, note, cut, peak = done.stdout.splitlines()
    assert first == "     1\tlog line 1"
    assert note.startswith("[Showing lines 1-1001 of at least 1001 (counting stopped ")
    assert note.endswith(
        " bytes past the page, in a file of 10,737,418,240 bytes). To read more, call read_file with start_line=1002.]"
    )
    assert cut.endswith(" more characters]") and "[… at least " in cut
    assert int(peak) < 200 * 1024 * 1024
