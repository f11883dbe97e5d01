"""Secrets in the environment: which variables hold them, and how their values are kept out of text.

One rule (:func:`is_secret_name`) decides which variables are secret, for every place that needs it: commands
are started without them (``tools/local.py``, and the editor's terminal in ``acp/client_ports.py``), and their values
are redacted from history.jsonl (``store/history.py``) and from log lines (:class:`RedactingFormatter`).
What is stored (history.jsonl, meta.json, the chat's prompt_history) also loses every credential of a well-known
shape, wherever it came from (:func:`redact_credentials`): a key typed into a prompt is not kept.

A name is split into words at ``_``, ``-``, ``.`` and lower-to-upper case changes; it is secret when a word is
one of :data:`SECRET_WORDS` (``DB_PASS``, ``AWS_SECRET_ACCESS_KEY``, ``GH_TOKEN``, ``apiKey``) or ends in
one of :data:`SECRET_ENDINGS` (``GITHUBTOKEN``, ``CLIENTSECRET``). Whole words, so ``KEYBOARD``,
``PASSAGE``, ``TOKENIZERS_PARALLELISM``, ``SSH_AUTH_SOCK`` and ``PWD`` are not secrets. Callers add the names
they know to be credentials whatever they look like (the providers' variables, ``llm/providers.py``).

A variable is also secret by its value, whatever its name: a URL with a password in it, or a value holding a
credential of a well-known shape (:data:`CREDENTIAL_SHAPES`: GitHub, GitLab, OpenAI, Anthropic, Slack, AWS key
ids, Google API keys, Hugging Face, npm, PyPI, Stripe, SendGrid, DigitalOcean, Shopify, Groq, Replicate, xAI
tokens, JWTs, PEM private keys). Such a credential inside a longer value (``Bearer ghp_…``) is redacted on its
own as well as the whole value.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Collection, Iterable, Mapping
from typing import Any
from urllib.parse import unquote

SECRET_WORDS = frozenset(
    {
        "KEY",
        "APIKEY",
        "SECRET",
        "SECRETS",
        "TOKEN",
        "PASSWORD",
        "PASSWD",
        "PASS",
        "PASSPHRASE",
        "CREDENTIAL",
        "CREDENTIALS",
        "CREDS",
    }
)
"""Words of a variable name that make it secret."""

SECRET_ENDINGS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "APIKEY")
"""Word endings that make a name secret (run-together names such as ``GITHUBTOKEN``)."""

SECRET_SUFFIXES = ("_DSN", "_WEBHOOK_URL", "_WEBHOOK", "_AUTH_CONFIG", "__AUTH", "_PWD")
"""Name endings of well-known credentials whose words say nothing on their own (``SENTRY_DSN``,
``SLACK_WEBHOOK_URL``, ``DOCKER_AUTH_CONFIG``, ``NPM_CONFIG__AUTH``, ``MYSQL_PWD``); ``PWD`` and ``OLDPWD`` are the
working directories, ``SSH_AUTH_SOCK`` a socket's path."""

_WORD_BREAK = re.compile(r"[^A-Za-z0-9]+|(?<=[a-z0-9])(?=[A-Z])")
_MIN_SECRET_LENGTH = 8
"""Shorter values are not redacted: they would match ordinary text (and secrets are longer)."""


def is_secret_name(name: str) -> bool:
    """Whether a variable called ``name`` holds a secret, by the words of its name (see the module docstring)."""
    words = [w.upper() for w in _WORD_BREAK.split(name) if w]
    return any(w in SECRET_WORDS or w.endswith(SECRET_ENDINGS) for w in words) or name.upper().endswith(SECRET_SUFFIXES)


_URL_WITH_PASSWORD = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*:([^/\s@]+)@")
"""A URL that carries a password (``postgres://user:pw@host/db``): a secret whatever its variable is called."""

CREDENTIAL_SHAPES: tuple[tuple[str, str], ...] = (
    ("GitHub token", r"gh[pousr]_[A-Za-z0-9]{36,}"),
    ("GitHub fine-grained token", r"github_pat_[A-Za-z0-9_]{50,}"),
    ("GitLab token", r"gl(?:pat|dt|rt|ptt|cbt|oas)-[A-Za-z0-9_-]{20,}"),
    ("OpenAI or Anthropic key", r"sk-(?:ant-|proj-|svcacct-|admin-)?[A-Za-z0-9_-]{32,}"),
    ("Slack token", r"xox[abeoprs]-[A-Za-z0-9-]{10,}|xapp-[A-Za-z0-9-]{10,}"),
    ("AWS access key id", r"(?:AKIA|ASIA)[A-Z0-9]{16}"),
    ("Google API key", r"AIza[A-Za-z0-9_-]{35}"),
    ("Hugging Face token", r"hf_[A-Za-z0-9]{30,}"),
    ("npm token", r"npm_[A-Za-z0-9]{36,}"),
    ("PyPI token", r"pypi-[A-Za-z0-9_-]{50,}"),
    ("Stripe key", r"[rs]k_(?:live|test)_[A-Za-z0-9]{20,}"),
    ("SendGrid key", r"SG\.[A-Za-z0-9_-]{20,}\.[A-Za-z0-9_-]{20,}"),
    ("DigitalOcean token", r"do[opr]_v1_[a-f0-9]{64}"),
    ("Shopify token", r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}"),
    ("Groq key", r"gsk_[A-Za-z0-9]{40,}"),
    ("Replicate token", r"r8_[A-Za-z0-9]{30,}"),
    ("xAI key", r"xai-[A-Za-z0-9]{50,}"),
    ("JSON web token", r"eyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]*"),
    ("PEM private key", r"-----BEGIN[A-Z ]*PRIVATE KEY-----[^-]+-----END[A-Z ]*PRIVATE KEY-----"),
)
"""Well-known credential shapes (after gitleaks' and GitHub secret scanning's rules): a variable holding one is
secret whatever its name. Each has its provider's prefix and a minimum length, and must stand alone (not inside
a longer word), so a branch name such as ``task-sk-…`` or a short ``sk-learn`` is not taken for a key."""

_CREDENTIAL = re.compile(
    r"(?<![A-Za-z0-9_-])(?:" + "|".join(f"(?:{shape})" for _, shape in CREDENTIAL_SHAPES) + r")(?![A-Za-z0-9_-])"
)


_STORED_CREDENTIAL = re.compile(
    # The look-ahead for a shape's first character first: most places in a long text fail there, cheaply.
    r"(?=[AdeghnprSsx-])(?:(?<![A-Za-z0-9_-])|(?<=\\[nrtbf]))(?:"
    + "|".join(f"(?:{shape})" for _, shape in CREDENTIAL_SHAPES)
    + r")(?![A-Za-z0-9_-])"
)
""":data:`_CREDENTIAL` as it also stands in JSON text: right after an escape such as ``\\n`` (a key typed on a line
of its own)."""


def redact_credentials(text: str) -> str:
    """``text`` with every credential of a well-known shape (:data:`CREDENTIAL_SHAPES`) and every URL's password
    replaced by ``[redacted]``, whatever variable (if any) holds them: a key the user typed or pasted into a
    prompt, or one a command printed. For text that is stored (history.jsonl, meta.json, prompt_history), also
    after JSON encoding; not for streams, whose pieces may split a key (those redact the environment's values)."""
    text = _STORED_CREDENTIAL.sub("[redacted]", text)
    if "://" not in text:  # the URL pattern is slow on long runs of letters (base64 output): most text has none
        return text
    return _URL_WITH_PASSWORD.sub(lambda m: m.group(0).replace(m.group(1), "[redacted]"), text)


def credentials_in(value: str) -> list[str]:
    """The credentials of a well-known shape (:data:`CREDENTIAL_SHAPES`) that ``value`` holds, in order, then
    the password of each URL in it (as written and percent-decoded: it may turn up on its own, in a command's
    output or a config file, and is redacted then too when it is long enough)."""
    passwords = _URL_WITH_PASSWORD.findall(value)
    return [*_CREDENTIAL.findall(value), *dict.fromkeys([*passwords, *map(unquote, passwords)])]


def is_secret_value(value: str) -> bool:
    """Whether ``value`` is a credential by its shape alone: a URL with a password, or a well-known token."""
    return bool(_URL_WITH_PASSWORD.match(value) or _CREDENTIAL.search(value))


def secret_names(env: Mapping[str, str], known: Iterable[str] = ()) -> frozenset[str]:
    """The variables of ``env`` that hold secrets: named like one, among the ``known`` credential names, or
    holding one by its value (:func:`is_secret_value`: ``DATABASE_URL`` with a password, ``CI_BOT=ghp_…``)."""
    known = set(known)
    return frozenset(
        name for name, value in env.items() if name in known or is_secret_name(name) or is_secret_value(value)
    )


def scrubbed(env: Mapping[str, str], allow: Collection[str] = (), known: Iterable[str] = ()) -> dict[str, str]:
    """``env`` without its secret variables (:func:`secret_names`), except those in ``allow``."""
    hidden = secret_names(env, known) - set(allow)
    return {name: value for name, value in env.items() if name not in hidden}


class Redactor:
    """Removes secret values (API keys, tokens) from text before it is written anywhere."""

    def __init__(self, secrets: Iterable[str]) -> None:
        kept = {s for s in secrets if len(s) >= _MIN_SECRET_LENGTH}
        # Text is redacted after JSON encoding, where a secret holding quotes, backslashes or control
        # characters appears escaped: look for that form too. Longest first, so nested secrets go whole.
        forms = kept | {json.dumps(s, ensure_ascii=False)[1:-1] for s in kept}
        self._secrets = sorted(forms, key=len, reverse=True)

    @classmethod
    def from_env(cls, env: Mapping[str, str], known: Iterable[str] = ()) -> Redactor:
        """Treat the value of every secret variable of ``env`` (:func:`secret_names`), and each well-known
        credential inside one, as a secret, whether or not commands may see it: allowing a command a token does not
        allow recording it."""
        values = [env[name] for name in secret_names(env, known)]
        return cls([*values, *(found for value in values for found in credentials_in(value))])

    def add(self, secrets: Iterable[str]) -> None:
        """Treat ``secrets`` as secrets too from now on (a key stored after this redactor was made)."""
        merged = Redactor([*self._secrets, *secrets])
        self._secrets = merged._secrets

    def __call__(self, text: str) -> str:
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, "[redacted]")
        return text

    def held_back(self, text: str) -> int:
        """How many characters at the end of ``text`` may be the start of a secret that the next piece of a
        stream completes (0 when none): a stream keeps them until it knows."""
        longest = 0
        for secret in self._secrets:
            for size in range(min(len(secret) - 1, len(text)), longest, -1):
                if text.endswith(secret[:size]):
                    longest = size
                    break
        return longest


class RedactingStream:
    """A text stream (``sys.stdout``, ``sys.stderr``) whose writes pass through a :class:`Redactor`, also when a
    secret arrives split across writes (a reply streams in pieces): what may be the start of one is kept back
    until the next write says, or ``close`` (which does not close the stream beneath). Everything else is the
    stream's own (``isatty``, ``fileno``, ``encoding``…)."""

    def __init__(self, stream: Any, redact: Redactor) -> None:
        self._stream = stream
        self._redact = redact
        self._pending = ""

    def write(self, text: str) -> int:
        """Write ``text``, redacted; its length, as a stream's ``write`` answers."""
        text = self._redact(self._pending + text)
        keep = self._redact.held_back(text)
        self._pending = text[len(text) - keep :] if keep else ""
        self._stream.write(text[: len(text) - keep])
        return len(text)

    def close(self) -> None:
        """Write what was kept back and flush."""
        if self._pending:
            self._stream.write(self._pending)
            self._pending = ""
        self._stream.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class RedactingFormatter(logging.Formatter):
    """A log formatter whose lines (message, arguments and traceback alike) pass through a :class:`Redactor`."""

    def __init__(self, fmt: str, redact: Redactor) -> None:
        super().__init__(fmt)
        self._redact = redact

    def format(self, record: logging.LogRecord) -> str:
        """The formatted line with every secret value replaced."""
        return self._redact(super().format(record))


def redact_in_logs(secrets: Iterable[str]) -> None:
    """Keep ``secrets`` out of every log line from now on: they became known after logging was set up (a key
    stored by ``codling login`` while ``codling acp`` runs)."""
    for handler in logging.getLogger().handlers:
        if isinstance(handler.formatter, RedactingFormatter):
            handler.formatter._redact.add(secrets)
