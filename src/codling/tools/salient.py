"""The lines of a command's output that matter once the output itself is gone: errors, failures, the exception
that ended a traceback, the summary line of a test run (pytest, unittest, jest, cargo, go, mocha), and where a
server listens.

The turn ledger keeps these for each command, so a later turn knows *why* ``pytest`` exited 1 without the
30 KB it printed.
"""

from __future__ import annotations

import re

from codling.text import plain_terminal_text

LINE_CHARS = 200
"""Most characters of one kept line."""

_SUMMARY = re.compile(
    "|".join(
        [
            # pytest: "==== 3 failed, 12 passed in 0.50s ====" (also -q without the rule, and "no tests ran").
            r"^=+ .*\b(?:passed|failed|errors?|skipped|xfailed|xpassed|deselected|no tests ran)\b.*=+$",
            r"^\d+ (?:passed|failed|errors?|skipped|deselected)\b.* in [\d.]+s",
            r"^no tests ran in [\d.]+s",
            # unittest: "Ran 14 tests in 0.003s", then "OK", "OK (skipped=1)" or "FAILED (failures=2, errors=1)".
            r"^Ran \d+ tests? in ",
            r"^(?:OK|FAILED)(?: \(.*\))?$",
            # jest / vitest
            r"^Tests?(?: Suites| Files)?:\s+\d",
            # cargo test
            r"^test result: ",
            # go test: "ok  \tpkg\t0.01s", "FAIL\tpkg\t0.02s", a bare "FAIL" / "PASS".
            r"^(?:ok|FAIL)\s+\S+",
            r"^(?:PASS|FAIL)$",
            # mocha
            r"^\d+ (?:passing|failing|pending)\b",
        ]
    )
)

_PROBLEM = re.compile(
    "|".join(
        [
            r"\berror\b",
            r"\bERROR\b",
            r"Error:",
            r"^\S+:\d+: \w*(?:Error|Exception)\b",  # pytest: where a failing test raised
            r"^make: \*\*\* .*\bError \d+",
            r"\bFAIL(?:ED)?\b",
            r"\bfailed\b",
            r"AssertionError",
            r"\bpanic(?:ked)?\b",
            r"fatal:",
            r"^Exception\b",
        ]
    )
)

_DETAIL = re.compile(r"^(?:E {3}|Traceback \(most recent call last\)|-->\s)")
"""Lines that say where or how, kept when there is room: pytest's ``E   `` lines, a traceback's start, rustc's
``--> file:line``."""

_ADDRESS = re.compile(
    r"\b(?:listening|serving|running|started|available|bound)\b.{0,40}(?:\bport\s*\d+|https?://\S+|:\d{2,5}\b)",
    re.IGNORECASE,
)
"""Where a server says it can be reached ("Listening on port 8744", "Running on http://127.0.0.1:5000"): kept,
since a later turn will want to talk to it."""

_SUMMARY_RANK, _PROBLEM_RANK, _DETAIL_RANK = 0, 1, 2


def salient_lines(output: str, max_lines: int = 8, max_chars: int = 600, *, last_lines: bool = True) -> tuple[str, ...]:
    """The lines of ``output`` that matter, in output order, each once, each clipped to ``LINE_CHARS``, at most
    ``max_lines`` of them and ``max_chars`` characters in all.

    Test-run summary lines come first in priority, then errors and failures (with the exception line that
    ends a Python traceback), then detail lines (pytest ``E   `` lines, ``Traceback``, ``-->``); among equals,
    earlier lines win. When no line matches, the last non-empty lines are kept instead (with ``last_lines``;
    else nothing).
    """
    if max_lines <= 0 or max_chars <= 0:
        return ()
    lines = _lines(output)
    ranked: list[tuple[int, int, str]] = []  # (rank, index, line)
    seen: set[str] = set()
    in_traceback = False
    for index, line in enumerate(lines):
        rank: int | None = None
        if in_traceback and line and not line[0].isspace():
            # The first unindented line after the frames names the exception.
            in_traceback = False
            rank = _PROBLEM_RANK
        if line.startswith("Traceback (most recent call last)"):
            in_traceback = True
        text = line.strip()
        if not text or text in seen:
            continue
        if _SUMMARY.search(text):
            rank = _SUMMARY_RANK
        elif rank is None and _PROBLEM.search(text):
            rank = _PROBLEM_RANK
        elif rank is None and (_DETAIL.search(text) or _ADDRESS.search(text)):
            rank = _DETAIL_RANK
        if rank is not None:
            seen.add(text)
            ranked.append((rank, index, text))
    if ranked:
        chosen = sorted(ranked)[:max_lines]
        picked = [text for _, _, text in sorted(chosen, key=lambda item: item[1])]
    elif last_lines:
        picked = list(dict.fromkeys(t for line in reversed(lines) if (t := line.strip())))[:max_lines][::-1]
    else:
        return ()
    return _within(picked, max_chars)


def _lines(output: str) -> list[str]:
    """The output's lines as a terminal would show them: colours removed, and of a line rewritten with
    carriage returns (a progress bar), only what was written last."""
    return plain_terminal_text(output).split("\n")


def _within(lines: list[str], max_chars: int) -> tuple[str, ...]:
    """``lines`` each clipped, as many as fit in ``max_chars`` (the last one cut to fit when it is long)."""
    kept: list[str] = []
    room = max_chars
    for line in lines:
        line = _clip(line, min(LINE_CHARS, room))
        if not line:
            break
        kept.append(line)
        room -= len(line)
        if room <= 0:
            break
    return tuple(kept)


def _clip(line: str, limit: int) -> str:
    if len(line) <= limit:
        return line
    if limit < 20:  # a stub of a line says nothing
        return ""
    return line[: limit - 1].rstrip() + "…"
