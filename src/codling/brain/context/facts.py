"""The concrete facts a session depends on, found in its history without a model: what a summary assembled
without the summarizer keeps, so a failing summarizer does not lose them.

Three kinds, each a short line:

- what the user said that holds a concrete value, wherever it stands in the message ("…the retry budget turned
  out to be 17 attempts, which…", "Staging DB: pg-stage-4.internal:6432");
- what the assistant decided or established ("We'll use orjson", "I chose port 9317", "the checksum is
  0x5A3F");
- the values a tool call showed: ``NAME = value`` and ``key: value`` lines of what was read, and lines of a
  command's output that name a port, an address, a version or an id.

``history_facts`` finds them, by kind, each once (a later value of the same name replaces an earlier one);
``carried_facts`` takes the fact lines of an earlier summary, so compacting again without the summarizer keeps
what the last summary kept (its lines, never the summary itself: nothing nests or grows). The fallback summary
spends its facts share on them newest first.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from codling.brain.state import SUMMARY_PREFIX, HistoryEntry
from codling.text import prose_lines

FACT_CHARS = 220
"""The longest line a fact keeps (a longer sentence is cut)."""

TOOL_CALLS_HEADING = "[Tool calls in this turn]"
"""Where an assistant entry's reply ends and its tool calls' summaries begin (see ``brain/turns.py``)."""

_SENTENCE = re.compile(r"(?<=[.!?;])\s+(?=\S)|\n+")
_CONCRETE = re.compile(
    r"\d"  # a number, a version, a port, a date
    r"|\b[A-Z][A-Z0-9]*[_-][A-Z0-9_-]+\b|\b[A-Z]{3,}\b"  # a code or a constant: PROJ-4411, MAX_WORKERS
    r"|\b[\w-]+\.(?:internal|local|com|org|net|io|dev)\b"  # a host
    r"|`[^`]+`"  # something quoted as code
)
_DECISION = re.compile(
    r"\b(?:we(?:'ll| will| should)? (?:use|go with|keep|switch to|pick|stick with)|i(?:'ll| will)? (?:use|go with|"
    r"chose|picked|decided|settled on|switched to)|(?:we|i) (?:chose|picked|decided|settled on|switched to|went with)"
    r"|decided to|decision:|from here on)\b",
    re.IGNORECASE,
)
_STATEMENT = re.compile(
    r"\b(?:is|are|was|were|equals|turned out to be|set to|lives (?:in|at)|runs on|starts at|uses?|"
    r"(?:should|will|would|must) be)\b|\s=\s",
    re.IGNORECASE,
)
_LABELLED = re.compile(r"^[\w .'/-]{2,40}:\s*\S")
"""``Staging DB: pg-stage-4.internal:6432``: a label and its value."""
_REQUEST = re.compile(
    r"^(?:(?:ok(?:ay)?|so|now|then|also|and|please|pls|can you|could you|would you|let's|lets|go ahead and)[,:]?\s+)*"
    r"(?:in [^,]{1,60},\s*)?"  # "In src/x.py, make …"
    r"(?:add|make|fix|read|run|check|write|implement|refactor|update|rename|move|create|delete|remove|look|"
    r"continue|open|show|change|use|try|start|stop|test|build|install|explain|tell|give|find|search|list|"
    r"replace|set|bump|revert|commit|push|review|walk|rerun|re-run|port|split|merge|keep|drop|print)\b",
    re.IGNORECASE,
)
"""A sentence that asks for work ("make handle_6 reject …", "please run the tests"): not a fact."""
_OUTPUT_VALUE = re.compile(
    r"\b(?:port|listening|address|url|host|version|id|token|key|hash|checksum|commit|revision|build)\b", re.I
)
_KEY_VALUE = re.compile(r"^\s*(?:\d+\t)?\s*(?P<name>[A-Za-z_][\w.\-]*)\s*(?::|=|:=)\s*(?P<value>\S.*)$")
_INDENTED = re.compile(r"^ {4}")
_READS = ("Read ", "Search", "List")
_NOT_OUTPUT = ("[", "`", "+", "-", "@@", "diff ", "index ")
_MATCH_PREFIX = re.compile(r"^\S+?:\d+[:-]\s*")
_SECTION = re.compile(r"^\s*\[([\w.\-\" ]+)\]\s*$")
"""A TOML or INI section heading: the keys under it are its own."""
"""Tool calls whose ``NAME = value`` lines are what a file holds (a command's ``x = y`` lines are its chatter)."""
_LITERAL = re.compile(
    r"""^(?:-?\d[\d_.,]*\s*[a-zA-Z%]{0,12}|"[^"]{1,80}"|'[^']{1,80}'|`[^`]{1,80}`|[\w.:/@+-]{1,80})[,;]?(?:\s*#.*)?$"""
)
"""A value as a file states it (``12``, ``"rates-2019q3"``, ``4500``, ``db-7.internal:5432``), not an expression
(``os.environ.get(…)``, ``8 * 1024``): what a later turn may need to know without reading the file again."""


@dataclass(frozen=True)
class HistoryFacts:
    """The facts of a history by where they come from, each group oldest first."""

    tools: tuple[str, ...] = ()
    assistant: tuple[str, ...] = ()
    user: tuple[str, ...] = ()


def history_facts(entries: Sequence[HistoryEntry]) -> HistoryFacts:
    """The facts of ``entries`` (see the module's docstring), each once (of two values of one ``NAME =``, only
    the later; a restated fact counts where it was last said)."""
    groups: tuple[dict[str, str], dict[str, str], dict[str, str]] = ({}, {}, {})
    for entry in entries:
        found: list[tuple[int, str]] = []
        if entry.role == "user":
            found = [(2, f"User: {s}") for s in _sentences(entry.text) if _user_fact(s)]
        elif entry.role == "assistant":
            reply, _, calls = entry.text.partition(TOOL_CALLS_HEADING)
            found = [(1, f"Assistant: {s}") for s in _sentences(reply) if _assistant_fact(s)]
            found += [(0, line) for line in _tool_facts(calls)]
        for group, line in found:  # (an earlier summary's facts: see carried_facts)
            key = _key(line)
            groups[group].pop(key, None)  # the newer statement of the same thing goes last
            groups[group][key] = _clip(line)
    tools, assistant, user = (tuple(group.values()) for group in groups)
    return HistoryFacts(tools, assistant, user)


FACTS_HEADING = "## Facts and decisions"
"""The fallback summary's section of facts: all that a later fallback carries of it."""
FALLBACK_MARK = "assembled without the model"
_LASTING = re.compile(r"decision|constraint|preference|fact|files|commands|^$", re.IGNORECASE)
"""The sections of a model's summary whose lines stay true (prompts/compact.md's headings)."""
"""Words only a fallback summary's note holds."""


def carried_facts(entries: Sequence[HistoryEntry]) -> list[str]:
    """The fact lines of the summaries in ``entries``, oldest first, each once: of a model's summary the lines
    with a concrete value in its decisions, constraints and files sections (not its progress or next steps,
    which the next turns make stale); of a fallback summary its facts section only (the rest of it is rebuilt
    from the session's state anyway, and carrying it would nest)."""
    found: dict[str, None] = {}
    for entry in entries:
        if entry.role != "summary":
            continue
        text = entry.text.removeprefix(SUMMARY_PREFIX)
        fallback = FALLBACK_MARK in text.split("\n\n", 1)[0]
        section = ""
        for raw in text.splitlines():
            if raw.startswith("#"):
                section = raw.strip()
                continue
            line = raw.strip().lstrip("-*• ").strip()
            if section != FACTS_HEADING if fallback else not _LASTING.search(section):
                continue
            # A fallback's facts were chosen as facts already (a decision need not hold a number).
            if line and not line.startswith("(…") and (fallback or _CONCRETE.search(line)):
                for fact in ungrouped(line) if fallback else [line]:
                    found.setdefault(_clip(fact), None)
    return list(found)


_SOURCED = re.compile(r"^(?P<fact>.+) \((?P<source>[^()]+)\)$")
_GROUP = re.compile(r"^\((?P<source>[^()]+)\) (?P<facts>.+)$")


def grouped(facts: Sequence[str]) -> list[str]:
    """``facts`` as a summary lists them: the values a tool showed from one source, when they come one after
    the other, on one line behind their source ("(settings.py) A = 1; B = 2"), so each costs its value and not
    its source again; ``ungrouped`` reads such a line back."""
    out: list[str] = []
    last = ""
    for fact in facts:
        found = None if fact.startswith(("User: ", "Assistant: ")) else _SOURCED.match(fact)
        if found is not None and found["source"] == last:
            out[-1] += f"; {found['fact']}"
        elif found is not None:
            out.append(f"({found['source']}) {found['fact']}")
        else:
            out.append(fact)
        last = found["source"] if found is not None else ""
    return out


def ungrouped(line: str) -> list[str]:
    """The facts of one line ``grouped`` wrote, each as ``history_facts`` finds it ("A = 1 (settings.py)")."""
    found = _GROUP.match(line)
    if found is None:
        return [line]
    return [f"{fact} ({found['source']})" for fact in found["facts"].split("; ") if fact]


def ranked_facts(entries: Sequence[HistoryEntry]) -> list[str]:
    """The facts of ``entries`` for a summary built without the model, least important first (a budget keeps
    the end): what tools showed, then what the assistant said, then what the user said; within each, what an
    earlier summary carried before what the history holds now (a newer value wins the room). A fact an earlier
    summary had to cut, when the history holds it whole, is said once, whole."""
    carried = carried_facts(entries)
    found = history_facts(entries)
    by = {who: [f for f in carried if f.startswith(who)] for who in ("User: ", "Assistant: ")}
    shown = [f for f in carried if not f.startswith(("User: ", "Assistant: "))]
    facts = dict.fromkeys([*shown, *found.tools, *by["Assistant: "], *found.assistant, *by["User: "], *found.user])
    return [f for f in facts if not any(g != f and g.startswith(f.rstrip("…")) for g in facts)]


def _sentences(text: str) -> Iterable[str]:
    for line in prose_lines(text, 1_000):  # (code or a pasted log: its lines are not statements)
        for sentence in _SENTENCE.split(line):
            if (sentence := " ".join(sentence.split())) and len(sentence) > 8:
                yield sentence


def _user_fact(sentence: str) -> bool:
    """A statement that something is a concrete value ("the retry budget turned out to be 17 attempts",
    "Staging DB: pg-stage-4.internal:6432"); not a question, and not a request ("make handle_6 reject …"),
    which says what to do, not what is."""
    if sentence.endswith("?") or not _CONCRETE.search(sentence) or _REQUEST.match(sentence):
        return False
    return bool(_STATEMENT.search(sentence) or _LABELLED.match(sentence))


def _assistant_fact(sentence: str) -> bool:
    """A decision, or a statement of a concrete value ("the checksum is 0x5A3F"); not a question, and not the
    lead-in of a list ("The change touches 5 files:")."""
    if sentence.endswith(("?", ":")) or len(sentence) < 20:
        return False
    return bool(_DECISION.search(sentence) or (_CONCRETE.search(sentence) and _STATEMENT.search(sentence)))


TOOL_FACTS_PER_CALL = 6
"""Most facts one tool call gives (a read of a long table of constants is not a list of facts)."""


def _tool_facts(calls: str) -> list[str]:
    """``NAME = value`` and ``key: value`` lines of what tool calls showed, and output lines naming a port, an
    address, a version or an id (a tool's summary lines are indented under its title); at most
    ``TOOL_FACTS_PER_CALL`` of one call, and none of a series (``RULE_1 = 1``, ``RULE_2 = 2``, …)."""
    facts: list[str] = []
    call: list[tuple[str, str]] = []  # (name or "", line) of the current call
    title = source = section = ""

    def close() -> None:
        stems: dict[str, int] = {}
        for name, _ in call:
            stems[_stem(name)] = stems.get(_stem(name), 0) + 1
        kept = [line for name, line in call if not name or stems[_stem(name)] < 3]
        facts.extend(kept[:TOOL_FACTS_PER_CALL])
        call.clear()

    for line in calls.splitlines():
        if not _INDENTED.match(line):
            close()
            title = line.strip().lstrip("- ").split(" (", 1)[0]
            # The file it came from, by name (the path costs tokens in every fact of it; the ledger has it).
            source = title.removeprefix("Read ").rsplit("/", 1)[-1] if title.startswith("Read ") else title
            section = ""
            continue
        content = line.strip()
        if title.startswith("Search"):
            content = _MATCH_PREFIX.sub("", content)  # src/rates.py:12: RATE = "…" → RATE = "…"
        if section_match := _SECTION.match(content.split("\t")[-1]):
            section = section_match.group(1) + "."  # [tenants.initech]: its keys are tenants.initech.key
            continue
        found = _KEY_VALUE.match(content) if title.startswith(_READS) else None
        value = found.group("value").strip() if found is not None else ""
        if found is not None and _LITERAL.match(value) and _CONCRETE.search(value):
            name = section + found.group("name")
            call.append((name, f"{name} = {value} ({source})"))
        elif (
            title.startswith("Run ")
            and _OUTPUT_VALUE.search(content)
            and _CONCRETE.search(content)
            and not content.startswith(_NOT_OUTPUT)  # a diff's line, a heading, the command itself
        ):
            call.append(("", f"{content} ({source})"))
    close()
    return facts


def _stem(name: str) -> str:
    """A name without its trailing number: what the members of a series share."""
    return re.sub(r"[_-]?\d+$", "", name)


def _key(line: str) -> str:
    """What makes two fact lines the same fact: a ``NAME =`` line's name, else the line itself."""
    found = re.match(r"^(?P<name>[A-Za-z_][\w.\-]*) = ", line)
    return found.group("name") if found else " ".join(line.lower().split())


def _clip(line: str) -> str:
    return line if len(line) <= FACT_CHARS else line[: FACT_CHARS - 1].rstrip() + "…"
