from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import RunContext
from pydantic_ai.models.test import TestModel
from pydantic_ai.usage import RunUsage

from codling.errors import PermissionDenied, ToolError
from codling.text import counted_omission
from codling.tools.approval import Permissions
from codling.tools.base import ShownResult, ToolOutput
from codling.tools.deps import ToolDeps
from codling.tools.local import LocalFileSystem, LocalTerminal
from codling.tools.ports import PermissionRequest
from codling.tools.shell import output_summary, run_command
from codling.tools.workspace import Workspace
from codling.vocabulary import PermissionMode
from tests.fakes.approver import ScriptedApprover
from tests.fakes.deadlines import deadline


def ctx(
    root: Path,
    mode: PermissionMode = "yolo",
    approver: ScriptedApprover | None = None,
    command_timeout: float = 30.0,
    output_limit: int = 30_000,
    output_tokens: int = 8_000,
) -> RunContext[ToolDeps]:
    deps = ToolDeps(
        workspace=Workspace(root),
        fs=LocalFileSystem(),
        terminal=LocalTerminal(kill_grace=0.5),
        permissions=Permissions(mode, approver),
        command_timeout=command_timeout,
        output_limit=output_limit,
        output_tokens=output_tokens,
    )
    return RunContext(deps=deps, model=TestModel(), usage=RunUsage(), tool_call_id="call-7", tool_name="run_command")


async def bounded(call: Coroutine[Any, Any, ToolOutput]) -> ToolOutput:
    return await asyncio.wait_for(call, deadline(30))


async def test_runs_in_cwd_and_reports_exit_code(tmp_path: Path) -> None:
    result = await bounded(run_command(ctx(tmp_path), "pwd; echo oops >&2; exit 2"))
    assert result == ToolOutput(
        text=f"exit code 2\n{tmp_path}\noops\n",
        summary=f"exit code 2\n{tmp_path}\noops",
        shown=ShownResult(exit_code=2),
    )


async def test_no_output(tmp_path: Path) -> None:
    assert (await bounded(run_command(ctx(tmp_path), "true"))).text == "exit code 0\n(no output)"


async def test_asks_with_the_actual_command(tmp_path: Path) -> None:
    approver = ScriptedApprover("allow_once")
    await bounded(run_command(ctx(tmp_path, "ask", approver), "echo hi > out.txt", timeout_seconds=5))
    assert (tmp_path / "out.txt").read_text() == "hi\n"
    assert approver.asked == [
        PermissionRequest(
            tool_call_id="call-7",
            tool_name="run_command",
            kind="execute",
            title="Run echo hi > out.txt",
            subject="echo hi > out.txt",
            raw_input={"command": "echo hi > out.txt", "timeout_seconds": 5},
            always="this exact command",
        )
    ]


async def test_rejected_command_does_not_run(tmp_path: Path) -> None:
    with pytest.raises(PermissionDenied, match="The user rejected Run touch marker"):
        await bounded(run_command(ctx(tmp_path, "ask", ScriptedApprover("reject")), "touch marker"))
    assert not (tmp_path / "marker").exists()


async def test_read_only_mode_refuses(tmp_path: Path) -> None:
    with pytest.raises(PermissionDenied, match="read-only mode"):
        await bounded(run_command(ctx(tmp_path, "read-only"), "touch marker"))
    assert not (tmp_path / "marker").exists()


async def test_timeout_is_reported_in_the_text(tmp_path: Path) -> None:
    result = await bounded(run_command(ctx(tmp_path), "echo started; sleep 30", timeout_seconds=0.2))
    assert result == ToolOutput(  # clamped to 1s
        text="timed out after 1s, process group killed\nstarted\n",
        summary="timed out after 1s\nstarted",
        shown=ShownResult(exit_code=None),
    )


async def test_default_timeout_comes_from_deps(tmp_path: Path) -> None:
    result = await bounded(run_command(ctx(tmp_path, command_timeout=1.5), "sleep 30"))
    assert result.text == "timed out after 1.5s, process group killed\n(no output)"


async def test_output_limit_comes_from_deps(tmp_path: Path) -> None:
    result = await bounded(run_command(ctx(tmp_path, output_limit=200), "seq 1 10000"))
    assert result.text.startswith("exit code 0\n1\n2\n")
    assert "characters omitted" in result.text
    assert len(result.text) <= len("exit code 0\n") + 200


async def test_empty_command(tmp_path: Path) -> None:
    with pytest.raises(ToolError) as e:
        await run_command(ctx(tmp_path), "  ")
    assert str(e.value) == "the command is empty; give a shell command line to run"


async def test_a_small_windows_token_cap_bounds_the_output_captured(tmp_path: Path) -> None:
    # A 2,000-token cap (an 8,000-token window) keeps at most 8,000 characters, head and tail, whatever
    # output_limit says; the last lines (a test run's verdict) survive.
    command = "seq 1 20000; echo '== 3 failed, 97 passed =='"
    result = await bounded(run_command(ctx(tmp_path, output_limit=30_000, output_tokens=2_000), command))
    assert result.text.startswith("exit code 0\n1\n2\n")
    assert result.text.rstrip().endswith("== 3 failed, 97 passed ==")
    assert len(result.text) <= len("exit code 0\n") + 8_000


async def test_colours_and_progress_never_reach_the_model(tmp_path: Path) -> None:
    # What pytest prints with --color=yes (or under FORCE_COLOR), and a download's progress bar.
    script = tmp_path / "noisy.sh"
    script.write_text(
        "printf '\\033[32m.\\033[0m\\033[31mF\\033[0m  [100%%]\\n'\n"
        "printf 'get  10%%\\rget  70%%\\rget 100%%\\n'\n"
        "printf '\\033[31m1 failed\\033[0m, \\033[32m1 passed\\033[0m\\n'\n"
    )
    result = await bounded(run_command(ctx(tmp_path), "sh noisy.sh"))
    assert result == ToolOutput(
        text="exit code 0\n.F  [100%]\nget 100%\n1 failed, 1 passed\n",
        summary="exit code 0\n.F  [100%]\nget 100%\n1 failed, 1 passed",
        shown=ShownResult(exit_code=0),
    )


async def test_commands_are_asked_for_plain_output(tmp_path: Path) -> None:
    result = await bounded(run_command(ctx(tmp_path), 'echo "$NO_COLOR $TERM $PAGER $GIT_PAGER"'))
    assert result.text == "exit code 0\n1 dumb cat cat\n"


async def test_a_long_outputs_summary_keeps_the_lines_that_matter_and_its_end(tmp_path: Path) -> None:
    # The progress lines at its head are not kept: the same run repeats them word for word each time.
    # A test run's progress dots fill the head; the failure and the verdict are what a later turn needs.
    script = tmp_path / "suite.sh"
    script.write_text(
        "i=0; while [ $i -lt 60 ]; do echo 'tests/test_mod.py ........................................'; "
        "i=$((i+1)); done\n"
        "echo 'FAILED tests/test_mod.py::test_parse - ValueError: bad header'\n"
        "echo 'E   ValueError: bad header'\n"
        "i=0; while [ $i -lt 20 ]; do echo 'tests/test_more.py ........................................'; "
        "i=$((i+1)); done\n"
        "echo '=== 1 failed, 479 passed in 3.20s ==='\n"
        "exit 1\n"
    )
    result = await bounded(run_command(ctx(tmp_path), "sh suite.sh"))
    expected = [
        "[83 lines of output; its last lines:]",  # the lines that matter are among them: nothing said twice
        "FAILED tests/test_mod.py::test_parse - ValueError: bad header",
        "E   ValueError: bad header",
        *["tests/test_more.py ........................................"] * 20,
        "=== 1 failed, 479 passed in 3.20s ===",
    ]
    assert result.summary == "exit code 1\n" + "\n".join(expected)
    assert len(result.summary) < 1_600


async def test_the_lines_that_matter_far_from_the_end_are_kept_before_it(tmp_path: Path) -> None:
    script = tmp_path / "build.sh"
    script.write_text(
        "echo 'error: cannot find -lssl'\n"
        'i=0; while [ $i -lt 80 ]; do echo "compiling unit $i of 80 ..................."; i=$((i+1)); done\n'
    )
    result = await bounded(run_command(ctx(tmp_path), "sh build.sh"))
    lines = result.summary.split("\n")
    assert lines[1:4] == [
        "[81 lines of output; the lines that matter:]",
        "error: cannot find -lssl",
        "[… its last lines:]",
    ]
    assert lines[-1] == "compiling unit 79 of 80 ..................."


async def test_the_summary_does_not_repeat_the_command_its_title_names(tmp_path: Path) -> None:
    command = "true " + " ".join(["--flag"] * 60)
    result = await bounded(run_command(ctx(tmp_path), command))
    assert result.summary == "exit code 0\n(no output)"
    script = "python3 -c '\nimport sys\nprint(1)\n'"  # joined into one line it would read as broken Python
    result = await bounded(run_command(ctx(tmp_path), script))
    assert result.summary.split("\n")[0] == "exit code 0"


async def test_a_traceback_s_marker_lines_stay_out_of_the_summary(tmp_path: Path) -> None:
    (tmp_path / "bad.py").write_text("def f():\n    return 1 + None\n\nf()\n")
    result = await bounded(run_command(ctx(tmp_path), "python3 bad.py"))
    assert "^" in result.text and "TypeError" in result.summary
    assert not any(set(line.strip()) <= {"^", "~"} for line in result.summary.splitlines() if line.strip())


def test_a_summary_counts_the_lines_a_cap_cut_as_well_as_those_it_kept() -> None:
    # (the folded summary of `seq 1 300000` said "5,354 lines of output": the lines the cap had kept)
    kept = "\n".join(str(n) for n in range(1, 2001))
    cut = f"\n[… about 7,085 tokens cut here ({counted_omission(1_950_000, 296_001)}): read a line range …]\n"
    tail = "\n".join(str(n) for n in range(298_001, 300_001))
    assert output_summary(kept + cut + tail).splitlines()[0] == "[300,000 lines of output; its first lines:]"
