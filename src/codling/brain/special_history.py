"""A special turn's interactions and the model's history, both ways: a run's events as interactions
(``interactions_of``), override messages as pydantic-ai messages (``messages_of``) and persisted interactions as
history entries (``persisted_entries``, live and when a session is restored)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, assert_never

from codling.brain.context.digests import tool_call_digest
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
from codling.brain.interactions import Interaction, InteractionKind
from codling.brain.state import HistoryEntry, Role, summary_entry

_ROLE_OF_KIND: dict[str, Role] = {
    "user": "user",
    "assistant": "assistant",
    "summary": "summary",
    "tool_result": "assistant",
}
"""Where each kind goes in the model's history (a kind not named here is recorded but not shown to the model)."""


def interactions_of(events: Sequence[Event]) -> tuple[Interaction, ...]:
    """A run's events as interactions, in order: each stretch of thinking or text as one ``thought`` or
    ``assistant``, each tool call as a ``tool_call`` (its title) and a ``tool_result`` (what it did, as the
    plain-text summary the history keeps of user turns' tool calls)."""
    out: list[Interaction] = []
    started: dict[str, ToolCallStarted] = {}
    for event in events:
        match event:
            case TextDelta() | ThoughtDelta():
                kind: InteractionKind = "assistant" if isinstance(event, TextDelta) else "thought"
                if out and out[-1].kind == kind:
                    out[-1] = Interaction(kind, out[-1].text + event.text)
                else:
                    out.append(Interaction(kind, event.text))
            case ToolCallStarted():
                started[event.call_id] = event
                out.append(Interaction("tool_call", event.title))
            case ToolCallFinished() if event.call_id in started:
                out.append(Interaction("tool_result", tool_call_digest(started[event.call_id], event)))
            case (
                TurnStarted()
                | ToolCallTerminal()
                | ToolCallNote()
                | ToolCallRunning()
                | ToolCallFinished()
                | PlanUpdated()
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
                | Rewound()
            ):
                pass  # not an interaction (a result whose call was not seen neither)
            case _:
                assert_never(event)
    return tuple(out)


def messages_of(interactions: Sequence[Interaction]) -> list[Any]:
    """Override messages as pydantic-ai messages (see ``SpecialTurnConfig.messages``)."""
    from pydantic_ai.messages import ModelRequest, SystemPromptPart

    out: list[Any] = []
    for interaction in interactions:
        if interaction.kind == "system":
            out.append(ModelRequest(parts=[SystemPromptPart(interaction.text)]))
        elif interaction.kind == "context":
            out.append(HistoryEntry.of("user", interaction.text).message())
        elif interaction.kind in _ROLE_OF_KIND:
            out.append(_entry(interaction).message())
    return out


def _entry(interaction: Interaction) -> HistoryEntry:
    if interaction.kind == "summary":
        return summary_entry(interaction.text)
    return HistoryEntry.of(_ROLE_OF_KIND[interaction.kind], interaction.text)


def persisted_entries(interactions: Sequence[Interaction]) -> list[HistoryEntry]:
    """The history entries persisted interactions become (live, and when a session is restored from its
    records). As for user turns, the model's history keeps text: user and assistant messages, summaries, and
    tool results as their plain-text summaries, merged into the assistant's reply; the other kinds (thoughts,
    tool calls, system and context) stay in the record, for transcripts and replays, and out of the history."""
    entries: list[HistoryEntry] = []
    for interaction in interactions:
        role = _ROLE_OF_KIND.get(interaction.kind)
        if role is None:
            continue
        if role == "assistant" and entries and entries[-1].role == "assistant":
            entries[-1] = HistoryEntry.of("assistant", f"{entries[-1].text}\n\n{interaction.text}")
        else:
            entries.append(_entry(interaction))
    return entries
