from __future__ import annotations

import asyncio
import json
import random
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pydantic_ai import RunContext
from pydantic_ai.models.test import TestModel
from pydantic_ai.usage import RunUsage

from codling.brain.context.digests import display_path, tool_call_digest, update_recent_files
from codling.brain.context.ledger import build_turn_recap, render_ledger, render_turn_recap
from codling.brain.context.ledger_entries import TurnRecap, TurnStep
from codling.brain.events import (
    Event,
    PlanUpdated,
    TextDelta,
    ThoughtDelta,
    ToolCallFinished,
    ToolCallStarted,
    TurnFailed,
    TurnStarted,
    UsageUpdated,
)
from codling.llm.tokens import count_tokens
from codling.store.mirror import model_for
from codling.store.parts import RecapPart
from codling.tools.approval import Permissions
from codling.tools.deps import ToolDeps
from codling.tools.files import edit_file, read_file, write_file
from codling.tools.local import LocalFileSystem, LocalTerminal
from codling.tools.search import list_files, search
from codling.tools.shell import run_command, trim_middle
from codling.tools.workspace import Workspace
from codling.vocabulary import FileDiff, Location, PlanStep

T = "t1"


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    return root


def ctx_in(root: Path, output_tokens: int = 100_000) -> RunContext[ToolDeps]:
    deps = ToolDeps(
        workspace=Workspace(root),
        fs=LocalFileSystem(),
        terminal=LocalTerminal(kill_grace=0.5),
        permissions=Permissions("yolo", None),
        output_tokens=output_tokens,
    )
    return RunContext(deps=deps, model=TestModel(), usage=RunUsage(), tool_call_id="call-1", tool_name="tool")


def write(root: Path, files: dict[str, str]) -> None:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)


def numbers(first: int, last: int) -> str:
    return "\n".join(str(i) for i in range(first, last + 1))


# --- run_command -------------------------------------------------------------------------------------------


async def test_run_command_summary(proj: Path) -> None:
    result = await asyncio.wait_for(run_command(ctx_in(proj), "echo out; echo err >&2; exit 3"), 30)
    assert result.summary == "exit code 3\nout\nerr"


async def test_run_command_summary_without_output(proj: Path) -> None:
    result = await asyncio.wait_for(run_command(ctx_in(proj), "true"), 30)
    assert result.summary == "exit code 0\n(no output)"


async def test_run_command_summary_keeps_head_and_tail_of_long_output(proj: Path) -> None:
    result = await asyncio.wait_for(run_command(ctx_in(proj), "seq 1 2000"), 30)
    # 8,892 characters of output, no line that matters more than another: its first and last lines, whole.
    assert result.summary == (
        f"exit code 0\n[2,000 lines of output; its first lines:]\n{numbers(1, 102)}\n"
        f"[… its last lines:]\n{numbers(1774, 2000)}"
    )


async def test_run_command_summary_of_lines_too_long_to_keep_whole(proj: Path) -> None:
    result = await asyncio.wait_for(run_command(ctx_in(proj), "head -c 3000 /dev/zero | tr '\\0' x"), 30)
    assert result.summary == "exit code 0\n" + trim_middle("x" * 3000, 1_500)


async def test_run_command_summary_on_timeout(proj: Path) -> None:
    result = await asyncio.wait_for(run_command(ctx_in(proj), "echo started; sleep 30", timeout_seconds=1), 30)
    assert result.summary == "timed out after 1s\nstarted"


def test_trim_middle() -> None:
    assert trim_middle("short", 10) == "short"
    assert trim_middle("abcdefghijklmnopqrstuvwxyz", 10) == "abcde\n[… 16 characters trimmed …]\nvwxyz"
    lines = "\n".join(f"line {i:02}" for i in range(1, 21))  # 20 lines of 7 characters
    assert trim_middle(lines, 40) == "line 01\nline 02\n[… 129 characters trimmed …]\nline 19\nline 20"


# --- file tools --------------------------------------------------------------------------------------------


async def test_read_file_summaries(proj: Path) -> None:
    write(proj, {"src/a.py": "".join(f"line {i}\n" for i in range(1, 11)), "empty.txt": "", "big.txt": "x\n" * 2500})
    ctx = ctx_in(proj)

    async def first_line(*args: object, **kwargs: object) -> str:
        return (await read_file(ctx, *args, **kwargs)).summary.split("\n", 1)[0]  # type: ignore[arg-type]

    assert await first_line("src/a.py") == "Read src/a.py: lines 1-10 of 10"
    assert await first_line("src/a.py", start_line=3, end_line=5) == "Read src/a.py: lines 3-5 of 10"
    assert await first_line("src/a.py", start_line=7, end_line=7) == "Read src/a.py: line 7 of 10"
    assert await first_line("src/a.py", start_line=8, end_line=99) == "Read src/a.py: lines 8-10 of 10"
    assert (await read_file(ctx, "empty.txt")).summary == "Read empty.txt: the file is empty"
    # The range actually returned, not the one asked for.
    assert await first_line("big.txt") == "Read big.txt: lines 1-2000 of 2500"


async def test_list_files_summaries(proj: Path) -> None:
    write(proj, {"a.py": "", "b.py": "", "src/c.py": "", "src/d.py": "", ".gitignore": "*.log\n", "x.log": ""})
    (proj / "empty").mkdir()
    ctx = ctx_in(proj)
    assert (await list_files(ctx)).summary == "Listed .: 5 files"
    assert (await list_files(ctx, "src")).summary == "Listed src: 2 files"
    assert (await list_files(ctx, "src", max_entries=1)).summary == "Listed src: more than 1 file (the first 1 shown)"
    assert (await list_files(ctx, "empty")).summary == "Listed empty: no files"
    write(proj, {"one/only.py": ""})
    assert (await list_files(ctx, "one")).summary == "Listed one: 1 file"


async def test_search_summaries(proj: Path) -> None:
    write(proj, {f"m{i}.py": "TODO one\nTODO two\n" for i in range(1, 8)})
    write(proj, {"docs/a.md": "todo in docs\n"})
    ctx = ctx_in(proj)
    assert (await search(ctx, "TODO")).summary == (
        "Searched /TODO/ in .: 14 matches in 7 files: m1.py, m2.py, m3.py, m4.py, m5.py, … (2 more)\n"
        + "\n".join(f"m{i}.py:{n}: TODO {word}" for i in range(1, 8) for n, word in ((1, "one"), (2, "two")))
    )
    assert (await search(ctx, "todo", path="docs", ignore_case=True)).summary == (
        "Searched /todo/ in docs (ignoring case): 1 match in 1 file: docs/a.md\ndocs/a.md:1: todo in docs"
    )
    assert (await search(ctx, "TODO two", glob="m[12].py")).summary == (
        "Searched /TODO two/ in . (files matching m[12].py): 2 matches in 2 files: m1.py, m2.py\n"
        "m1.py:2: TODO two\nm2.py:2: TODO two"
    )
    assert (await search(ctx, "absent", path="docs")).summary == "Searched /absent/ in docs: no matches"


async def test_search_summary_when_capped(proj: Path) -> None:
    write(proj, {"many.txt": "hit\n" * 250})
    result = await search(ctx_in(proj), "hit")
    head, *matches, note = result.summary.splitlines()
    assert head == "Searched /hit/ in .: 200+ matches (capped) in 1 file+: many.txt"
    assert matches == [f"many.txt:{n}: hit" for n in range(1, len(matches) + 1)]
    assert note == f"[… {200 - len(matches)}+ more matches]"
    assert len(result.summary) <= 800  # what the history keeps of a search stays small


async def test_edit_file_summary(proj: Path) -> None:
    write(proj, {"src/a.py": "def f():\n    return 1\n"})
    result = await edit_file(ctx_in(proj), "src/a.py", "return 1", "return 2")
    assert result.summary == "Edited src/a.py (+1 −1):\n@@ -1,2 +1,2 @@\n def f():\n-    return 1\n+    return 2"


async def test_edit_file_summary_trims_the_diff(proj: Path) -> None:
    old = "".join(f"line {i}\n" for i in range(1, 61))
    new = "".join(f"new {i}\n" for i in range(1, 61))
    write(proj, {"f.txt": old})
    result = await edit_file(ctx_in(proj), "f.txt", old, new)
    # The diff has 121 lines (one hunk header, 60 removed, 60 added); 40 are kept.
    kept = "\n".join(f"-line {i}" for i in range(1, 40))
    assert result.summary == f"Edited f.txt (+60 −60):\n@@ -1,60 +1,60 @@\n{kept}\n[… 81 more diff lines cut]"


async def test_write_file_summaries(proj: Path) -> None:
    ctx = ctx_in(proj)
    assert (
        await write_file(ctx, "pkg/new.py", "a\nb\n")
    ).summary == "Created pkg/new.py (2 lines)\n     1\ta\n     2\tb"
    assert (await write_file(ctx, "one.txt", "single")).summary == "Created one.txt (1 line)\n     1\tsingle"
    assert (await write_file(ctx, "pkg/new.py", "a\nc\n")).summary == (
        "Overwrote pkg/new.py (+1 −1):\n@@ -1,2 +1,2 @@\n a\n-b\n+c"
    )
    assert (await write_file(ctx, "pkg/new.py", "a\nc\n")).summary == (
        "Wrote nothing to pkg/new.py: it already had this content"
    )


# --- tool_call_digest -----------------------------------------------------------------------------------


def started(call_id: str, tool: str, title: str, raw: dict[str, object], *paths: Path) -> ToolCallStarted:
    kind = {"run_command": "execute", "read_file": "read", "search": "search"}.get(tool, "edit")
    return ToolCallStarted(T, call_id, tool, title, kind, raw, tuple(Location(p) for p in paths))  # type: ignore[arg-type]


def test_summarize_uses_the_tool_summary() -> None:
    call = started("c1", "run_command", "Run `pytest -q`", {"command": "pytest -q"})
    done = ToolCallFinished(
        T, "c1", "run_command", "completed", "exit code 1\n...", summary="`pytest -q` → x\n1 failed"
    )
    assert tool_call_digest(call, done) == "- Run `pytest -q` (done):\n    `pytest -q` → x\n    1 failed"


def test_summarize_a_failure_uses_the_error_text() -> None:
    call = started("c1", "edit_file", "Edit a.py", {"path": "a.py"})
    failed = ToolCallFinished(T, "c1", "edit_file", "failed", "old_text was not found in a.py")
    assert tool_call_digest(call, failed) == "- Edit a.py (failed):\n    old_text was not found in a.py"


def test_summarize_without_a_summary_trims_the_text() -> None:
    call = started("c1", "delegate", "Plan", {})
    text = "a" * 400 + "b" * 400
    done = ToolCallFinished(T, "c1", "delegate", "completed", text)
    assert tool_call_digest(call, done) == (
        f"- Plan (done):\n    {'a' * 300}\n    [… 200 characters trimmed …]\n    {'b' * 300}"
    )
    empty = ToolCallFinished(T, "c1", "delegate", "completed", "  ")
    assert tool_call_digest(call, empty) == "- Plan (done)"


def test_summarize_a_call_that_never_finished() -> None:
    call = started("c1", "run_command", "Run `sleep 99`", {"command": "sleep 99"})
    assert tool_call_digest(call, None) == "- Run `sleep 99`: aborted before it finished"


# --- turn recaps ------------------------------------------------------------------------------

P = Path("/p")
REPLY = (
    "I fixed the off-by-one in `src/a.py` so the loop stops at the last item. "
    "The test suite still fails in test_b.py, which looks unrelated: it needs a database. "
    "Tell me if you want me to look at it next, or to mark it as skipped for now; either way, the fix in "
    "src/a.py is complete and covered by a new test."
)


def scripted_turn() -> list[Event]:
    a, b = P / "src" / "a.py", P / "src" / "b.py"
    return [
        TurnStarted(T, "fix   the\nfailing test", False, datetime(2026, 1, 2, tzinfo=UTC)),
        ThoughtDelta(T, "let me look"),
        started("c1", "read_file", "Read src/a.py", {"path": "src/a.py"}, a),
        ToolCallFinished(T, "c1", "read_file", "completed", "     1\tx", locations=(Location(a),), summary="Read"),
        started("c2", "edit_file", "Edit src/a.py", {"path": "src/a.py"}, a),
        ToolCallFinished(T, "c2", "edit_file", "completed", "Edited", FileDiff(a, "x", "y"), (Location(a, 1),)),
        started("c3", "run_command", "Run `pytest -q`", {"command": "pytest -q"}),
        ToolCallFinished(T, "c3", "run_command", "completed", "exit code 1\n1 failed", summary="..."),
        started("c4", "edit_file", "Edit src/b.py", {"path": "src/b.py"}, b),
        ToolCallFinished(T, "c4", "edit_file", "failed", "old_text was not found in src/b.py; it must match\nmore"),
        started("c5", "write_file", "Write src/b.py", {"path": "src/b.py"}, b),
        ToolCallFinished(T, "c5", "write_file", "completed", "Overwrote", FileDiff(b, "1", "2"), (Location(b, 1),)),
        started("c6", "edit_file", "Edit src/a.py", {"path": "src/a.py"}, a),
        ToolCallFinished(T, "c6", "edit_file", "completed", "Edited", FileDiff(a, "y", "z"), (Location(a, 1),)),
        started("c7", "run_command", "Run `sleep 30`", {"command": "sleep  30\n"}),
        ToolCallFinished(T, "c7", "run_command", "completed", "timed out after 5s, process group killed\n"),
        started("c8", "run_command", "Run `rm -rf build`", {"command": "rm -rf build"}),
        ToolCallFinished(T, "c8", "run_command", "failed", "The user rejected Run `rm -rf build`"),
        ToolCallFinished(T, "orphan", "read_file", "completed", "no start"),
        started("c9", "run_command", "Run `make`", {"command": "make"}),
        ToolCallFinished(T, "c9", "run_command", "failed", "aborted: the user cancelled the turn"),
        TextDelta(T, REPLY[:50]),
        TextDelta(T, REPLY[50:]),
        UsageUpdated(T, 100, 1000),
    ]


EXPECTED = TurnRecap(
    turn_number=3,
    request="fix the failing test",
    steps=(
        TurnStep("Read src/a.py", "done", (P / "src/a.py",)),
        TurnStep("Edit src/a.py", "done", (P / "src/a.py",), "+1 −1 lines"),
        TurnStep("Run `pytest -q`", "exit 1", detail="1 failed"),
        TurnStep("Edit src/b.py", "failed: old_text was not found in src/b.py; it must match", (P / "src/b.py",)),
        TurnStep("Write src/b.py", "done", (P / "src/b.py",), "+1 −1 lines"),
        TurnStep("Edit src/a.py", "done", (P / "src/a.py",), "+1 −1 lines"),
        TurnStep("Run `sleep 30`", "timed out after 5s"),
        TurnStep("Run `rm -rf build`", "failed: The user rejected Run `rm -rf build`"),
        TurnStep("Run `make`", "aborted: the user cancelled the turn"),
    ),
    files_changed=(P / "src/a.py", P / "src/b.py"),
    commands=(
        "`pytest -q` → exit 1",
        "`sleep 30` → timed out after 5s",
        "`rm -rf build` → failed: The user rejected Run `rm -rf build`",
        "`make` → aborted: the user cancelled the turn",
    ),
    reply=(
        "I fixed the off-by-one in `src/a.py` so the loop stops at the last item. "
        "The test suite still fails in test_b.py, which looks unrelated: it needs a database. …"
    ),
    goal="fix the failing test",
)


def test_build_turn_summary() -> None:
    assert build_turn_recap(3, scripted_turn()) == EXPECTED


def test_build_turn_summary_of_a_failed_turn() -> None:
    events: list[Event] = [
        TurnStarted(T, "x" * 400, False, datetime(2026, 1, 2, tzinfo=UTC)),
        started("c1", "run_command", "Run `make`", {"command": "make"}),
        TurnFailed(T, "The model provider returned HTTP 500 for m: upstream exploded"),
    ]
    assert build_turn_recap(1, events) == TurnRecap(
        turn_number=1,
        request="x" * 400,
        goal="x" * 199 + "…",
        steps=(TurnStep("Run `make`", "aborted"),),
        commands=("`make` → aborted",),
        error="The model provider returned HTTP 500 for m: upstream exploded",
    )


def test_build_turn_summary_reply_without_sentence_ends_is_cut_at_a_word() -> None:
    words = " ".join(["word"] * 100)  # 499 characters
    summary = build_turn_recap(1, [TextDelta(T, words)])
    assert summary == TurnRecap(1, "", reply=" ".join(["word"] * 59) + "…")


def test_a_short_follow_up_keeps_the_previous_goal() -> None:
    def goal(prompt: str) -> str:
        return build_turn_recap(2, [TurnStarted(T, prompt, False, datetime(2026, 1, 2))], "Port the lexer").goal

    assert goal("yes, go on") == "Port the lexer"
    assert goal("Now fix the docs. They are stale.") == "Now fix the docs."


def test_a_steps_detail_keeps_what_came_of_it() -> None:
    output = "exit code 1\n" + "\n".join(f"test_{i} PASSED" for i in range(50))
    output += "\nFAILED tests/test_parser.py::test_x - AssertionError\n==== 1 failed, 50 passed in 0.3s ===="
    events: list[Event] = [
        TurnStarted(T, "run the tests", False, datetime(2026, 1, 2)),
        started("c1", "run_command", "Run `pytest`", {"command": "pytest"}),
        ToolCallFinished(T, "c1", "run_command", "completed", output),
        PlanUpdated(T, (PlanStep("Fix the parser", "completed"), PlanStep("Update docs", "in_progress"))),
    ]
    summary = build_turn_recap(1, events)
    assert summary.steps[0].detail == (
        "FAILED tests/test_parser.py::test_x - AssertionError\n==== 1 failed, 50 passed in 0.3s ===="
    )
    assert summary.open_plan == ("Update docs",)


def test_render_turn_summary() -> None:
    assert render_turn_recap(EXPECTED, P) == (
        "Turn 3 — request: fix the failing test\n"
        "Steps:\n"
        "- Read src/a.py (done)\n"
        "- Edit src/a.py (done)\n"
        "    +1 −1 lines\n"
        "- Run `pytest -q` (exit 1)\n"
        "    1 failed\n"
        "- Edit src/b.py (failed: old_text was not found in src/b.py; it must match)\n"
        "- Write src/b.py (done)\n"
        "    +1 −1 lines\n"
        "- Edit src/a.py (done)\n"
        "    +1 −1 lines\n"
        "- Run `sleep 30` (timed out after 5s)\n"
        "- Run `rm -rf build` (failed: The user rejected Run `rm -rf build`)\n"
        "- Run `make` (aborted: the user cancelled the turn)\n"
        "Files changed: src/a.py, src/b.py\n"
        "Reply: I fixed the off-by-one in `src/a.py` so the loop stops at the last item. "
        "The test suite still fails in test_b.py, which looks unrelated: it needs a database. …"
    )
    # Without a cwd, paths stay absolute.
    assert render_turn_recap(TurnRecap(1, "go", files_changed=(P / "a.py",))) == (
        "Turn 1 — request: go\nFiles changed: /p/a.py"
    )


def test_render_turn_summary_is_bounded() -> None:
    steps = tuple(TurnStep(f"Run `step {i}`", "exit 0", detail="ok\n" * 3) for i in range(1, 16))
    summary = TurnRecap(
        turn_number=9,
        request="",
        steps=steps,
        files_changed=tuple(P / f"f{i}.py" for i in range(1, 13)),
        commands=tuple(f"`step {i}` → exit 0" for i in range(1, 16)),
        error="boom",
    )
    text = render_turn_recap(summary, P)
    assert text.count("- Run `step") == 12 and "- … 3 more" in text
    assert "Files changed: " + ", ".join(f"f{i}.py" for i in range(1, 11)) + ", … 2 more" in text
    assert text.endswith("Error: boom")
    huge = TurnRecap(1, "x " * 5_000, steps=tuple(TurnStep("s " * 200, "done") for _ in range(12)))
    assert count_tokens(render_turn_recap(huge)) <= 600


def test_the_ledger_keeps_two_turns_in_full_and_older_ones_in_a_line_within_its_budget() -> None:
    def turn(n: int) -> TurnRecap:
        return TurnRecap(n, f"step {n}: do thing {n}. " + "detail " * 80, goal=f"step {n}: do thing {n}.")

    ledger = render_ledger([turn(n) for n in range(1, 301)], 1_500, P)
    assert count_tokens(ledger) <= 1_500
    sections = ledger.split("\n\n")
    assert [s.splitlines()[0] for s in sections] == [
        "# Earlier turns (one line each)",
        "# Prior turn summary",
        "# Last turn summary",
    ]
    older = sections[0].splitlines()
    assert older[1].startswith("(… ") and older[1].endswith(" earlier turns not shown)")
    assert older[-1] == "Turn 298: step 298: do thing 298."
    assert sections[2].startswith("# Last turn summary\nTurn 300 — request: step 300")
    assert render_ledger([turn(1)], 1_500, P).startswith("# Last turn summary\nTurn 1 —")
    assert render_ledger([], 1_500, P) == ""


def test_turn_summary_round_trips_through_json() -> None:
    data = json.loads(model_for(RecapPart, EXPECTED).model_dump_json())
    assert RecapPart.model_validate(data).value() == EXPECTED
    assert data["files_changed"] == ["/p/src/a.py", "/p/src/b.py"]
    assert data["steps"][0] == {"title": "Read src/a.py", "outcome": "done", "paths": ["/p/src/a.py"], "detail": ""}
    failed = TurnRecap(2, "x", error="boom")
    assert RecapPart.model_validate_json(model_for(RecapPart, failed).model_dump_json()).value() == failed
    assert RecapPart.model_validate({"turn_number": 4}).value() == TurnRecap(4, "")


# --- recent files ------------------------------------------------------------------------------------------


def edited(path: str, status: str = "completed", diff: bool = True) -> ToolCallFinished:
    p = Path(path)
    return ToolCallFinished(T, "c", "edit_file", status, "ok", FileDiff(p, "a", "b") if diff else None)  # type: ignore[arg-type]


def test_update_recent_files() -> None:
    recent: tuple[Path, ...] = ()
    for name in ("/p/a.py", "/p/b.py", "/p/c.py", "/p/a.py"):
        recent = update_recent_files(recent, edited(name))
    assert recent == (Path("/p/b.py"), Path("/p/c.py"), Path("/p/a.py"))
    # Failed edits, results without a diff and other events change nothing.
    assert update_recent_files(recent, edited("/p/x.py", status="failed")) == recent
    assert update_recent_files(recent, edited("/p/x.py", diff=False)) == recent
    assert update_recent_files(recent, TextDelta(T, "hi")) == recent
    # Only the last ``limit`` are kept.
    assert update_recent_files(recent, edited("/p/d.py"), limit=2) == (Path("/p/a.py"), Path("/p/d.py"))
    assert update_recent_files(recent, edited("/p/d.py"), limit=0) == ()
    many: tuple[Path, ...] = ()
    for i in range(15):
        many = update_recent_files(many, edited(f"/p/{i}.py"))
    assert many == tuple(Path(f"/p/{i}.py") for i in range(5, 15))


def test_a_file_in_a_sibling_whose_name_extends_the_cwd_s_is_shown_absolute() -> None:
    cwd = Path("/ws")
    shown = [display_path(p, cwd) for p in (Path("/ws/src/a.py"), Path("/ws-secrets/key.txt"), Path("/ws"))]
    assert shown == ["src/a.py", "/ws-secrets/key.txt", "/ws"]


def test_the_ledger_s_reply_is_what_the_model_said_last_not_its_first_narration() -> None:
    # The played model's turn that added tests read like a refusal after compaction: its first words were
    # "I can't run the suite yet; let me look first."
    a = P / "tests" / "test_a.py"
    events: list[Event] = [
        TurnStarted(T, "add tests for the parser", False, datetime(2026, 1, 2)),
        TextDelta(T, "I can't run the suite yet; let me look first."),
        started("c1", "write_file", "Write tests/test_a.py", {"path": "tests/test_a.py"}, a),
        ToolCallFinished(T, "c1", "write_file", "completed", "Wrote", FileDiff(a, None, "def test_x():\n    pass\n")),
        TextDelta(T, "Added two tests "),
        TextDelta(T, "for the parser; both pass.\n"),
        TextDelta(T, "  "),
    ]
    assert build_turn_recap(1, events).reply == "Added two tests for the parser; both pass."


def _an_edit_two_diff_algorithms_count_differently() -> tuple[str, str]:
    """A file of repeated short lines (blank lines, ``pass``) and an edit in its middle: over 200 lines, difflib's
    popular-line heuristic makes ndiff and unified_diff disagree (the ledger said +11 −0 where the tool said
    +12 −1 before both used one counter)."""
    rng = random.Random(1)
    for _ in range(9):
        n = rng.randint(150, 400)
        lines = [rng.choice(["", "    pass", "x = 1", f"line {rng.randint(0, 50)}", "}"]) for _ in range(n)]
        at = rng.randint(0, n - 1)
        inserted = [rng.choice(["", "    pass", "y", f"line {rng.randint(0, 50)}"]) for _ in range(rng.randint(1, 12))]
        new = lines[:at] + inserted + lines[at + rng.randint(0, 2) :]
    return "\n".join(lines) + "\n", "\n".join(new) + "\n"


async def test_an_edit_s_size_in_the_ledger_is_the_size_its_tool_said(proj: Path) -> None:
    old, new = _an_edit_two_diff_algorithms_count_differently()
    (proj / "f.txt").write_text(old)
    result = await write_file(ctx_in(proj), "f.txt", new)
    assert result.summary.startswith("Overwrote f.txt (+12 −1):")
    call = started("c1", "write_file", "Write f.txt", {"path": "f.txt"}, proj / "f.txt")
    done = ToolCallFinished(T, "c1", "write_file", "completed", result.text, result.diff, summary=result.summary)
    assert build_turn_recap(1, [call, done]).steps[0].detail == "+12 −1 lines"
