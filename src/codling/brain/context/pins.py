"""Pinned instructions: the user's standing rules (and the facts they state), kept in every request whatever
compaction does.

A pin comes from a prompt, found deterministically by ``pin_capture``, or from ``/pin TEXT``. ``capture_pins``
takes the standing rules: orders standing by their form ("never …", "always …", "don't ever …", "must not …",
"prefer X over Y", "remember: …"), bare prohibitions ("don't touch …"), and any instruction under a standing
scope, given anywhere in the sentence or in a lead-in ("from now on", "Ground rules for this whole session:
…", "Throughout this project, …", "Every time you …, run …", "In this repo we use …"). One-offs tied to the
task at hand are not pinned ("don't commit yet", "don't change anything, just report", "not in this turn",
"until I say so"), nor questions, descriptions ("it always fails") or rules quoted from someone else.
``capture_facts`` takes durable facts stated with a concrete value ("the staging port is 8431", "our CI runs
on Python 3.11"), not the code's current state, which the model's next edit makes stale: bugs, errors,
failures, line numbers, what the code returns now, or a value the user asks to change ("the version is 1.2.3,
bump it to 1.3.0"). ``pin_score`` measures both on a labelled corpus (tests and ``scripts/bench.py``).

Pins live in the session's state, not in its history: they are rebuilt from the recorded prompts and commands
on restore, so a compaction, a failing summarizer or a restart cannot lose them. Every request carries them in
the turn's context block (``render_pins``, within the budget's share for pins); ``/pins`` lists them and
``/unpin N`` drops one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from codling.llm.tokens import count_tokens

MAX_PINS = 50
"""Pins kept; past this the oldest facts go first, then the oldest captured rules (``/pin`` ones last)."""
PinSource = Literal["prompt", "command", "fact"]
"""A standing rule stated in a prompt, one given with ``/pin``, or a fact the user stated (a value to remember)."""


@dataclass(frozen=True)
class Pin:
    """One standing instruction: its text, where it came from and the turn that gave it."""

    text: str
    source: PinSource
    turn: int


def add_pins(pins: tuple[Pin, ...], texts: Sequence[str], source: PinSource, turn: int) -> tuple[Pin, ...]:
    """``pins`` with ``texts`` added (each once: a pin stated again keeps its place), at most ``MAX_PINS``:
    past that the oldest captured pins go first, then the oldest ``/pin`` ones."""
    # Imported on first use: compiling pin_capture's ~40 patterns was a fifth of a first session/new's CPU
    # (the warm-up thread imports it before the first turn).
    from codling.brain.context.pin_capture import pin_key

    known = {pin_key(p.text) for p in pins}
    added = list(pins)
    for text in texts:
        if text.strip() and pin_key(text) not in known:
            known.add(pin_key(text))
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
        from codling.brain.context.pin_capture import capture_facts, capture_pins

        return add_pins(add_pins(pins, capture_pins(typed), "prompt", turn), capture_facts(typed), "fact", turn)
    name, argument = command
    if name == "pin":
        return add_pins(pins, [argument], "command", turn)
    if name == "unpin" and argument.strip().isdigit():
        return remove_pin(pins, int(argument.strip()))
    return pins
