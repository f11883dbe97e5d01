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

from codling.tools.approval import SHELL_SYNTAX
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
_MARKDOWN = re.compile(r"^\s*(?:[-*+>|#]\s|\d+\.\s)")
"""A line of a document (a list item, a quote, a table row, a heading): text that may quote an error."""
_VIEWER = re.compile(r"^(?:cat|head|tail|less|more|bat|grep|rg|sed\s+-n|git\s+(?:show|log|diff|grep|blame))\b")
"""Programs whose output is what they read: a viewer's output quotes, it does not report."""
_LOCAL = re.compile(r"127\.0\.0\.1|localhost|::1|\[Errno 111\]|connection refused", re.IGNORECASE)
_GIT_WRITER = re.compile(
    r"\bgit\s+(?:-C\s+\S+\s+)?(stash|add|commit|checkout|switch|branch|tag|reset|restore|merge|rebase|"
    r"cherry-pick|am|pull|fetch|rm|mv|gc|worktree|notes|config)\b"
)
"""A git command that writes ``.git``: when it fails with nothing the sandbox can be seen in, it is why."""
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
    command: str = "",
    askable: bool = True,
) -> str | None:
    """A note saying what the sandbox blocked in ``output`` (and the protected paths the command ``made``,
    which were removed) and how to ask for it; None when nothing was.

    Only what the command's programs said counts: a line that quotes (a search's hit, Markdown, text in
    backticks) does not, nor anything a viewer (``cat``, ``head``, ``git show``…) printed and exited 0 with. A
    command that retried offline and then worked did not need the network. ``askable``: whether anyone can
    answer a lift here (else the model is told to say what it needed instead)."""
    if not failed and _VIEWER.match(command.strip()) and not SHELL_SYNTAX.search(command):
        lines: list[str] = []
    else:
        lines = output.splitlines()[-_MAX_LINES:]
    blocked: dict[str, str] = {}  # what, in words → why
    offline = retried = local = rehash = False
    for line in lines:
        if _QUOTED.match(line) or "`" in line or _MARKDOWN.match(line):
            continue
        if "pyenv: cannot rehash" in line:
            rehash = True
        if "/.pyenv/shims" in line:
            continue
        if not network and _OFFLINE.search(line):
            offline = True
            retried = retried or "retry" in line.lower()
            local = local or bool(_LOCAL.search(line))
        denied, read_only, missing = _DENIED.search(line), _READ_ONLY.search(line), _MISSING.search(line)
        if not (denied or read_only or missing):
            continue
        for word in _PATH.findall(_PROGRAM.sub("", line, count=1)):
            path = _absolute(word, cwd, home)
            if path.is_relative_to("/proc") or path.is_relative_to("/sys"):
                continue  # the kernel's files: another process's are the sandbox's to keep, nothing to lift
            if sandbox.hides(path):
                if os.path.lexists(path):  # (what is not there outside the sandbox either is just missing)
                    blocked.setdefault(f"reading {path}", "hidden: credentials and private sockets")
            elif (read_only or (denied and _could_write(path))) and sandbox.blocked_write(path):
                blocked.setdefault(f"writing {path}", _why_not_writable(sandbox, path, home))
    if failed and not blocked and (writer := _GIT_WRITER.search(command)):
        blocked[f"git {writer[1]} writing .git"] = "git's own files are read-only"  # git said nothing of why
    make = "write it with write_file, which asks the user" if askable else "only the user can make it: say so"
    parts = [f"making {p}: protected, so it was removed ({make})" for p in made]
    parts += [f"{what} ({why})" for what, why in list(blocked.items())[:_MAX_NAMED]]
    if len(blocked) > _MAX_NAMED:
        parts.append(f"{len(blocked) - _MAX_NAMED} more paths")
    if rehash and failed:
        parts.append(
            "pyenv's rehash (its shims are outside the workspace): what ran before it finished; "
            "the exit code is pyenv's"
        )
    offline = offline and (failed or not retried)  # pip retried offline, then found what it needed: not needed
    if offline:
        own = ": 127.0.0.1 is the command's own, where only servers it starts answer" if local else ""
        parts.append(f"the network (off{own})")
    if not parts:
        return None
    # A line each: a terminal shows the output's last lines, each cut to its width.
    note = "\n".join(["[blocked by the sandbox:", *(f"- {part}" for part in parts)])
    lift = '"all" (the network too)' if blocked else '"network"' if offline else None
    if lift is None:
        return note + "]"
    if not askable:
        return (
            note + "\nNo one can be asked to lift it in this session: if the task needs it, say in your answer what "
            "to run outside the sandbox.]"
        )
    return (
        note
        + f"\nIf the task needs it, run the command again with lift_sandbox={lift} and a reason: the user is asked.]"
    )


def _why_not_writable(sandbox: Sandbox, path: Path, home: Path) -> str:
    """Why a confined command may not change ``path``, in a few words (and what helps, where something does)."""
    real = Path(os.path.realpath(path))
    if any(part == ".git" for part in real.parts):
        hint = "; `git -c key=value …` sets a setting for one command" if real.name == "config" else ""
        return f"git's own files are read-only{hint}"
    if any(real == p or real.is_relative_to(p) for p in sandbox.read_only):
        return "protected: a program runs what it names"
    if any(part in ("site-packages", "dist-packages") for part in real.parts) or real.is_relative_to(home / ".local"):
        return (
            "outside the workspace and temp; install into a virtual environment in the workspace: python -m venv .venv"
        )
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
