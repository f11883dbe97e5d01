"""A session restored before every turn sends the model exactly what the live session sent, compactions,
in-turn budgets and a failing summarizer included."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.messages import ModelMessage, ModelRequest, UserPromptPart

from codling.brain.events import ContextCompacted, Event
from codling.brain.factory import open_session
from codling.brain.session import ConversationSession
from codling.config import Settings
from codling.llm.catalog import ModelInfo
from codling.store.header import SessionHeader
from codling.store.history import HistoryFile, HistoryRecorder, read_history
from tests.fakes.scenarios import Call, Fail, Response, Say, Script, user_prompt
from tests.fakes.summarizer import is_summary_request

MODEL = ModelInfo("test:small", context_limit=8_000, max_output_tokens=1_000)
TURNS = 10


def prompt_of(messages: list[ModelMessage]) -> str:
    for message in reversed(messages):
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, UserPromptPart) and isinstance(part.content, str):
                    return user_prompt(part.content)
    return ""


def coding_session(summarizer_works: bool) -> Any:
    """Turn i reads file i, then answers; odd turns read a second file first. The summarizer works or fails."""

    def respond(messages: list[ModelMessage]) -> Response:
        if is_summary_request(messages):
            if summarizer_works:
                return [Say("## Goal\nFinish the parser.\n\n## Progress\nFiles read; the codeword is PELICAN.")]
            return [Fail(ModelHTTPError(500, MODEL.id, {"message": "summarizer down"}))]
        turn = int(prompt_of(messages).split(":")[0].removeprefix("turn "))
        done = sum(1 for m in messages[-6:] if isinstance(m, ModelRequest) and not _has_prompt(m))
        calls = [f"f{turn}.txt", f"g{turn}.txt"] if turn % 2 else [f"f{turn}.txt"]
        if done < len(calls):
            return [Call("read_file", {"path": calls[done]}, f"t{turn}-{done}")]
        return [Say(f"Turn {turn} done: read {', '.join(calls)}.")]

    return respond


def _has_prompt(message: ModelRequest) -> bool:
    return any(isinstance(p, UserPromptPart) for p in message.parts)


def shape(messages: list[ModelMessage]) -> list[tuple[str, str, str]]:
    """A request as the model sees it, without timestamps."""
    out: list[tuple[str, str, str]] = []
    for message in messages:
        for part in message.parts:
            content = getattr(part, "content", None)
            if content is None and hasattr(part, "args_as_json_str"):
                content = part.args_as_json_str()
            out.append((type(message).__name__, part.part_kind, str(content)))
        out.append((type(message).__name__, "instructions", str(getattr(message, "instructions", ""))))
    return out


def prompts() -> list[str]:
    facts = ["the staging port is 8431", "never touch migrations/", "the codeword is PELICAN"]
    return [f"turn {i}: {facts[i % 3]}. " + "Some more words about the parser. " * 40 for i in range(TURNS)]


def fresh(project: Path, settings: Settings, script: Script) -> ConversationSession:
    return open_session(settings, MODEL, project, approver=None, mode="yolo", model_factory=script.factory())


@pytest.fixture
def files(project: Path) -> Path:
    for i in range(TURNS):
        for name in (f"f{i}.txt", f"g{i}.txt"):
            (project / name).write_text("\n".join(f"{name} line {n}: " + "value " * 12 for n in range(120)))
    return project


@pytest.mark.parametrize("summarizer_works", [True, False], ids=["summarizer-works", "summarizer-fails"])
async def test_restarting_before_every_turn_sends_what_the_live_session_sent(
    files: Path, settings: Settings, tmp_path: Path, summarizer_works: bool
) -> None:
    live_script = Script([], fallback=coding_session(summarizer_works))
    live = fresh(files, settings, live_script)
    live_events: list[Event] = []
    for prompt in prompts():
        live_events += [e async for e in live.stream(prompt)]
    assert any(isinstance(e, ContextCompacted) for e in live_events), "the session never compacted"

    restarted_script = Script([], fallback=coding_session(summarizer_works))
    path = tmp_path / "history.jsonl"
    file = HistoryFile(path, "s1")
    file.write(SessionHeader("s1", files, MODEL.id, "yolo").record())
    file.close()
    for prompt in prompts():
        session = fresh(files, settings, restarted_script)
        session.restore(read_history(path).events)
        file = HistoryFile(path, "s1")
        session.subscribe(HistoryRecorder(file))
        await session.run(prompt)
        await session.stop()
        file.close()

    def turn_requests(script: Script) -> list[list[tuple[str, str, str]]]:
        return [shape(r) for r in script.requests if not is_summary_request(r)]

    live_requests, restarted_requests = turn_requests(live_script), turn_requests(restarted_script)
    assert len(live_requests) == len(restarted_requests)
    for index, (a, b) in enumerate(zip(live_requests, restarted_requests, strict=True)):
        assert a == b, f"request {index} differs"


async def test_the_providers_count_survives_a_restart(files: Path, settings: Settings, tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    file = HistoryFile(path, "s1")
    file.write(SessionHeader("s1", files, MODEL.id, "yolo").record())
    live = fresh(files, settings, Script([], fallback=coding_session(True)))
    live.subscribe(HistoryRecorder(file))
    await live.run(prompts()[0])
    file.close()
    assert live.state.reported_input_tokens > 0
    restored = fresh(files, settings, Script([]))
    restored.restore(read_history(path).events)
    assert restored.state.reported_input_tokens == live.state.reported_input_tokens
    assert restored.context.context_used() == live.context.context_used()
