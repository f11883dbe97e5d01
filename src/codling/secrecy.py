"""Secrets in the environment: which variables hold them, and how their values are kept out of text.

Foundation for two places: the history writer redacts secret values before a record is written
(``store/history.py``), and commands are started without them (``tools/local.py``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL)", re.IGNORECASE)
_MIN_SECRET_LENGTH = 8


class Redactor:
    """Removes secret values (API keys, tokens) from text before it is written anywhere."""

    def __init__(self, secrets: list[str]) -> None:
        kept = {s for s in secrets if len(s) >= _MIN_SECRET_LENGTH}
        # Text is redacted after JSON encoding, where a secret holding quotes, backslashes or control
        # characters appears escaped: look for that form too. Longest first, so nested secrets go whole.
        forms = kept | {json.dumps(s, ensure_ascii=False)[1:-1] for s in kept}
        self._secrets = sorted(forms, key=len, reverse=True)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Redactor:
        """Treat the value of every variable named like a key, token, secret or password as a secret."""
        return cls([value for name, value in env.items() if _SECRET_NAME.search(name)])

    def __call__(self, text: str) -> str:
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, "[redacted]")
        return text
