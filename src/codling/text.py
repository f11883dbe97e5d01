"""Text that can always be written as UTF-8.

A lone UTF-16 surrogate (what a JSON escape like ``\\ud800`` decodes to in Python) is a valid ``str`` but
cannot be encoded: once one is in a session, every later history write, provider request or terminal line
fails. Text arriving from outside (a client's message, a provider's reply) is cleaned here on its way in.
"""

from __future__ import annotations

import re

_SURROGATE = re.compile("[\ud800-\udfff]")


def clean_text(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD (the same string when it has none)."""
    return _SURROGATE.sub("\ufffd", text) if _SURROGATE.search(text) else text
