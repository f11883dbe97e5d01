"""Per-session state the brain keeps between turns."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from codling.brain.context.window import LearnedWindow
from codling.brain.events import Usage
from codling.brain.thinking import Thinking
from codling.llm.catalog import ModelInfo
from codling.llm.tokens import count_wire_tokens
from codling.vocabulary import PermissionMode

if TYPE_CHECKING:
    from codling.brain.context.ledger_entries import TurnRecap
    from codling.brain.context.pins import Pin
    from codling.vocabulary import PlanStep

SUMMARY_PREFIX = "[Summary of the conversation so far: earlier turns were compacted]\n\n"
"""Starts every compaction summary in the history, so later compactions can find and exclude it."""

Role = Literal["user", "assistant", "summary"]

MESSAGE_TOKENS = 8
"""What a message costs besides its text: its role and the JSON around it (``{"role": "user", "content": …}``)."""


@dataclass(frozen=True)
class HistoryEntry:
    """One message of the text history and its token count (counted once, when it is added)."""

    role: Role
    text: str
    tokens: int
    context: str = ""
    """The context block the turn's request carried before the prompt ``text`` (a user entry's; "" for none):
    kept with it, so the next turn's request starts with the bytes this one sent (see ``context/layout.py``)."""

    @classmethod
    def of(cls, role: Role, text: str, context: str = "") -> HistoryEntry:
        """An entry with its tokens counted as a request carries it (a JSON string in a message)."""
        entry = cls(role, text, 0, context)
        return replace(entry, tokens=count_wire_tokens(entry.sent) + MESSAGE_TOKENS)

    @property
    def sent(self) -> str:
        """The message's text as requests carry it: the context block, if any, then the text."""
        return f"{self.context}\n\n{self.text}" if self.context else self.text

    def message(self) -> Any:
        """The pydantic-ai message for this entry (a summary is a user message behind SUMMARY_PREFIX)."""
        from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart

        if self.role == "assistant":
            return ModelResponse(parts=[TextPart(self.text)])
        return ModelRequest(parts=[UserPromptPart(self.sent)])


MAX_REWIND_NOTES = 3
"""Rewind notes kept for the context block (older ones are forgotten)."""

MAX_UNPINNED = 20
"""Withdrawn pins kept to be said withdrawn (the oldest are forgotten first)."""

SUMMARY_END = "\n\n[End of the summary.]"
"""Ends every compaction summary in the history: after a compaction the kept messages, the summary and the next
prompt reach the model as one message, and the prompt must not read as the summary's last section."""


def saved_prompt(state: SessionState, turn: int) -> Path | None:
    """Where the ``turn``-th turn's prompt is saved if it is too long for the window (None: the session saves
    none). Live, restore and a fork name the same file, so the cut prompt reads the same."""
    return None if state.prompts_dir is None else state.prompts_dir / f"turn-{turn}.txt"


def summary_entry(summary: str) -> HistoryEntry:
    """The history entry holding a summary between ``SUMMARY_PREFIX`` and ``SUMMARY_END`` (each added once)."""
    body = summary.removeprefix(SUMMARY_PREFIX).strip().removesuffix(SUMMARY_END.strip()).strip()
    return HistoryEntry.of("summary", SUMMARY_PREFIX + body + SUMMARY_END)


@dataclass
class SessionState:
    """What one session knows: where it works, with which model and mode, and its text history.

    The history holds only user and assistant text (tool calls appear as plain-text summaries inside the
    assistant text) and compaction summaries, so no provider rejects a truncated tool-call history across
    turns. Token counts are kept per entry and as a running total, so accounting costs only each new message.
    """

    session_id: str
    cwd: Path
    model: ModelInfo
    mode: PermissionMode = "ask"
    thinking: Thinking = field(default_factory=Thinking)
    """Whether a model that can think does, and how hard (kept across model switches)."""
    additional_dirs: tuple[Path, ...] = ()
    prompts_dir: Path | None = None
    """Where a prompt too long for the window is saved whole, for the model to read or search (the session's
    own folder, one of the workspace's roots); None: nowhere, its middle is only cut."""
    entries: list[HistoryEntry] = field(default_factory=list)
    history_tokens: int = 0
    turn_count: int = 0
    recent_files: tuple[Path, ...] = ()
    rewind_notes: tuple[str, ...] = ()
    """What the latest rewinds of one side only left the conversation and the files disagreeing on, for the
    context block (``branches.rewind_note``; the last :data:`MAX_REWIND_NOTES`)."""
    turn_recaps: tuple[TurnRecap, ...] = ()
    """Every turn's ledger entry, oldest first (rendered within a budget: see ``context/ledger.py``)."""
    reported_input_tokens: int = 0
    """Input tokens the provider reported for the latest request (0 after a compaction)."""
    delegate_notes: dict[str, str] = field(default_factory=dict)
    """The answer of each delegate role's latest run in this session (for carryover), by role."""
    first_request: str = ""
    """The session's first request (what the user set out to do; kept through compactions)."""
    plan: tuple[PlanStep, ...] = ()
    """The plan as the model last set it (``update_plan``)."""
    pins: tuple[Pin, ...] = ()
    """The user's standing instructions (see ``context/pins.py``): in every request, never compacted away."""
    unpinned: tuple[Pin, ...] = ()
    """The pins the user withdrew (``/unpin``), oldest first: a request whose history still states one says so."""
    replaced_at: int = 0
    """``turn_count`` when the history was last replaced: the prompts of later turns are in it."""
    summarizer_failures: int = 0
    """Compactions in a row whose summarizer failed (the circuit breaker's count, see ``context/compactor.py``)."""
    summarizer_skips: int = 0
    """Compactions since the breaker opened that did not ask the summarizer."""
    replacements: int = 0
    """How often the history was replaced (a special turn's result applies only to the history it read)."""
    spent: Usage = field(default_factory=Usage)
    """What the session's turns spent (delegates included), summed from their ends."""
    cost: float | None = None
    """What they cost in US dollars at list prices (None: no turn had a known price)."""
    catalog_model: ModelInfo | None = None
    """The catalog's entry for ``model`` while a window learned from its server replaces the catalog's in
    ``model`` (None: ``model`` is the catalog's). Every budget reads ``model``, so all of them follow."""
    shown: frozenset[str] = frozenset()
    """The lines of the context blocks the history holds: the next turn's block says only what they do not
    (see ``context/layout.py``). Follows the history: ``add`` and ``replace_history`` keep it."""
    _messages: list[Any] = field(default_factory=list, repr=False)

    @property
    def learned_window(self) -> LearnedWindow | None:
        """The window learned from the model's server this session (None: the catalog's is in use)."""
        if self.catalog_model is None:
            return None
        return LearnedWindow(self.model.id, self.model.context_limit)

    def learn_window(self, tokens: int) -> bool:
        """Use ``tokens`` as the model's window from now on (its server revealed it: see ``context/window.py``);
        False, and nothing changes, unless it is smaller than the window in use."""
        if not 0 < tokens < self.model.context_limit:
            return False
        self.catalog_model = self.catalog_model or self.model
        self.model = replace(self.model, context_limit=tokens)
        return True

    def use_window(self, learned: LearnedWindow | None) -> None:
        """Use the window a turn's end recorded (None: the catalog's); one learned for another model than
        the session's is ignored (the model was switched since)."""
        if self.catalog_model is not None:
            self.model, self.catalog_model = self.catalog_model, None
        if learned is not None and learned.model == self.model.id:
            self.learn_window(learned.tokens)

    def use_model(self, model: ModelInfo) -> None:
        """Switch to ``model`` (its catalog entry): a window learned for the previous model is forgotten, even
        when it is the same model picked again (so the user can say the server now takes more)."""
        self.model, self.catalog_model = model, None

    def add_spend(self, usage: Usage, cost: float | None) -> None:
        """Count a finished turn's tokens and cost (None: its price was not known) in the session's totals."""
        self.spent += usage
        if cost is not None:
            self.cost = (self.cost or 0.0) + cost

    def add(self, entry: HistoryEntry) -> None:
        """Append one entry to the history."""
        self.entries.append(entry)
        self._messages.append(entry.message())
        self.history_tokens += entry.tokens
        if entry.context:
            self.shown |= frozenset(entry.context.splitlines())

    def replace_history(self, entries: list[HistoryEntry], replaced: int | None = None) -> None:
        """Swap the history (after a compaction): all of it, or only its first ``replaced`` entries."""
        kept = self.entries[replaced:] if replaced is not None else []
        self.entries = [*entries, *kept]
        self._messages = [e.message() for e in self.entries]
        self.history_tokens = sum(e.tokens for e in self.entries)
        self.shown = frozenset(line for e in self.entries for line in e.context.splitlines())
        self.reported_input_tokens = 0
        self.replacements += 1
        self.replaced_at = self.turn_count

    def set_pins(self, pins: tuple[Pin, ...], withdrawn: bool = False) -> None:
        """Use ``pins`` from now on; with ``withdrawn`` (``/unpin``) the ones left out were withdrawn by the user
        (not dropped for room). A pin stated again is no longer withdrawn."""
        gone = [p for p in self.pins if p not in pins] if withdrawn else []
        texts = {p.text for p in pins}
        self.unpinned = tuple(p for p in (*self.unpinned, *gone) if p.text not in texts)[-MAX_UNPINNED:]
        self.pins = pins

    def stated(self, pin: Pin) -> bool:
        """Whether the history holds the prompt that stated ``pin`` (one of a turn since the history was last
        replaced, or a prompt a compaction kept): it says it in the user's words, so no context block need.
        Bounded: the kept prompts are the history's first entries, before its summary."""
        if pin.source == "command":
            return False
        if pin.turn > self.replaced_at:
            return True
        for entry in self.entries:
            if entry.role != "user":
                return False
            if pin.text in " ".join(entry.text.split()):
                return True
        return False

    def messages(self) -> list[Any]:
        """The history as pydantic-ai messages (built once per entry, not per request)."""
        return list(self._messages)

    def remember_turn(self, summary: TurnRecap) -> None:
        """Keep a turn's ledger entry."""
        self.turn_recaps = (*self.turn_recaps, summary)
