"""Nothing rendered is cut at the terminal's width (issue 32 item 1): a reply streamed through the live renderer,
styled, at 40, 80 and 200 columns, holds every non-space character of its source, in order."""

from __future__ import annotations

import io
import re
from datetime import UTC, datetime

import pytest
from rich.console import Console

from codling.brain.events import TextDelta, TurnEnded, TurnStarted, Usage
from codling.cli.chat_commands import describe_chat
from codling.cli.draw import StyledWriter
from codling.cli.render import TerminalRenderer
from codling.cli.sessions import print_table
from codling.config import MODE_DESCRIPTIONS, PERMISSION_MODES

WIDTHS = [40, 80, 200]
LONG_WORD = "A" * 70 + "B" * 70 + "END"

REPLY = f"""# Installing the tool with a heading long enough to need two lines at forty columns

Run this, then check the version; the paragraph itself runs well past the edge of a narrow window.

- a list item that is quite long and goes way past the width of the terminal window for sure ENDLIST
- another with a word too long for any line: {LONG_WORD}
  - nested item that is also much longer than forty columns, to see the indent kept ENDNESTED

> a quote that is very long and keeps going and going past the edge of the terminal window ENDQUOTE

```sh
curl -fsSL https://example.com/install.sh | sh -s -- --yes --prefix=/usr/local/something/long ENDCODE
echo {LONG_WORD}
```

Done: `codling --version` prints it.
"""


def plain(markdown: str) -> str:
    """The characters of ``markdown`` a reader sees, spaces dropped: no fences, list or quote markers,
    heading marks or backticks."""
    kept: list[str] = []
    for line in markdown.splitlines():
        if re.match(r"\s*(```|~~~)", line):
            continue
        line = re.sub(r"^\s*(#+ |> |[-*] )", "", line)
        kept.append(line.replace("`", "").replace("\\", ""))
    return "".join("".join(kept).split())


def shown(output: str) -> str:
    """What a terminal shows of ``output``, spaces dropped: no escape codes, bullets, quote bars or rules."""
    output = re.sub(r"\x1b\[[0-9;]*m", "", output)
    output = re.sub(r"[•▌\u2500-\u257f]", "", output)
    return "".join(output.replace("\\", "").split())


async def render_reply(text: str, width: int, monkeypatch: pytest.MonkeyPatch) -> str:
    """``text`` streamed in small deltas through the styled live renderer on a terminal ``width`` wide."""
    monkeypatch.setenv("COLUMNS", str(width))  # how rich learns a terminal's width when it cannot ask it
    out = io.StringIO()
    renderer = TerminalRenderer(out, color=True, interactive=False)
    started_at = datetime(2025, 1, 2, tzinfo=UTC)
    await renderer(TurnStarted("t1", "go", thinking=False, started_at=started_at))
    for start in range(0, len(text), 7):
        await renderer(TextDelta("t1", text[start : start + 7]))
    await renderer(TurnEnded("t1", "end_turn", Usage()))
    renderer.close()
    return out.getvalue()


@pytest.mark.parametrize("width", WIDTHS)
async def test_a_reply_keeps_every_character_at_any_width(width: int, monkeypatch: pytest.MonkeyPatch) -> None:
    output = await render_reply(REPLY, width, monkeypatch)
    assert shown(output) == plain(REPLY)
    lines = re.sub(r"\x1b\[[0-9;]*m", "", output).splitlines()
    assert max(len(line) for line in lines) <= width  # wrapped, not left for the terminal to cut or wrap
    assert not [line for line in lines if line.endswith(" ")]  # not padded: a copied line has no trailing blanks


@pytest.mark.parametrize("width", WIDTHS)
async def test_help_and_mode_lists_keep_every_character(width: int, monkeypatch: pytest.MonkeyPatch) -> None:
    modes = "Permission modes (switch with /mode NAME):\n\n" + "\n".join(
        f"- `{mode}`: {MODE_DESCRIPTIONS[mode][1]}" for mode in PERMISSION_MODES
    )
    for text in (describe_chat(), modes):
        assert shown(await render_reply(text, width, monkeypatch)) == plain(text)


def table(columns: int, cell: str) -> str:
    head = "|" + "|".join(f"head{i}" for i in range(columns)) + "|"
    rows = ["|" + "|".join(f"r{r}c{i}{cell}" for i in range(columns)) + "|" for r in range(2)]
    return "\n".join([head, "|" + "---|" * columns, *rows])


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize(("columns", "cell"), [(3, "x"), (3, LONG_WORD), (6, "some words in a cell"), (30, "y")])
def test_a_table_keeps_every_cell_whole(width: int, columns: int, cell: str) -> None:
    out = io.StringIO()
    StyledWriter(out, color=True, width=width).markdown(table(columns, cell))
    seen = shown(out.getvalue()).replace(":", "")
    # A wrapped cell's lines interleave with its neighbours', so each cell is looked for on its own, in order,
    # and nothing may be missing in all.
    for row in range(2):
        for i in range(columns):
            assert is_subsequence(f"r{row}c{i}{cell}".replace(" ", ""), seen)
    heads = "".join(f"head{i}" for i in range(columns))
    cells = "".join(f"r{r}c{i}{cell}".replace(" ", "") for r in range(2) for i in range(columns))
    assert len(seen) in (len(heads) + len(cells), 2 * len(heads) + len(cells))  # a narrow table names per row


def is_subsequence(needle: str, haystack: str) -> bool:
    it = iter(haystack)
    return all(char in it for char in needle)


@pytest.mark.parametrize("width", WIDTHS)
def test_the_sessions_table_keeps_every_value_whole(width: int) -> None:
    row = ("20261122-0b9f3c2a41de", "2026-11-22 10:00", "a long title about the parser END", "/home/u/" + LONG_WORD)
    console = Console(record=True, width=width)
    print_table([row], console)
    seen = shown(console.export_text())
    assert row[0] in seen  # an id is only useful whole, on one line
    for value in row[1:]:
        assert is_subsequence(value.replace(" ", ""), seen)
    assert len(seen) == len("idupdatedtitledirectory") + sum(len(value.replace(" ", "")) for value in row)
