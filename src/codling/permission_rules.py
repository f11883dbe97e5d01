"""The user's permission rules for commands: allow, ask and deny, from ``$CODLING_HOME/config.toml`` and the
project's ``.codling/permissions.toml`` (a file the model may never change)::

    [permissions]
    allow = ["pytest", "git status", "npm test"]
    ask = ["git push"]
    deny = ["rm -rf /", "curl"]

A rule is the first words of a command (``git status`` matches ``git status --short``; a program's path
counts by its name). **Deny always wins**, then ask, then allow: a deny or ask rule matches its words
anywhere in the command, in every part of a chain, a pipe or a substitution (``make && curl x | sh`` is
denied by ``curl``); an allow rule matches only a simple command, one program with its arguments and nothing
that could chain, redirect or substitute, so ``pytest; rm -rf ~`` never rides on ``pytest``. Rules apply in
every mode: a denied command is refused even in yolo, an ask rule asks even there, and an allowed one runs
without a question in ask and accept-edits (read-only still refuses it).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from codling.errors import ConfigError

Verdict = Literal["allow", "ask", "deny"]
VERDICTS: tuple[Verdict, ...] = ("deny", "ask", "allow")
"""In the order they win."""

PROJECT_RULES = Path(".codling") / "permissions.toml"
"""The project's rules, relative to the working directory: the user's file, which the model may never change."""

_SHELL_SYNTAX = re.compile(r"[;&|<>`\n\r(){}]|\$")
"""What can chain, redirect, substitute or expand: an allow rule never matches a command holding any of it."""
_PARTS = re.compile(r"[;&|\n\r(){}`]|\$\(|<\(|>\(")
"""Where a command line parts into the commands it runs (for deny and ask rules)."""
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=.*", re.DOTALL)


@dataclass(frozen=True)
class Rule:
    """One rule: its verdict, its words and where it was written."""

    verdict: Verdict
    words: tuple[str, ...]
    source: str

    def describe(self) -> str:
        """``your rule "allow pytest" (config.toml)``."""
        return f'your rule "{self.verdict} {" ".join(self.words)}" ({self.source})'


@dataclass(frozen=True)
class Rules:
    """A set of rules (none: every command is left to the mode and the user's answers)."""

    rules: tuple[Rule, ...] = ()

    def __add__(self, other: Rules) -> Rules:
        return Rules((*self.rules, *other.rules))

    def verdict(self, command: str) -> Rule | None:
        """The rule that decides ``command``: a deny rule matching any part of it, else an ask rule, else an
        allow rule matching the whole of a simple command; None when no rule does."""
        parts = [[_name(word) for word in _words(part)] for part in _PARTS.split(command)]
        for verdict in ("deny", "ask"):
            for rule in self.rules:
                if rule.verdict == verdict and any(_holds(words, rule.words) for words in parts):
                    return rule
        if _SHELL_SYNTAX.search(command):
            return None
        words = _command_words(command)
        if words:
            words[0] = _name(words[0])
        for rule in self.rules:
            if rule.verdict == "allow" and _starts(words, rule.words):
                return rule
        return None

    @staticmethod
    def parse(data: object, source: str, where: Path) -> Rules:
        """The rules of a ``[permissions]`` table (``ConfigError`` naming ``where`` when it is malformed)."""
        if data is None:
            return Rules()
        if not isinstance(data, Mapping):
            raise ConfigError(f"{where}: [permissions] must be a table of allow, ask and deny lists")
        unknown = sorted(set(data) - set(VERDICTS))
        if unknown:
            raise ConfigError(f"{where}: [permissions] has no {', '.join(unknown)} (only allow, ask and deny)")
        rules: list[Rule] = []
        for verdict in VERDICTS:
            listed = data.get(verdict, [])
            if not isinstance(listed, list) or not all(isinstance(item, str) for item in listed):
                raise ConfigError(f'{where}: permissions.{verdict} must be a list of commands like ["pytest"]')
            for item in listed:
                words = tuple(_command_words(item))
                words = (_name(words[0]), *words[1:]) if words else ()
                if not words:
                    raise ConfigError(f"{where}: permissions.{verdict} holds an empty command")
                rules.append(Rule(verdict, words, source))
        return Rules(tuple(rules))


USER_RULES = "permissions.toml"
"""The user's own rules file in ``$CODLING_HOME`` (beside config.toml), which ``/permissions save`` adds to."""


def project_rules(cwd: Path) -> Rules:
    """The rules in ``cwd``'s ``.codling/permissions.toml`` (top-level allow, ask and deny lists), if it is a
    plain file there (a link is not followed: a cloned repository must not point it elsewhere);
    ``ConfigError`` when it is malformed (a session does not start on rules it cannot read)."""
    path = cwd / PROJECT_RULES
    if path.is_symlink() or path.parent.is_symlink():
        return Rules()
    return _read(path, str(PROJECT_RULES))


def user_rules(home: Path) -> Rules:
    """The rules in ``$CODLING_HOME/permissions.toml`` (top-level lists, as a project's), if there are any."""
    return _read(home / USER_RULES, f"$CODLING_HOME/{USER_RULES}")


def save_allowed(home: Path, commands: Sequence[str]) -> Path:
    """Add ``commands`` to the allow list of ``$CODLING_HOME/permissions.toml`` (the file is rewritten with its
    three lists; what it held stays); the file's path."""
    path = home / USER_RULES
    held = _read(path, USER_RULES)  # a malformed file is an error, not overwritten
    lists = {verdict: [shlex.join(r.words) for r in held.rules if r.verdict == verdict] for verdict in VERDICTS}
    lists["allow"] += [command for command in commands if command not in lists["allow"]]
    lines = ['# Your permission rules for commands, in every session (see codling\'s README, "Your rules").']
    lines += [f"{verdict} = [{', '.join(json.dumps(item) for item in lists[verdict])}]" for verdict in VERDICTS]
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{USER_RULES}.{os.getpid()}.tmp")
    try:
        temporary.write_text("\n".join(lines) + "\n", encoding="utf-8")
        os.replace(temporary, path)  # whole or not at all: a half-written rules file would stop every session
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return path


def _read(path: Path, source: str) -> Rules:
    if not path.is_file():
        return Rules()
    return Rules.parse(_table(path), source, path)


def _table(path: Path) -> dict[str, object]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: cannot be read ({e})") from e
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: not valid TOML: {e}") from e


def is_rules_file(path: Path) -> bool:
    """Whether ``path`` is a project's rules file (``.codling/permissions.toml`` in any directory)."""
    return path.name.lower() == PROJECT_RULES.name and path.parent.name.lower() == PROJECT_RULES.parent.name


def _words(part: str) -> list[str]:
    try:
        return shlex.split(part, comments=False)
    except ValueError:  # unbalanced quotes: plain words
        return part.split()


def _command_words(command: str) -> list[str]:
    words = _words(command)
    while words and _ASSIGNMENT.fullmatch(words[0]):
        words = words[1:]
    return words


def _name(word: str) -> str:
    """A program's path counts by its name (``/usr/bin/curl`` is ``curl``). Deny and ask rules compare every
    word so (matching more often, never less); an allow rule only the program."""
    return word.rsplit("/", 1)[-1] if "/" in word and not word.endswith("/") else word


def _starts(words: list[str], rule: tuple[str, ...]) -> bool:
    return tuple(words[: len(rule)]) == rule


def _holds(words: list[str], rule: tuple[str, ...]) -> bool:
    """Whether ``rule``'s words appear, in order and together, anywhere in ``words`` (a path by its name)."""
    rule = tuple(_name(word) for word in rule)
    size = len(rule)
    return any(tuple(words[i : i + size]) == rule for i in range(len(words) - size + 1))
