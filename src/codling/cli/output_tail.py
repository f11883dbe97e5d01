"""The last lines of a command's output as a tool line shows them: capped in width, with true counts.

A command's recorded output may have been cut, perhaps twice (the capture's limit, then the token cap of a tool
result), each cut leaving a note that says how many characters and line breaks it stands for
(:func:`codling.text.omission`). Read back here, the notes give the number of lines that came before the ones shown
(``seq 1 300000`` has 299,994 before its last six, however little of them was kept), and the length of a line
that ran through a cut (one 4 MB line is shown as its first characters and how many more it had).
"""

from __future__ import annotations

from dataclasses import dataclass

from codling.text import omission

LINE_CHARS = 200
"""How many characters of one output line a tool line shows before "… (N more characters)"."""


@dataclass
class _Line:
    """One line of the original output as far as it was kept."""

    start: str
    """Its first characters that were kept (all of it when nothing was cut)."""
    more: int = 0
    """How many characters it had after ``start``."""
    start_cut: bool = False
    """Whether its beginning was cut away (it is the first line kept after a cut)."""


@dataclass(frozen=True)
class OutputTail:
    """What a tool line shows of a command's output."""

    earlier: int
    """How many lines of the original output came before :attr:`lines`."""
    lines: tuple[str, ...]
    """The last lines, each at most about :data:`LINE_CHARS` characters plus a note of what it had more."""


def output_tail(output: str, keep: int | None, width: int = LINE_CHARS) -> OutputTail:
    """The last ``keep`` lines of ``output`` (None: every line, as recorded, notes included, none capped) and
    how many original lines came before them. Lines past a cut are shown only when no cut lies among them, so
    the count of earlier lines is the count of what is not on the screen."""
    text = output.rstrip("\n")
    # Split at line breaks only, the one separator the notes count.
    raws = text.split("\n") if text else []
    if keep is None:
        return OutputTail(0, tuple(raws))
    lines: list[_Line] = []
    hidden = 0  # whole lines of the original no kept text belongs to
    since_cut = 0  # lines begun after the last cut that dropped a line break
    joining = False  # the next kept line continues the last one (the cut dropped no line break)
    start_cut = False  # the next kept line begins inside a cut
    for raw in raws:
        if (cut := omission(raw)) is not None:
            chars, breaks = cut
            if breaks == 0 and lines:
                lines[-1].more += chars
                joining = True
            else:
                # (The line the cut began in is never shown: only lines after the last such cut are.)
                hidden += max(breaks - 1, 0)
                since_cut, start_cut = 0, True
            continue
        if joining:
            lines[-1].more += len(raw)
            joining = False
            continue
        lines.append(_Line(raw, start_cut=start_cut))
        start_cut = False
        since_cut += 1
    shown = lines[len(lines) - min(keep, since_cut) :]
    return OutputTail(len(lines) + hidden - len(shown), tuple(_shown(line, width) for line in shown))


def _shown(line: _Line, width: int) -> str:
    start, more = line.start, line.more
    if len(start) > width:
        more += len(start) - width
        start = start[:width]
    start = ("…" if line.start_cut else "") + start
    return f"{start}… ({more:,} more characters)" if more else start
