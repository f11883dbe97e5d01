"""Text helpers: text that can always be written as UTF-8, and suggestions for mistyped names.

A lone UTF-16 surrogate (what a JSON escape like ``\\ud800`` decodes to in Python) is a valid ``str`` but
cannot be encoded: once one is in a session, every later history write, provider request or terminal line
fails. Text arriving from outside (a client's message, a provider's reply) is cleaned here on its way in.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Iterator

_SURROGATE = re.compile("[\ud800-\udfff]")


def clean_text(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD (the same string when it has none)."""
    return _SURROGATE.sub("\ufffd", text) if _SURROGATE.search(text) else text


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` naming the known names closest to a mistyped ``name`` (the best, and any
    nearly as close), else `` (known: …)`` listing them all: the tail of an "unknown …" message."""
    choices = sorted(known)
    matcher = difflib.SequenceMatcher(b=name)
    scored: list[tuple[float, str]] = []
    for choice in choices:
        matcher.set_seq1(choice)
        scored.append((matcher.ratio(), choice))
    best = max((score for score, _ in scored), default=0.0)
    if best < 0.6:
        return f" (known: {', '.join(choices)})"
    close = [choice for score, choice in sorted(scored, reverse=True) if score >= best - 0.1]
    return f" (did you mean {' or '.join(repr(c) for c in close)}?)"


# Terminal control sequences, as ECMA-48 frames them: CSI (ESC [ … final byte: colours, cursor moves, erasing),
# OSC (ESC ] … BEL or ST: titles, hyperlinks), DCS/SOS/PM/APC strings (… ST), the short escapes (ESC ( B, ESC 7,
# ESC =, ESC M) and the 8-bit C1 forms of the openers.
_CONTROL_SEQUENCE = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"
    r"|(?:\x1b\]|\x9d)[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)"
    r"|(?:\x1b[PX^_]|[\x90\x98\x9e\x9f])[^\x1b\x9c]*(?:\x1b\\|\x9c)"
    r"|\x1b[ -/]*[0-~]"
)
_CONTROL = re.compile(r"[\x00-\x07\x0b\x0c\x0e-\x1f\x7f-\x9f]")
"""Control characters left once the sequences are gone (a lone ESC, BEL, NUL…): dropped. Newline and tab stay;
carriage return and backspace are applied first."""
_PENDING_CHARS = 8_192
"""Most characters of an unfinished line ``TerminalText`` holds back (a line longer than that is let through)."""


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters (at a word break when one is near), ending in "…" when cut."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    if space >= limit * 2 // 3:
        cut = cut[:space]
    return cut.rstrip() + "…"


def prose_lines(text: str, longest: int) -> Iterator[str]:
    """The lines of ``text`` where someone states something: not inside a fenced block (```` ``` ```` or
    ``~~~``) and not longer than ``longest`` characters (a pasted log or minified code)."""
    fenced = False
    for line in text.splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
            continue
        if not fenced and len(line) <= longest:
            yield line


def plain_terminal_text(text: str) -> str:
    """``text`` as a terminal would leave it on screen, in plain characters: colours, cursor moves and other
    control sequences removed, a line rewritten with carriage returns (a progress bar) reduced to what was
    written last, backspaces applied (``_\\bX`` is ``X``), other control characters dropped. The same string
    when there is nothing to clean, and cleaning twice changes nothing."""
    cleaner = TerminalText()
    return cleaner.feed(text) + cleaner.finish()


class TerminalText:
    """``plain_terminal_text`` fed piece by piece (a command's output as it arrives): ``feed`` returns what is
    final so far — whole lines, since a carriage return can still rewrite the unfinished one — and ``finish``
    the rest. A progress bar's rewrites are dropped as they come, so what is held stays small; an unfinished
    line past ``_PENDING_CHARS`` is let through (a 4 MB line of base64 is not held whole)."""

    def __init__(self) -> None:
        self._pending = ""

    def feed(self, text: str) -> str:
        """The cleaned text that ``text`` completes (possibly ""), holding back the unfinished line."""
        pending = self._pending + text
        cut = pending.rfind("\n") + 1
        done, line = pending[:cut], pending[cut:]
        line = _last_rewrite(line)
        if len(line) > _PENDING_CHARS:
            # Keep only what could be the start of a control sequence split by the chunk boundary.
            escape = line.rfind("\x1b", len(line) - 64)
            keep = escape if escape >= 0 else len(line)
            done, line = done + line[:keep], line[keep:]
        self._pending = line
        return _clean(done) if done else ""

    def finish(self) -> str:
        """The cleaned rest, once the output has ended."""
        rest, self._pending = self._pending, ""
        return _clean(rest)


_NEEDS_CLEANING = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _last_rewrite(line: str) -> str:
    """An unfinished line without what a carriage return has already rewritten (a trailing one is kept, since
    it may be the first half of a CRLF)."""
    body = line[:-1] if line.endswith("\r") else line
    if (cut := body.rfind("\r")) >= 0:
        return line[cut + 1 :]
    return line


def _clean(text: str) -> str:
    if not _NEEDS_CLEANING.search(text):
        return text
    text = _CONTROL_SEQUENCE.sub("", text)
    lines = text.split("\n")
    for index, line in enumerate(lines):
        if "\r" in line:
            line = line.rstrip("\r").rsplit("\r", 1)[-1]
        if "\b" in line:
            line = _backspaced(line)
        lines[index] = line
    return _CONTROL.sub("", "\n".join(lines))


def _backspaced(line: str) -> str:
    """``line`` with its backspaces applied as a terminal does: the cursor steps back and the next character
    overwrites (``_\\bX`` underlines X on a printer, shows X on a screen)."""
    cells: list[str] = []
    at = 0
    for char in line:
        if char == "\b":
            at = max(0, at - 1)
        elif at < len(cells):
            cells[at] = char
            at += 1
        else:
            cells.append(char)
            at += 1
    return "".join(cells)


# -- omission notes ----------------------------------------------------------------------------------------------
# Where a tool's output is cut, the note left in its place says how much of the original it stands for, in a form
# the terminal reads back (``cli/output_tail.py``) to count the lines before the ones it shows and the length of a
# line that ran through the cut. A note cut again by a later cap is counted into the later note.

_OMISSION = re.compile(
    r"^\[(?:\.\.\.|…) [^\n]*?(?P<chars>[\d,]+) characters omitted, (?P<breaks>[\d,]+) line breaks? among them[^\n]*\]$",
    re.MULTILINE,
)


def omission_note(removed: str) -> str:
    """What a note standing for ``removed`` says of it: ``N characters omitted, M line breaks among them``, counting
    what notes inside ``removed`` stood for rather than the notes themselves."""
    chars, breaks = len(removed), removed.count("\n")
    for note in _OMISSION.finditer(removed):
        stood_for = omission(note.group())
        assert stood_for is not None  # the same pattern
        # The note's line and the two line breaks around it were not in the original; what it stood for was.
        chars += stood_for[0] - len(note.group()) - 2
        breaks += stood_for[1] - 2
    return counted_omission(max(chars, 0), max(breaks, 0))


def counted_omission(chars: int, breaks: int) -> str:
    """``N characters omitted, M line breaks among them`` (see :func:`omission_note`)."""
    return f"{chars:,} characters omitted, {breaks:,} line break{'' if breaks == 1 else 's'} among them"


def omission(line: str) -> tuple[int, int] | None:
    """The characters and line breaks of the original that a note line (from :func:`omission_note`) stands for;
    None when ``line`` is no such note."""
    if (found := _OMISSION.fullmatch(line)) is None:
        return None
    return int(found["chars"].replace(",", "")), int(found["breaks"].replace(",", ""))


def original_lines(text: str) -> int:
    """How many lines the output ``text`` was cut from had: its own, plus the line breaks its notes (from
    :func:`omission_note`) stood for, less each note's line and the two breaks around it."""
    breaks = text.count("\n")
    for note in _OMISSION.finditer(text):
        stood_for = omission(note.group())
        assert stood_for is not None  # the same pattern
        breaks += stood_for[1] - 2
    return breaks + 1
