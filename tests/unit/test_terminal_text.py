"""Tool output as plain text: what a terminal would show, without the control sequences that cost the model
tokens and show as escapes in the user's terminal (issue 28)."""

from __future__ import annotations

import pytest

from codling.text import TerminalText, plain_terminal_text

PYTEST_COLOURED = (
    "\x1b[1m============================= test session starts ==============================\x1b[0m\n"
    "collected 3 items\n\n"
    "tests/test_a.py \x1b[32m.\x1b[0m\x1b[31mF\x1b[0m\x1b[32m.\x1b[0m\x1b[32m                    [100%]\x1b[0m\n\n"
    "\x1b[31m\x1b[1m_________________________________ test_b __________________________________\x1b[0m\n"
    "\x1b[1m\x1b[31mE       assert 1 == 2\x1b[0m\n"
    "\x1b[31m\x1b[1m========================= \x1b[31m1 failed\x1b[0m, \x1b[32m2 passed\x1b[0m\x1b[31m in 0.05s"
    "\x1b[0m\x1b[31m =========================\x1b[0m\n"
)
PYTEST_PLAIN = (
    "============================= test session starts ==============================\n"
    "collected 3 items\n\n"
    "tests/test_a.py .F.                    [100%]\n\n"
    "_________________________________ test_b __________________________________\n"
    "E       assert 1 == 2\n"
    "========================= 1 failed, 2 passed in 0.05s =========================\n"
)


@pytest.mark.parametrize(
    ("raw", "plain"),
    [
        (PYTEST_COLOURED, PYTEST_PLAIN),
        ("no control at all\n", "no control at all\n"),
        # Carriage-return progress: only what was written last stays; CRLF is a line end.
        ("Downloading  10%\rDownloading  55%\rDownloading 100%\r\ndone\r\n", "Downloading 100%\ndone\n"),
        ("50%\r100%\r", "100%"),
        # Backspaces move the cursor back; the next character overwrites (man's overstrike, spinners).
        ("_\bb_\bo_\bl_\bd", "bold"),
        ("spin |\b/\b-\b\\\bok", "spin ok"),
        ("x\b\b\by", "y"),
        # Cursor moves, erasing, private modes, charset switches, keypad modes.
        ("\x1b[2K\x1b[1A\x1b[?25lhidden cursor\x1b[?25h\x1b(B\x1b=\x1b7saved\x1b8", "hidden cursorsaved"),
        # OSC: a window title (BEL or ST), a hyperlink around its text.
        ("\x1b]0;build\x07\x1b]8;;https://x.test\x1b\\link\x1b]8;;\x1b\\ end", "link end"),
        # 8-bit CSI, a DCS string, a bell, NUL and other controls; tabs and newlines stay.
        ("\x9b31mred\x9bm\x1bPq#0\x1b\\\ta\x07\x00b\x0c\x7f\n", "red\tab\n"),
        # A lone ESC at the very end is dropped, not shown.
        ("tail\x1b", "tail"),
    ],
)
def test_plain_terminal_text(raw: str, plain: str) -> None:
    assert plain_terminal_text(raw) == plain
    assert plain_terminal_text(plain) == plain  # cleaning twice changes nothing


@pytest.mark.parametrize("size", [1, 2, 3, 7, 64])
def test_fed_in_pieces_it_gives_what_it_gives_whole(size: int) -> None:
    raw = PYTEST_COLOURED + "fetch  1%\rfetch 50%\rfetch 99%\r\x1b[32mfetch 100%\x1b[0m\r\n_\bX\x1b]0;t\x07end"
    cleaner = TerminalText()
    pieces = [cleaner.feed(raw[i : i + size]) for i in range(0, len(raw), size)]
    assert "".join(pieces) + cleaner.finish() == plain_terminal_text(raw)
    assert plain_terminal_text(raw) == PYTEST_PLAIN + "fetch 100%\nXend"


def test_a_progress_bar_is_not_held_and_a_huge_line_is_let_through() -> None:
    cleaner = TerminalText()
    for percent in range(100_000):
        assert cleaner.feed(f"\r{percent % 100:3d}%") == ""  # each rewrite drops the one before
    assert cleaner.finish() == " 99%"
    line = "A" * 50_000  # one line of base64, no newline: not held whole
    cleaner = TerminalText()
    out = cleaner.feed(line + "\x1b[3")  # the start of a sequence split by the chunk's end is held back
    assert out == line
    assert cleaner.feed("1mB\n") + cleaner.finish() == "B\n"
