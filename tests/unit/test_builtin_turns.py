"""The built-in special turns (summarize, title, greeting) and the session options around them."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart

from codling.brain.builtin_turns import (
    SUMMARY_IDLE_TIMEOUT,
    clean_title,
    fallback_title,
    greeting_turn,
    prompt_text,
    summarize_turn,
    title_turn,
)
from codling.brain.context import compaction
from codling.brain.events import (
    CompactionStarted,
    ContextCompacted,
    Event,
    SessionTitled,
    SpecialTurnPersisted,
    TextDelta,
    TurnEnded,
    UsageUpdated,
)
from codling.brain.factory import open_session
from codling.brain.interactions import DEFAULT, PRESERVE_SYSTEM_CONTEXT, Interaction
from codling.brain.options import TOOLS_SPENT_NOTE, SessionOptions
from codling.brain.prompt import ResourceBlock, TextBlock
from codling.brain.session import ConversationSession
from codling.brain.state import SUMMARY_END, SUMMARY_PREFIX, HistoryEntry
from codling.config import Settings
from codling.llm.catalog import ModelInfo
from codling.tools.specs import NO_TOOLS, TOOL_NAMES
from tests.fakes.deadlines import deadline
from tests.fakes.observer import observed
from tests.fakes.scenarios import Call, Fail, Say, Script, Until

MODEL = ModelInfo("test:builtin", context_limit=100_000)
SUMMARY = "## Goal\nRename greet to welcome everywhere.\n\n## Next steps\nRun the tests after the rename."


def make_session(project: Path, settings: Settings, script: Script, **options: object) -> ConversationSession:
    session = open_session(settings, MODEL, project, approver=None, mode="yolo", model_factory=script.factory())
    if options:
        session.options = SessionOptions(**options)  # type: ignore[arg-type]
    return session


def all_text(messages: list[ModelMessage]) -> str:
    """Everything a request carried: instructions, prompts, replies."""
    pieces: list[str] = []
    for message in messages:
        if isinstance(message, ModelRequest):
            pieces.append(message.instructions or "")
            pieces += [str(p.content) for p in message.parts if isinstance(p, UserPromptPart)]
        elif isinstance(message, ModelResponse):
            pieces += [p.content for p in message.parts if isinstance(p, TextPart)]
    return "\n".join(pieces)


# -- summarize ---------------------------------------------------------------------------------------------


def test_summarize_turn_replaces_the_history_with_the_system_context_preserved() -> None:
    keep = [Interaction("user", "rename greet")]
    config = summarize_turn("### User\nrename greet", instructions="keep the API notes", keep=keep, max_tokens=900)
    assert (config.turn_type, config.persistence, config.persistence_filter) == (
        "summarize",
        "replace-above",
        PRESERVE_SYSTEM_CONTEXT,
    )
    assert (config.messages, config.tool_filter, config.run_tools, config.max_tokens) == ((), NO_TOOLS, False, 900)
    assert config.instructions == compaction.compaction_prompt()
    assert config.prompt.endswith("The user asked that the summary also: keep the API notes")
    assert config.keep == tuple(keep)
    # It streams and gives up on a silent summarizer sooner than a user turn would.
    assert (config.force_non_streaming, config.idle_timeout) == (False, SUMMARY_IDLE_TIMEOUT)
    assert config.accept is not None
    good = "## Goal\nRename greet everywhere; the user wants the API notes kept.\n## Next\n- rename greet in app.py"
    assert config.accept(good) and not config.accept("Lorem ipsum dolor sit amet, consectetur adipiscing elit sed.")


def user_prompts(messages: list[ModelMessage]) -> list[str]:
    return [str(p.content) for m in messages for p in m.parts if isinstance(p, UserPromptPart)]


async def test_compaction_runs_through_the_summarize_special_turn(project: Path, settings: Settings) -> None:
    script = Script([[Say("The parser lives in src/parse.py.")], [Say(SUMMARY)], [Say("ok")]])
    session = make_session(project, settings, script)
    await session.run("where is the parser?")
    seen = observed(session)
    await session.run("/compact")
    summary_request = script.requests[1]
    # The summarize turn, laid out as the user turn's requests (a prefix cache serves it): their instructions,
    # their tools switched off, the history as they send it, then the summary request.
    assert user_prompts(summary_request)[0] == user_prompts(script.requests[0])[0]
    assert script.tools[1] == script.tools[0] and script.infos[1].instructions == script.infos[0].instructions
    assert (script.infos[1].model_settings or {}).get("tool_choice") == "none"
    assert "where is the parser?" in all_text(summary_request)
    # It names the user messages kept word for word beside the summary, so it does not copy them out.
    assert user_prompts(summary_request)[-1].endswith('the user\'s messages that begin:\n- "where is the parser?"')
    # Observers see the compaction within the turn, never the summarize request or a SpecialTurnPersisted.
    kinds = [type(e) for e in seen]
    assert CompactionStarted in kinds and ContextCompacted in kinds and SpecialTurnPersisted not in kinds
    (done,) = [e for e in seen if isinstance(e, ContextCompacted)]
    assert (done.summary, done.kept_user_messages, done.fallback) == (SUMMARY, ("where is the parser?",), False)
    assert session.state.entries == [
        HistoryEntry.of("user", compaction.EARLIER_REQUEST + "where is the parser?"),
        HistoryEntry.of("summary", SUMMARY_PREFIX + SUMMARY + SUMMARY_END),
    ]
    await session.run("go on")
    assert SUMMARY in all_text(script.requests[2])


async def test_a_failing_summarize_turn_persists_the_fallback(project: Path, settings: Settings) -> None:
    down = ModelHTTPError(503, "test:builtin", {"message": "overloaded"})
    script = Script([[Say("Renamed greet in src/app.py.")], [Fail(down)]])
    session = make_session(project, settings, script)
    await session.run("rename greet to welcome")
    seen = observed(session)
    await session.run("/compact")
    (done,) = [e for e in seen if isinstance(e, ContextCompacted)]
    assert done.fallback and "rename greet to welcome" in done.summary
    assert [e.role for e in session.state.entries] == ["user", "summary"]
    assert session.state.entries[1] == HistoryEntry.of("summary", SUMMARY_PREFIX + done.summary + SUMMARY_END)


# -- title -------------------------------------------------------------------------------------------------


async def test_first_turn_gets_a_model_title_that_no_later_request_sees(project: Path, settings: Settings) -> None:
    script = Script([[Say("Looking at auth.py now.")], [Say("Done.")]], title=[Say('Title: "Fix the login bug."')])
    session = make_session(project, settings, script, auto_title=True)
    seen = observed(session)
    await session.run("fix the login bug in auth.py")
    await session.settle()
    assert seen[-1] == SessionTitled("Fix the login bug", "model")
    assert isinstance(seen[-2], TurnEnded)  # after the turn, never inside it
    (request,) = script.title_requests
    assert len(request) == 1 and request[0].instructions == prompt_text("title")  # type: ignore[union-attr]
    assert "fix the login bug in auth.py" in all_text(request) and "Looking at auth.py now." in all_text(request)
    await session.run("and add a test")
    await session.settle()
    assert len(script.title_requests) == 1  # only the first turn of a new session is titled
    assert [e for e in seen if isinstance(e, SessionTitled)] == [SessionTitled("Fix the login bug", "model")]
    assert "login bug\n" not in all_text(script.requests[1]) and "Fix the login bug" not in all_text(script.requests[1])
    assert all("Fix the login bug" not in e.text for e in session.state.entries)


@pytest.mark.parametrize(
    "answer",
    [[Fail(ModelHTTPError(500, "test:builtin", {"message": "down"}))], [Say("   \n ")]],
    ids=["model-fails", "empty-answer"],
)
async def test_title_falls_back_to_the_first_request(project: Path, settings: Settings, answer: list[object]) -> None:
    script = Script([[Say("ok")]], title=answer)  # type: ignore[arg-type]
    session = make_session(project, settings, script, auto_title=True)
    seen = observed(session)
    before = list(session.state.entries)
    await session.run("  please   rename\ngreet  ")
    await session.settle()
    assert seen[-1] == SessionTitled("please rename greet", "fallback")
    assert [e.role for e in session.state.entries] == ["user", "assistant"] and before == []


@pytest.mark.parametrize("title_answer", [[Say("Explain the settings")], [Fail(ValueError("down"))]])
async def test_an_attachment_names_the_session_by_its_name_never_its_contents(
    project: Path, settings: Settings, title_answer: list[object]
) -> None:
    script = Script([[Say("It holds the API settings.")]], title=title_answer)  # type: ignore[arg-type]
    session = make_session(project, settings, script, auto_title=True)
    seen = observed(session)
    secret = ResourceBlock("file:///p/secret.py", "API_KEY = 'abc123'\n")
    await session.run((TextBlock("explain this"), secret))
    await session.settle()
    (request,) = script.title_requests
    assert "explain this @secret.py" in all_text(request) and "abc123" not in all_text(request)
    expected = "Explain the settings" if isinstance(title_answer[0], Say) else "explain this @secret.py"
    assert seen[-1] == SessionTitled(expected, "model" if isinstance(title_answer[0], Say) else "fallback")


async def test_no_title_without_auto_title_or_for_a_restored_session(project: Path, settings: Settings) -> None:
    script = Script([[Say("one")], [Say("two")]])
    untitled = make_session(project, settings, script, auto_title=False)
    seen = observed(untitled)
    await untitled.run("first")
    await untitled.settle()
    restored = make_session(project, settings, script, auto_title=True)
    restored.restore(e for e in seen)
    restored_seen = observed(restored)
    await restored.run("second")
    await restored.settle()
    assert script.title_requests == []
    assert not [e for e in seen + restored_seen if isinstance(e, SessionTitled)]


async def test_stop_cancels_a_title_in_progress(project: Path, settings: Settings) -> None:
    script = Script([[Say("ok")]], title=[Until(asyncio.Event()), Say("Too late")])  # a title that never comes
    session = make_session(project, settings, script, auto_title=True)
    seen = observed(session)
    await session.run("name me")
    await asyncio.wait_for(session.stop(), 5)
    assert not [e for e in seen if isinstance(e, SessionTitled)]


@pytest.mark.parametrize(
    ("answer", "title"),
    [
        ('Title: "Fix the login bug."', "Fix the login bug"),
        ("## Add CSV export", "Add CSV export"),
        ("**Title:** Refactor parser", "Refactor parser"),
        ("\n\n  Refactor parser  \nbecause the user asked", "Refactor parser"),
        ("“Speed up the test suite”", "Speed up the test suite"),
        (
            "A very long title that goes on and on and on about many different things",
            "A very long title that goes on and on and on about many…",
        ),
        ("  \n ", ""),
    ],
)
def test_clean_title(answer: str, title: str) -> None:
    assert clean_title(answer) == title


def test_fallback_title_is_the_request_on_one_line() -> None:
    assert fallback_title("  fix\n the   bug ") == "fix the bug"
    long = fallback_title("word " * 40)
    assert len(long) == 80 and long.endswith("…")


def test_title_turn_is_ephemeral_and_bounded() -> None:
    config = title_turn("x " * 5_000, "reply")
    assert (config.turn_type, config.persistence, config.messages, config.tool_filter) == (
        "title",
        "ephemeral",
        (),
        NO_TOOLS,
    )
    assert len(config.prompt) < 5_000  # the request is cut to a bounded size
    assert config.fallback is not None and config.fallback() == fallback_title("x " * 5_000)


# -- greeting ----------------------------------------------------------------------------------------------


async def test_greeting_enters_the_history_alone(project: Path, settings: Settings) -> None:
    (project / "AGENTS.md").write_text("This is the widget factory.\n")
    script = Script([[Say("Hi! Ready to work on the widget factory.")], [Say("sure")]])
    session = make_session(project, settings, script)
    seen = observed(session)
    result = await session.execute_special_turn(greeting_turn())
    assert result.ok
    assert seen == [
        SpecialTurnPersisted(
            "greeting", "persist-result", (Interaction("assistant", "Hi! Ready to work on the widget factory."),)
        )
    ]
    assert session.state.entries == [HistoryEntry.of("assistant", "Hi! Ready to work on the widget factory.")]
    (request,) = script.requests[0:1]
    assert "widget factory" in (request[0].instructions or "")  # type: ignore[union-attr]  # the session's prompt
    assert script.tools[0] == []
    await session.run("hello")
    assert "Ready to work on the widget factory" in all_text(script.requests[1])
    assert prompt_text("greeting") not in all_text(script.requests[1])  # the greeting's request is not kept


def test_greeting_turn_persists_the_result_only() -> None:
    config = greeting_turn()
    assert (config.persistence, config.persistence_filter, config.instructions) == ("persist-result", DEFAULT, None)


# -- session options ---------------------------------------------------------------------------------------


async def test_after_max_tool_passes_the_model_answers_without_tools(project: Path, settings: Settings) -> None:
    (project / "a.txt").write_text("alpha\n")
    read = Call("read_file", {"path": "a.txt"}, "r")
    script = Script([[read], [Call("read_file", {"path": "a.txt"}, "r2")], [Say("Both reads say alpha.")]])
    session = make_session(project, settings, script, max_tool_passes=2)
    result = await session.run("read a.txt twice")
    assert result.stop_reason == "end_turn" and result.text == "Both reads say alpha."
    assert [sorted(t) for t in script.tools] == [sorted(TOOL_NAMES), sorted(TOOL_NAMES), []]
    assert TOOLS_SPENT_NOTE in (script.requests[2][-1].instructions or "")  # type: ignore[union-attr]
    assert TOOLS_SPENT_NOTE not in (script.requests[1][-1].instructions or "")  # type: ignore[union-attr]


async def test_run_tools_off_offers_no_tools(project: Path, settings: Settings) -> None:
    script = Script([[Say("no tools here")]])
    session = make_session(project, settings, script, run_tools=False)
    assert (await session.run("hi")).text == "no tools here"
    assert script.tools == [[]]


async def test_coalescing_options_shape_both_run_and_stream(project: Path, settings: Settings) -> None:
    chunks = [f"{i:02}" for i in range(60)]
    for drive in ("run", "stream"):
        script = Script([[Say(*chunks)]])
        # A window no test outlasts: how the deltas merge depends on the options alone, not the machine's speed.
        session = make_session(project, settings, script, merge_window=3600.0, max_chunk_chars=10)
        seen = observed(session)
        if drive == "run":
            await session.run("count")
        else:
            [e async for e in session.stream("count")]
        texts = [e.text for e in seen if isinstance(e, TextDelta)]
        # The first delta is never held; the rest merge up to 10 characters, the last ended by the next event.
        assert texts == ["00", *("".join(chunks[i : i + 5]) for i in range(1, 60, 5))]
        assert isinstance(seen[-1], TurnEnded) and isinstance(seen[-2], UsageUpdated)


async def test_a_cancelled_first_turn_is_not_titled_but_the_next_good_one_is(project: Path, settings: Settings) -> None:
    script = Script([[Say("thinking"), Until(asyncio.Event())], [Say("done")]])  # the first reply never ends
    session = make_session(project, settings, script, auto_title=True)
    seen = observed(session)
    replying = asyncio.Event()

    async def on_text(event: Event) -> None:
        if isinstance(event, TextDelta):
            replying.set()

    session.subscribe(on_text)
    first = asyncio.create_task(session.run("first try"))
    await asyncio.wait_for(replying.wait(), 5)
    session.cancel()
    assert (await asyncio.wait_for(first, deadline(5))).stop_reason == "cancelled"
    await session.settle()
    assert script.title_requests == []
    await session.run("second try")
    await session.settle()
    assert len(script.title_requests) == 1 and "second try" in all_text(script.title_requests[0])
    assert [e for e in seen if isinstance(e, SessionTitled)] == [SessionTitled("Scripted session title", "model")]


async def test_options_changed_between_turns_apply_to_the_next(project: Path, settings: Settings) -> None:
    script = Script([[Say("with tools")], [Say("without")]])
    session = make_session(project, settings, script)
    await session.run("one")
    session.options = SessionOptions(run_tools=False)
    await session.run("two")
    assert [sorted(t) for t in script.tools] == [sorted(TOOL_NAMES), []]


async def test_a_turn_failing_after_its_first_answer_still_counts_its_input(project: Path, settings: Settings) -> None:
    (project / "a.txt").write_text("alpha\n")
    down = ModelHTTPError(400, "test:builtin", {"message": "down"})
    script = Script([[Call("read_file", {"path": "a.txt"}, "r1")], [Fail(down)]])
    session = make_session(project, settings, script)
    result = await session.run("read a.txt")
    assert result.error is not None
    # The provider's count for the first request is kept, not lost with the turn (a new session starts at 0).
    assert session.state.reported_input_tokens > session.state.entries[-1].tokens


async def test_stop_during_the_last_events_of_a_first_turn_leaves_no_title_behind(
    project: Path, settings: Settings
) -> None:
    script = Script([[Say("ok")]])
    session = make_session(project, settings, script, auto_title=True)
    seen = observed(session)
    stopping: asyncio.Task[None] | None = None
    async for event in session.stream("first"):
        if isinstance(event, TurnEnded):
            stopping = asyncio.create_task(session.stop())  # closed while the turn's last events go out
    assert stopping is not None
    await stopping
    await session.settle()  # a title started after all would be over now, and seen
    assert not [e for e in seen if isinstance(e, SessionTitled)]


async def test_titles_can_use_a_model_of_their_own(project: Path, settings: Settings) -> None:
    script = Script([[Say("ok")]])
    asked: list[str] = []
    model = script.model()

    def factory(model_id: str) -> object:
        asked.append(model_id)
        return model

    session = open_session(settings, MODEL, project, approver=None, mode="yolo", model_factory=factory)  # type: ignore[arg-type]
    session.options = SessionOptions(auto_title=True, title_model="test:cheap")
    seen = observed(session)
    await session.run("name this")
    await session.settle()
    assert asked == [MODEL.id, "test:cheap"]
    assert seen[-1] == SessionTitled("Scripted session title", "model")
