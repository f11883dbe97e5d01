"""Replay: the session/update stream a client receives on session/load, derived from recorded events."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from acp import CLIENT_METHODS, helpers
from acp.schema import SessionNotification, ToolCallProgress, ToolCallStart
from acp.utils import serialize_params

from codling.acp.content import to_acp
from codling.acp.newer import ClientExtras, NewerUpdate, wire
from codling.acp.translate import Paths, ToolCards, Update, error_text
from codling.brain.events import Event, TurnEnded, TurnFailed, TurnStarted

INTERRUPTED = "interrupted: the agent stopped before this tool call finished"


def replay_updates(
    events: Iterable[Event], paths: Paths = str, extras: ClientExtras | None = None
) -> list[Update | NewerUpdate]:
    """Every update of a recorded conversation: user chunks, agent chunks, thoughts, tool calls (with their
    final status and content). Every call shown settles in the replay: one the user rejected or cancelled is
    failed (no editor marks it this time), one the process never finished (it died) is failed too. For a
    client that advertised them (``extras``), each compaction is one completed ``compaction_update``; notices
    are not history (and their events are never recorded), so a replay has none."""
    updates: list[Update | NewerUpdate] = []
    cards = ToolCards(paths, replaying=True, extras=extras)
    open_calls: dict[str, None] = {}  # calls shown but not yet completed or failed, in order

    def close_open() -> None:
        for call_id in open_calls:
            note = helpers.tool_content(helpers.text_block(INTERRUPTED))
            updates.append(helpers.update_tool_call(call_id, status="failed", content=[note]))
        open_calls.clear()

    for event in events:
        if isinstance(event, TurnStarted):
            close_open()
            blocks = event.blocks or ()
            if blocks:
                updates.extend(helpers.update_user_message(to_acp(b)) for b in blocks)
            else:
                updates.append(helpers.update_user_message_text(event.prompt))
            continue
        shown: list[Update | NewerUpdate] = (
            cards.translate(event)
            if not isinstance(event, TurnFailed)
            else [helpers.update_agent_message_text(error_text(event.message))]
        )
        for update in shown:
            if isinstance(update, ToolCallStart | ToolCallProgress):
                if update.status in ("completed", "failed"):
                    open_calls.pop(update.tool_call_id, None)
                elif isinstance(update, ToolCallStart) or update.status is not None:
                    open_calls[update.tool_call_id] = None
        if isinstance(event, TurnEnded):
            close_open()
        updates.extend(shown)
    close_open()
    return updates


def replay_messages(
    session_id: str, events: Iterable[Event], extras: ClientExtras | None = None
) -> list[dict[str, Any]]:
    """The replay as the JSON-RPC notifications a client reads on its stdin, serialized as the SDK does (and
    the newer protocol's updates as ``NewerEdge`` sends them)."""
    method = CLIENT_METHODS["session_update"]
    return [
        {
            "jsonrpc": "2.0",
            "method": method,
            "params": (
                {"sessionId": session_id, "update": wire(update)}
                if isinstance(update, NewerUpdate)
                else serialize_params(SessionNotification(session_id=session_id, update=update))
            ),
        }
        for update in replay_updates(events, extras=extras)
    ]
