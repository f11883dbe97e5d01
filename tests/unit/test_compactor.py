"""Compaction as a session runs it: the summarizer's circuit breaker and a summarizer request trimmed when the
provider finds it too long."""

from __future__ import annotations

from pathlib import Path

from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.messages import ModelMessage, ToolReturnPart

from codling.brain.context.compactor import BREAKER_FAILURES, BREAKER_SKIPS
from codling.brain.events import ContextCompacted
from codling.brain.factory import open_session
from codling.brain.session import ConversationSession
from codling.brain.special_turns import TOOLS_OFF
from codling.config import Settings
from codling.llm.catalog import ModelInfo
from codling.store.header import SessionHeader
from codling.store.history import HistoryFile, HistoryRecorder, read_history
from tests.fakes.scenarios import Call, Fail, Response, Say, Script
from tests.fakes.summarizer import MARK, is_summary_request, transcript_of

MODEL = ModelInfo("test:small", context_limit=16_000, max_output_tokens=1_000)
SUMMARY = "## Goal\nKeep the parser fast.\n\n## Progress\nThe tokenizer was rewritten; tests pass."


class Summarizer:
    """Answers user turns with "ok" and summary requests as ``answers`` says, in turn (then the last one)."""

    def __init__(self, *answers: Response) -> None:
        self.answers = list(answers)
        self.prompts: list[str] = []
        """What each summary request asked to summarise, as a transcript (see ``tests/fakes/summarizer.py``)."""
        self.forms: list[str] = []
        """How each one sent it: "history" (as a user turn lays it out) or "transcript"."""

    def __call__(self, messages: list[ModelMessage]) -> Response:
        if not is_summary_request(messages):
            return [Say("ok")]
        self.prompts.append(transcript_of(messages))
        self.forms.append("transcript" if MARK in (getattr(messages[-1], "instructions", None) or "") else "history")
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


def session_for(script: Script, project: Path, settings: Settings) -> ConversationSession:
    return open_session(settings, MODEL, project, approver=None, mode="yolo", model_factory=script.factory())


async def compactions(session: ConversationSession, count: int) -> list[ContextCompacted]:
    out: list[ContextCompacted] = []
    for i in range(count):
        await session.run(f"step {i}: the parser needs work")
        out += [e async for e in session.stream("/compact") if isinstance(e, ContextCompacted)]
    return out


DOWN = Fail(ModelHTTPError(500, "test:small", {"message": "the summarizer is down"}))


async def test_a_failing_summarizer_is_skipped_for_a_while_then_tried_again(
    project: Path, settings: Settings, tmp_path: Path
) -> None:
    summarizer = Summarizer([DOWN])
    session = session_for(Script([], fallback=summarizer), project, settings)
    path = tmp_path / "history.jsonl"
    file = HistoryFile(path, "s1")
    file.write(SessionHeader("s1", project, MODEL.id, "yolo").record())
    session.subscribe(HistoryRecorder(file))
    done = await compactions(session, BREAKER_FAILURES + BREAKER_SKIPS + 1)
    assert [(c.fallback, c.skipped) for c in done] == [
        *[(True, False)] * BREAKER_FAILURES,  # asked, and it failed
        *[(True, True)] * BREAKER_SKIPS,  # not asked
        (True, False),  # asked again
    ]
    assert len(summarizer.prompts) == BREAKER_FAILURES + 1
    notes = [c.note for c in done if c.note]
    assert len(notes) == 1 and notes[0].startswith("The summarizer failed 2 times in a row")
    assert done[BREAKER_FAILURES].note == notes[0]  # said once, on the first skip
    file.close()
    # A restored session counts the same, so it skips the summarizer exactly where the live one would.
    restored = session_for(Script([]), project, settings)
    restored.restore(read_history(path).events)
    assert (restored.state.summarizer_failures, restored.state.summarizer_skips) == (
        session.state.summarizer_failures,
        session.state.summarizer_skips,
    )


async def test_a_summarizer_that_works_again_closes_the_breaker(project: Path, settings: Settings) -> None:
    summarizer = Summarizer([DOWN], [DOWN], [Say(SUMMARY)])
    session = session_for(Script([], fallback=summarizer), project, settings)
    done = await compactions(session, BREAKER_FAILURES + BREAKER_SKIPS + 2)
    assert [c.fallback for c in done][-2:] == [False, False]
    assert (session.state.summarizer_failures, session.state.summarizer_skips) == (0, 0)


async def test_a_summarizer_request_too_long_for_the_provider_is_trimmed_and_sent_again(
    project: Path, settings: Settings
) -> None:
    too_long = ModelHTTPError(400, "test:small", {"message": "This model's maximum context length is 16000 tokens."})
    summarizer = Summarizer([Fail(too_long)], [Fail(too_long)], [Say(SUMMARY)])
    session = session_for(Script([], fallback=summarizer), project, settings)
    for i in range(12):
        await session.run(f"turn {i}: " + "the parser is slow because of backtracking. " * 60)
    (done,) = [e async for e in session.stream("/compact") if isinstance(e, ContextCompacted)]
    assert not done.fallback and done.summary == SUMMARY
    # The history as user turns send it; then, too long, a transcript; then a shorter one.
    assert summarizer.forms == ["history", "transcript", "transcript"]
    whole, first, second = summarizer.prompts
    said = [text.partition("\n\n---\n")[0].count("the parser is slow") for text in (whole, first)]
    assert said == [12 * 60, 12 * 60]  # all of it
    assert len(second) < len(first) and second.endswith(first[-200:])  # the oldest messages went first


async def test_a_summarizer_that_calls_a_tool_anyway_is_refused_and_still_summarises(
    project: Path, settings: Settings
) -> None:
    # The summarizer's request lists the user turns' tools (its prefix is theirs) with tool_choice none; a
    # provider that ignores it and calls one gets a refusal, and nothing runs (here: in yolo mode).
    summarizer = Summarizer([Call("write_file", {"path": "planted.txt", "content": "no"}, "c1")], [Say(SUMMARY)])
    script = Script([], fallback=summarizer)
    session = session_for(script, project, settings)
    await session.run("the parser is slow because of backtracking")
    (done,) = [e async for e in session.stream("/compact") if isinstance(e, ContextCompacted)]
    assert not done.fallback and done.summary == SUMMARY
    assert not (project / "planted.txt").exists()
    assert summarizer.forms == ["history", "history"]  # asked again, told the tools are off
    (refused,) = script.requests[-1][-1].parts
    assert isinstance(refused, ToolReturnPart) and refused.content == TOOLS_OFF
