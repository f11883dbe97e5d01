from __future__ import annotations

import json
from collections.abc import AsyncIterable, AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any, get_args

import pytest
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import (
    AgentStreamEvent,
    FunctionToolResultEvent,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturn,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.toolsets import FunctionToolset
from pydantic_ai.usage import RunUsage

from codling.brain.context.tools import definitions_tokens, offered_definitions
from codling.brain.options import SessionOptions
from codling.errors import ConfigError, PathError, ToolError
from codling.llm.tokens import count_tokens
from codling.tools.approval import Permissions
from codling.tools.base import ToolCallInfo, ToolOutput, ToolReport
from codling.tools.deps import ToolDeps
from codling.tools.local import LocalFileSystem, LocalTerminal
from codling.tools.ports import COMMAND_TOOL, DELEGATE_TOOL, PLAN_TOOL, DelegateRole
from codling.tools.specs import TOOL_NAMES, TOOLS, ToolName, describe_call, role_tools
from codling.tools.toolset import ReportingToolset, build_toolset, capped, capped_error
from codling.tools.workspace import Workspace
from codling.vocabulary import FileDiff, Location
from tests.fakes.approver import ScriptedApprover
from tests.fakes.openai_server import Reply, running_server


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    (tmp_path / "proj" / "src").mkdir(parents=True)
    return Workspace(tmp_path / "proj")


# --- describe_call -----------------------------------------------------------------------------------------


def test_describe_read_file(ws: Workspace) -> None:
    a = ws.cwd / "src" / "a.py"
    assert describe_call("read_file", {"path": "src/a.py"}, ws) == ToolCallInfo("Read src/a.py", "read", (Location(a),))
    assert describe_call("read_file", {"path": "src/a.py", "start_line": 10, "end_line": 20}, ws) == ToolCallInfo(
        "Read src/a.py (lines 10-20)", "read", (Location(a, 10),)
    )
    assert describe_call("read_file", {"path": "src/a.py", "start_line": 5}, ws).title == "Read src/a.py (from line 5)"
    assert describe_call("read_file", {"path": "src/a.py", "end_line": 9}, ws).title == "Read src/a.py (lines 1-9)"


def test_describe_listing_and_search(ws: Workspace) -> None:
    assert describe_call("list_files", {}, ws) == ToolCallInfo("List files", "search", (Location(ws.cwd),))
    assert describe_call("list_files", {"path": "src"}, ws) == ToolCallInfo(
        "List files in src", "search", (Location(ws.cwd / "src"),)
    )
    assert describe_call("search", {"pattern": "def \\w+"}, ws) == ToolCallInfo(
        "Search for /def \\w+/", "search", (Location(ws.cwd),)
    )
    assert describe_call("search", {"pattern": "x", "path": "src", "glob": "*.py"}, ws).title == (
        "Search for /x/ in src (*.py)"
    )


def test_describe_edits_and_commands(ws: Workspace) -> None:
    a = ws.cwd / "a.py"
    assert describe_call("edit_file", {"path": "a.py", "old_text": "x", "new_text": "y"}, ws) == ToolCallInfo(
        "Edit a.py", "edit", (Location(a),)
    )
    assert describe_call("write_file", {"path": "a.py", "content": ""}, ws) == ToolCallInfo(
        "Write a.py", "edit", (Location(a),)
    )
    assert describe_call("run_command", {"command": "pytest -q"}, ws) == ToolCallInfo("Run pytest -q", "execute")
    assert describe_call("run_command", {"command": "make\nmake test"}, ws).title == "Run make …"
    assert describe_call("run_command", {"command": "x" * 300}, ws).title == f"Run {'x' * 200} …"


def test_describe_outside_path_still_has_a_title(ws: Workspace) -> None:
    assert describe_call("read_file", {"path": "../../etc/passwd"}, ws) == ToolCallInfo("Read ../../etc/passwd", "read")


@pytest.mark.parametrize(
    ("name", "args", "expected"),
    [
        ("frobnicate", {"x": 1}, ToolCallInfo("frobnicate", "other")),
        ("run_command", {}, ToolCallInfo("run_command", "execute")),
        ("search", {"path": "src"}, ToolCallInfo("search", "search")),
        ("edit_file", None, ToolCallInfo("edit_file", "edit")),
    ],
)
def test_describe_never_raises(ws: Workspace, name: str, args: Any, expected: ToolCallInfo) -> None:
    assert describe_call(name, args, ws) == expected


# --- the toolset -------------------------------------------------------------------------------------------


def make_deps(root: Path, approver: ScriptedApprover | None = None) -> ToolDeps:
    return ToolDeps(
        workspace=Workspace(root),
        fs=LocalFileSystem(),
        terminal=LocalTerminal(),
        permissions=Permissions("ask" if approver else "yolo", approver),
    )


async def test_toolset_offers_the_named_tools(tmp_path: Path) -> None:
    ctx = RunContext(deps=make_deps(tmp_path), model=TestModel(), usage=RunUsage())
    tools = await build_toolset().get_tools(ctx)
    assert tuple(tools) == tuple(n for n in TOOL_NAMES if n != "delegate")  # no delegator: no delegating
    delegating = RunContext(deps=replace(make_deps(tmp_path), delegator=object()), model=TestModel(), usage=RunUsage())  # type: ignore[arg-type]
    assert tuple(await build_toolset().get_tools(delegating)) == TOOL_NAMES
    for tool in tools.values():
        assert tool.tool_def.description
        params = tool.tool_def.parameters_json_schema["properties"]
        assert all(p.get("description") for p in params.values()), tool.tool_def.name


async def test_every_table_follows_the_descriptors(tmp_path: Path) -> None:
    ctx = RunContext(deps=make_deps(tmp_path), model=TestModel(), usage=RunUsage())
    tools = await build_toolset().get_tools(ctx)
    # Only the tools that change nothing run concurrently; the order of the rest is the model's.
    sequential = {name for name, tool in tools.items() if tool.tool_def.sequential}
    assert sequential == {"edit_file", "write_file", "apply_patch", "run_command"}
    assert {spec.name for spec in TOOLS if spec.sequential} == sequential | {"delegate"}
    assert get_args(ToolName) == TOOL_NAMES
    assert {PLAN_TOOL, DELEGATE_TOOL, COMMAND_TOOL} <= set(TOOL_NAMES)
    assert {role: sorted(role_tools(role)) for role in get_args(DelegateRole)} == {
        "planner": ["list_files", "read_file", "search", "update_plan"],
        "reviewer": ["list_files", "read_file", "run_command", "search"],
        "coder": ["apply_patch", "edit_file", "list_files", "read_file", "run_command", "search", "write_file"],
    }
    # A name that is no tool is refused where tools are chosen, not silently offered nothing.
    with pytest.raises(ConfigError, match="the session's options names unknown tools: raed_file"):
        SessionOptions(tool_names=frozenset({"read_file", "raed_file"}))  # type: ignore[arg-type]
    # Every kind a call is shown with is its descriptor's, also for malformed arguments.
    for spec in TOOLS:
        assert describe_call(spec.name, {}, Workspace(tmp_path)).kind == spec.kind
        assert describe_call(spec.name, {"path": "a", "command": "x", "pattern": "y"}, Workspace(tmp_path)).kind == (
            spec.kind
        )


async def test_reporting_toolset_wraps_outputs_and_tool_errors(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("hi\n")
    deps = make_deps(tmp_path)
    ctx = RunContext(deps=deps, model=TestModel(), usage=RunUsage())
    toolset = build_toolset()
    tools = await toolset.get_tools(ctx)
    ok = await toolset.call_tool("read_file", {"path": "a.txt"}, ctx, tools["read_file"])
    assert ok == ToolReturn(
        return_value="     1\thi",
        metadata=ToolReport(
            ToolOutput(
                "     1\thi", locations=(Location(tmp_path / "a.txt"),), summary="Read a.txt: line 1 of 1\n     1\thi"
            )
        ),
    )
    failed = await toolset.call_tool("read_file", {"path": "../x"}, ctx, tools["read_file"])
    message = f"path '../x' is outside the workspace ({tmp_path}); use a path inside it"
    assert failed == ToolReturn(return_value=f"Error: {message}", metadata=ToolReport(None, error=message))
    assert failed.metadata.failed


async def test_non_tool_errors_propagate(tmp_path: Path) -> None:
    class BrokenFileSystem(LocalFileSystem):
        async def read_text(self, path: Path) -> str:
            raise RuntimeError("disk on fire")

    deps = ToolDeps(
        workspace=Workspace(tmp_path),
        fs=BrokenFileSystem(),
        terminal=LocalTerminal(),
        permissions=Permissions("yolo", None),
    )
    ctx = RunContext(deps=deps, model=TestModel(), usage=RunUsage())
    toolset = build_toolset()
    tools = await toolset.get_tools(ctx)
    with pytest.raises(RuntimeError, match="disk on fire"):
        await toolset.call_tool("read_file", {"path": "a.txt"}, ctx, tools["read_file"])


# --- through a real agent ----------------------------------------------------------------------------------

EDIT_ARGS = {"path": "a.py", "old_text": "return 1", "new_text": "return 2"}
BAD_EDIT_ARGS = {"path": "a.py", "old_text": "no such text", "new_text": "x"}


def tool_returns(messages: list[ModelMessage]) -> list[ToolReturnPart]:
    return [p for m in messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, ToolReturnPart)]


class ScriptedModel:
    """Calls edit_file twice (one good, one bad edit), then answers "done"; records what it was sent."""

    def __init__(self) -> None:
        self.seen: list[list[ModelMessage]] = []

    def respond(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.seen.append(list(messages))
        if tool_returns(messages):
            return ModelResponse(parts=[TextPart("done")])
        return ModelResponse(
            parts=[
                ToolCallPart("edit_file", EDIT_ARGS, tool_call_id="call-1"),
                ToolCallPart("edit_file", BAD_EDIT_ARGS, tool_call_id="call-2"),
            ]
        )

    async def stream(self, messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | DeltaToolCalls]:
        self.seen.append(list(messages))
        if tool_returns(messages):
            yield "done"
            return
        yield {
            0: DeltaToolCall(name="edit_file", json_args=json.dumps(EDIT_ARGS), tool_call_id="call-1"),
            1: DeltaToolCall(name="edit_file", json_args=json.dumps(BAD_EDIT_ARGS), tool_call_id="call-2"),
        }


@pytest.mark.parametrize("streaming", [True, False])
async def test_agent_edits_a_file_and_reports_the_diff(tmp_path: Path, streaming: bool) -> None:
    target = tmp_path / "a.py"
    target.write_text("def f():\n    return 1\n")
    approver = ScriptedApprover("allow_once")
    script = ScriptedModel()
    agent = Agent(
        FunctionModel(script.respond, stream_function=script.stream),
        deps_type=ToolDeps,
        toolsets=[build_toolset()],
    )
    deps = make_deps(tmp_path, approver)

    results: list[FunctionToolResultEvent] = []
    if streaming:
        async with agent.run_stream_events("change f to return 2", deps=deps) as events:
            async for event in events:
                if isinstance(event, FunctionToolResultEvent):
                    results.append(event)
    else:

        async def on_events(ctx: RunContext[ToolDeps], events: AsyncIterable[AgentStreamEvent]) -> None:
            async for event in events:
                if isinstance(event, FunctionToolResultEvent):
                    results.append(event)

        result = await agent.run("change f to return 2", deps=deps, event_stream_handler=on_events)
        assert result.output == "done"

    new = "def f():\n    return 2\n"
    assert target.read_text() == new
    diff_text = "Edited a.py.\n--- a/a.py\n+++ b/a.py\n@@ -1,2 +1,2 @@\n def f():\n-    return 1\n+    return 2"
    error = (
        "old_text was not found in a.py; it must match the file exactly, including whitespace and "
        "indentation. Use read_file to see the current text."
    )
    by_id = {event.part.tool_call_id: event.part for event in results}
    assert by_id["call-1"].metadata == ToolReport(
        ToolOutput(
            text=diff_text,
            diff=FileDiff(target, "def f():\n    return 1\n", new),
            locations=(Location(target, 2),),
            summary="Edited a.py (+1 −1):\n@@ -1,2 +1,2 @@\n def f():\n-    return 1\n+    return 2",
        )
    )
    assert by_id["call-1"].content == diff_text
    assert by_id["call-2"].metadata == ToolReport(None, error=error)
    assert by_id["call-2"].content == f"Error: {error}"
    assert [r.title for r in approver.asked] == ["Edit a.py"]
    # The model is sent the text only.
    sent = {p.tool_call_id: p.content for p in tool_returns(script.seen[-1])}
    assert sent == {"call-1": diff_text, "call-2": f"Error: {error}"}


def test_describe_tolerates_wrong_argument_types(ws: Workspace) -> None:
    assert describe_call("read_file", {"path": 5, "start_line": "ten"}, ws) == ToolCallInfo(
        "Read 5", "read", (Location(ws.cwd / "5"),)
    )


def test_describe_call_accepts_unresolvable_workspace_paths(ws: Workspace) -> None:
    with pytest.raises(PathError):
        ws.resolve("a\0b")
    assert describe_call("write_file", {"path": "a\0b"}, ws) == ToolCallInfo("Write a\0b", "edit")


async def test_edits_in_one_response_do_not_overwrite_each_other(tmp_path: Path) -> None:
    target = tmp_path / "a.py"
    target.write_text("a = 1\nb = 1\n")
    calls = [
        ToolCallPart("edit_file", {"path": "a.py", "old_text": "a = 1", "new_text": "a = 2"}, tool_call_id="e1"),
        ToolCallPart("edit_file", {"path": "a.py", "old_text": "b = 1", "new_text": "b = 2"}, tool_call_id="e2"),
    ]

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart("done")] if tool_returns(messages) else list(calls))

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | DeltaToolCalls]:
        if tool_returns(messages):
            yield "done"
            return
        yield {
            i: DeltaToolCall(name=c.tool_name, json_args=c.args_as_json_str(), tool_call_id=c.tool_call_id)
            for i, c in enumerate(calls)
        }

    agent = Agent(FunctionModel(respond, stream_function=stream), deps_type=ToolDeps, toolsets=[build_toolset()])
    approver = ScriptedApprover("allow_once", "allow_once")
    result = await agent.run("edit", deps=make_deps(tmp_path, approver))
    assert result.output == "done"
    assert target.read_text() == "a = 2\nb = 2\n"
    assert [r.raw_input["new_text"] for r in approver.asked] == ["a = 2", "b = 2"]


def test_a_result_past_the_cap_keeps_its_head_and_tail_and_says_how_to_see_the_rest() -> None:
    output = "\n".join(f"test_{i} PASSED" for i in range(3_000)) + "\nFAILED test_parser - boom\n== 1 failed =="
    text = capped(output, 1_000)
    assert count_tokens(text) <= 1_000
    assert text.startswith("test_0 PASSED") and text.endswith("FAILED test_parser - boom\n== 1 failed ==")
    assert "a tool result may hold at most 1,000 tokens with this model" in text
    assert capped("short", 1_000) == "short"


def test_an_errors_first_line_is_never_cut() -> None:
    first = "Error: the patch could not be applied: " + "context not found in app.py " * 120
    detail = "\n".join(f"  line {i}: expected something else here" for i in range(2_000))
    text = capped_error(f"{first}\n{detail}", 1_000)
    assert text.split("\n", 1)[0] == first
    assert count_tokens(text) <= 1_000 and "a tool result may hold at most" in text
    assert text.endswith("line 1999: expected something else here")
    # When the first line alone fills the cap, it comes back whole and alone.
    assert capped_error(f"{first}\n{detail}", count_tokens(first) + 20) == first
    assert capped_error("Error: short\nand small", 1_000) == "Error: short\nand small"


async def test_results_and_errors_are_capped_at_the_sessions_token_cap(tmp_path: Path) -> None:
    log = "\n".join(f"test_{i} PASSED" for i in range(5_000)) + "\n== 1 failed =="

    async def noisy(ctx: RunContext[ToolDeps]) -> ToolOutput:
        """Print a long log."""
        return ToolOutput(log, summary="ran")

    async def failing(ctx: RunContext[ToolDeps]) -> ToolOutput:
        """Fail with a long message."""
        raise ToolError("it failed: the first line\n" + log)

    functions = FunctionToolset[ToolDeps]()
    functions.add_function(noisy)
    functions.add_function(failing)
    toolset = ReportingToolset(functions)
    ctx = RunContext(deps=replace(make_deps(tmp_path), output_tokens=500), model=TestModel(), usage=RunUsage())
    tools = await toolset.get_tools(ctx)
    ok = await toolset.call_tool("noisy", {}, ctx, tools["noisy"])
    assert count_tokens(ok.return_value) <= 500 and ok.return_value.endswith("== 1 failed ==")
    assert ok.metadata.output.text == ok.return_value  # what the user is shown is what the model got
    bad = await toolset.call_tool("failing", {}, ctx, tools["failing"])
    assert bad.return_value.startswith("Error: it failed: the first line\ntest_0 PASSED")
    assert count_tokens(bad.return_value) <= 500 and bad.return_value.endswith("== 1 failed ==")


def test_the_tool_definitions_are_counted_as_a_provider_receives_them_or_a_little_over(tmp_path: Path) -> None:
    everything = definitions_tokens(offered_definitions(None, delegates=True, lean=False))
    readers = definitions_tokens(offered_definitions(frozenset({"read_file", "search"}), delegates=True, lean=False))
    assert 0 < readers < everything and 1_200 <= everything <= 4_000


async def test_tool_definitions_counted_against_what_the_provider_receives(tmp_path: Path) -> None:
    with running_server() as server:
        server.enqueue(Reply(text="hi"))
        provider = OpenAIProvider(base_url=server.base_url, api_key="test-key")
        agent = Agent(OpenAIChatModel("fake-model", provider=provider), deps_type=ToolDeps, toolsets=[build_toolset()])
        await agent.run("hello", deps=make_deps(tmp_path))
        (sent,) = server.requests
    tools = sent["tools"]
    received = count_tokens(json.dumps(tools, separators=(",", ":"), ensure_ascii=False))
    names = frozenset(t["function"]["name"] for t in tools)  # without delegate: no delegator here
    counted = definitions_tokens(offered_definitions(names, delegates=True, lean=False))
    # Counted with JSON's default spacing: never under the compact body, at most a sixth over it.
    assert received <= counted <= received * 1.17


def test_the_toolset_is_built_once_per_process() -> None:
    # Its schemas took ~50 ms to generate, which every new session (and delegate) paid; it holds no state.
    assert build_toolset() is build_toolset()
