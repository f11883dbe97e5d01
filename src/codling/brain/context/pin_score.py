"""How well ``capture_pins`` and ``capture_facts`` pin what they should, measured on a labelled corpus.

The corpus (``tests/unit/data/pins_corpus.jsonl``, shared by the unit tests and ``scripts/bench.py``) holds one
prompt a line as a JSON list of ``[label, text]`` parts, joined with a space into the prompt. Labels: ``rule``
(a standing rule, to be pinned as one), ``fact`` (a durable fact, to be pinned as one), ``one-off`` (an
instruction for the task at hand), ``state`` (how the code is now: a failing test, a line number, a version to
bump) and ``other`` (requests, questions, descriptions, pasted text), none of which is to be pinned.

A pin is matched to the parts it overlaps in the prompt (whitespace collapsed), so a sentence the capture cuts
differently from the corpus still counts: a pin is correct when a part it overlaps has its kind's label; a rule
or fact part is recalled when a pin of its kind overlaps it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, cast

from codling.brain.context.pin_capture import capture_facts, capture_pins

Label = Literal["rule", "fact", "one-off", "state", "other"]
LABELS: tuple[Label, ...] = ("rule", "fact", "one-off", "state", "other")
LabelledPrompt = tuple[tuple[Label, str], ...]
"""One prompt as its labelled parts, in order."""
Capture = Callable[[str], tuple[str, ...]]


@dataclass(frozen=True)
class PinScore:
    """Pins made and expected over a corpus, with what went wrong (for a failing test's message)."""

    pins_made: int
    correct: int
    expected: int
    recalled: int
    wrong: tuple[str, ...]
    """Pins that overlap no part of their kind: ``kind: text``."""
    missed: tuple[str, ...]
    """Rule and fact parts no pin of their kind overlaps: ``label: text``."""

    @property
    def precision(self) -> float:
        """Correct pins over all pins made (1.0 when none were made)."""
        return self.correct / self.pins_made if self.pins_made else 1.0

    @property
    def recall(self) -> float:
        """Rule and fact parts recalled over all of them (1.0 when there are none)."""
        return self.recalled / self.expected if self.expected else 1.0


def load_corpus(path: Path) -> list[LabelledPrompt]:
    """The labelled prompts of a JSONL corpus file; a malformed line or an unknown label raises ValueError."""
    prompts: list[LabelledPrompt] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        parts = json.loads(line)
        if not isinstance(parts, list) or not parts:
            raise ValueError(f"{path}:{number}: a prompt is a non-empty list of [label, text] parts")
        prompt: list[tuple[Label, str]] = []
        for part in parts:
            if not (isinstance(part, list) and len(part) == 2 and part[0] in LABELS and str(part[1]).strip()):
                raise ValueError(f"{path}:{number}: {part!r} is not a [label, text] part")
            prompt.append((cast(Label, part[0]), part[1]))
        prompts.append(tuple(prompt))
    return prompts


def label_counts(corpus: Sequence[LabelledPrompt]) -> dict[Label, int]:
    """How many parts carry each label."""
    counts: dict[Label, int] = dict.fromkeys(LABELS, 0)
    for prompt in corpus:
        for label, _ in prompt:
            counts[label] += 1
    return counts


def score_pins(
    corpus: Sequence[LabelledPrompt], rules: Capture = capture_pins, facts: Capture = capture_facts
) -> PinScore:
    """Precision and recall of pinning over ``corpus``: each prompt goes through ``rules`` and ``facts`` (the
    live capture unless others are given, e.g. an older version to compare with)."""
    made = correct = expected = recalled = 0
    wrong: list[str] = []
    missed: list[str] = []
    for prompt in corpus:
        typed = " ".join(part for _, part in prompt)  # as the user typed it: lines and fences matter
        flat = " ".join(typed.split())  # where pins (whitespace collapsed) are looked up
        spans = _spans(prompt)
        hit: set[int] = set()
        for kind, captured in (("rule", rules(typed)), ("fact", facts(typed))):
            for pin in captured:
                made += 1
                overlapped = _overlapped(flat, pin, spans)
                matching = [i for i in overlapped if prompt[i][0] == kind]
                if matching:
                    correct += 1
                    hit.update(matching)
                else:
                    wrong.append(f"{kind}: {pin}")
        for index, (label, part) in enumerate(prompt):
            if label in ("rule", "fact"):
                expected += 1
                if index in hit:
                    recalled += 1
                else:
                    missed.append(f"{label}: {' '.join(part.split())}")
    return PinScore(made, correct, expected, recalled, tuple(wrong), tuple(missed))


def _spans(prompt: LabelledPrompt) -> list[tuple[int, int]]:
    """Where each part lies in the prompt with its whitespace collapsed (parts joined by one space)."""
    spans: list[tuple[int, int]] = []
    at = 0
    for _, part in prompt:
        size = len(" ".join(part.split()))
        spans.append((at, at + size))
        at += size + 1
    return spans


def _overlapped(text: str, pin: str, spans: Sequence[tuple[int, int]]) -> list[int]:
    """The parts a pin overlaps (a pin cut to its length ends with "…", left out of the search)."""
    start = text.find(pin.removesuffix("…"))
    if start < 0:
        return []
    end = start + len(pin.removesuffix("…"))
    return [i for i, (a, b) in enumerate(spans) if a < end and start < b]
