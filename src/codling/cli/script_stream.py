"""``codling run --json``: the stream of JSON lines a script reads (documented in the README, "For scripts").

One object per line, each with a ``"type"``: ``session`` first, then the turn's events as
:func:`~codling.cli.script_output.event_to_json` makes them, with an ``assistant_message`` (the whole text) each time a
message of the model's completes, and ``result`` last, carrying the final answer. A failed turn's ``turn_ended``
and ``result`` both say ``"stop_reason": "error"``, so a script reads one stop reason whichever line it checks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, TextIO

from codling.cli.script_output import JsonLinesRenderer
from codling.secrecy import Redactor
from codling.vocabulary import StopReason

if TYPE_CHECKING:
    from codling.brain.session import TurnResult

ScriptStopReason = StopReason | Literal["error"]
"""The stop reason a script reads: the turn's own, or ``error`` for a failed turn."""

_MESSAGE_PARTS = frozenset({"text_delta", "thought_delta"})
"""The lines that do not end a message: its text, and reasoning streamed around it in the same response."""


def script_stop_reason(stop_reason: StopReason, failed: bool) -> ScriptStopReason:
    """What ``turn_ended`` and ``result`` say: ``error`` for a failed turn (whose own reason is ``end_turn``)."""
    return "error" if failed and stop_reason != "cancelled" else stop_reason


class ScriptStream(JsonLinesRenderer):
    """The ``--json`` renderer: the event lines, plus an ``assistant_message`` line with a message's whole text
    before the first line that is not part of it (a tool call, the turn's end …), and failed turns' stop reason
    said as ``error``. The text is built from the lines already written, so it is redacted as they are."""

    def __init__(self, out: TextIO, redact: Redactor | None = None) -> None:
        super().__init__(out, redact)
        self._message: list[str] = []
        self._turn_id = ""

    def write(self, line: Mapping[str, Any]) -> None:
        """Print ``line``, after the message it completes (if any)."""
        kind = line.get("type")
        if kind == "text_delta":
            self._message.append(line["text"])
            self._turn_id = line["turn_id"]
        elif kind not in _MESSAGE_PARTS and self._message:
            text, self._message = "".join(self._message), []
            super().write({"type": "assistant_message", "turn_id": self._turn_id, "text": text})
        if kind == "turn_ended":
            line = {**line, "stop_reason": script_stop_reason(line["stop_reason"], line["error"])}
        super().write(line)


def result_line(session_id: str, result: TurnResult, text: str, duration_ms: int, turns: int) -> dict[str, Any]:
    """The last line of a run: how the turn ended (``stop_reason``, ``error``), ``text`` (its final answer: the
    message after its last tool call, "" when there is none), what it spent, how long it took and how many
    turns the session has had."""
    return {
        "type": "result",
        "session_id": session_id,
        "stop_reason": script_stop_reason(result.stop_reason, result.error is not None),
        "text": text,
        "error": result.error,
        "usage": {
            "input_tokens": result.usage.input_tokens,
            "output_tokens": result.usage.output_tokens,
            "cache_read_tokens": result.usage.cache_read_tokens,
            "cache_write_tokens": result.usage.cache_write_tokens,
        },
        "cost": result.cost,
        "duration_ms": duration_ms,
        "turns": turns,
    }
