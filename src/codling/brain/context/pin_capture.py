"""Which sentences of a prompt are standing rules (``capture_pins``) and which are durable facts
(``capture_facts``): deterministic patterns, measured on the labelled corpus of ``pin_score``.

A **rule** is an instruction meant to outlive the task at hand:

* an order that says so itself: "never …", "always …" (with a bare verb: "it always fails" is a
  description), "don't ever …", "make sure you always …", "… must not …", "use tabs", "I prefer X over Y",
  "prefer/avoid …", "stop doing …", "no more …", "remember: …", "ask me before …", "use X, never Y",
  "no print statements, ever", "we never catch …" (a team's convention), "keep X, that's our style", also
  after a condition ("When you write tests, always use …");
* a prohibition ("don't touch/modify/push … X");
* anything said with a standing time scope, anywhere in the sentence ("from now on", "going forward", "for the
  rest of the session", "until further notice", "at all times");
* an instruction under a standing scope, wherever it is given: a lead-in ("Ground rules for this whole
  session: never …", "Throughout this project, use …", "As a rule, keep …", "In general, prefer …",
  "Every time you edit a file, run …", "Whenever a test is flaky, mark …", "In this repo we use …", "Next
  time, …", "Our convention: …"), or a scope after the order ("we use double quotes in this repo"). Under a
  scope the instruction can be any imperative, a "we (always|never|don't) <verb>" convention or a "no …"
  ban; after a label such as "ground rules:" anything goes.

Not rules: questions; reported speech ("the docs say you should never …"); and **one-offs**, instructions
tied to the current task: a sentence marked "for now", "this time", "right now", "yet", "today", "in this
turn/change/PR", "for this one/task/test", "while we …", "whenever you're ready" is never pinned, and a bare
prohibition or preference is not pinned when it says "just …", "only …", "first", "until …", "before you …",
"here", "when you run it" or "I'll …", or forbids all work ("don't change anything").

A **fact** is a short statement of a concrete value (a number, a version, a path, a name, a code, something
quoted): "the staging port is 8431", "our CI runs on Python 3.11", "the design doc lives at docs/x.md". A
statement of the code's **current state** is not a fact: one about a bug, an error, a failure or a warning,
a line number ("line 42", "app.py:42", "140 lines long"), what the code returns, raises or prints, or said
to be so "currently", "right now", "still", "latest", …, a measurement ("takes 4 seconds") or a value set in
a source file ("MAX_WORKERS is 4 in config.py"); nor is a value the user asks to change in the same
or the next sentence ("the version is 1.2.3, bump it to 1.3.0", "it's 3, it should be 4"). Those are true
until the model edits the code, and a pin would then contradict it.
"""

from __future__ import annotations

import re

from codling.text import prose_lines

PIN_CHARS = 300
"""The longest sentence taken as a pin (a longer one is rarely a rule; it is cut)."""
FACT_CHARS = 200
"""The longest sentence taken as a fact."""

# --- sentences ---------------------------------------------------------------------------------------------

_SENTENCE = re.compile(r"(?<=[.!])\s+(?=[A-Z\"'`(])|(?<=;)\s+|\n+")


def _sentences(text: str) -> list[str]:
    # (code, a log or a paste is not where a user states rules)
    return [
        " ".join(s.split()) for line in prose_lines(text, 2 * PIN_CHARS) for s in _SENTENCE.split(line) if s.strip()
    ]


def pin_key(text: str) -> str:
    """What two pins are compared by: case, spacing and a final full stop do not make them different."""
    return " ".join(text.lower().split()).rstrip(".!")


# --- rules -------------------------------------------------------------------------------------------------

_DISCOURSE = (
    r"(?:(?:please|pls|and|also|ok|okay|so|btw|oh|hey|note|important|reminder|first|second|then|plus|but|"
    r"one more thing|two things)[,:!]?\s+)*"
)
_LEAD = (
    r"^" + _DISCOURSE + r"(?:(?!(?:error|warning|warn|fatal|info|debug|critical|exception)\b)"
    r"[A-Za-z][a-z'’]*(?: [a-z'’]+){0,3}:\s+)?" + _DISCOURSE
)
"""What a user puts before an order ("ok so never …", "oh and always …", "another thing: always …"; not a
log's "Error: …")."""
_DONT = r"(?:do not|don['’]t|dont)"
_ANCHORED = re.compile(_LEAD + r"(?:never|always)\s+(?P<verb>[a-z'’-]+)", re.IGNORECASE)
_PROHIBITION = re.compile(
    _LEAD + _DONT + r"\s+(?:touch|modify|change|edit|commit|push|delete|add|rename|remove|use|run|install|upgrade|"
    r"reformat|print|log|hardcode|hard-code|import|catch|merge|deploy|squash|rebase|disable|bump|vendor|mock|"
    r"introduce|leave|skip|ignore)\b",
    re.IGNORECASE,
)
_PREFERENCE = re.compile(_LEAD + r"(?:prefer|avoid)\s+\S", re.IGNORECASE)
_RULES = [
    re.compile(r"\b" + _DONT + r"\s+ever\s+[a-z]", re.IGNORECASE),
    re.compile(r"\bmake sure\s+(?:to|you|that you|we|that we)\s+(?:always|never)\b", re.IGNORECASE),
    re.compile(r"\b(?:must|should)\s+(?:not|never|always)\b(?!\s+have\b)", re.IGNORECASE),
    re.compile(r"\b(?:use|indent with)\s+(?:tabs|spaces|\d+\s+spaces)\b", re.IGNORECASE),
    re.compile(
        r"\b(?:I|I['’]d|we|we['’]d)\s+(?:really\s+|strongly\s+|always\s+)?prefer\s+\S.*?"
        r"\s(?:over|to|instead of|rather than)\s+\S",
        re.IGNORECASE,
    ),
    re.compile(_LEAD + r"(?:(?:stop|quit)\s+[a-z]+ing\b|no more\s+\S)", re.IGNORECASE),
    re.compile(_LEAD + r"(?:remember|reminder|keep in mind|note|make a note)(?:\s+that)?\s*[:,-]?\s+\S", re.I),
    re.compile(_LEAD + r"(?:ask(?: me)?|check with me)(?: first)? before\b", re.IGNORECASE),
    re.compile(_LEAD + r"(?:use|prefer|keep|write)\b[^,;]*,\s*never\s+\S", re.IGNORECASE),
    re.compile(r"\b(?:I|we)(?:['’]d| would)\s+(?:prefer|like|rather|love|appreciate)\b.*\b(?:always|never)\b", re.I),
    re.compile(_LEAD + r"no\s+(?!(?:need|worries|idea|problem|rush|way)\b)\S[^,;]*\b(?:anywhere|everywhere)\b", re.I),
]
"""Orders that are standing by their form, wherever they are (unless the sentence is a one-off)."""
_CUSTOM = re.compile(
    r"^(?P<head>.+?),?\s+(?:that['’]s|that is|it['’]s|it is|this is)\s+(?:our|the)\s+(?:house\s+)?"
    r"(?:style|convention|rule|policy|standard)\b",
    re.IGNORECASE,
)
"""'Keep error messages lowercase, that's our style.'"""
_TRAILING = re.compile(r"^(?P<head>.+),\s*(?:always|ever)[.!]?$", re.IGNORECASE)
"""'no print statements, ever', 'type hints on every public function, always'."""

_TIME_SCOPE = re.compile(
    r"\b(?:from now on|from here on(?: out)?|from this point on|going forward|henceforth|until further notice|"
    r"at all times|for the rest of (?:this|the) (?:session|conversation|chat|project))\b",
    re.IGNORECASE,
)
"""A standing time scope: the sentence is a rule whatever its form."""
_PLACE = r"(?:project|repo|repository|codebase|code ?base|session|conversation|chat|service|app|package|module)"
_SCOPE = re.compile(
    r"\b(?:for (?:the|this) (?:whole |entire )?" + _PLACE + r"|throughout(?: (?:this|the|our) (?:whole |entire )?"
    r"" + _PLACE + r")?|(?:in|across) (?:this|the|our) (?:whole |entire )?" + _PLACE + r"|"
    r"as a (?:general )?rule(?: of thumb)?|in general|generally|(?:ground|house|general|standing) rules?|"
    r"(?:one|a|another) rule|rules?(?= for| of|:)|(?:our |the )?(?:conventions?|polic(?:y|ies))(?=:)|"
    r"in (?:the )?future|next time)\b",
    re.IGNORECASE,
)
"""Where a rule applies: an instruction under one of these is standing."""
_CONDITION = re.compile(r"\b(?:(?:every|each|any) ?time|whenever)\b", re.IGNORECASE)
"""'Every time you …, run …': the order after the first comma is standing."""

_ONE_OFF = re.compile(
    r"\b(?:for now|this time|right now|at the moment|yet|today|tonight|this (?:one|turn)|"
    r"for (?:this|that|it)(?=\s*\W*$)|"
    r"for this (?:one|turn|task|change|commit|pr|fix|bug|ticket|issue|pass|refactor|step|run|test|release)|"
    r"in this (?:turn|task|change|commit|pr|fix|pass|refactor|step|run)|while (?:we|you|i)|"
    r"whenever you(?:['’]re| are) ready|(?:whenever|when) you (?:get|have) (?:a|the) (?:chance|minute|moment)|"
    r"(?:any ?time|whenever) you (?:want|like|can))\b",
    re.IGNORECASE,
)
"""A sentence for the moment only ("don't push this time", "don't commit yet"): never pinned."""
_FOR_THE_TASK = re.compile(
    r"(?:^|[,;:—-]\s*|\b(?:and|but)\s+)(?:just|only)\b|\bfirst\b|\bbefore (?:you|we|i)\b|\buntil\b|\bhere\b|"
    r"\b(?:when|once|after|as) (?:you|we) \w+ (?:it|this|that|them)\b|\bI['’]ll\b|\bI will\b|\blet me\b",
    re.IGNORECASE,
)
"""Marks of the current task ("don't change anything, just report", "don't edit before you've shown me a plan"):
a bare prohibition or preference saying one is a one-off (an order with "never"/"always" or a scope is not)."""
_EVERYTHING = re.compile(
    _LEAD + _DONT + r"\s+(?:change|modify|touch|edit|delete|remove|commit|push|run|write|fix|install|do|add|rename|"
    r"refactor|deploy|merge|start)\s+(?:anything|any (?:code|files?)|a thing|nothing)(?:\s+else)?\s*(?:[,.;:!—-]|$)",
    re.IGNORECASE,
)
"""'Don't change anything.': nobody forbids every change for good; it is about the task at hand."""
_REPORTED = re.compile(
    r"\b(?:say|says|said|saying|claims?|claimed|states?|stated|mentions?|mentioned|wrote|writes|reads|"
    r"complains?|complained|told|tells)\b.*\b(?:always|never|must|should|don['’]?t|do not)\b",
    re.IGNORECASE,
)
"""Someone else's rule, quoted or reported ("the docs say you should never …"), is not the user's order."""
_NOT_RULES = re.compile(
    r"^(?:never\s*mind|always\s+(?:has|had|was|were|is|are|been)\b|never\s+(?:has|had|was|were|is|are|been)\b)",
    re.IGNORECASE,
)


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_VERBS = _words(
    """add annotate answer apply ask assume avoid be break bump call capitalise capitalize catch check choose cite
    clean comment commit confirm consider cover create declare default define delete deploy describe document
    double-check edit end ensure explain favour favor follow format give go grep group handle import include indent
    install keep label leave limit lint list log make mark match mention merge mirror mock modify move name note open
    pin place prefer prefix print propose push put quote raise read rebase reformat remember remove rename reply
    report respond return reuse review run say show sign skip sort speak spell split squash stage start stay stick
    stop store structure stub suffix summarise summarize switch sync tag talk target tell test touch treat try type
    update upgrade use validate verify vendor wait work wrap write"""
)
"""Verbs an order under a scope starts with ("Throughout this project, use …")."""
_PAST = _words("had was were is are been did does has got went came made said thought knew took gave ran wrote")
_ORDER = re.compile(
    r"^(?:(?:please|pls|also|and|then|oh|kindly)[,]?\s+)*(?P<norm>(?:(?:you\s+(?:should|must|need to|have to)|"
    r"make sure(?:\s+(?:to|you|that you))?|remember to|try to|be sure to|always|never|ever|do not|don['’]?t|dont|"
    r"do)\s+)*)(?P<verb>[a-z'’-]+)",
    re.IGNORECASE,
)
_CONVENTION = re.compile(
    r"^(?:and\s+)?we\s+(?P<norm>(?:(?:always|never|only|usually|generally|do not|don['’]t|dont)\s+)*)"
    r"(?P<verb>[a-z-]+)",
    re.IGNORECASE,
)
"""'we use …', 'we don't use …', 'we always write …' (under a scope)."""


def capture_pins(text: str) -> tuple[str, ...]:
    """The standing instructions stated in a user's prompt, as written (one sentence each, whitespace
    collapsed, at most ``PIN_CHARS``), in order, each once. Questions, fenced code, pasted text (long lines),
    descriptions ("it always fails", "never mind"), reported rules and one-offs ("don't commit yet") are not
    pinned; see the module's docstring."""
    found: list[str] = []
    for sentence in _sentences(text):
        if not is_rule(sentence):
            continue
        pin = sentence if len(sentence) <= PIN_CHARS else sentence[: PIN_CHARS - 1].rstrip() + "…"
        if pin_key(pin) not in {pin_key(p) for p in found}:
            found.append(pin)
    return tuple(found)


def is_rule(sentence: str) -> bool:
    """Whether one sentence states a standing rule (not a question, a description or a one-off)."""
    if sentence.endswith("?") or _NOT_RULES.match(sentence) or _REPORTED.search(sentence):
        return False
    if _ONE_OFF.search(sentence):
        return False
    if _standing(sentence):
        return True
    if _FOR_THE_TASK.search(sentence) or _EVERYTHING.match(sentence):
        return False  # "don't change anything, just report", "prefer the smaller fix here"
    return bool(_PROHIBITION.match(sentence) or _PREFERENCE.match(sentence))


def _standing(sentence: str) -> bool:
    """Whether a sentence is an order that is standing by its form or its scope (one-offs aside)."""
    if _TIME_SCOPE.search(sentence) or _scoped(sentence) or any(rule.search(sentence) for rule in _RULES):
        return True
    main = _main_clause(sentence)
    if _bare_verb(_ANCHORED.match(main)) or _convention(main):
        return True
    if (custom := _CUSTOM.match(sentence)) and _is_order(custom.group("head")):
        return True
    return bool((trailing := _TRAILING.match(sentence)) and _head_is_order(trailing.group("head")))


def _main_clause(sentence: str) -> str:
    """The sentence after a leading condition ("When you write tests, always use …" → "always use …")."""
    lead = re.match(_LEAD, sentence, re.IGNORECASE)
    rest = sentence[lead.end() if lead else 0 :]
    condition = re.match(r"^(?:if|when|whenever|once|before|after)\b[^,]{0,80},\s*", rest, re.IGNORECASE)
    return rest[condition.end() :] if condition else sentence


def _convention(sentence: str) -> bool:
    """'We never catch KeyboardInterrupt', 'we always squash-merge PRs': a team's convention (present tense)."""
    found = re.match(
        _LEAD + r"we\s+(?:always|never|don['’]t(?: ever)?|do not(?: ever)?)\s+(?P<verb>[a-z'’-]+)", sentence, re.I
    )
    if found is None or re.search(r"\b(?:this|that|these|those|it)\b", sentence[found.end() :], re.IGNORECASE):
        return False  # "we always run into this timeout": about a thing at hand, not a convention
    return found.group("verb").lower().split("-")[0] in _VERBS


def _looks_like_an_order(sentence: str) -> bool:
    """Whether a sentence has the form of an instruction, standing or not (then it is no fact either)."""
    return _standing(sentence) or bool(_PROHIBITION.match(sentence) or _PREFERENCE.match(sentence))


def _scoped(sentence: str) -> bool:
    """An instruction under a standing scope: led in by the scope, or followed by one."""
    lead = re.match(r"^" + _DISCOURSE, sentence, re.IGNORECASE)
    rest = sentence[lead.end() if lead else 0 :]
    if condition := _CONDITION.match(rest):
        # "Every time you edit a file, run ruff": the order is the clause after the condition.
        clause = re.split(r"[,:;]\s*", rest[condition.end() :], maxsplit=1)
        return len(clause) == 2 and (_is_order(clause[1]) or _imperative_shape(clause[1]))
    scope = _SCOPE.search(rest)
    if scope is None:
        return False
    before, after = rest[: scope.start()].strip(), rest[scope.end() :]
    if re.match(r"^[^:,;]{0,40}:\s*\S", after) and not re.search(r"[,;]", before):
        return True  # "Ground rules for this whole session: …", "One rule: …": what follows is the rule
    if not before:  # the scope leads: "Throughout this project, use …", "In this repo we use …"
        return _is_order(re.sub(r"^\s*[,:—-]?\s*", "", after))
    # The scope follows the order: only a convention or a prohibition ("we use X in this repo"), since an
    # imperative followed by a place is usually a request about it ("add a README for this project").
    return bool(_CONVENTION.match(before) or re.match(_LEAD + _DONT + r"\s", before, re.IGNORECASE))


def _is_order(clause: str) -> bool:
    """Whether a clause is an instruction: an imperative, a "we (always|never|don't) <verb>" convention or a
    "no …" ban."""
    clause = clause.strip()
    if condition := re.match(r"^(?:if|when|whenever|once|unless|(?:every|each|any) ?time)\b[^,]*,\s*", clause, re.I):
        clause = clause[condition.end() :]  # "if a function needs a comment, rename it": the order follows
    if re.match(r"^no\s+\S", clause, re.IGNORECASE):
        return True
    # "every public function gets a docstring": a norm stated of the code
    if re.match(
        r"^(?:every|each|all|any)\s+(?:\S+\s+){0,4}?(?:gets?|needs?|must|should|has to|have to)\b", clause, re.I
    ):
        return True
    for pattern in (_CONVENTION, _ORDER):
        found = pattern.match(clause)
        if found is None:
            continue
        verb = found.group("verb").lower()
        if verb in _VERBS or (found.group("norm").strip() and _bare(verb)):
            return True
    return False


_SUBJECTS = _words(
    """it this that the a an i we you they he she there my our your its their some all no nothing something
    everything someone nobody sometimes usually often it's i'm"""
)


def _imperative_shape(clause: str) -> bool:
    """A clause that starts like an imperative ("regenerate the models") though its verb is not in ``_VERBS``:
    a bare word that is no subject ("it hangs") nor adverb."""
    words = clause.split()
    first = words[0].lower() if words else ""
    return first.isalpha() and first not in _SUBJECTS and _bare(first)


def _head_is_order(head: str) -> bool:
    """'no print statements' or 'type hints on every public function' before ", always": a ban or a bare
    noun phrase, not a description ("it crashes, always")."""
    if _is_order(head):
        return True
    words = head.lower().split()
    described = re.search(r"\b(?:is|are|was|were|has|have|had|does|did)\b", head, re.IGNORECASE)
    return bool(words) and words[0] not in {"it", "this", "that", "they", "he", "she", "i", "we"} and not described


def _bare_verb(found: re.Match[str] | None) -> bool:
    return found is not None and _bare(found.group("verb").lower())


def _bare(verb: str) -> bool:
    """'always fails', 'never worked', 'always had': a description, not an order (an order's verb is bare)."""
    return not (verb.endswith("ed") or (verb.endswith("s") and not verb.endswith("ss")) or verb in _PAST)


# --- facts -------------------------------------------------------------------------------------------------

_FACT = re.compile(
    r"\b(?:is|are|was|were|(?:it|that|we|they|he|she)['’](?:s|re)|runs|lives|listens|uses|needs|requires|owns|"
    r"reviews|maintains|starts|deploys|deployed|hosts|belongs|(?<=\bwe )(?:run|use|need|deploy|host)|"
    r"(?<=s )(?:live|run|sit|use|need|require))\s+"
    r"(?:now\s+|still\s+|always\s+)?(?!(?!(?:every|some|any|no)thing\b)\w+ing\b)(?P<value>.+)$",
    re.IGNORECASE,
)
"""'X is <value>', 'X runs on <value>', 'we deploy with <value>' (not 'we are porting …': an activity)."""
_CONCRETE = re.compile(
    r"\d"  # a number, a version, a date, a port
    r"|\b[A-Z][A-Z0-9_-]{2,}\b"  # a code or a constant: PELICAN-7, SERVICE_TOKEN
    r"|\b[A-Z][a-z]+\s+[A-Z][a-z]+\b"  # a name: Dana Whitfield
    r"|\b[A-Z]?[a-z]+[A-Z]\w*"  # a product: GitHub, PyPI
    r"|\b[a-z][a-z0-9]*(?:[-_][a-z0-9]+)+\b"  # an identifier: acme-backend, test_acme
    r"|#[\w-]+|\b(?:called|named)\s+\S"  # a channel or a name given
    r"|\S+/\S*|\b\w+\.\w{1,5}\b"  # a path or a file name
    r"|[`\"'][^`\"']+[`\"']"  # something quoted
)
_TRACKER_ID = re.compile(r"[A-Z][A-Z0-9]+-\d+")
_STATE = re.compile(
    r"\b(?:currently|current|right now|at the moment|at present|so far|still|latest|last|anymore|"
    r"bugs?|errors?|exceptions?|traceback|stack ?trace|fail(?:s|ed|ing|ures?)?|broken|breaks|crash(?:es|ed|ing)?|"
    r"segfaults?|warnings?|regression|flaky|typo|wrong|problem|issue|is red|"
    r"returns|returned|returning|raises|raised|throws|thrown|prints|printed|outputs?|says|shows|reports|"
    r"instead of|hard-?coded|keeps? \w+ing|\d+ commits? (?:behind|ahead)|line \d+|\d+ lines?|lines? long|"
    r"(?:uses|using|takes|took|taking|peaks? at)\s+(?:about |around |over )?[\d.]+\s*"
    r"(?:[KMGT]i?B|ms|s|secs?|seconds?|mins?|minutes?|hours?|%))\b"
    r"|\b(?:in|inside) [\w./-]+\.(?:py|pyi|js|ts|tsx|jsx|rs|go|java|kt|rb|php|c|h|cpp|cs|toml|cfg|ini|ya?ml|json)\b"
    r"|\.\w{1,5}:\d+"  # app.py:42
    r"|(?<!is )(?<!are )(?<!['’]s )(?<!['’]re )\bnow\b",  # "it takes 9 minutes now" (but "the API is now v2")
    re.IGNORECASE,
)
"""How the code is now (a failure, a line, what it returns, "currently"): true until the model changes it."""
_CHANGE = re.compile(
    r"\b(?:bump|change|set|make|update|upgrade|downgrade|move|raise|lower|increase|decrease|reduce|flip|switch|"
    r"rename|split|get|turn|fix|replace|revert|shrink|cut|drop)\s+(?:it|that|this|them|those)\b"
    r"|\b(?:should|ought to|needs? to|has to) be\b|\btoo (?:short|long|big|large|small|slow|high|low|old)\b"
    r"|\b(?:we|i) (?:need|want)\b",
    re.IGNORECASE,
)
"""A value the user asks to change ("bump it to 1.3.0", "it should be 4") is the code's state, not a fact."""


def capture_facts(text: str) -> tuple[str, ...]:
    """The durable facts a prompt states: short statements that something is a concrete value ("the staging
    port is 8431", "our CI runs on Python 3.11"), as written, in order, each once. Instructions, questions,
    code, pasted text and the code's current state ("the bug is on line 42", "the version is 1.2.3, bump it")
    are not facts."""
    found: list[str] = []
    sentences = _sentences(text)
    for index, sentence in enumerate(sentences):
        following = sentences[index + 1] if index + 1 < len(sentences) else ""
        if sentence.endswith("?") or len(sentence) > FACT_CHARS or _looks_like_an_order(sentence):
            continue
        statement = _FACT.search(sentence)
        if statement is None or not _CONCRETE.search(statement.group("value")):
            continue
        # A tracker's id ("the ticket for this bug is DOT-4127") names the work, not the code's state.
        settled = _TRACKER_ID.fullmatch(statement.group("value").strip().rstrip(".;,"))
        if (_STATE.search(sentence) and not settled) or _CHANGE.search(sentence) or _CHANGE.search(following):
            continue
        if pin_key(sentence) not in {pin_key(f) for f in found}:
            found.append(sentence)
    return tuple(found)
