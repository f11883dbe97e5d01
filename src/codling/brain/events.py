"""The brain's typed event stream.

A turn emits, in order: ``TurnStarted``; any mix of ``TextDelta``, ``ThoughtDelta``, ``ToolCallStarted``,
``ToolCallTerminal``, ``ToolCallNote`` and ``ToolCallRunning`` (live only), ``ToolCallFinished``,
``PlanUpdated``, compaction pairs (``CompactionStarted`` then ``ContextCompacted``), ``ProviderRetrying``
(live only: a wait before retrying a model request) and ``McpServersStarting`` (live only: a wait for MCP
servers); at most one ``TurnFailed``; one ``UsageUpdated``; and exactly one ``TurnEnded``.
Observers (the ACP translator, the terminal renderer, the history recorder) see the same stream. Outside turns,
observers also get ``SpecialTurnPersisted`` (a special turn changed the history) and ``SessionTitled``.
Events are frozen and carry no provider or protocol types. What is recorded, sent to a client, drawn or folded of
each kind is ``brain/event_contract.py``'s table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, assert_never

from codling.brain.context.ledger_entries import TurnRecap
from codling.brain.context.window import LearnedWindow
from codling.brain.interactions import Interaction
from codling.brain.prompt import PromptBlock
from codling.tools.base import ShownResult
from codling.vocabulary import FileDiff, Location, PermissionMode, PlanStep, StopReason, ToolKind

CompactionReason = Literal["threshold", "overflow", "command", "mid-turn"]
"""Why the history was compacted: the context passed the threshold, the provider said it overflowed, or the
user asked (/compact)."""


@dataclass(frozen=True)
class Usage:
    """Tokens and model requests spent by one turn."""

    input_tokens: int = 0
    """All input, the prompt cache's reads and writes included (as pydantic-ai counts it)."""
    output_tokens: int = 0
    requests: int = 0
    cache_read_tokens: int = 0
    """Input tokens the provider read from its prompt cache (billed at a discount)."""
    cache_write_tokens: int = 0
    """Input tokens the provider wrote to its prompt cache (Anthropic bills them at a premium)."""
    cache_write_1h_tokens: int = 0
    """Of ``cache_write_tokens``, those written to live an hour (Anthropic bills them 2x input, not 1.25x)."""

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.requests + other.requests,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
            self.cache_write_1h_tokens + other.cache_write_1h_tokens,
        )


@dataclass(frozen=True)
class TurnStarted:
    """A user prompt was accepted and the turn began."""

    turn_id: str
    prompt: str
    """The prompt as a user would describe it (typed text and attachment names)."""
    thinking: bool
    started_at: datetime
    blocks: tuple[PromptBlock, ...] = ()
    """The prompt's content blocks, as the user sent them."""
    checkpoint: int | None = None
    """The workspace's checkpoint taken before the turn (None: none was; see ``tools/checkpoints/``)."""
    kind: Literal["turn_started"] = "turn_started"


@dataclass(frozen=True)
class TextDelta:
    """A piece of the assistant's reply text, in arrival order."""

    turn_id: str
    text: str
    kind: Literal["text_delta"] = "text_delta"


@dataclass(frozen=True)
class ThoughtDelta:
    """A piece of the model's visible reasoning."""

    turn_id: str
    text: str
    kind: Literal["thought_delta"] = "thought_delta"


@dataclass(frozen=True)
class ToolCallStarted:
    """The model called a tool; it has not run yet (it may wait for permission)."""

    turn_id: str
    call_id: str
    tool_name: str
    title: str
    tool_kind: ToolKind
    raw_input: dict[str, Any]
    locations: tuple[Location, ...] = ()
    kind: Literal["tool_call_started"] = "tool_call_started"


@dataclass(frozen=True)
class ToolCallFinished:
    """A tool call completed or failed; ``text`` is what the model was told."""

    turn_id: str
    call_id: str
    tool_name: str
    status: Literal["completed", "failed"]
    text: str
    diff: FileDiff | None = None
    locations: tuple[Location, ...] = ()
    summary: str = ""
    """What the call did, concretely and briefly (command, exit status and trimmed output; path and trimmed
    diff …), kept in the history across turns in place of the call; empty when the tool gave none."""
    terminal_id: str | None = None
    """The editor's terminal the command ran in (live only: never recorded, it means nothing later)."""
    changed: tuple[Path, ...] = ()
    """Files the call changed besides its ``diff``'s (a delegate's edits)."""
    ended_by: Literal["rejected", "cancelled"] | None = None
    """The user ended the call: rejected it when asked, or cancelled the turn (an editor marks it so itself)."""
    shown: ShownResult | None = None
    """How the user sees the result where that is not ``text`` and ``diff`` (live only: never recorded)."""
    checkpoint: int | None = None
    """The workspace's checkpoint taken just before the call ran (a call that may change files: None for
    the others, or when none was taken)."""
    approved_by: str | None = None
    """What let the call run without a question: the user's rule or "always" answer, in words (None: nothing
    did: it was asked, or the mode allows it)."""
    kind: Literal["tool_call_finished"] = "tool_call_finished"


@dataclass(frozen=True)
class ToolCallTerminal:
    """A running tool call's command runs in the editor's terminal ``terminal_id``, which can show it live.
    Live only: never recorded (a terminal id means nothing once the connection is gone)."""

    turn_id: str
    call_id: str
    terminal_id: str
    kind: Literal["tool_call_terminal"] = "tool_call_terminal"


@dataclass(frozen=True)
class ToolCallRunning:
    """A tool call started its work (a call needing permission asks first). Live only: never recorded."""

    turn_id: str
    call_id: str
    kind: Literal["tool_call_running"] = "tool_call_running"


@dataclass(frozen=True)
class ToolCallNote:
    """What a running tool call is doing, as the whole text to show under it (a delegate's steps so far).
    Live only: never recorded (the call's result says what it did)."""

    turn_id: str
    call_id: str
    text: str
    kind: Literal["tool_call_note"] = "tool_call_note"


@dataclass(frozen=True)
class PlanUpdated:
    """The model set its plan for the task (the whole list of steps, replacing any earlier plan)."""

    turn_id: str
    steps: tuple[PlanStep, ...]
    kind: Literal["plan_updated"] = "plan_updated"


@dataclass(frozen=True)
class CompactionStarted:
    """The history is being compacted (shown to the client as a tool call until ``ContextCompacted``)."""

    turn_id: str
    call_id: str
    tokens_before: int
    reason: CompactionReason
    kind: Literal["compaction_started"] = "compaction_started"


@dataclass(frozen=True)
class ContextCompacted:
    """The history was replaced by the kept user messages plus ``summary``."""

    turn_id: str
    call_id: str
    summary: str
    kept_user_messages: tuple[str, ...]
    tokens_before: int
    tokens_after: int
    fallback: bool
    """True when the model's summary failed or was unusable and a deterministic one was built instead."""
    reason: CompactionReason = "threshold"
    skipped: bool = False
    """The summarizer was not asked (it kept failing: the circuit breaker is open); implies ``fallback``."""
    note: str = ""
    """Something the user should know about this compaction, said once (the summarizer is being skipped)."""
    kind: Literal["context_compacted"] = "context_compacted"


RetryStatus = Literal["waiting", "retrying", "cancelled"]
"""Where a provider retry is: waiting ``delay`` seconds, over (the request is being sent again), or cut short
by the user's cancel."""


@dataclass(frozen=True)
class ProviderRetrying:
    """The model provider refused a request for a passing reason (rate limit, overload, no connection), so it
    is sent again after ``delay`` seconds: ``status`` "waiting" as the wait starts, then "retrying" (or
    "cancelled") with the same ``call_id``. Live only: never recorded (the retry changed nothing)."""

    turn_id: str
    call_id: str
    attempt: int
    """The attempt about to be made (2 for the first retry)."""
    max_attempts: int
    delay: float
    reason: str
    """Why, in a few words: ``HTTP 429``, ``connection failed``."""
    status: RetryStatus = "waiting"
    kind: Literal["provider_retrying"] = "provider_retrying"

    @property
    def title(self) -> str:
        """One line for the user, e.g. "Model provider busy (HTTP 429): retrying in 30 s (attempt 2 of 3)", or
        "Model provider unreachable (connection failed): …"."""
        state = "busy" if self.reason.startswith("HTTP") else "unreachable"
        return (
            f"Model provider {state} ({self.reason}): retrying in {self.delay:g} s "
            f"(attempt {self.attempt} of {self.max_attempts})"
        )


@dataclass(frozen=True)
class ContextWarning:
    """Something about the context the user should know, said once per session: the model's window is too
    small for codling's fixed overhead, or the context is fuller than the window. Live only: never recorded."""

    turn_id: str
    call_id: str
    message: str
    kind: Literal["context_warning"] = "context_warning"


McpStartStatus = Literal["waiting", "progress", "ready", "cancelled"]


@dataclass(frozen=True)
class McpServersStarting:
    """A turn waits for the session's MCP servers still starting: ``status`` "waiting" as the wait begins,
    "progress" as each one becomes ready or fails, then "ready" (the wait is over: each is ready or failed) or
    "cancelled" (the turn was), all with the same ``call_id``. Sent only when some server is still starting.
    Live only: never recorded."""

    turn_id: str
    call_id: str
    starting: tuple[str, ...]
    """The servers still starting, by name."""
    ready: int
    """How many servers are ready."""
    failed: int
    """How many could not start (each has its own ``McpServerNotice``)."""
    total: int
    status: McpStartStatus = "waiting"
    kind: Literal["mcp_starting"] = "mcp_starting"

    @property
    def title(self) -> str:
        """One line for the user, e.g. "Starting MCP servers: a, b (4 of 6 ready)…" or "MCP servers started
        (5 of 6 ready, 1 failed)"."""
        counts = f"{self.ready} of {self.total} ready" + (f", {self.failed} failed" if self.failed else "")
        match self.status:
            case "waiting" | "progress":
                return f"Starting MCP servers: {', '.join(self.starting)} ({counts})…"
            case "ready":
                return f"MCP servers started ({counts})"
            case "cancelled":
                return f"Stopped waiting for MCP servers {', '.join(self.starting)}: the turn was cancelled"
            case _:
                assert_never(self.status)


@dataclass(frozen=True)
class McpServerNotice:
    """An MCP server of the session failed to start, stopped working, or offers more tools than the model
    gets. Live only: never recorded (what a server writes to stderr may hold anything)."""

    turn_id: str
    """The turn it happened in ("" between turns)."""
    call_id: str
    server: str
    message: str
    """One line naming the server and what happened."""
    detail: str = ""
    """The server's last words on stderr, or the error's text."""
    kind: Literal["mcp_notice"] = "mcp_notice"


@dataclass(frozen=True)
class SettingsChanged:
    """A slash command changed the session's model or permission mode (whichever is not None)."""

    turn_id: str
    model: str | None = None
    mode: PermissionMode | None = None
    kind: Literal["settings_changed"] = "settings_changed"


@dataclass(frozen=True)
class UsageUpdated:
    """How full the context is after a turn: ``used`` of ``size`` tokens; and what the session has spent."""

    turn_id: str
    used: int
    size: int
    cost: float | None = None
    """The session's cost so far in US dollars, at list prices (None: no turn had a known price)."""
    spent: Usage = field(default_factory=Usage)
    """The tokens and requests the session's turns have spent so far."""
    kind: Literal["usage_updated"] = "usage_updated"


@dataclass(frozen=True)
class SpecialTurnPersisted:
    """A special turn's result entered the history (never sent for an ephemeral one)."""

    turn_type: str
    persistence: Literal["persist-result", "persist-all", "replace-above"]
    interactions: tuple[Interaction, ...]
    metadata: dict[str, Any] = field(default_factory=dict)
    replaced: int | None = None
    """replace-above: how many of the history's first entries the interactions replaced (None: all of them;
    entries added after the special turn read the history stay behind its result)."""
    special_id: str = field(default="", compare=False)
    """Tells this persisted special turn from any other (e.g. to give its replayed tool calls their own ids);
    an identity, not content, so equal events may differ in it."""
    kind: Literal["special_turn_persisted"] = "special_turn_persisted"


RewindScope = Literal["both", "code", "conversation"]
"""What a rewind puts back: the workspace's files and the conversation, or one of them."""


@dataclass(frozen=True)
class Rewound:
    """The user rewound the session (``/undo``, ``/rewind``) to how it was before turn ``target_turn_id``
    (its number then: ``turn_number``). The conversation side (scope ``both`` or ``conversation``) abandons that
    turn and every later one: from here on the model is sent the conversation as it stood before it (they stay
    in the history, shown as abandoned). The code side put the workspace back as checkpoint ``checkpoint`` holds
    it, changing ``files`` (a conversation rewind: the files that keep what the abandoned turns changed);
    ``saved`` is the checkpoint of the workspace as it was just before (None: no code side)."""

    turn_id: str
    target_turn_id: str
    turn_number: int
    scope: RewindScope
    checkpoint: int | None = None
    saved: int | None = None
    files: tuple[str, ...] = ()
    step: int | None = None
    """The step of the turn the code went back to before (None: the whole turn)."""
    kind: Literal["rewound"] = "rewound"


@dataclass(frozen=True)
class SessionTitled:
    """The session has a title: the model's (from the title special turn) or, when the model could not give
    one, the fallback made from the first request. Not part of any turn."""

    title: str
    source: Literal["model", "fallback"]
    kind: Literal["session_titled"] = "session_titled"


FailureReason = Literal["auth", "provider", "model_output", "config", "internal"]
"""Why a turn failed: the provider refused the credentials (or there are none), the provider failed, the model's
answer could not be used, codling is configured wrongly, or codling itself failed."""


@dataclass(frozen=True)
class TurnFailed:
    """The turn could not finish: ``message`` is the error reply shown to the user."""

    turn_id: str
    message: str
    reason: FailureReason = "internal"
    details: str = field(default="", compare=False)
    """What a client may show under the message (exception types, the provider's status and body): diagnostics,
    left out of comparisons. Live only: the history keeps ``message``."""
    kind: Literal["turn_failed"] = "turn_failed"


@dataclass(frozen=True)
class TurnEnded:
    """The turn is over; always the last event of a turn."""

    turn_id: str
    stop_reason: StopReason
    usage: Usage = field(default_factory=Usage)
    error: bool = False
    summary: TurnRecap | None = None
    """What the turn did, for the next turns' prompts (None for command turns such as /compact)."""
    context_tokens: int = 0
    """The input tokens the provider reported for the turn's first request, carried to the history after the
    turn (0: none reported); recorded, so a restored session budgets with the live one's numbers."""
    cost: float | None = None
    """What ``usage`` cost at the model's list price, in US dollars (None: the price is not known)."""
    window: LearnedWindow | None = None
    """The window learned from the model's server, in use when the turn ended (None: the catalog's); recorded,
    so a restored session budgets with it too (see ``context/window.py``)."""
    context: str = ""
    """The context block the turn's request carried before the prompt ("" for none); recorded, so a restored
    history holds the bytes the live one sent, whatever day it is restored on (see ``context/layout.py``)."""
    checkpoint: int | None = None
    """The workspace's checkpoint taken as the turn ended (None: none was)."""
    kind: Literal["turn_ended"] = "turn_ended"


Event = (
    TurnStarted
    | TextDelta
    | ThoughtDelta
    | ToolCallStarted
    | ToolCallTerminal
    | ToolCallNote
    | ToolCallRunning
    | ToolCallFinished
    | PlanUpdated
    | CompactionStarted
    | ContextCompacted
    | ProviderRetrying
    | ContextWarning
    | McpServersStarting
    | McpServerNotice
    | SettingsChanged
    | UsageUpdated
    | SpecialTurnPersisted
    | SessionTitled
    | TurnFailed
    | TurnEnded
    | Rewound
)
"""Any brain event."""
