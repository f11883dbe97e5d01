"""The lines of a command's output that matter: errors, failures, the exception of a traceback and the summary
line of a test run (pytest, unittest, jest, cargo, go), kept in the turn ledger instead of the whole output."""

from __future__ import annotations

import re

_SALIENT = re.compile(
    r"\b(?:error|errors|failed|failure|failures|fatal|panic(?:ked)?|exception|traceback)\b"
    r"|^E\s{2,}"  # pytest's assertion detail
    r"|^(?:FAIL|FAILED|ERROR)\b"
    r"|^={3,}.*\b(?:passed|failed|error|errors|skipped)\b.*={3,}$"  # pytest's summary line
    r"|^Ran \d+ tests? in "  # unittest
    r"|^(?:OK|FAILED)(?: \(.*\))?$"  # unittest's verdict
    r"|^Tests?:\s+.*\b(?:passed|failed|total)\b"  # jest
    r"|^test result: "  # cargo
    r"|^(?:ok|FAIL|---)\s+\S+"  # go test
    r"|^\w+(?:\.\w+)*(?:Error|Exception|Warning):",  # the last line of a Python traceback
    re.IGNORECASE,
)
_CASE_SENSITIVE = re.compile(r"^(?:ok|FAIL)\s+\S+\s+[\d.]+s$|^(?:OK|FAILED)(?: \(.*\))?$")
LINE_CHARS = 200


def salient_lines(output: str, max_lines: int = 8, max_chars: int = 600) -> tuple[str, ...]:
    """The lines of ``output`` that say how a command went, in order, each once and clipped; when none
    stands out, its last non-empty lines. At most ``max_lines`` lines and ``max_chars`` characters, the
    latest kept first (a test run's summary comes last)."""
    lines = [line.rstrip() for line in output.splitlines() if line.strip()]
    picked = [line for line in lines if _SALIENT.search(line.strip()) or _CASE_SENSITIVE.match(line.strip())]
    chosen = picked or lines[-3:]
    out: list[str] = []
    size = 0
    for line in reversed(_unique(chosen)):
        clipped = line.strip() if len(line.strip()) <= LINE_CHARS else line.strip()[: LINE_CHARS - 1] + "…"
        if len(out) == max_lines or size + len(clipped) > max_chars:
            break
        out.insert(0, clipped)
        size += len(clipped) + 1
    return tuple(out)


def _unique(lines: list[str]) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for line in lines:
        if line not in seen:
            seen.add(line)
            out.append(line)
    return out
