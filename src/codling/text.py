"""Text helpers: text that can always be written as UTF-8, and suggestions for mistyped names.

A lone UTF-16 surrogate (what a JSON escape like ``\\ud800`` decodes to in Python) is a valid ``str`` but
cannot be encoded: once one is in a session, every later history write, provider request or terminal line
fails. Text arriving from outside (a client's message, a provider's reply) is cleaned here on its way in.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable

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
