"""The event contract (``brain/event_contract.py``) held to the code: a row for every kind of the ``Event``
union; per kind, on a sample event, a record iff recorded, updates iff translated, output iff drawn; what the
real recorder writes and reads back; and every fold's ``match`` acting on exactly the kinds its rows name,
ending in ``assert_never``."""

from __future__ import annotations

import ast
import importlib.util
import io
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import assert_never, get_args

import pytest

from codling.acp.translate import translate
from codling.brain.event_contract import CONTRACT, FOLDS, Fold
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
    Usage,
    UsageUpdated,
)
from codling.brain.interactions import Interaction
from codling.brain.prompt import TextBlock
from codling.cli.render import TerminalRenderer
from codling.store.header import SessionHeader
from codling.store.history import HistoryFile, HistoryRecorder, read_history
from codling.store.ids import new_session_id
from codling.store.records import SettingsRecord, event_record
from codling.vocabulary import FileDiff, Location, PlanStep

T = "turn-1"
SID = new_session_id()
KINDS: tuple[type[Event], ...] = get_args(Event)

SAMPLES: dict[type[Event], Event] = {
    TurnStarted: TurnStarted(T, "fix it", False, datetime(2026, 11, 26, 15, 0, tzinfo=UTC), (TextBlock("fix it"),)),
    TextDelta: TextDelta(T, "Fixed."),
    ThoughtDelta: ThoughtDelta(T, "Let me look."),
    ToolCallStarted: ToolCallStarted(
        T, "c1", "edit_file", "Edit a.py", "edit", {"path": "a.py"}, (Location(Path("/p/a.py"), 1),)
    ),
    ToolCallTerminal: ToolCallTerminal(T, "c2", "term-1"),
    ToolCallNote: ToolCallNote(T, "c3", "→ Read a.py"),
    ToolCallRunning: ToolCallRunning(T, "c1"),
    ToolCallFinished: ToolCallFinished(
        T, "c1", "edit_file", "completed", "Edited a.py", FileDiff(Path("/p/a.py"), "x = 1\n", "x = 2\n")
    ),
    PlanUpdated: PlanUpdated(T, (PlanStep("read", "completed"), PlanStep("fix", "in_progress"))),
    CompactionStarted: CompactionStarted(T, "k1", 9_000, "threshold"),
    ContextCompacted: ContextCompacted(T, "k1", "## Summary\nfixed a.py", ("fix it",), 9_000, 2_000, False),
    ProviderRetrying: ProviderRetrying(T, "r1", 2, 3, 1.0, "HTTP 429"),
    ContextWarning: ContextWarning(T, "w1", "The context is fuller than the window: start a new session."),
    McpServersStarting: McpServersStarting(T, "m1", ("docs",), 0, 0, 1),
    McpServerNotice: McpServerNotice(T, "m2", "docs", "MCP server docs failed to start", "no such program"),
    SettingsChanged: SettingsChanged(T, mode="yolo"),
    UsageUpdated: UsageUpdated(T, 2_000, 128_000, 0.01, Usage(100, 20, 1)),
    SpecialTurnPersisted: SpecialTurnPersisted(
        "greeting", "persist-result", (Interaction("assistant", "Hello."),), special_id="g1"
    ),
    SessionTitled: SessionTitled("Fix a.py", "model"),
    TurnFailed: TurnFailed(T, "The model provider failed: HTTP 500."),
    TurnEnded: (ENDED := TurnEnded(T, "max_tokens", Usage(100, 20, 1), checkpoint=3)),
    Rewound: Rewound(T, "t0", 2, "both", 1, 3, ("a.py",)),
}
"""One event of each kind, as the turn loop makes them (a stop reason whose end the terminal draws)."""

UPDATES: dict[type[Event], list[str]] = {
    TextDelta: ["agent_message_chunk"],
    ThoughtDelta: ["agent_thought_chunk"],
    ToolCallStarted: ["tool_call"],
    ToolCallTerminal: ["tool_call_update"],
    ToolCallNote: ["tool_call_update"],
    ToolCallRunning: ["tool_call_update"],
    ToolCallFinished: ["tool_call_update"],
    PlanUpdated: ["plan"],
    CompactionStarted: ["tool_call"],
    ContextCompacted: ["tool_call_update"],
    ProviderRetrying: ["tool_call"],
    ContextWarning: ["tool_call"],
    McpServersStarting: ["tool_call"],
    McpServerNotice: ["tool_call"],
    UsageUpdated: ["usage_update"],
    SpecialTurnPersisted: ["agent_message_chunk"],
}
"""The updates each translated sample becomes, by their ``sessionUpdate``."""


def test_every_event_kind_has_one_row_and_one_sample() -> None:
    assert set(CONTRACT) == set(KINDS)
    assert len(KINDS) == len(set(KINDS))
    assert set(SAMPLES) == set(KINDS)
    assert all(type(sample) is kind for kind, sample in SAMPLES.items())


def test_rows_name_only_known_folds_and_each_fold_acts_on_something() -> None:
    named = {fold for row in CONTRACT.values() for fold in row.folds}
    assert named == set(get_args(Fold)) == set(FOLDS)


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.__name__)
def test_a_kind_has_a_record_of_its_own_iff_its_row_says_recorded(kind: type[Event]) -> None:
    sample = SAMPLES[kind]
    record = event_record(sample, SID)
    match CONTRACT[kind].history:
        case "record":  # and the record gives the event back whole
            assert record is not None and record.events()[-1] == sample
        case "settings":  # a settings record (or the recorder writes one), read back as the session's settings
            assert record is None or isinstance(record, SettingsRecord)
        case "in_record" | "live":
            assert record is None
        case _ as never:
            assert_never(never)


async def test_the_recorder_keeps_what_the_rows_say_and_reading_gives_it_back(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    file = HistoryFile(path, SID)
    file.write(SessionHeader(SID, Path("/p"), "openai-chat:m", "ask", created_at="2026-11-26T15:00:00.000Z").record())
    recorder = HistoryRecorder(file)
    for kind in KINDS:  # the union's order is a turn's
        await recorder(SAMPLES[kind])
    file.close()
    log = read_history(path)

    kept = [kind for kind in KINDS if CONTRACT[kind].history in ("record", "in_record")]
    # Whole events, in order: a compaction's start and a failure read back from the records that carry them,
    # the turn's end marked failed by the failure before it.
    assert log.events == [SAMPLES[k] if k is not TurnEnded else replace(ENDED, error=True) for k in kept]
    # The settings kinds are the session's now, not events.
    assert {kind for kind, row in CONTRACT.items() if row.history == "settings"} == {SessionTitled, SettingsChanged}
    assert (log.title, log.mode) == ("Fix a.py", "yolo")


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.__name__)
def test_a_kind_becomes_updates_iff_its_row_says_translated(kind: type[Event]) -> None:
    updates = translate(SAMPLES[kind])
    assert bool(updates) == CONTRACT[kind].translated
    assert [u.session_update for u in updates] == UPDATES.get(kind, [])


@pytest.mark.parametrize("color", [False, True], ids=["plain", "styled"])
@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.__name__)
async def test_a_kind_is_drawn_iff_its_row_says_drawn(kind: type[Event], color: bool) -> None:
    out, err = io.StringIO(), io.StringIO()
    renderer = TerminalRenderer(out, err=err, color=color, interactive=False)
    await renderer(SAMPLES[kind])
    renderer.close()
    assert bool(out.getvalue() + err.getvalue()) == CONTRACT[kind].drawn


# -- the folds -------------------------------------------------------------------------------------------------


def _scope(where: str) -> ast.AST:
    module, _, name = where.partition(":")
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None
    tree = ast.parse(Path(spec.origin).read_text())
    if not name:
        return tree
    found = [
        node
        for node in tree.body
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name
    ]
    assert len(found) == 1, f"{where}: no top-level {name}"
    return found[0]


def _event_matches(scope: ast.AST) -> list[ast.Match]:
    return [
        node
        for node in ast.walk(scope)
        if isinstance(node, ast.Match) and isinstance(node.subject, ast.Name) and node.subject.id == "event"
    ]


def _ignores(body: list[ast.stmt]) -> bool:
    """Whether a case's body only lets the event pass: ``pass``, ``continue``, or returning nothing or ``[]``."""
    if len(body) != 1:
        return False
    stmt = body[0]
    if isinstance(stmt, ast.Pass | ast.Continue):
        return True
    if isinstance(stmt, ast.Return):
        value = stmt.value
        return (
            value is None
            or (isinstance(value, ast.Constant) and value.value is None)
            or (isinstance(value, ast.List) and not value.elts)
        )
    return False


def _classes(pattern: ast.pattern) -> set[str]:
    match pattern:
        case ast.MatchClass(cls=ast.Name(id=name)):
            return {name}
        case ast.MatchOr(patterns=patterns):
            return set().union(*(_classes(p) for p in patterns))
        case ast.MatchAs(pattern=inner) if inner is not None:
            return _classes(inner)
        case _:
            return set()


def _ends_in_assert_never(match: ast.Match) -> bool:
    last = match.cases[-1]
    return (
        isinstance(last.pattern, ast.MatchAs)
        and last.pattern.pattern is None
        and last.guard is None
        and any(
            isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "assert_never"
            for stmt in last.body
            for node in ast.walk(stmt)
        )
    )


@pytest.mark.parametrize("fold", list(FOLDS), ids=str)
def test_a_fold_acts_on_the_kinds_its_rows_name_and_ends_in_assert_never(fold: Fold) -> None:
    matches = _event_matches(_scope(FOLDS[fold]))
    assert matches, f"{fold}: no `match event` in {FOLDS[fold]}"
    assert all(_ends_in_assert_never(m) for m in matches), f"{fold}: a `match event` without assert_never"
    acted = {name for m in matches for case in m.cases if not _ignores(case.body) for name in _classes(case.pattern)}
    assert acted == {kind.__name__ for kind, row in CONTRACT.items() if fold in row.folds}
