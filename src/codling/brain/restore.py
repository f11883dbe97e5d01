"""Rebuilding a session's state from its recorded events (e.g. read back from history.jsonl)."""

from __future__ import annotations

from collections.abc import Iterable

from codling.brain.context import compaction
from codling.brain.context.budget import Budget
from codling.brain.context.compaction import DEFAULT_THRESHOLD
from codling.brain.context.compactor import count_compaction
from codling.brain.context.engine import fit_prompt
from codling.brain.context.pins import pins_after
from codling.brain.context.summaries import update_recent_files
from codling.brain.delegates import remember as remember_delegate
from codling.brain.events import (
    ContextCompacted,
    Event,
    PlanUpdated,
    SpecialTurnPersisted,
    ToolCallFinished,
    TurnEnded,
    TurnStarted,
)
from codling.brain.prompt import TextBlock
from codling.brain.slash import PROMPT_COMMANDS
from codling.brain.special_history import persisted_entries
from codling.brain.state import HistoryEntry, SessionState, saved_prompt
from codling.brain.turns import Ending, TurnLog, command_of, turn_text, typed_text


def record_turn(state: SessionState, log_: TurnLog, ending: Ending | None) -> None:
    """Append a turn to the text history (user text, then reply text with tool summaries)."""
    if state.turn_count == 0:
        state.first_request = log_.user_text
    state.add(HistoryEntry.of("user", log_.user_text, log_.context))
    state.add(HistoryEntry.of("assistant", log_.reply(ending)))
    state.turn_count += 1


def follow(state: SessionState, log_: TurnLog | None, event: Event) -> None:
    """What the state takes from one event of a turn, live and on restore alike: the recently edited files,
    the delegates' latest answers and the plan."""
    if isinstance(event, ToolCallFinished):
        state.recent_files = update_recent_files(state.recent_files, event)
        if log_ is not None and (started := log_.calls.get(event.call_id)) is not None:
            remember_delegate(state, started, event)
    elif isinstance(event, PlanUpdated):
        state.plan = event.steps


def restore(state: SessionState, events: Iterable[Event]) -> None:
    """Replay recorded events into ``state``: each turn enters the history exactly as it did live; compactions
    and persisted special turns (recorded only between turns) change it as they did live; a turn whose end was
    never recorded (the process died) enters it with a note that it was interrupted. A window learned from the
    model's server is taken from each turn's end, so every prompt is cut to the window its turn started with."""
    log_: TurnLog | None = None  # the open turn, unless it is a slash command (not part of the text history)
    for event in events:
        if isinstance(event, TurnStarted):
            if log_ is not None:
                record_turn(state, log_, "interrupted")
            blocks = event.blocks or (TextBlock(event.prompt),)
            # (a prompt's cap does not depend on the threshold)
            text = fit_prompt(
                turn_text(blocks), Budget.of(state.model, DEFAULT_THRESHOLD), saved_prompt(state, state.turn_count + 1)
            )
            command = command_of(blocks)
            pins = pins_after(state.pins, typed_text(blocks), command, state.turn_count + 1)
            state.set_pins(pins, withdrawn=command is not None and command[0] == "unpin")
            answered = command is not None and command[0] not in PROMPT_COMMANDS  # not part of the text history
            log_ = None if answered else TurnLog(state.turn_count + 1, text)
            continue
        if isinstance(event, ContextCompacted):
            state.replace_history(compaction.rebuilt_history(event.kept_user_messages, event.summary))
            count_compaction(state, event)
        elif isinstance(event, SpecialTurnPersisted):
            _apply_special(state, event)
        elif isinstance(event, ToolCallFinished | PlanUpdated):
            follow(state, log_, event)
        elif isinstance(event, TurnEnded):
            state.add_spend(event.usage, event.cost)
            state.use_window(event.window)
            if event.summary is not None:
                state.remember_turn(event.summary)
        if log_ is not None:
            log_.apply(event)
            if isinstance(event, TurnEnded):
                record_turn(state, log_, "cancelled" if event.stop_reason == "cancelled" else None)
                state.reported_input_tokens = event.context_tokens
                log_ = None
    if log_ is not None:
        record_turn(state, log_, "interrupted")


def _apply_special(state: SessionState, event: SpecialTurnPersisted) -> None:
    entries = persisted_entries(event.interactions)
    if event.persistence == "replace-above":
        state.replace_history(entries, event.replaced)
    else:
        for entry in entries:
            state.add(entry)
