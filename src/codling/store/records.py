"""history.jsonl records: brain events and session facts as versioned JSON objects, and back.

Every record has ``v`` (format version), ``ts`` (UTC, ISO 8601), ``session_id``, ``kind`` and, for records of
a turn, ``turn_id``. The format is documented in docs/history-format.md.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from codling.brain.events import (
    CompactionStarted,
    ContextCompacted,
    Event,
    PlanUpdated,
    SpecialTurnPersisted,
    TextDelta,
    ThoughtDelta,
    ToolCallFinished,
    ToolCallStarted,
    TurnEnded,
    TurnFailed,
    TurnStarted,
    Usage,
)
from codling.brain.interactions import Interaction
from codling.brain.prompt import ImageBlock, PromptBlock, ResourceBlock, TextBlock, prompt_summary
from codling.brain.summaries import TurnExecutionSummary
from codling.tools.base import PlanStep
from codling.tools.ports import FileDiff, Location

VERSION = 1

TURN_KINDS = frozenset(
    {"turn_start", "message", "thought", "tool_call", "tool_result", "plan", "compaction", "turn_end"}
)
"""Record kinds that belong to a turn (and carry ``turn_id``)."""

EVENT_KINDS = TURN_KINDS | {"special"}
"""Record kinds that stand for brain events (special turns persist between turns, without a turn id)."""


def now() -> str:
    """The current UTC time as written in records."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_time(value: str) -> datetime:
    """A record timestamp as an aware datetime."""
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


# -- prompt blocks in ACP wire format --------------------------------------------------------------------------


def block_to_wire(block: PromptBlock) -> dict[str, Any]:
    """A prompt block as an ACP content block (JSON): text, image, embedded text resource, or resource link."""
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text}
    if isinstance(block, ImageBlock):
        image = {"type": "image", "mimeType": block.mime_type, "data": block.data}
        return image if block.uri is None else {**image, "uri": block.uri}
    if block.text is not None:
        return {"type": "resource", "resource": {"uri": block.uri, "text": block.text}}
    wire: dict[str, Any] = {"type": "resource_link", "uri": block.uri, "name": block.name}
    if block.note:
        wire["description"] = block.note
    return wire


def block_from_wire(wire: dict[str, Any]) -> PromptBlock:
    """The inverse of :func:`block_to_wire`."""
    kind = wire.get("type")
    if kind == "text":
        return TextBlock(str(wire.get("text", "")))
    if kind == "image":
        return ImageBlock(str(wire.get("data", "")), str(wire.get("mimeType", "")), wire.get("uri"))
    if kind == "resource":
        resource = wire.get("resource") or {}
        return ResourceBlock(str(resource.get("uri", "")), text=resource.get("text"))
    return ResourceBlock(str(wire.get("uri", "")), note=wire.get("description"))


# -- events → records ------------------------------------------------------------------------------------------


def _locations(items: tuple[Location, ...]) -> list[dict[str, Any]]:
    return [{"path": str(loc.path), "line": loc.line} for loc in items]


def _diff(diff: FileDiff | None) -> dict[str, Any] | None:
    if diff is None:
        return None
    return {"path": str(diff.path), "old_text": diff.old_text, "new_text": diff.new_text}


def event_payload(event: Event, error: str | None = None) -> dict[str, Any] | None:
    """The kind-specific part of the record for one event (text deltas arrive here already merged), or None
    for events that have no record of their own: ``TurnFailed`` (its message is the ``error`` of the turn's
    end record), ``CompactionStarted`` (the ``compaction`` record stands for both), ``UsageUpdated``
    (derived again on load), ``SessionTitled`` (the recorder writes a ``settings`` record) and
    ``ToolCallTerminal`` (a terminal id means nothing once the client is gone; nor is ``terminal_id`` kept) and
    ``ToolCallNote`` (a delegate's progress; its result is recorded)."""
    match event:
        case TurnStarted():
            return {
                "kind": "turn_start",
                "prompt": [block_to_wire(b) for b in event.blocks],
                "thinking": event.thinking,
                "started_at": event.started_at.isoformat(),
            }
        case TextDelta():
            return {"kind": "message", "text": event.text}
        case ThoughtDelta():
            return {"kind": "thought", "text": event.text}
        case ToolCallStarted():
            return {
                "kind": "tool_call",
                "call_id": event.call_id,
                "tool_name": event.tool_name,
                "title": event.title,
                "tool_kind": event.tool_kind,
                "raw_input": event.raw_input,
                "locations": _locations(event.locations),
            }
        case ToolCallFinished():
            return {
                "kind": "tool_result",
                "call_id": event.call_id,
                "tool_name": event.tool_name,
                "status": event.status,
                "text": event.text,
                "diff": _diff(event.diff),
                "locations": _locations(event.locations),
                "summary": event.summary,
                **({"changed": [str(p) for p in event.changed]} if event.changed else {}),
            }
        case SpecialTurnPersisted():
            return {
                "kind": "special",
                "turn_type": event.turn_type,
                "persistence": event.persistence,
                "interactions": [{"kind": i.kind, "text": i.text} for i in event.interactions],
                "metadata": event.metadata,
                **({"replaced": event.replaced} if event.replaced is not None else {}),
                **({"special_id": event.special_id} if event.special_id else {}),
            }
        case ContextCompacted():
            return {
                "kind": "compaction",
                "call_id": event.call_id,
                "reason": event.reason,
                "summary": event.summary,
                "kept_messages": list(event.kept_user_messages),
                "tokens_before": event.tokens_before,
                "tokens_after": event.tokens_after,
                "fallback": event.fallback,
            }
        case PlanUpdated():
            return {
                "kind": "plan",
                "steps": [{"step": s.step, "status": s.status, "priority": s.priority} for s in event.steps],
            }
        case TurnEnded():
            usage = event.usage
            return {
                "kind": "turn_end",
                "stop_reason": event.stop_reason,
                "usage": {
                    "input_tokens": usage.input_tokens,
                    "output_tokens": usage.output_tokens,
                    "requests": usage.requests,
                },
                "error": error,
                "summary": event.summary.to_dict() if event.summary is not None else None,
            }
    return None


# -- records → events ------------------------------------------------------------------------------------------


def _locations_from(items: Any) -> tuple[Location, ...]:
    return tuple(Location(Path(i["path"]), i.get("line")) for i in items or ())


def record_events(record: dict[str, Any]) -> list[Event]:
    """The brain events one turn record stands for (none for records outside turns)."""
    kind = record.get("kind")
    turn_id = str(record.get("turn_id", ""))
    match kind:
        case "turn_start":
            blocks = tuple(block_from_wire(w) for w in record.get("prompt", ()))
            started = parse_time(record.get("started_at") or record["ts"])
            return [TurnStarted(turn_id, prompt_summary(blocks), bool(record.get("thinking")), started, blocks)]
        case "message":
            return [TextDelta(turn_id, record["text"])]
        case "thought":
            return [ThoughtDelta(turn_id, record["text"])]
        case "tool_call":
            return [
                ToolCallStarted(
                    turn_id,
                    record["call_id"],
                    record["tool_name"],
                    record["title"],
                    record.get("tool_kind", "other"),
                    record.get("raw_input") or {},
                    _locations_from(record.get("locations")),
                )
            ]
        case "plan":
            steps = tuple(
                PlanStep(s["step"], s.get("status", "pending"), s.get("priority", "medium"))
                for s in record.get("steps") or ()
            )
            return [PlanUpdated(turn_id, steps)]
        case "tool_result":
            diff = record.get("diff")
            return [
                ToolCallFinished(
                    turn_id,
                    record["call_id"],
                    record["tool_name"],
                    record["status"],
                    record.get("text", ""),
                    FileDiff(Path(diff["path"]), diff.get("old_text"), diff["new_text"]) if diff else None,
                    _locations_from(record.get("locations")),
                    record.get("summary", ""),
                    changed=tuple(Path(p) for p in record.get("changed") or ()),
                )
            ]
        case "special":
            interactions = tuple(Interaction(i["kind"], i["text"]) for i in record.get("interactions") or ())
            persistence = record.get("persistence", "persist-result")
            return [
                SpecialTurnPersisted(
                    record.get("turn_type", "special"),
                    persistence,
                    interactions,
                    record.get("metadata") or {},
                    record.get("replaced"),
                    record.get("special_id", ""),
                )
            ]
        case "compaction":
            reason = record.get("reason", "threshold")
            before = int(record.get("tokens_before", 0))
            return [
                CompactionStarted(turn_id, record["call_id"], before, reason),
                ContextCompacted(
                    turn_id,
                    record["call_id"],
                    record["summary"],
                    tuple(record.get("kept_messages") or ()),
                    before,
                    int(record.get("tokens_after", 0)),
                    bool(record.get("fallback")),
                    reason,
                ),
            ]
        case "turn_end":
            usage = Usage(**(record.get("usage") or {}))
            error = record.get("error")
            raw_summary = record.get("summary")
            summary = TurnExecutionSummary.from_dict(raw_summary) if raw_summary else None
            ended = TurnEnded(turn_id, record["stop_reason"], usage, error=error is not None, summary=summary)
            return [TurnFailed(turn_id, error), ended] if error is not None else [ended]
    return []
