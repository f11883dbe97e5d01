"""/context: what the next request holds, part by part, adding up to the engine's own count."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from pydantic_ai.messages import ModelMessage

from codling.brain.context import tools
from codling.brain.context.report import context_report
from codling.brain.events import Event, TextDelta
from codling.brain.factory import open_session
from codling.brain.session import ConversationSession
from codling.config import Settings
from codling.llm.catalog import ModelInfo
from codling.mcp_servers import McpServerSpec
from tests.fakes.mcp import stdio_spec
from tests.fakes.scenarios import Call, Response, Say, Script
from tests.fakes.summarizer import is_summary_request

MODEL = ModelInfo("test:scripted", context_limit=100_000, max_output_tokens=8_000)
SMALL = ModelInfo("test:small", context_limit=16_000, max_output_tokens=1_000)
SUMMARY = "## Goal\nMake the greeting say hi.\n\n## Next steps\nRun the tests."
LIMITS = [
    "Total (codling's count)",
    "Compaction point (70% of the input limit)",
    "Free before compaction",
    "Input limit (window - 8,000 for the answer - 5,000 margin)",
    "Free before the input limit",
    "Window of test:scripted",
]


@pytest.fixture
def repo(project: Path, home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The project as a repository with its AGENTS.md, and the user's own AGENTS.md in a private CODLING_HOME."""
    monkeypatch.setenv("CODLING_HOME", str(home))
    (project / ".git").mkdir()
    (project / "AGENTS.md").write_text("# demo\n\nRun the tests with `pytest -q`. Keep functions small.\n")
    (home / "AGENTS.md").write_text("Answer in British English.\n")
    return project


Start = Callable[..., ConversationSession]


@pytest.fixture
async def start(settings: Settings) -> AsyncIterator[Start]:
    """Opens sessions (in a directory, with a script and a model) and closes them when the test ends."""
    opened: list[ConversationSession] = []

    def open_in(
        cwd: Path, script: Script, model: ModelInfo = MODEL, mcp_servers: tuple[McpServerSpec, ...] = ()
    ) -> ConversationSession:
        session = open_session(
            settings, model, cwd, approver=None, mode="yolo", model_factory=script.factory(), mcp_servers=mcp_servers
        )
        opened.append(session)
        return session

    yield open_in
    for session in opened:
        await session.close()


async def reply(session: ConversationSession, prompt: str) -> str:
    events: list[Event] = [e async for e in session.stream(prompt)]
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def table(text: str) -> list[tuple[str, int, str]]:
    """The rows of /context's table: label, tokens, share of the window (header and rule left out)."""
    lines = [line for line in text.splitlines() if line.startswith("| ")][1:]
    cells = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]
    return [(label, int(tokens.replace(",", "")), share) for label, tokens, share in cells]


def check_sums(rows: list[tuple[str, int, str]], window: int) -> int:
    """Each group's parts add up to it and the groups to the total (returned); every share is of ``window``."""
    total_at = [label for label, _, _ in rows].index("Total (codling's count)")
    groups: list[list[int]] = []
    for label, tokens, _ in rows[:total_at]:
        if label.startswith("· "):
            groups[-1].append(tokens)
        else:
            groups.append([tokens])
    for group, *parts in groups:
        assert not parts or sum(parts) == group, (group, parts)
        assert all(part >= 0 for part in parts)
    assert all(share == f"{tokens / window:.1%}" for _, tokens, share in rows)
    total = rows[total_at][1]
    assert total == sum(group for group, *_ in groups)
    return total


async def test_context_shows_every_part_of_the_next_request(repo: Path, home: Path, start: Start) -> None:
    script = Script(
        [
            [Say("The greeting is in src/app.py.")],
            [Call("edit_file", {"path": "src/app.py", "old_text": "'hello'", "new_text": "'hi'"}, "c1")],
            [Say("Done: it says hi now.")],
        ]
    )
    session = start(repo, script)
    await reply(session, "Never touch vendor/. Where is the greeting?")
    assert await reply(session, "/pin use tabs") == "Pinned: use tabs"
    await reply(session, "Make it say hi.")
    entries = list(session.state.entries)
    text = await reply(session, "/context")
    # /context is answered by codling and changes nothing it reports.
    assert session.state.entries == entries and await reply(session, "/context") == text
    used = session.context.context_used()
    assert text.startswith(f"What the next request holds: {used:,} of 100,000 tokens ({used / 100_000:.1%}).\n\n")
    rows = table(text)
    builtin = len(tools.offered_definitions(None, delegates=True, lean=False))
    assert [label for label, _, _ in rows] == [
        "System prompt",
        "· codling's own prompt",
        f"· {home / 'AGENTS.md'} (yours)",
        "· AGENTS.md",
        "· Environment",
        "Tool definitions",
        f"· codling's tools ({builtin})",
        "History (4 messages)",
        "· Prompts (2)",
        "· Session context notes in them (2)",
        "· Replies (2)",
        # The notes in the history show the pins; the next prompt's says only that a file was edited.
        "Session context (new with the next prompt)",
        "· Recently edited files",
        "· Its frame, note and date",
        *LIMITS,
    ]
    # The rows add up to the engine's own estimate (the provider's scripted count is not larger here).
    assert check_sums(rows, 100_000) == used == session.context.overhead() + session.state.history_tokens
    tokens = {label: count for label, count, _ in rows}
    assert tokens["System prompt"] == session.context.system_tokens()
    assert tokens["Tool definitions"] == session.context.tool_tokens()
    assert tokens["History (4 messages)"] == session.state.history_tokens
    budget = session.context.budget
    assert tokens["Free before compaction"] == budget.compact_at - used
    assert tokens["Free before the input limit"] == budget.input_limit - used
    assert all(count > 0 for label, count, _ in rows if not label.startswith("Free"))


async def test_context_of_a_new_session(repo: Path, start: Start) -> None:
    session = start(repo / "src", Script([]))
    text = await reply(session, "/context")
    rows = table(text)
    labels = [label for label, _, _ in rows]
    assert labels[labels.index("History (no messages yet)") :] == [
        "History (no messages yet)",
        "Session context (new with the next prompt)",  # today's date
        *LIMITS,
    ]
    # From a subdirectory, the project's file is named by its path.
    assert "· ../AGENTS.md" not in labels and f"· {repo / 'AGENTS.md'}" in labels
    assert check_sums(rows, 100_000) == session.context.context_used()
    assert not session.state.entries


async def test_the_provider_s_larger_count_is_shown_and_used(repo: Path, start: Start) -> None:
    session = start(repo, Script([[Say("hi")]]))
    await reply(session, "hello")
    estimate = context_report(session).estimate
    session.state.reported_input_tokens = estimate + 1_000
    rows = table(await reply(session, "/context"))
    tokens = {label: count for label, count, _ in rows}
    assert check_sums(rows, 100_000) == estimate
    assert tokens["Provider's count of the latest request and reply (used)"] == estimate + 1_000
    assert session.context.context_used() == estimate + 1_000
    assert tokens["Free before compaction"] == session.context.budget.compact_at - estimate - 1_000


async def test_pins_beyond_their_budget_and_left_out_instruction_files(
    project: Path, home: Path, start: Start, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CODLING_HOME", str(home))
    (project / ".git").mkdir()
    (project / "AGENTS.md").write_text("Root rules.\n" * 1_600)  # 19,200 bytes
    (project / "src" / "AGENTS.md").write_text("Source rules.\n" * 1_100)  # 15,400: together past 32,000
    session = start(project / "src", Script([]), SMALL)
    for i in range(20):  # about 50 tokens each: past the 800 tokens a 16,000-token window gives pins
        await reply(session, f"/pin rule number {i}: " + f"keep the public API of module {i} as it is, " * 4)
    text = await reply(session, "/context")
    rows = table(text)
    shown = session.context.turn_block().count("- rule number")
    assert 0 < shown < 20
    labels = [label for label, _, _ in rows]
    assert f"· Pins and facts ({shown} new of 20)" in labels
    assert "· AGENTS.md" in labels and f"· {project / 'AGENTS.md'}" not in labels
    assert text.endswith(
        "\n\nInstruction files left out (all of them together may take 32,000 bytes, the nearest kept first): "
        f"{project / 'AGENTS.md'}."
    )
    assert check_sums(rows, 16_000) == session.context.context_used()


async def test_after_a_compaction_the_kept_prompts_and_the_summary(repo: Path, start: Start) -> None:
    def respond(messages: list[ModelMessage]) -> Response:
        return [Say(SUMMARY)] if is_summary_request(messages) else [Say("ok")]

    session = start(repo, Script([], fallback=respond))
    await reply(session, "Make the greeting say hi.")
    await reply(session, "And add a test for it.")
    await reply(session, "/compact")
    await reply(session, "Now run the tests.")
    assert [e.role for e in session.state.entries] == ["user", "user", "summary", "user", "assistant"]
    rows = table(await reply(session, "/context"))
    labels = [label for label, _, _ in rows]
    at = labels.index("History (5 messages)")
    assert labels[at : at + 6] == [
        "History (5 messages)",
        "· Prompts kept by compaction (2)",
        "· Compaction summary",
        "· Prompts since (1)",
        "· Session context notes in them (1)",  # the compaction took the earlier ones: said again in full
        "· Replies since (1)",
    ]
    assert rows[at + 2][1] == session.state.entries[2].tokens
    assert check_sums(rows, 100_000) == session.context.context_used()


async def test_mcp_tools_are_counted_apart_from_codling_s(repo: Path, start: Start) -> None:
    session = start(repo, Script([]), mcp_servers=(stdio_spec("fake"),))
    rows = table(await reply(session, "/context"))  # a turn waits for the servers to start
    builtin = len(tools.offered_definitions(None, delegates=True, lean=False))
    at = [label for label, _, _ in rows].index("Tool definitions")
    assert [label for label, _, _ in rows[at : at + 3]] == [
        "Tool definitions",
        f"· codling's tools ({builtin})",
        "· MCP tools (9, 1 server)",
    ]
    assert rows[at][1] == session.context.tool_tokens() and rows[at + 2][1] > 100
    assert check_sums(rows, 100_000) == session.context.context_used()
