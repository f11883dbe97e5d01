"""One vocabulary for history: each record is declared as the event it stands for (``store/mirror.py``), so a
field on one side with none on the other, a field that does not survive the file, or an event kind the records
forget fails here."""

from __future__ import annotations

import json
import typing
from dataclasses import MISSING, fields
from typing import Any

import pytest

from codling.brain.events import (
    CompactionStarted,
    ContextCompacted,
    Event,
    SettingsChanged,
    SpecialTurnPersisted,
    ToolCallFinished,
    TurnEnded,
    TurnFailed,
    TurnStarted,
    Usage,
)
from codling.brain.prompt import TextBlock
from codling.store.mirror import Mirrored, mirror_problems
from codling.store.parts import Part
from codling.store.records import RECORD, Record, dump_record, event_record
from tests.unit.history_samples import SAMPLES

SID = "20261122-0b9f2c1d3e4f"
ERROR = "The provider refused the request: narrow the prompt"


def record_models() -> list[type[Part]]:
    """Every record kind, from the union the reader validates against."""
    union = typing.get_args(typing.get_args(Record)[0])
    return list(union)


def mirrored_models() -> list[type[Mirrored]]:
    """Every model that stands for a dataclass: the records' and the parts they hold."""
    found: list[type[Mirrored]] = []

    def visit(model: type[Any]) -> None:
        if isinstance(model, type) and issubclass(model, Mirrored) and model not in found:
            found.append(model)
        for info in getattr(model, "model_fields", {}).values():
            for inner in _types_in(info.annotation):
                if inner not in found:
                    visit(inner)

    for model in record_models():
        visit(model)
    return found


def _types_in(annotation: Any) -> list[type[Any]]:
    if isinstance(annotation, type):
        return [annotation]
    return [t for arg in typing.get_args(annotation) for t in _types_in(arg)]


def test_the_mirrored_models_are_found() -> None:
    names = {model.__name__ for model in mirrored_models()}
    assert {"TurnEndRecord", "UsagePart", "RecapPart", "TurnStepPart", "LocationPart", "DiffPart"} <= names


@pytest.mark.parametrize("model", mirrored_models(), ids=lambda model: model.__name__)
def test_every_record_and_part_stands_for_its_dataclass_field_by_field(model: type[Mirrored]) -> None:
    assert mirror_problems(model) == []


def test_every_event_kind_with_a_record_has_a_sample_with_every_recorded_field_set() -> None:
    recorded = {model.MIRROR.of for model in mirrored_models() if model in record_models()}
    assert {type(event) for event in SAMPLES} == recorded
    by_event = {model.MIRROR.of: model for model in mirrored_models()}
    for event in SAMPLES:
        live_only = by_event[type(event)].MIRROR.live_only
        for f in fields(event):
            default = f.default if f.default is not MISSING else MISSING
            if f.default_factory is not MISSING:
                default = f.default_factory()
            if f.name == "kind" or f.name in live_only:
                continue
            assert getattr(event, f.name) != default, (
                f"history_samples: give {type(event).__name__}.{f.name} a value other than its default, so its "
                "round trip through the file is tested"
            )


def _whole(event: Event) -> dict[str, Any]:
    # Every field, those left out of == (compare=False) too.
    return {f.name: getattr(event, f.name) for f in fields(event)}


@pytest.mark.parametrize("event", SAMPLES, ids=lambda event: event.kind)
def test_every_recorded_event_comes_back_whole_from_the_file(event: Event) -> None:
    error = ERROR if isinstance(event, TurnEnded) else None
    record = event_record(event, SID, error)
    assert record is not None
    line = json.dumps(dump_record(record), ensure_ascii=False)
    back = RECORD.validate_json(line).events()
    assert _whole(back[-1]) == _whole(event)


def test_a_failed_turn_comes_back_as_its_failure_then_its_end() -> None:
    ended = TurnEnded("t", "end_turn", error=True)
    record = event_record(ended, SID, ERROR)
    assert record is not None
    assert RECORD.validate_json(json.dumps(dump_record(record))).events() == [TurnFailed("t", ERROR), ended]
    fine = event_record(TurnEnded("t", "end_turn"), SID)
    assert fine is not None and fine.events() == [TurnEnded("t", "end_turn")]


def test_a_compaction_record_stands_for_its_start_and_its_end() -> None:
    compacted = next(event for event in SAMPLES if isinstance(event, ContextCompacted))
    record = event_record(compacted, SID)
    assert record is not None
    assert record.events() == [
        CompactionStarted(compacted.turn_id, compacted.call_id, compacted.tokens_before, compacted.reason),
        compacted,
    ]


def test_a_slash_commands_settings_change_is_a_settings_record_of_what_changed() -> None:
    record = event_record(SettingsChanged("t", mode="yolo"), SID)
    assert record is not None
    line = dump_record(record)
    assert (line["kind"], line["mode"], "model" in line, "turn_id" in line) == ("settings", "yolo", False, False)


def test_records_an_older_codling_wrote_without_the_later_fields_still_read() -> None:
    # Version 1 as first written: no started_at, cache counts, changed, ended_by, window, context, note or
    # special_id; each reads back as the event's default.
    lines: list[dict[str, Any]] = [
        {"kind": "turn_start", "turn_id": "t", "prompt": [{"type": "text", "text": "hi"}], "thinking": False},
        {"kind": "tool_result", "turn_id": "t", "call_id": "c", "tool_name": "read_file", "status": "completed"},
        {"kind": "compaction", "turn_id": "t", "call_id": "k", "summary": "s"},
        {"kind": "turn_end", "turn_id": "t", "stop_reason": "end_turn", "usage": {"input_tokens": 3}, "error": None},
        {"kind": "special", "interactions": [{"kind": "assistant", "text": "hello"}]},
    ]
    ts = "2026-01-02T03:04:05.000Z"
    records = [RECORD.validate_python({"v": 1, "ts": ts, "session_id": SID, **line}) for line in lines]
    events = [event for record in records for event in record.events()]
    started, result, _, compacted, ended, special = events
    assert isinstance(started, TurnStarted)
    assert (started.prompt, started.blocks) == ("hi", (TextBlock("hi"),))
    assert started.started_at.isoformat() == "2026-01-02T03:04:05+00:00"
    assert isinstance(result, ToolCallFinished) and (result.changed, result.ended_by, result.text) == ((), None, "")
    assert isinstance(compacted, ContextCompacted) and (compacted.note, compacted.skipped) == ("", False)
    assert isinstance(ended, TurnEnded) and (ended.window, ended.context, ended.usage) == (None, "", Usage(3))
    assert isinstance(special, SpecialTurnPersisted)
    assert (special.special_id, special.persistence, special.replaced) == ("", "persist-result", None)
