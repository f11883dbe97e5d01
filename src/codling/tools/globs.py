"""Gitignore-style globs matched in time linear in the name whatever the pattern (globs come from the
repository's ignore files and the model's ``glob``), and :class:`GlobIndex`, which finds the last of thousands
of globs that matches a name without trying each one.
"""

from __future__ import annotations

import itertools
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

_Token = tuple[str, str]
"""A glob's piece: ("lit", char), ("one", ""), ("class", regex of one character), ("star", ""): any run
within a segment, ("any", ""): any run at all, ("dirs", ""): empty or any run ending in a slash (``**/``)."""

_WILD = ("star", "any", "dirs")
_INDEX_CHARS = 3
"""The length of the literal pieces :class:`GlobIndex` files globs under."""


@dataclass(frozen=True)
class Glob:
    """A gitignore-style glob: ``*`` and ``?`` stay within one path segment, ``**/`` spans directories, ``**``
    anything, ``[...]`` is a character class and a backslash escapes the next character.

    :meth:`fullmatch` takes time linear in the subject for any pattern: a pattern with at most one run
    wildcard, or only ``*`` wildcards, uses ``re`` (each ``*`` but the last takes the first place its following
    piece matches and never looks back, which finds a match whenever there is one); others are matched by
    simulating all their positions at once.
    """

    pattern: str
    tokens: tuple[_Token, ...] = field(init=False, repr=False, compare=False)
    regex: re.Pattern[str] | None = field(init=False, repr=False, compare=False)
    literal: str = field(init=False, repr=False, compare=False)
    """The longest run of plain characters every match contains."""

    def __post_init__(self) -> None:
        tokens = _glob_tokens(self.pattern)
        object.__setattr__(self, "tokens", tokens)
        object.__setattr__(self, "regex", _regex(tokens))
        object.__setattr__(self, "literal", _longest_literal(tokens))

    def fullmatch(self, subject: str) -> bool:
        """Whether the whole of ``subject`` matches."""
        if self.regex is not None:
            return self.regex.fullmatch(subject) is not None
        if self.literal not in subject:
            return False
        tokens = self.tokens
        end = len(tokens)
        states = self._closure({0})
        for char in subject:
            following: set[int] = set()
            for i in states:
                if i > end:  # inside the ``**/`` at i - end - 1: stay, or leave after a slash
                    following.add(i)
                    if char == "/":
                        following.add(i - end)
                    continue
                if i == end:
                    continue
                kind, value = tokens[i]
                if (
                    (kind == "lit" and char == value)
                    or (kind == "one" and char != "/")
                    or (kind == "class" and re.fullmatch(value, char))
                ):
                    following.add(i + 1)
                elif (kind == "star" and char != "/") or kind == "any":
                    following.add(i)
            states = self._closure(following)
            if not states:
                return False
        return end in states

    def _closure(self, states: set[int]) -> set[int]:
        """``states`` plus every position reachable without consuming a character. Position ``end + 1 + i``
        is the inside of the ``**/`` at ``i``, which has consumed something and must end in a slash."""
        tokens = self.tokens
        end = len(tokens)
        done: set[int] = set()
        todo = list(states)
        while todo:
            i = todo.pop()
            if i in done:
                continue
            done.add(i)
            if i < end and tokens[i][0] in _WILD:
                todo.append(i + 1)
                if tokens[i][0] == "dirs":
                    todo.append(end + 1 + i)
        return done


class GlobIndex:
    """Globs in order, asked for the last one that matches a subject (gitignore's rule: the last match decides).

    A name is not tried against every glob: plain names are looked up, ``*suffix`` globs by their suffix, and
    globs holding a run of three plain characters only when the subject holds that run; the rest are tried one
    by one, newest first, only while they could still beat what was found.
    """

    def __init__(self, globs: Sequence[Glob]) -> None:
        self._exact: dict[str, int] = {}
        self._suffixes: dict[int, dict[str, int]] = defaultdict(dict)
        self._by_piece: dict[str, list[tuple[int, Glob]]] = defaultdict(list)
        self._rest: list[tuple[int, Glob]] = []
        for number, glob in enumerate(globs):
            kinds = [kind for kind, _ in glob.tokens]
            if all(kind == "lit" for kind in kinds):
                self._exact[glob.literal] = number
            elif kinds[0] == "star" and all(kind == "lit" for kind in kinds[1:]) and "/" not in glob.literal:
                self._suffixes[len(glob.literal)][glob.literal] = number
            elif len(glob.literal) >= _INDEX_CHARS:
                self._by_piece[glob.literal[:_INDEX_CHARS]].append((number, glob))
            else:
                self._rest.append((number, glob))
        self._rest.reverse()

    def last_match(self, subject: str) -> int:
        """The position of the last glob matching the whole of ``subject``, or -1."""
        best = self._exact.get(subject, -1)
        if "/" not in subject:  # a "*suffix" glob's star never spans a slash (and its suffix holds none)
            for length, suffixes in self._suffixes.items():
                if len(subject) >= length:
                    best = max(best, suffixes.get(subject[len(subject) - length :], -1))
        if self._by_piece:
            seen: set[str] = set()
            for start in range(len(subject) - _INDEX_CHARS + 1):
                piece = subject[start : start + _INDEX_CHARS]
                if piece in seen or piece not in self._by_piece:
                    continue
                seen.add(piece)
                for number, glob in self._by_piece[piece]:
                    if number > best and glob.literal in subject and glob.fullmatch(subject):
                        best = number
        for number, glob in self._rest:
            if number <= best:
                break
            if glob.fullmatch(subject):
                return number
        return best


def _glob_tokens(pattern: str) -> tuple[_Token, ...]:
    tokens: list[_Token] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            token: _Token = ("dirs", "")
            i += 3
        elif pattern.startswith("**", i):
            token = ("any", "")
            i += 2
        elif pattern[i] == "*":
            token = ("star", "")
            i += 1
        elif pattern[i] == "?":
            token = ("one", "")
            i += 1
        elif pattern[i] == "[" and (close := pattern.find("]", i + 2)) != -1 and (cls := _char_class(pattern[i:close])):
            token = ("class", cls)
            i = close + 1
        elif pattern[i] == "\\" and i + 1 < len(pattern):
            token = ("lit", pattern[i + 1])
            i += 2
        else:
            token = ("lit", pattern[i])
            i += 1
        if token[0] in _WILD and tokens and tokens[-1] == token:
            continue  # "**/**/" is "**/": repeating it adds nothing but work
        tokens.append(token)
    return tuple(tokens)


def _char_class(opening: str) -> str | None:
    """The regex for a ``[...]`` class (``opening`` without its ``]``), or ``None`` if it is not a valid one."""
    body = opening[1:]
    if body.startswith("!"):
        body = "^" + body[1:]
    regex = "[" + body.replace("\\", "\\\\") + "]"
    try:
        re.compile(regex)
    except re.error:  # e.g. a reversed range: then "[" is an ordinary character
        return None
    return regex


_PIECE_REGEX = {"one": "[^/]", "star": "[^/]*", "any": ".*", "dirs": "(?:.*/)?"}


def _piece(tokens: Sequence[_Token]) -> str:
    return "".join(
        re.escape(value) if kind == "lit" else value if kind == "class" else _PIECE_REGEX[kind]
        for kind, value in tokens
    )


def _regex(tokens: tuple[_Token, ...]) -> re.Pattern[str] | None:
    """A regex that cannot backtrack badly, or ``None`` when the pattern needs the position simulation."""
    wild = [i for i, (kind, _) in enumerate(tokens) if kind in _WILD]
    if len(wild) <= 1:
        return re.compile(_piece(tokens))
    if any(tokens[i][0] != "star" for i in wild):
        return None
    # Only "*": the fixed-width pieces between them are found left to right, each at the first place it fits
    # (an atomic group never gives it back), which is linear; only the last "*" is left to the regex engine.
    regex = _piece(tokens[: wild[0]])
    for before, after in itertools.pairwise(wild):
        regex += f"(?>[^/]*?{_piece(tokens[before + 1 : after])})"
    regex += "[^/]*" + _piece(tokens[wild[-1] + 1 :])
    return re.compile(regex)


def _longest_literal(tokens: tuple[_Token, ...]) -> str:
    longest = run = ""
    for kind, value in tokens:
        run = run + value if kind == "lit" else ""
        longest = max(longest, run, key=len)
    return longest
