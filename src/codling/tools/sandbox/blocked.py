"""What the sandbox blocked, told from a confined command's output, in words the model and the user can act on.

The kernel says only EACCES, EROFS or ENETUNREACH; a program prints them in its own words ("Permission
denied", "Read-only file system", "Could not resolve host"). A line with one of those is the sandbox's doing
when the path it names is one the sandbox keeps from changing (outside the writable places, or read-only
within them), when the path is one it covers, or, for the network, whenever the network is off: then a note
says so, and how to ask for more. A path the sandbox allows is left alone (a script without its execute bit is
not the sandbox's doing).
"""

from __future__ import annotations

import re
from pathlib import Path

from codling.tools.sandbox.policy import Sandbox

_DENIED = re.compile(r"permission denied|read-only file system|operation not permitted", re.IGNORECASE)
_MISSING = re.compile(r"no such file or directory", re.IGNORECASE)
_OFFLINE = re.compile(
    r"network is unreachable|temporary failure in name resolution|name or service not known|could not resolve"
    r"|no address associated with hostname|nodename nor servname|failed to resolve|getaddrinfo"
    r"|(connection refused|failed to connect|cannot connect).*(127\.0\.0\.1|localhost|::1)",
    re.IGNORECASE,
)
_PATH = re.compile(r"""(?:^|[\s'"`‘’“”(=:])((?:~|\.{0,2})/[^\s'"`‘’“”:,;)]*|[\w.-]+/[^\s'"`‘’“”:,;)]*)""")
_PROGRAM = re.compile(r"^\S+:\s(\d+:\s)?")
"""The program a message starts with (``/bin/sh: 1: ``, ``cat: ``): the path it names is not what failed."""
_MAX_LINES = 400
"""Lines looked at, from the end: the last ones say what failed."""


def blocked_note(output: str, sandbox: Sandbox, *, cwd: Path, home: Path, network: bool) -> str | None:
    """A note saying what the sandbox blocked in ``output`` and how to ask for it; None when nothing was."""
    writes: list[str] = []
    hidden: list[str] = []
    offline = False
    for line in output.splitlines()[-_MAX_LINES:]:
        if not network and _OFFLINE.search(line):
            offline = True
        denied, missing = _DENIED.search(line), _MISSING.search(line)
        if not (denied or missing):
            continue
        for word in _PATH.findall(_PROGRAM.sub("", line, count=1)):
            path = _absolute(word, cwd, home)
            if sandbox.hides(path):
                hidden.append(str(path))
            elif denied and sandbox.blocked_write(path):
                writes.append(str(path))
    parts = []
    if writes:
        parts.append(
            f"writing {_listed(writes)} (commands may change only the workspace, its additional directories and "
            'temp; git hooks and config and the protected paths are read-only): lift_sandbox="all"'
        )
    if hidden:
        parts.append(f'reading {_listed(hidden)} (credentials are hidden from commands): lift_sandbox="all"')
    if offline:
        parts.append(
            "the network (it is off; only servers the command starts itself answer on 127.0.0.1): "
            'lift_sandbox="network"'
        )
    if not parts:
        return None
    return (
        f"[blocked by the sandbox: {'; '.join(parts)} — if the task needs it, ask to allow: run the command "
        "again with that lift_sandbox and a reason; the user is asked]"
    )


def _absolute(word: str, cwd: Path, home: Path) -> Path:
    word = word.rstrip(".'")
    if word.startswith("~/"):
        return home / word[2:]
    return Path(word) if word.startswith("/") else cwd / word


def _listed(paths: list[str]) -> str:
    unique = list(dict.fromkeys(paths))
    shown = ", ".join(unique[:3])
    return shown if len(unique) <= 3 else f"{shown} and {len(unique) - 3} more"
