"""The context engine as the turn loop sees it: one object per session (``ConversationSession.context``).

It answers what the next request will cost (``context_used``, ``usage_event``), lays out the context each
turn carries with the user's message (``turn_block``), cuts a prompt too long for the window (``fit_prompt``),
says when a turn would pass the budget, so a compaction runs first (``compaction_due``), fits every request of
the turn into the window (``requests``: see ``requests.py``) and carries the provider's own count past the
turn (``after_turn``).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from codling.brain.context import tools
from codling.brain.context.budget import MESSAGE_OVERHEAD_TOKENS, Budget, image_tokens
from codling.brain.context.layout import (
    CONTEXT_CLOSE,
    CONTEXT_NOTE,
    CONTEXT_OPEN,
    Section,
    recent_files_note,
    sections_of,
    unshown,
    withdrawn,
)
from codling.brain.context.pins import render_pins
from codling.brain.events import ContextWarning, Event, UsageUpdated
from codling.brain.model_stack import ModelStack
from codling.brain.options import SessionOptions
from codling.brain.prompt import ImageBlock
from codling.brain.state import SessionState, saved_prompt
from codling.llm.tokens import count_tokens, count_wire_tokens, tail_tokens, truncate_to_tokens
from codling.tools.atomic import replace_file
from codling.tools.deps import ToolDeps

if TYPE_CHECKING:
    from codling.brain.context.requests import TokenCounter, TurnRequests

log = logging.getLogger(__name__)

SMALL_SHARE = 0.6
"""A window is too small for codling when its fixed overhead alone takes this share of the compaction point:
what is left for the conversation is then less than a compaction leaves."""


def fit_prompt(text: str, budget: Budget, saved: Path | None = None) -> str:
    """The user's prompt as the model gets it: whole, or, past the budget's share of the window for one
    prompt, its head and tail around a note saying how much was cut (so a pasted log cannot overflow) and,
    given ``saved``, where the whole message is for the model to read or search."""
    limit = budget.prompt
    if len(text) <= limit:  # a token is at least one character
        return text
    tokens = count_tokens(text)
    if tokens <= limit:
        return text
    half = limit // 2
    where = f"; the whole message is saved in {saved}: read or search it for the rest" if saved else ""
    head, tail = truncate_to_tokens(text, half), tail_tokens(text, half)
    # At line ends, when that costs little: a log's line cut in two reads as a different line.
    if (end := head.rfind("\n")) >= len(head) * 4 // 5:
        head = head[:end]
    if 0 <= (start := tail.find("\n")) <= len(tail) // 5:
        tail = tail[start + 1 :]
    return (
        f"{head}\n[… {tokens - 2 * half:,} tokens of this message were cut to fit the model's window{where} …]\n{tail}"
    )


class EngineOwner(Protocol):
    """The session a context engine counts for (read at each use: a session's options may be replaced)."""

    state: SessionState
    deps: ToolDeps
    options: SessionOptions
    models: ModelStack


class ContextEngine:
    """The context of one session (see the module's docstring)."""

    def __init__(self, session: EngineOwner) -> None:
        self._session = session
        self._tools: dict[tuple[frozenset[str] | None, bool, bool], int] = {}
        self._mcp_tokens: tuple[tuple[str, ...], int] = ((), 0)
        """The names of the MCP tools last counted, and what their definitions take."""
        self._warned: set[str] = set()
        self._system: tuple[str, int] = ("", 0)
        self._block: tuple[Any, str, int] | None = None
        """The last context block: what it was rendered from, its text and its tokens."""
        self._counter: TokenCounter | None = None
        """Counts the tokens of the parts the session's requests carry (made with the first turn)."""
        self.today: Callable[[], date] = date.today
        """Today's date, as the context block says it (a test sets its own day)."""

    @property
    def state(self) -> SessionState:
        """The session's state."""
        return self._session.state

    @property
    def budget(self) -> Budget:
        """The budgets of the session's current model."""
        return Budget.of(self.state.model, self._session.options.compact_threshold)

    # -- accounting ----------------------------------------------------------------------------------------

    @property
    def lean(self) -> bool:
        """Whether requests carry the lean tool set (a small window: see ``context/tools.py``)."""
        return bool(self.state.model.context_limit < tools.LEAN_WINDOW)

    def system_tokens(self) -> int:
        """What the system prompt takes of every request."""
        text = self._session.models.instructions()
        if self._system[0] is not text:
            self._system = (text, count_wire_tokens(text) + MESSAGE_OVERHEAD_TOKENS)
        return self._system[1]

    def tool_tokens(self) -> int:
        """What the definitions of the tools a user turn offers take of its requests."""
        options = self._session.options
        if not options.run_tools:
            return 0
        key = (options.tool_names, options.delegates, self.lean)
        if (known := self._tools.get(key)) is None:
            defs = tools.offered_definitions(options.tool_names, delegates=options.delegates, lean=self.lean)
            known = self._tools[key] = tools.definitions_tokens(defs)
        mcp = self._session.deps.mcp
        if mcp is not None and options.tool_names is None:
            offered = mcp.tools()
            names = tuple(tool.name for tool in offered)  # a name stands for one tool all session
            if self._mcp_tokens[0] != names:  # counted once per change of the servers' tools
                from codling.tools.mcp.mcp_toolset import definition

                self._mcp_tokens = (names, tools.definitions_tokens(definition(tool) for tool in offered))
            known += self._mcp_tokens[1]
        return known

    def fixed_tokens(self) -> int:
        """What every request carries besides the conversation: the system prompt and the tool definitions."""
        return self.system_tokens() + self.tool_tokens()

    def turn_block(self) -> str:
        """The context the next turn carries with the user's message: what the blocks the history holds do not
        say yet of today's date, the pinned instructions (within their budget), the pins withdrawn and the
        recently edited files ("" when they say it all: see ``layout.py``). The date is here, not in the system
        prompt, so the system prompt stays one cacheable prefix across midnight and across days a session is
        resumed on; the turn ledger is not."""
        state = self.state
        budget = self.budget
        today = self.today().isoformat()
        # Rendered once per change of what it shows: the turn loop asks for it several times a turn.
        key = (
            today,
            state.pins,
            state.unpinned,
            state.recent_files,
            state.rewind_notes,
            budget.pins,
            state.shown,
            state.replacements,
        )
        if self._block is not None and self._block[0] == key:
            return self._block[1]
        # The note says what the tags are once per history: a later block is read as adding to it.
        sections: list[Section] = [("", [CONTEXT_NOTE]), ("", [f"Today's date: {today}"])]
        # A pin the history states in the user's own words (the prompt that said it) is not said again.
        sections += sections_of(render_pins(tuple(p for p in state.pins if not state.stated(p)), budget.pins))
        # A withdrawn one is said withdrawn while the history still states it (or a block of it showed it).
        said = [p.text for p in state.unpinned if state.stated(p) or f"- {p.text}" in state.shown]
        if gone := withdrawn(said):
            sections.append(gone)
        sections.append(("", list(state.rewind_notes)))
        sections.append(("", [recent_files_note(state.recent_files, state.cwd)]))
        body = unshown(sections, state.shown)
        block = f"{CONTEXT_OPEN}\n{body}\n{CONTEXT_CLOSE}" if body and body != CONTEXT_NOTE else ""
        self._block = (key, block, count_wire_tokens(block) if block else 0)
        return block

    def overhead(self) -> int:
        """What the next request carries before any conversation: fixed tokens plus the turn's context block."""
        self.turn_block()
        assert self._block is not None
        return self.fixed_tokens() + self._block[2]

    def context_used(self) -> int:
        """Tokens the next request would start from: the larger of codling's count (system prompt, tool
        definitions, the turn's context block, the history) and what the provider last reported."""
        estimate = self.overhead() + self.state.history_tokens
        return int(max(estimate, self.state.reported_input_tokens))

    def usage_event(self, turn_id: str, send: Callable[[Event], None] | None = None) -> UsageUpdated:
        """How full the context is now. Never more than the window: past it (a window too small for codling's
        own overhead), the user is told once, through ``send``."""
        size = self.state.model.context_limit
        used = self.context_used()
        if used > size:
            self.warn_once(
                "over",
                turn_id,
                send,
                f"The context ({used:,} tokens) is larger than {self.state.model.id}'s window ({size:,}); "
                "codling is cutting what it sends. Start a new session or pick a model with a larger window.",
            )
        return UsageUpdated(turn_id, min(used, size), size, self.state.cost, self.state.spent)

    def warn_once(self, key: str, turn_id: str, send: Callable[[Event], None] | None, message: str) -> None:
        """Tell the user ``message`` (a ``ContextWarning`` through ``send``) unless this session already did;
        without ``send`` nothing is said (and it is said the next time there is a way to)."""
        if key in self._warned or send is None:
            return
        self._warned.add(key)
        log.warning("%s", message)
        send(ContextWarning(turn_id, f"context-{uuid.uuid4().hex[:12]}", message))

    # -- a turn --------------------------------------------------------------------------------------------

    def fit_prompt(self, text: str, turn_id: str, send: Callable[[Event], None], turn: int) -> str:
        """``text``, the ``turn``-th turn's prompt, cut to what one prompt may take of the current model's window
        (see ``fit_prompt``) and saved whole where the session keeps such prompts; a cut is said to the user (a
        ``ContextWarning``), since the model will not see all they wrote."""
        saved = saved_prompt(self.state, turn)
        fitted = fit_prompt(text, self.budget, saved)
        if fitted != text and saved is not None and not saved.exists():  # (a retry cuts the cut text again)
            try:
                saved.parent.mkdir(parents=True, exist_ok=True)
                replace_file(saved, text.encode("utf-8", "replace"))
            except OSError as e:  # the note names it anyway, so a restored session reads the same
                log.warning("could not save the whole prompt in %s: %s", saved, e)
        if fitted != text:
            budget = self.budget
            where = f" and of {saved}, where the whole message is saved for it to read" if saved else ""
            message = (
                f"Your message is about {count_tokens(text):,} tokens, more than the {budget.prompt:,} one message "
                f"may take of {self.state.model.id}'s {budget.window:,}-token window: the model gets its first "
                f"and last parts, with a note of the cut{where}. Attach a smaller part, or name the file so the "
                "model can read what it needs."
            )
            log.warning("%s", message)
            send(ContextWarning(turn_id, f"context-{uuid.uuid4().hex[:12]}", message))
        return fitted

    def compaction_due(self, turn_id: str, send: Callable[[Event], None], prompt: str) -> int | None:
        """Before a turn's first request: what ``prompt`` adds to the context (the compaction's ``pending``)
        when that request would pass the budget's compaction point and compaction can help, else None; not
        when what it would leave is about what there is (that would compact every turn). A window too small
        for codling's own overhead is said once."""
        budget = self.budget
        overhead = self.overhead()
        pending = count_tokens(prompt)
        if overhead > budget.compact_at * SMALL_SHARE:
            self.warn_once(
                "small",
                turn_id,
                send,
                f"{self.state.model.id}'s window ({budget.window:,} tokens) is small for codling: the system "
                f"prompt, tool definitions and session notes alone take {overhead:,} tokens of the "
                f"{budget.input_limit:,} a request may use. Expect frequent compaction; a model with a larger "
                "window will work better.",
            )
        if not self.state.entries or self.context_used() + pending <= budget.compact_at:
            return None
        leaves = budget.kept_user + budget.summary
        if self.state.history_tokens <= leaves * 1.25 and self.context_used() + pending <= budget.input_limit:
            return None  # compacting would leave about what there is
        return pending

    def after_compaction(self, turn_id: str, send: Callable[[Event], None], pending: int) -> None:
        """After the compaction ``compaction_due`` asked for: say so once when the request is still too large."""
        budget = self.budget
        if (after := self.context_used() + pending) > budget.input_limit:
            self.warn_once(
                "small",
                turn_id,
                send,
                f"Even after compacting, the next request ({after:,} tokens) is larger than the "
                f"{budget.input_limit:,} {self.state.model.id} can take; codling will cut this turn's tool "
                "output to fit. A model with a larger window will work better.",
            )

    def requests(self, compact_history: Any) -> TurnRequests:
        """The capability that fits each request of a turn into the window (see ``requests.py``); the
        session's parts are counted once, by one counter."""
        from codling.brain.context.requests import TokenCounter, TurnRequests

        if self._counter is None:
            self._counter = TokenCounter()
        self._counter.next_turn()
        return TurnRequests(self.budget, self.system_tokens, compact_history, counter=self._counter)

    def after_turn(self, first_input: int, images: tuple[ImageBlock, ...]) -> None:
        """Carry the provider's count of the turn's first request (``first_input``; 0: not reported) past the
        turn, once the turn's prompt and reply are in the history: the history's growth is the reply."""
        if not first_input:
            self.state.reported_input_tokens = 0  # nothing the provider said applies to the history as it is
            return
        counted = first_input - image_tokens(images, self.state.model)
        self.state.reported_input_tokens = max(0, counted) + self.state.entries[-1].tokens
