"""What the sandbox blocked, told from a confined command's output, in words the model and the user can act on.

The kernel says only EACCES, EROFS or ENETUNREACH; a program prints them in its own words ("Permission
denied", "Read-only file system", "Could not resolve host"). A line with one of those is the sandbox's doing
when the path it names is one the sandbox keeps from changing (outside the writable places, or read-only
within them), when the path is one it covers, or, for the network, whenever the network is off: then a note
says so, and how to ask for more. A path the sandbox allows is left alone (a script without its execute bit is
not the sandbox's doing).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

from codling.tools.sandbox.policy import Sandbox

_DENIED = re.compile(r"permission denied|operation not permitted", re.IGNORECASE)
"""EACCES and EPERM: the sandbox's doing only where codling itself could write the path."""
_READ_ONLY = re.compile(r"read-only file system|device or resource busy|invalid cross-device link", re.IGNORECASE)
"""EROFS (a read-only bind), EBUSY (moving or removing one), EXDEV (a hard link across): writes the sandbox refused."""
_MISSING = re.compile(r"no such file or directory", re.IGNORECASE)
_OFFLINE = re.compile(
    r"network is unreachable|temporary failure in name resolution|name or service not known|could not resolve"
    r"|no address associated with hostname|nodename nor servname|failed to resolve|getaddrinfo"
    r"|connection refused|(failed to connect|cannot connect).*(127\.0\.0\.1|localhost|::1)",
    re.IGNORECASE,
)
_PATH = re.compile(r"""(?:^|[\s'"`‘’“”(=:])((?:~|\.{0,2})/[^\s'"`‘’“”:,;)]*|[\w.-]+/[^\s'"`‘’“”:,;)]*)""")
_PROGRAM = re.compile(r"^\S+:\s(\d+:\s)?")
"""The program a message starts with (``/bin/sh: 1: ``, ``cat: ``): the path it names is not what failed."""
_QUOTED = re.compile(r"^[^\s:]+:\d+[:-]")
"""A line a search printed (``src/net.py:12: getaddrinfo(...)``): code quoted, not a failure."""
_MAX_NAMED = 6
"""Paths a note names; the rest are counted."""
_MAX_LINES = 400
"""Lines looked at, from the end: the last ones say what failed."""


def blocked_note(
    output: str,
    sandbox: Sandbox,
    *,
    cwd: Path,
    home: Path,
    network: bool,
    failed: bool = True,
    made: Sequence[Path] = (),
) -> str | None:
    """A note saying what the sandbox blocked in ``output`` (and the protected paths the command ``made``,
    which were removed) and how to ask for it; None when nothing was. A command that retried offline and
    then worked (it did not fail) did not need the network."""
    blocked: dict[str, str] = {}  # what, in words → why
    offline = retried = False
    for line in output.splitlines()[-_MAX_LINES:]:
        if _QUOTED.match(line) or "/.pyenv/shims" in line:
            continue  # a search's hit quotes code; pyenv's failed rehash does not fail the install
        if not network and _OFFLINE.search(line):
            offline = True
            retried = retried or "retry" in line.lower()
        denied, read_only, missing = _DENIED.search(line), _READ_ONLY.search(line), _MISSING.search(line)
        if not (denied or read_only or missing):
            continue
        for word in _PATH.findall(_PROGRAM.sub("", line, count=1)):
            path = _absolute(word, cwd, home)
            if path.is_relative_to("/proc") or path.is_relative_to("/sys"):
                continue  # the kernel's files: another process's are the sandbox's to keep, nothing to lift
            if sandbox.hides(path):
                blocked.setdefault(f"reading {path}", "hidden: credentials and private sockets")
            elif (read_only or (denied and _could_write(path))) and sandbox.blocked_write(path):
                blocked.setdefault(f"writing {path}", _why_not_writable(sandbox, path, home))
    parts = [f"making {p}: protected, so it was removed (write it with write_file, which asks the user)" for p in made]
    parts += [f"{what} ({why})" for what, why in list(blocked.items())[:_MAX_NAMED]]
    if len(blocked) > _MAX_NAMED:
        parts.append(f"{len(blocked) - _MAX_NAMED} more paths")
    offline = offline and (failed or not retried)  # pip retried offline, then found what it needed: not needed
    if offline:
        parts.append("the network (off: 127.0.0.1 is the command's own, where only servers it starts answer)")
    if not parts:
        return None
    lifts = [value for value, needed in (('"all"', bool(blocked)), ('"network"', offline)) if needed]
    lifts[:1] = [f"lift_sandbox={lifts[0]}"] if lifts else []
    ask = f"\nIf the task needs it, run the command again with {' or '.join(lifts)} and a reason: the user is asked."
    # A line each: a terminal shows the output's last lines, each cut to its width.
    return "\n".join(["[blocked by the sandbox:", *(f"- {part}" for part in parts)]) + (ask if lifts else "") + "]"


def _why_not_writable(sandbox: Sandbox, path: Path, home: Path) -> str:
    """Why a confined command may not change ``path``, in a few words (and what helps, where something does)."""
    real = Path(os.path.realpath(path))
    if any(part == ".git" for part in real.parts):
        hint = "; `git -c key=value …` sets a setting for one command" if real.name == "config" else ""
        return f"git's own files are read-only{hint}"
    if any(real == p or real.is_relative_to(p) for p in sandbox.read_only):
        return "protected: a program runs what it names"
    if real.is_relative_to(home):
        return "outside the workspace and temp; the user can add a directory to sandbox_writable in config.toml"
    return "outside the workspace and temp"


def _absolute(word: str, cwd: Path, home: Path) -> Path:
    word = word.rstrip(".'")
    if word.startswith("~/"):
        return home / word[2:]
    return Path(word) if word.startswith("/") else cwd / word


def _could_write(path: Path) -> bool:
    """Whether codling, unconfined, could change ``path`` (or make it in its nearest existing directory): if
    not, a "permission denied" is the file's owner's doing, and lifting the sandbox would not help."""
    for place in (path, *path.parents):
        if os.path.lexists(place):
            return os.access(place, os.W_OK)
    return False
