"""Rebuilding a session's state from its recorded events (e.g. read back from history.jsonl)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import assert_never

from codling.brain.branches import abandoned, rewind_note
from codling.brain.context import compaction
from codling.brain.context.budget import Budget
from codling.brain.context.compaction import DEFAULT_THRESHOLD
from codling.brain.context.compactor import count_compaction
from codling.brain.context.digests import update_recent_files
from codling.brain.context.engine import fit_prompt
from codling.brain.context.pins import pins_after
from codling.brain.delegates import remember as remember_delegate
from codling.brain.events import (
    CompactionStarted,
    ContextCompacted,
    ContextWarning,
    Event,
    McpServerNotice,
    McpServersStarting,
    PlanUpdated,
    ProviderRetrying,
    Rewound,
    SessionTitled,
    SettingsChanged,
    SpecialTurnPersisted,
    TextDelta,
    ThoughtDelta,
    ToolCallFinished,
    ToolCallNote,
    ToolCallRunning,
    ToolCallStarted,
    ToolCallTerminal,
    TurnEnded,
    TurnFailed,
    TurnStarted,
    UsageUpdated,
)
from codling.brain.prompt import TextBlock
from codling.brain.slash import PROMPT_COMMANDS
from codling.brain.special_history import persisted_entries
from codling.brain.state import MAX_REWIND_NOTES, HistoryEntry, SessionState, saved_prompt
from codling.brain.turns import Ending, TurnLog, command_of, turn_text, typed_text


def record_turn(state: SessionState, log_: TurnLog, ending: Ending | None) -> None:
    """Append a turn to the text history (user text, then reply text with tool digests)."""
    if state.turn_count == 0:
        state.first_request = log_.user_text
    state.add(HistoryEntry.of("user", log_.user_text, log_.context))
    state.add(HistoryEntry.of("assistant", log_.reply(ending)))
    state.turn_count += 1


def follow(state: SessionState, log_: TurnLog | None, event: Event) -> None:
    """What the state takes from one event of a turn, live and on restore alike: the recently edited files,
    the delegates' latest answers and the plan."""
    match event:
        case ToolCallFinished():
            state.recent_files = update_recent_files(state.recent_files, event)
            if log_ is not None and (started := log_.calls.get(event.call_id)) is not None:
                remember_delegate(state, started, event)
        case PlanUpdated():
            state.plan = event.steps
        case Rewound():
            if (note := rewind_note(event)) is not None:
                state.rewind_notes = (*state.rewind_notes, note)[-MAX_REWIND_NOTES:]
        case (
            TurnStarted()
            | TextDelta()
            | ThoughtDelta()
            | ToolCallStarted()
            | ToolCallTerminal()
            | ToolCallNote()
            | ToolCallRunning()
            | CompactionStarted()
            | ContextCompacted()
            | ProviderRetrying()
            | ContextWarning()
            | McpServersStarting()
            | McpServerNotice()
            | SettingsChanged()
            | UsageUpdated()
            | SpecialTurnPersisted()
            | SessionTitled()
            | TurnFailed()
            | TurnEnded()
        ):
            pass  # the turn's log keeps what the text history needs of them
        case _:
            assert_never(event)


def restore(state: SessionState, events: Iterable[Event]) -> None:
    """Replay recorded events into ``state``: each turn enters the history exactly as it did live; compactions
    and persisted special turns (recorded only between turns) change it as they did live; a turn whose end was
    never recorded (the process died) enters it with a note that it was interrupted. A window learned from the
    model's server is taken from each turn's end, so every prompt is cut to the window its turn started with.
    What a rewind abandoned is skipped (``brain/branches.py``), its turns' spend aside."""
    recorded = list(events)
    gone = abandoned(recorded)
    log_: TurnLog | None = None  # the open turn, unless it is a slash command (not part of the text history)
    for index, event in enumerate(recorded):
        if index not in gone:
            log_ = restore_event(state, log_, event)
        elif isinstance(event, TurnEnded):  # a rewind abandoned the turn: what it spent was spent all the same
            state.add_spend(event.usage, event.cost)
    if log_ is not None:
        record_turn(state, log_, "interrupted")


def restore_event(state: SessionState, log_: TurnLog | None, event: Event) -> TurnLog | None:
    """Replay one recorded event into ``state``; the turn open after it (None: none, or a slash command)."""
    match event:
        case TurnStarted():
            if log_ is not None:
                record_turn(state, log_, "interrupted")
            return _started(state, event)
        case ContextCompacted():
            state.replace_history(compaction.rebuilt_history(event.kept_user_messages, event.summary))
            count_compaction(state, event)
        case SpecialTurnPersisted():
            _apply_special(state, event)
        case ToolCallFinished() | PlanUpdated() | Rewound():
            follow(state, log_, event)
        case TurnEnded():
            state.add_spend(event.usage, event.cost)
            state.use_window(event.window)
            if event.summary is not None:
                state.remember_turn(event.summary)
        case TextDelta() | ThoughtDelta() | ToolCallStarted() | TurnFailed() | CompactionStarted():
            pass  # the turn's log takes them (below)
        case (
            ToolCallTerminal()
            | ToolCallNote()
            | ToolCallRunning()
            | ProviderRetrying()
            | ContextWarning()
            | McpServersStarting()
            | McpServerNotice()
            | SettingsChanged()
            | UsageUpdated()
            | SessionTitled()
        ):
            pass  # never recorded as events
        case _:
            assert_never(event)
    if log_ is None:
        return None
    log_.apply(event)
    if not isinstance(event, TurnEnded):
        return log_
    record_turn(state, log_, "cancelled" if event.stop_reason == "cancelled" else None)
    state.reported_input_tokens = event.context_tokens
    return None


def _started(state: SessionState, event: TurnStarted) -> TurnLog | None:
    """A recorded turn's start: its prompt cut as it was live, the pins it set; its log (None for a slash
    command that is not part of the text history)."""
    blocks = event.blocks or (TextBlock(event.prompt),)
    # (a prompt's cap does not depend on the threshold)
    text = fit_prompt(
        turn_text(blocks), Budget.of(state.model, DEFAULT_THRESHOLD), saved_prompt(state, state.turn_count + 1)
    )
    command = command_of(blocks)
    pins = pins_after(state.pins, typed_text(blocks), command, state.turn_count + 1)
    state.set_pins(pins, withdrawn=command is not None and command[0] == "unpin")
    answered = command is not None and command[0] not in PROMPT_COMMANDS  # not part of the text history
    return None if answered else TurnLog(state.turn_count + 1, text)


def _apply_special(state: SessionState, event: SpecialTurnPersisted) -> None:
    entries = persisted_entries(event.interactions)
    if event.persistence == "replace-above":
        state.replace_history(entries, event.replaced)
    else:
        for entry in entries:
            state.add(entry)
