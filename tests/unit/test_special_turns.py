"""Special turns: persistence strategies with filters, isolation, failures, parallel runs, restore."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelRequestPart,
    ModelResponsePart,
    SystemPromptPart,
    TextPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import FunctionModel

from codling.brain.events import Event, SpecialTurnPersisted, TextDelta, UsageUpdated
from codling.brain.factory import open_session
from codling.brain.interactions import (
    ALLOW_ALL,
    DEFAULT,
    KINDS,
    PRESERVE_SYSTEM_CONTEXT,
    Interaction,
    InteractionFilter,
)
from codling.brain.session import ConversationSession
from codling.brain.special_config import Persistence, SpecialTurnConfig
from codling.brain.state import SUMMARY_END, SUMMARY_PREFIX, HistoryEntry
from codling.config import Settings
from codling.errors import ConfigError, SpecialTurnError
from codling.llm.catalog import ModelInfo
from codling.store.header import SessionHeader
from codling.store.history import HistoryFile, HistoryRecorder, read_history
from codling.tools.specs import ALL_TOOLS, NO_TOOLS, ToolFilter
from tests.fakes.approver import ScriptedApprover
from tests.fakes.deadlines import deadline
from tests.fakes.scenarios import Call, Fail, Gate, Response, Say, Script, Think, Until, user_prompt

MODEL = ModelInfo("test:special", context_limit=100_000)


def last_prompt(messages: list[ModelMessage]) -> str:
    request = messages[-1]
    assert isinstance(request, ModelRequest)
    text = user_prompt(next(str(p.content) for p in reversed(request.parts) if isinstance(p, UserPromptPart)))
    return text.rsplit("\n\n", 1)[-1]  # user messages in a row reach the model as one; these prompts are one line


def answer_by_prompt(messages: list[ModelMessage]) -> Response:
    prompt = last_prompt(messages)
    if prompt == "fail":
        return [Fail(ModelHTTPError(500, "test:special", {"message": "down"}))]
    return [Say(f"RESULT {prompt}")]


class Answers:
    """A model that answers as ``answer_by_prompt`` does, but holds a prompt starting with "hold" until the test
    releases it: the order in which special turns get their answers is the test's, not the machine's.

    ``asked(prompt)`` waits until the model is holding that prompt. A config with ``accept=answers.took``
    records its answer in ``answered`` as it comes; ``answer(output)`` waits for one.
    """

    def __init__(self) -> None:
        self._gates: dict[str, Gate] = {}
        self.answered: list[str] = []
        self._took = asyncio.Event()

    def __call__(self, messages: list[ModelMessage]) -> Response:
        prompt = last_prompt(messages)
        if prompt.startswith("hold"):
            return [Until(self._gate(prompt)), Say(f"RESULT {prompt}")]
        return answer_by_prompt(messages)

    def _gate(self, prompt: str) -> Gate:
        return self._gates.setdefault(prompt, Gate())

    async def asked(self, prompt: str) -> None:
        await self._gate(prompt).arrival()

    def release(self, prompt: str) -> None:
        self._gate(prompt).set()

    def took(self, output: str) -> bool:
        """An ``accept`` check that takes every answer, noting it."""
        self.answered.append(output)
        self._took.set()
        return True

    async def answer(self, output: str) -> None:
        """Wait until the model has given ``output`` (a liveness deadline: a test fails, not hangs)."""
        async with asyncio.timeout(deadline(10)):
            while output not in self.answered:
                self._took.clear()
                await self._took.wait()


def session_with_history(project: Path, settings: Settings, script: Script) -> ConversationSession:
    session = open_session(settings, MODEL, project, approver=None, mode="yolo", model_factory=script.factory())
    session.state.add(HistoryEntry.of("user", "hi"))
    session.state.add(HistoryEntry.of("assistant", "hello"))
    return session


def recorded(session: ConversationSession, path: Path) -> HistoryFile:
    """Record ``session`` to ``path`` from now on (the caller closes the file)."""
    file = HistoryFile(path, "s1")
    file.write(SessionHeader("s1", session.state.cwd, MODEL.id, session.state.mode).record())
    session.subscribe(HistoryRecorder(file))
    return file


def history(session: ConversationSession) -> list[tuple[str, str]]:
    return [(e.role, e.text) for e in session.state.entries]


BEFORE = [("user", "hi"), ("assistant", "hello")]
BLOCK_ASSISTANT = InteractionFilter.of(block=("assistant",))

CASES = [
    ("ephemeral", DEFAULT, BEFORE),
    ("ephemeral", ALLOW_ALL, BEFORE),
    ("persist-result", DEFAULT, [*BEFORE, ("assistant", "RESULT ask")]),
    ("persist-result", PRESERVE_SYSTEM_CONTEXT, [*BEFORE, ("assistant", "RESULT ask")]),
    ("persist-result", ALLOW_ALL, [*BEFORE, ("assistant", "RESULT ask")]),
    ("persist-result", BLOCK_ASSISTANT, BEFORE),
    ("persist-all", DEFAULT, [*BEFORE, ("user", "ask"), ("assistant", "RESULT ask")]),
    ("persist-all", PRESERVE_SYSTEM_CONTEXT, [*BEFORE, ("user", "ask"), ("assistant", "RESULT ask")]),
    ("persist-all", ALLOW_ALL, [*BEFORE, ("user", "ask"), ("assistant", "RESULT ask")]),
    ("persist-all", BLOCK_ASSISTANT, [*BEFORE, ("user", "ask")]),
    ("replace-above", DEFAULT, []),  # conversation only: a summary does not pass
    ("replace-above", PRESERVE_SYSTEM_CONTEXT, [("summary", SUMMARY_PREFIX + "RESULT ask" + SUMMARY_END)]),
    ("replace-above", ALLOW_ALL, [("summary", SUMMARY_PREFIX + "RESULT ask" + SUMMARY_END)]),
]


@pytest.mark.parametrize(("persistence", "interaction_filter", "expected"), CASES)
async def test_each_strategy_with_each_filter(
    project: Path, settings: Settings, persistence: Persistence, interaction_filter: InteractionFilter, expected: list
) -> None:
    script = Script([], fallback=answer_by_prompt)
    session = session_with_history(project, settings, script)
    seen: list[Event] = []

    async def observer(event: Event) -> None:
        seen.append(event)

    session.subscribe(observer)
    config = SpecialTurnConfig(
        "ask",
        turn_type="probe",
        persistence=persistence,
        persistence_filter=interaction_filter,
    )
    result = await session.execute_special_turn(config)
    assert result.ok and result.output == "RESULT ask"
    assert history(session) == expected
    if persistence == "ephemeral":
        assert seen == []
    else:
        (event,) = seen
        assert isinstance(event, SpecialTurnPersisted)
        assert (event.turn_type, event.persistence) == ("probe", persistence)
    # The special turn read a copy of the history: the request held it, then the prompt.
    prompts = [str(p.content) for m in script.requests[0] for p in m.parts if isinstance(p, UserPromptPart)]
    assert prompts == ["hi", "ask"]


def test_filter_rules() -> None:
    assert all(InteractionFilter().allows(kind) for kind in KINDS)  # an empty allow list allows all
    only = InteractionFilter.of(allow=("user", "tool_call"), block=("tool_call",))
    assert only.allows("user") and not only.allows("tool_call") and not only.allows("assistant")  # block wins
    items = [Interaction("user", "a"), Interaction("thought", "b"), Interaction("assistant", "c")]
    assert DEFAULT.apply(items) == [items[0], items[2]]


async def test_observers_see_nothing_while_it_runs(project: Path, settings: Settings) -> None:
    answers = Answers()
    session = session_with_history(project, settings, Script([], fallback=answers))
    seen: list[Event] = []

    async def observer(event: Event) -> None:
        seen.append(event)

    session.subscribe(observer)
    config = SpecialTurnConfig("hold", persistence="persist-result")
    task = asyncio.create_task(session.execute_special_turn(config))
    await answers.asked("hold")  # running: the model is answering
    assert seen == [] and history(session) == BEFORE
    answers.release("hold")
    await task
    assert [type(e) for e in seen] == [SpecialTurnPersisted]


@pytest.mark.parametrize(("prompt", "timeout", "status"), [("fail", 5.0, "error"), ("hold", 0.1, "timeout")])
async def test_failure_and_timeout_leave_the_history_byte_for_byte_unchanged(
    project: Path, settings: Settings, tmp_path: Path, prompt: str, timeout: float, status: str
) -> None:
    script = Script([], fallback=Answers())  # "hold" is never released
    session = session_with_history(project, settings, script)
    path = tmp_path / "history.jsonl"
    file = recorded(session, path)
    on_disk = path.read_bytes()
    entries = list(session.state.entries)
    result = await session.execute_special_turn(
        SpecialTurnConfig(prompt, persistence="replace-above", persistence_filter=ALLOW_ALL, timeout=timeout)
    )
    file.close()
    assert result.status == status and result.error
    assert session.state.entries == entries
    assert path.read_bytes() == on_disk


async def test_parallel_special_turns_persist_in_start_order(project: Path, settings: Settings) -> None:
    answers = Answers()
    session = session_with_history(project, settings, Script([], fallback=answers))
    prompts = ("hold first", "hold second", "fast")
    turns = [
        asyncio.create_task(
            session.execute_special_turn(SpecialTurnConfig(p, persistence="persist-result", accept=answers.took))
        )
        for p in prompts
    ]
    await answers.answer("RESULT fast")
    answers.release("hold second")
    await answers.answer("RESULT hold second")
    answers.release("hold first")
    results = await asyncio.wait_for(asyncio.gather(*turns), 5)
    assert all(r.ok for r in results)
    assert answers.answered == ["RESULT fast", "RESULT hold second", "RESULT hold first"]  # answered last first
    assert history(session)[2:] == [
        ("assistant", "RESULT hold first"),
        ("assistant", "RESULT hold second"),
        ("assistant", "RESULT fast"),
    ]


async def test_overrides_and_restore(project: Path, settings: Settings, tmp_path: Path) -> None:
    script = Script([], fallback=answer_by_prompt)
    session = session_with_history(project, settings, script)
    path = tmp_path / "history.jsonl"
    file = recorded(session, path)
    config = SpecialTurnConfig(
        "greet",
        messages=[Interaction("user", "only this")],
        instructions="Be brief.",
        persistence="persist-all",
    )
    await session.execute_special_turn(config)
    file.close()
    request = script.requests[0]
    prompts = [str(p.content) for m in request for p in m.parts if isinstance(p, UserPromptPart)]
    assert prompts == ["only this\n\ngreet"]  # the override, not the session's history (one user message)
    last = request[-1]
    assert isinstance(last, ModelRequest) and last.instructions == "Be brief."
    restored = open_session(settings, MODEL, project, approver=None, model_factory=script.factory())
    restored.restore(read_history(path).events)
    assert history(restored) == [("user", "greet"), ("assistant", "RESULT greet")]


async def test_a_cancelled_special_turn_does_not_hold_up_later_ones(project: Path, settings: Settings) -> None:
    answers = Answers()
    session = session_with_history(project, settings, Script([], fallback=answers))
    stuck = asyncio.create_task(session.execute_special_turn(SpecialTurnConfig("hold", persistence="persist-result")))
    await answers.asked("hold")  # never released
    later = asyncio.create_task(
        session.execute_special_turn(SpecialTurnConfig("fast", persistence="persist-result", accept=answers.took))
    )
    await answers.answer("RESULT fast")
    assert not later.done()  # answered, and waiting for the turn started before it
    stuck.cancel()
    result = await asyncio.wait_for(later, deadline(5))
    assert result.ok
    assert history(session)[2:] == [("assistant", "RESULT fast")]


@pytest.mark.parametrize("streaming", [False, True], ids=["non-streaming", "streaming"])
async def test_tool_model_and_streaming_overrides(
    project: Path, settings: Settings, tmp_path: Path, streaming: bool
) -> None:
    (project / "a.txt").write_text("alpha\n")
    script = Script([[Call("read_file", {"path": "a.txt"}, "r1")], [Say("a.txt says alpha")]])
    asked: list[str] = []

    def factory(model_id: str) -> FunctionModel:
        asked.append(model_id)
        return script.model()

    session = open_session(settings, MODEL, project, approver=None, mode="yolo", model_factory=factory)
    config = SpecialTurnConfig(
        "what does a.txt say?",
        model="test:other",
        run_tools=True,
        tool_filter=ToolFilter.only("read_file", "list_files"),
        force_non_streaming=not streaming,
    )
    result = await session.execute_special_turn(config)
    assert (result.status, result.output) == ("ok", "a.txt says alpha")
    assert asked == ["test:other"]  # the override; the session's own model was never built
    assert [sorted(tools) for tools in script.tools] == [["list_files", "read_file"]] * 2
    tool_result = script.requests[1][-1]
    assert isinstance(tool_result, ModelRequest)
    returned = tool_result.parts[0]
    assert isinstance(returned, ToolReturnPart) and "alpha" in str(returned.content)
    assert session.state.entries == []  # ephemeral


@pytest.mark.parametrize(
    ("tool_filter", "run_tools", "offered"),
    [
        (
            ToolFilter.without("run_command", "write_file"),
            True,
            ["apply_patch", "edit_file", "list_files", "read_file", "search", "update_plan"],
        ),
        (ALL_TOOLS, False, []),
        (NO_TOOLS, True, []),
        (ToolFilter.only("search"), True, ["search"]),
    ],
)
async def test_tool_filters(
    project: Path, settings: Settings, tool_filter: ToolFilter, run_tools: bool, offered: list[str]
) -> None:
    script = Script([[Say("ok")]])
    session = open_session(settings, MODEL, project, approver=None, mode="yolo", model_factory=script.factory())
    await session.execute_special_turn(SpecialTurnConfig("hi", tool_filter=tool_filter, run_tools=run_tools))
    assert sorted(script.tools[0]) == offered


WORKED = [
    Interaction("user", "what does a.txt say?"),
    Interaction("thought", "I should read it."),
    Interaction("tool_call", "Read a.txt"),
    Interaction("tool_result", "- Read a.txt (done):\n    Read a.txt: line 1 of 1\n         1\talpha"),
    Interaction("assistant", "It says alpha."),
]


@pytest.mark.parametrize("streaming", [False, True], ids=["non-streaming", "streaming"])
@pytest.mark.parametrize(
    ("interaction_filter", "kinds"),
    [
        (DEFAULT, ("user", "assistant")),
        (PRESERVE_SYSTEM_CONTEXT, ("user", "assistant")),
        (ALLOW_ALL, ("user", "thought", "tool_call", "tool_result", "assistant")),
        (InteractionFilter.of(block=("thought",)), ("user", "tool_call", "tool_result", "assistant")),
    ],
)
async def test_persist_all_keeps_what_the_filter_allows_of_a_turn_that_thinks_and_uses_tools(
    project: Path,
    settings: Settings,
    tmp_path: Path,
    interaction_filter: InteractionFilter,
    kinds: tuple,
    streaming: bool,
) -> None:
    (project / "a.txt").write_text("alpha\n")
    script = Script([[Think("I should read it."), Call("read_file", {"path": "a.txt"}, "r1")], [Say("It says alpha.")]])
    session = open_session(settings, MODEL, project, approver=None, mode="ask", model_factory=script.factory())
    path = tmp_path / "history.jsonl"
    file = recorded(session, path)
    config = SpecialTurnConfig(
        "what does a.txt say?",
        run_tools=True,
        tool_filter=ToolFilter.only("read_file"),
        force_non_streaming=not streaming,
        persistence="persist-all",
        persistence_filter=interaction_filter,
    )
    result = await session.execute_special_turn(config)
    file.close()
    assert result.output == "It says alpha."
    assert result.interactions == tuple(WORKED[1:])  # everything the model did, before filtering
    assert result.persisted == tuple(i for i in WORKED if i.kind in kinds)
    # The model's history keeps text only: thoughts and call titles stay in the record; a tool result joins
    # the reply as its plain-text summary, as a user turn's tool calls do.
    reply = "It says alpha."
    if "tool_result" in kinds:
        reply = WORKED[3].text + "\n\n" + reply
    assert history(session) == [("user", "what does a.txt say?"), ("assistant", reply)]
    restored = open_session(settings, MODEL, project, approver=None, model_factory=script.factory())
    restored.restore(read_history(path).events)
    assert history(restored) == history(session)


async def test_a_special_turn_asks_nobody_so_gated_tools_need_a_mode_that_allows_them(
    project: Path, settings: Settings
) -> None:
    script = Script([[Call("write_file", {"path": "new.txt", "content": "x"}, "w1")], [Say("could not write")]] * 2)
    approver = ScriptedApprover("allow_once")
    session = open_session(settings, MODEL, project, approver=approver, mode="ask", model_factory=script.factory())
    config = SpecialTurnConfig("write new.txt", run_tools=True, tool_filter=ALL_TOOLS, timeout=deadline(5))
    result = await session.execute_special_turn(config)
    assert result.ok and approver.asked == []  # the user never saw this call, so was never asked about it
    (_call, refusal, _answer) = result.interactions
    assert refusal.kind == "tool_result" and "no one can be asked" in refusal.text
    assert not (project / "new.txt").exists()
    session.set_mode("yolo")
    await session.execute_special_turn(config)
    assert (project / "new.txt").read_text() == "x"


async def test_a_cancelled_turn_in_the_middle_keeps_the_start_order(project: Path, settings: Settings) -> None:
    answers = Answers()
    session = session_with_history(project, settings, Script([], fallback=answers))
    first = asyncio.create_task(
        session.execute_special_turn(SpecialTurnConfig("hold first", persistence="persist-result"))
    )
    await answers.asked("hold first")
    middle = asyncio.create_task(
        session.execute_special_turn(SpecialTurnConfig("hold middle", persistence="persist-result"))
    )
    await answers.asked("hold middle")  # never released
    last = asyncio.create_task(
        session.execute_special_turn(SpecialTurnConfig("fast", persistence="persist-result", accept=answers.took))
    )
    await answers.answer("RESULT fast")
    middle.cancel()
    answers.release("hold first")
    await asyncio.wait_for(asyncio.gather(first, last), 5)
    assert history(session)[2:] == [("assistant", "RESULT hold first"), ("assistant", "RESULT fast")]


async def test_a_special_turn_persists_after_the_user_turn_in_progress_and_restores_the_same(
    project: Path, settings: Settings, tmp_path: Path
) -> None:
    release = asyncio.Event()
    script = Script([[Say("working"), Until(release), Say(" done")]], fallback=answer_by_prompt)
    session = session_with_history(project, settings, script)
    path = tmp_path / "history.jsonl"
    file = recorded(session, path)

    replying = asyncio.Event()

    async def slow_at_the_end(event: Event) -> None:
        if isinstance(event, TextDelta):
            replying.set()
        if isinstance(event, UsageUpdated):  # the turn's entries are in place; its end is not recorded yet
            await asyncio.sleep(0.1)

    session.subscribe(slow_at_the_end)
    turn = asyncio.create_task(session.run("do it"))
    await asyncio.wait_for(replying.wait(), 5)
    answers = Answers()
    special = asyncio.create_task(
        session.execute_special_turn(SpecialTurnConfig("note", persistence="persist-all", accept=answers.took))
    )
    await answers.answer("RESULT note")
    assert not special.done() and history(session) == BEFORE  # answered, but waiting for the turn to end
    release.set()
    await asyncio.wait_for(asyncio.gather(turn, special), 5)
    await session.settle()  # the title of the first turn
    file.close()
    expected = [
        *BEFORE,
        ("user", "do it"),
        ("assistant", "working done"),
        ("user", "note"),
        ("assistant", "RESULT note"),
    ]
    assert history(session) == expected
    kinds = [json.loads(line)["kind"] for line in path.read_text().splitlines()]
    # Recorded after the turn, even with an observer lagging (and before the title, made after the turn).
    assert kinds[kinds.index("turn_end") + 1] == "special"
    restored = open_session(settings, MODEL, project, approver=None, model_factory=script.factory())
    restored.restore(read_history(path).events)
    assert history(restored) == expected[2:]


async def test_what_enters_while_a_summary_is_written_stays_after_it(
    project: Path, settings: Settings, tmp_path: Path
) -> None:
    answers = Answers()
    script = Script([], fallback=answers)
    session = open_session(settings, MODEL, project, approver=None, model_factory=script.factory())
    path = tmp_path / "history.jsonl"
    file = recorded(session, path)
    await session.run("first")  # recorded, so the restored session starts from the same history
    summary = SpecialTurnConfig("hold summary", persistence="replace-above", persistence_filter=ALLOW_ALL)
    summarizing = asyncio.create_task(session.execute_special_turn(summary))
    await answers.asked("hold summary")  # it read the history, and the summary is being written
    await session.run("meanwhile")  # a whole turn while the summary is written: the summary never saw it
    answers.release("hold summary")
    result = await summarizing
    await session.settle()  # the title of the first turn
    file.close()
    assert result.ok
    expected = [
        ("summary", SUMMARY_PREFIX + "RESULT hold summary" + SUMMARY_END),
        ("user", "meanwhile"),
        ("assistant", "RESULT meanwhile"),
    ]
    assert history(session) == expected
    restored = open_session(settings, MODEL, project, approver=None, model_factory=script.factory())
    restored.restore(read_history(path).events)
    assert history(restored) == expected


async def test_a_summary_of_a_history_replaced_meanwhile_does_not_apply(project: Path, settings: Settings) -> None:
    answers = Answers()
    session = session_with_history(project, settings, Script([], fallback=answers))
    stale = asyncio.create_task(
        session.execute_special_turn(
            SpecialTurnConfig("hold summary", persistence="replace-above", persistence_filter=ALLOW_ALL)
        )
    )
    await answers.asked("hold summary")
    session.state.replace_history([HistoryEntry.of("user", "compacted elsewhere")])
    answers.release("hold summary")
    result = await stale
    assert result.status == "error" and "replaced while this special turn ran" in (result.error or "")
    assert history(session) == [("user", "compacted elsewhere")]


def test_a_config_that_cannot_be_recorded_or_sent_is_refused_when_built() -> None:
    with pytest.raises(SpecialTurnError, match="must be JSON"):
        SpecialTurnConfig("x", metadata={"when": object()})
    with pytest.raises(SpecialTurnError, match="kind memo"):
        SpecialTurnConfig("x", messages=[Interaction("memo", "?")])  # type: ignore[arg-type]
    # A typo in a filter would silently take everything away: it is refused when the filter is built.
    with pytest.raises(ConfigError, match="unknown kinds: asistant; known: system, context"):
        InteractionFilter.of(allow=("user", "asistant"))
    with pytest.raises(ConfigError, match="unknown tools: read; known: read_file, list_files"):
        ToolFilter.only("read", "search")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="unknown tools: run"):
        ToolFilter.without("run")  # type: ignore[arg-type]


async def test_override_messages_reach_the_model_as_text(project: Path, settings: Settings) -> None:
    script = Script([[Say("ok")]])
    session = open_session(settings, MODEL, project, approver=None, model_factory=script.factory())
    messages = [
        Interaction("system", "SYS-NOTE"),
        Interaction("context", "CTX-NOTE"),
        Interaction("user", "question"),
        Interaction("thought", "not sent"),
        Interaction("tool_call", "Read a.txt"),
        Interaction("tool_result", "- Read a.txt (done)"),
        Interaction("assistant", "answer"),
    ]
    await session.execute_special_turn(SpecialTurnConfig("go on", messages=messages))
    sent = [(type(p).__name__, sent_text(p)) for m in script.requests[0] for p in m.parts]
    assert sent == [
        ("SystemPromptPart", "SYS-NOTE"),
        ("UserPromptPart", "CTX-NOTE"),
        ("UserPromptPart", "question"),
        ("TextPart", "- Read a.txt (done)"),
        ("TextPart", "answer"),
        ("UserPromptPart", "go on"),
    ]


def sent_text(part: ModelRequestPart | ModelResponsePart) -> str:
    """What a part of a request carries: only prompts and text are sent here."""
    assert isinstance(part, SystemPromptPart | UserPromptPart | TextPart), part
    return str(part.content)


def _raises(_: str) -> str:
    raise RuntimeError("broken check")


@pytest.mark.parametrize(
    ("accept", "fallback", "error"),
    [(_raises, None, "broken check"), (lambda _: False, lambda: _raises(""), "the fallback failed too")],
    ids=["accept-raises", "fallback-raises"],
)
async def test_a_failing_check_or_fallback_is_an_error_result(
    project: Path,
    settings: Settings,
    accept: Callable[[str], bool],
    fallback: Callable[[], str] | None,
    error: str,
) -> None:
    script = Script([], fallback=answer_by_prompt)
    session = session_with_history(project, settings, script)
    config = SpecialTurnConfig("ask", persistence="persist-result", accept=accept, fallback=fallback)
    result = await session.execute_special_turn(config)
    assert result.status == "error" and error in (result.error or "") and history(session) == BEFORE


async def test_a_special_turn_cancelled_while_it_waits_keeps_its_place_in_the_order(
    project: Path, settings: Settings
) -> None:
    answers = Answers()
    session = session_with_history(project, settings, Script([], fallback=answers))
    first = asyncio.create_task(
        session.execute_special_turn(SpecialTurnConfig("hold first", persistence="persist-result"))
    )
    waiting = asyncio.create_task(
        session.execute_special_turn(SpecialTurnConfig("quick", persistence="persist-result", accept=answers.took))
    )
    last = asyncio.create_task(session.execute_special_turn(SpecialTurnConfig("fast", persistence="persist-result")))
    await answers.answer("RESULT quick")  # "quick" answered and waits for "hold first"
    waiting.cancel()
    answers.release("hold first")
    await asyncio.wait_for(asyncio.gather(first, last), 5)
    assert history(session)[2:] == [("assistant", "RESULT hold first"), ("assistant", "RESULT fast")]


async def test_a_mode_change_reaches_a_special_turn_already_running(project: Path, settings: Settings) -> None:
    gate = Gate()
    script = Script([[Until(gate), Call("write_file", {"path": "x.txt", "content": "x"}, "w1")], [Say("done")]])
    session = open_session(settings, MODEL, project, approver=None, mode="yolo", model_factory=script.factory())
    config = SpecialTurnConfig("write x.txt", run_tools=True, tool_filter=ToolFilter.only("write_file"))
    running = asyncio.create_task(session.execute_special_turn(config))
    await gate.arrival()  # running: the model is answering
    session.set_mode("read-only")
    gate.set()
    result = await asyncio.wait_for(running, deadline(5))
    assert "read-only mode" in result.interactions[1].text and not (project / "x.txt").exists()


async def test_awaiting_a_persisting_special_turn_inside_a_turn_is_refused_not_a_deadlock(
    project: Path, settings: Settings
) -> None:
    script = Script([], fallback=answer_by_prompt)
    session = session_with_history(project, settings, script)
    errors: list[str] = []

    async def impatient(event: Event) -> None:
        if isinstance(event, TextDelta):
            try:
                await session.execute_special_turn(SpecialTurnConfig("note", persistence="persist-result"))
            except SpecialTurnError as e:
                errors.append(str(e))
            # Ephemeral turns persist nothing, so they may be awaited anywhere.
            assert (await session.execute_special_turn(SpecialTurnConfig("check"))).ok

    session.subscribe(impatient)
    result = await asyncio.wait_for(session.run("hello"), 5)
    await session.settle()  # the title
    assert result.text == "RESULT hello"
    assert errors and "start_background" in errors[0]
