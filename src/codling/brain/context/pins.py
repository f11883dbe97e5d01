"""Pinned instructions: the user's standing rules (and the facts they state), kept in every request whatever
compaction does.

A pin comes from a prompt, found deterministically (``capture_pins``: "never …", "always …", "from now on …",
"don't (ever) touch …", "make sure you always …", "must not …", "use tabs …", "I prefer X over Y", "avoid …",
"stop doing …", "remember: …", "note that …"; never a question, a description such as "it always fails", or a
one-off such as "don't push this time"; ``capture_facts``: "the staging port is 8431"), or from ``/pin TEXT``.
Pins live in the session's state, not
in its history: they are rebuilt from the recorded prompts and commands on restore, so a compaction, a failing
summarizer or a restart cannot lose them. Every request carries them in the turn's context block
(``render_pins``, within the budget's share for pins); ``/pins`` lists them and ``/unpin N`` drops one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from codling.llm.tokens import count_tokens

PIN_CHARS = 300
"""The longest sentence taken as a pin (a longer one is rarely a rule; it is cut)."""
MAX_PINS = 50
"""Pins kept; past this the oldest facts go first, then the oldest captured rules (``/pin`` ones last)."""
FACT_CHARS = 200
"""The longest sentence taken as a fact."""

PinSource = Literal["prompt", "command", "fact"]
"""A standing rule stated in a prompt, one given with ``/pin``, or a fact the user stated (a value to remember)."""


@dataclass(frozen=True)
class Pin:
    """One standing instruction: its text, where it came from and the turn that gave it."""

    text: str
    source: PinSource
    turn: int


_LEAD = r"^(?:(?:please|and|also|ok|okay|so|btw|note|important|reminder)[,:!]?\s+)*"
_RULES = [
    re.compile(_LEAD + r"(?:never|always)\s+(?P<verb>[a-z'’-]+)", re.IGNORECASE),
    re.compile(r"\b(?:from now on|from here on|going forward|henceforth|for the rest of (?:this|the) session)\b", re.I),
    re.compile(
        _LEAD + r"(?:do not|don['’]t|dont)\s+(?:ever\s+)?(?:touch|modify|change|edit|commit|push|delete|add|"
        r"rename|remove|use|run|install|upgrade|reformat)\b",
        re.IGNORECASE,
    ),
    re.compile(r"\b(?:do not|don['’]t|dont)\s+ever\s+[a-z]", re.IGNORECASE),
    re.compile(r"\bmake sure\s+(?:to|you|that you|we|that we)\s+(?:always|never)\b", re.IGNORECASE),
    re.compile(r"\b(?:must|should)\s+(?:not|never|always)\b(?!\s+have\b)", re.IGNORECASE),
    re.compile(r"\b(?:use|indent with)\s+(?:tabs|spaces|\d+\s+spaces)\b", re.IGNORECASE),
    re.compile(_LEAD + r"(?:prefer|avoid)\s+\S", re.IGNORECASE),
    re.compile(
        r"\b(?:I|I['’]d|we|we['’]d)\s+(?:really\s+|strongly\s+|always\s+)?prefer\s+\S.*?"
        r"\s(?:over|to|instead of|rather than)\s+\S",
        re.IGNORECASE,
    ),
    re.compile(_LEAD + r"(?:stop|no more)\s+[a-z]+ing\b", re.IGNORECASE),
    re.compile(_LEAD + r"(?:remember|keep in mind|note|make a note)(?:\s+that)?\s*[:,-]?\s+\S", re.IGNORECASE),
]
"""What makes a sentence a standing instruction."""

_NOT_RULES = re.compile(
    r"^(?:never\s*mind|always\s+(?:has|had|was|were|is|are|been)\b|never\s+(?:has|had|was|were|is|are|been)\b)",
    re.IGNORECASE,
)
_ONE_OFF = re.compile(r"\b(?:for now|this time|right now|for this (?:one|turn|change|commit))\b", re.IGNORECASE)
"""A rule for the moment only ("don't push this time"): not pinned."""
_SENTENCE = re.compile(r"(?<=[.!])\s+(?=[A-Z\"'`(])|(?<=;)\s+|\n+")
_FENCE = re.compile(r"^\s*(```|~~~)")


def capture_pins(text: str) -> tuple[str, ...]:
    """The standing instructions stated in a user's prompt, as written (one sentence each, whitespace
    collapsed, at most ``PIN_CHARS``), in order, each once. Questions, fenced code and pasted text (long lines)
    are not searched; descriptions ("it always fails", "never mind") are not instructions."""
    found: list[str] = []
    for sentence in _sentences(text):
        if sentence.endswith("?") or _NOT_RULES.match(sentence) or _ONE_OFF.search(sentence):
            continue
        if not _is_rule(sentence):
            continue
        pin = sentence if len(sentence) <= PIN_CHARS else sentence[: PIN_CHARS - 1].rstrip() + "…"
        if _key(pin) not in {_key(p) for p in found}:
            found.append(pin)
    return tuple(found)


def _sentences(text: str) -> list[str]:
    out: list[str] = []
    fenced = False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if fenced or len(line) > 2 * PIN_CHARS:
            continue  # code, a log or a paste: not where a user states rules
        out += [" ".join(s.split()) for s in _SENTENCE.split(line) if s.strip()]
    return out


_FACT = re.compile(r"\b(?:is|are|was|were)\s+(?:now\s+|still\s+|always\s+)?(?P<value>.+)$", re.IGNORECASE)
_CONCRETE = re.compile(
    r"\d"  # a number, a version, a date, a port
    r"|\b[A-Z][A-Z0-9_-]{2,}\b"  # a code or a constant: PELICAN-7, SERVICE_TOKEN
    r"|\b[A-Z][a-z]+\s+[A-Z][a-z]+\b"  # a name: Dana Whitfield
    r"|\S+/\S*|\b\w+\.\w{1,5}\b"  # a path or a file name
    r"|[`\"'][^`\"']+[`\"']"  # something quoted
)


def capture_facts(text: str) -> tuple[str, ...]:
    """The facts a prompt states: short statements that something is a concrete value ("the staging port is
    8431", "the owner of the parser is Dana Whitfield"), as written, in order, each once. Rules, questions,
    code and pasted text are not facts."""
    found: list[str] = []
    for sentence in _sentences(text):
        if sentence.endswith("?") or len(sentence) > FACT_CHARS or _is_rule(sentence):
            continue
        statement = _FACT.search(sentence)
        if statement is None or not _CONCRETE.search(statement.group("value")):
            continue
        if _key(sentence) not in {_key(f) for f in found}:
            found.append(sentence)
    return tuple(found)


def _is_rule(sentence: str) -> bool:
    for rule in _RULES:
        found = rule.search(sentence)
        if found is None:
            continue
        verb = found.groupdict().get("verb")
        # "always fails", "never worked": a description, not an order (an order's verb is bare).
        if verb is not None and (verb.lower().endswith("ed") or (verb.endswith("s") and not verb.endswith("ss"))):
            continue
        return True
    return False


def _key(text: str) -> str:
    return " ".join(text.lower().split()).rstrip(".!")


def add_pins(pins: tuple[Pin, ...], texts: Sequence[str], source: PinSource, turn: int) -> tuple[Pin, ...]:
    """``pins`` with ``texts`` added (each once: a pin stated again keeps its place), at most ``MAX_PINS``:
    past that the oldest captured pins go first, then the oldest ``/pin`` ones."""
    known = {_key(p.text) for p in pins}
    added = list(pins)
    for text in texts:
        if text.strip() and _key(text) not in known:
            known.add(_key(text))
            added.append(Pin(" ".join(text.split()), source, turn))
    while len(added) > MAX_PINS:
        victim = next((p for p in added if p.source == "fact"), None)
        victim = victim or next((p for p in added if p.source == "prompt"), added[0])
        added.remove(victim)
    return tuple(added)


def remove_pin(pins: tuple[Pin, ...], number: int) -> tuple[Pin, ...]:
    """``pins`` without the ``number``-th (counting from 1, as ``/pins`` lists them); unchanged if none."""
    if not 1 <= number <= len(pins):
        return pins
    return pins[: number - 1] + pins[number:]


PINS_HEADING = "# Standing instructions from the user (they apply to every turn until the user says otherwise)"
FACTS_HEADING = "# Facts the user stated"


def render_pins(pins: Sequence[Pin], budget_tokens: int) -> str:
    """The block every request carries: the standing instructions, then the facts, each oldest first, at most
    ``budget_tokens`` tokens (``count_tokens``). When they do not all fit, ``/pin`` ones are kept first, then
    rules, then facts, newest first, and a note says how many were left out. "" without pins (or without
    room for any)."""
    if not pins:
        return ""
    whole = _block(pins, set(range(len(pins))))
    if count_tokens(whole) <= budget_tokens:
        return whole
    rank = {"command": 0, "prompt": 1, "fact": 2}
    order = sorted(range(len(pins)), key=lambda i: (rank[pins[i].source], -i))
    # Greedy on the rendered block itself (at most MAX_PINS short lines, and only when they do not all fit), so
    # the budget holds exactly, seams and the note included.
    chosen: set[int] = set()
    for index in order:
        if count_tokens(_block(pins, chosen | {index})) <= budget_tokens:
            chosen.add(index)
    block = _block(pins, chosen)
    return block if count_tokens(block) <= budget_tokens else ""


def _left_note(count: int) -> str:
    return f"(… {count} left out for room; /pins lists them all)"


def _block(pins: Sequence[Pin], chosen: set[int]) -> str:
    """The chosen pins under their headings (rules, then facts; each in the order given), and a note of how
    many were left out."""
    rules = [f"- {pins[i].text}" for i in sorted(chosen) if pins[i].source != "fact"]
    facts = [f"- {pins[i].text}" for i in sorted(chosen) if pins[i].source == "fact"]
    lines = [PINS_HEADING, *rules] if rules else []
    if facts:
        lines += [FACTS_HEADING, *facts]
    if left := len(pins) - len(chosen):
        lines.append(_left_note(left))
    return "\n".join(lines)


def describe_pins(pins: Sequence[Pin]) -> str:
    """What ``/pins`` shows the user."""
    if not pins:
        return (
            'No pinned instructions yet. codling pins standing rules you state ("never …", "always …", '
            '"from now on …"); add one yourself with /pin TEXT.'
        )
    lines = ["Pinned instructions (every request carries them; /unpin N drops one):"]
    for number, pin in enumerate(pins, 1):
        origins = {"command": "/pin", "prompt": f"from turn {pin.turn}", "fact": f"a fact, from turn {pin.turn}"}
        origin = origins[pin.source]
        lines.append(f"{number}. {pin.text} ({origin})")
    return "\n".join(lines)


def pins_after(pins: tuple[Pin, ...], typed: str, command: tuple[str, str] | None, turn: int) -> tuple[Pin, ...]:
    """The pins once a turn has started: ``/pin TEXT`` adds TEXT, ``/unpin N`` drops pin N, any other prompt
    adds the standing instructions it states (``typed``: the text the user typed, attachments left out). The
    live turn loop and restore both call this, so a restored session has the live one's pins."""
    if command is None:
        return add_pins(add_pins(pins, capture_pins(typed), "prompt", turn), capture_facts(typed), "fact", turn)
    name, argument = command
    if name == "pin":
        return add_pins(pins, [argument], "command", turn)
    if name == "unpin" and argument.strip().isdigit():
        return remove_pin(pins, int(argument.strip()))
    return pins
