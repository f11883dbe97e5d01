"""Every request of a turn fits the window: tool results give way to their summaries, the history is compacted
between requests when that is not enough, and max_tokens is the room the window has left."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryFeedbackPart,
    RetryInfo,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from codling.brain.context.budget import Budget
from codling.brain.context.engine import fit_prompt
from codling.brain.context.layout import CONTEXT_CLOSE, CONTEXT_OPEN
from codling.brain.context.requests import SUMMARISED, TokenCounter, TurnRequests, summarised, turn_start
from codling.brain.events import ContextCompacted, ContextWarning, TextDelta, ToolCallFinished, TurnFailed
from codling.brain.factory import open_session
from codling.brain.session import ConversationSession
from codling.config import Settings
from codling.llm.catalog import ModelInfo
from codling.llm.tokens import count_tokens
from codling.tools.base import ToolOutput, ToolReport
from tests.fakes.scenarios import Call, Fail, Response, Say, Script

WINDOW = Budget(window=8_000, max_output=1_000, threshold=0.7)
BIG = "\n".join(f"line {i}: " + "data " * 12 for i in range(400))  # ~6,000 tokens


def result(call_id: str, text: str, summary: str) -> ToolReturnPart:
    report = ToolReport(ToolOutput(text=text, summary=summary))
    return ToolReturnPart("read_file", text, tool_call_id=call_id, metadata=report)


def turn(*results: ToolReturnPart, history: int = 0) -> list[ModelMessage]:
    messages: list[ModelMessage] = []
    for i in range(history):
        messages += [ModelRequest(parts=[UserPromptPart(f"old {i}")]), ModelResponse(parts=[TextPart("ok")])]
    messages.append(ModelRequest(parts=[UserPromptPart("read them")]))
    for r in results:
        messages.append(ModelResponse(parts=[ToolCallPart("read_file", {"path": "x"}, tool_call_id=r.tool_call_id)]))
        messages.append(ModelRequest(parts=[r]))
    return messages


async def no_compaction() -> tuple[list[ModelMessage], str] | None:
    raise AssertionError("the history should not need compacting")


def contents(messages: list[ModelMessage]) -> list[str]:
    return [p.content for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]  # type: ignore[misc]


async def test_a_request_that_fits_goes_as_it_is_past_the_compaction_point() -> None:
    small = "\n".join(f"line {i}" for i in range(300))  # ~1,200 tokens each
    messages = turn(*(result(f"c{i}", f"{i}:{small}", f"summary {i}") for i in range(4)))
    requests = TurnRequests(WINDOW, lambda: 1_000, no_compaction)
    assert WINDOW.compact_at - 1_000 < requests.counter.messages(messages) <= WINDOW.input_limit - 1_000
    assert await requests.fit(messages, 1_000) is messages  # nothing the model would read is squashed


async def test_older_results_of_the_turn_give_way_to_their_summaries_first() -> None:
    small = "\n".join(f"line {i}" for i in range(300))  # ~1,200 tokens each
    messages = turn(*(result(f"c{i}", f"{i}:{small}", f"summary {i}") for i in range(5)))
    requests = TurnRequests(WINDOW, lambda: 1_000, no_compaction)
    fitted = await requests.fit(messages, 1_000)
    assert contents(fitted) == [SUMMARISED + "summary 0", f"1:{small}", f"2:{small}", f"3:{small}", f"4:{small}"]
    assert requests.counter.messages(fitted) <= WINDOW.input_limit - 1_000
    assert await requests.fit(fitted, 1_000) is fitted  # within budget now: nothing more happens


async def test_history_that_compaction_can_fold_goes_before_a_result_the_model_has_not_read() -> None:
    # The played model's case: old turns' text in the history, a fresh read over the limit. The history is
    # compacted; the read the model asked for arrives whole.
    history: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart("first task")]),
        ModelResponse(parts=[TextPart("old notes " * 1_500)]),
    ]
    fresh = "\n".join(f"line {i}" for i in range(700))  # ~2,800 tokens, never read before
    messages = [*history, *turn(result("a", fresh, "a: 700 lines"))]
    calls: list[int] = []

    async def compact() -> tuple[list[ModelMessage], str]:
        calls.append(1)
        return [ModelRequest(parts=[UserPromptPart("[Summary] first task done")])], ""

    requests = TurnRequests(WINDOW, lambda: 1_000, compact)
    assert requests.counter.messages(messages) > WINDOW.input_limit - 1_000
    fitted = await requests.fit(messages, 1_000)
    assert calls == [1]
    assert contents(fitted) == [fresh]
    assert fitted[1:] == messages[2:]


async def test_the_newest_result_goes_too_when_it_alone_is_too_big() -> None:
    messages = turn(result("a", "short", "a read"), result("b", BIG, "b: 400 lines"))
    fitted = await TurnRequests(WINDOW, lambda: 1_000, no_compaction).fit(messages, 1_000)
    assert contents(fitted) == ["short", SUMMARISED + "b: 400 lines"]


async def test_the_history_is_compacted_between_requests_when_the_turn_cannot_give_more() -> None:
    history: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart("kept")]),
        ModelResponse(parts=[TextPart("old " * 5_000)]),
    ]
    messages = [*history, *turn(result("a", "x" * 50, "a"))]
    calls: list[int] = []

    # The turn's prompt carried a block saying only what the history's blocks did not: once they are
    # compacted away, it says it all (the block the session gives), before the same prompt.
    prompt = UserPromptPart(f"{CONTEXT_OPEN}\nnew pin\n{CONTEXT_CLOSE}\n\nread them")
    messages[2] = ModelRequest(parts=[prompt])
    whole = f"{CONTEXT_OPEN}\nevery pin\n{CONTEXT_CLOSE}"

    async def compact() -> tuple[list[ModelMessage], str]:
        calls.append(1)
        return [ModelRequest(parts=[UserPromptPart("[Summary] short")])], whole

    fitted = await TurnRequests(WINDOW, lambda: 3_000, compact).fit(messages, 3_000)
    assert calls == [1]
    summary = fitted[0].parts[0]
    assert isinstance(summary, UserPromptPart) and summary.content == "[Summary] short"
    assert fitted[1] == ModelRequest(parts=[replace(prompt, content=f"{whole}\n\nread them")])
    assert fitted[2:] == messages[3:]  # the turn's own messages stay as they were
    assert turn_start(fitted) == 1


def test_max_tokens_is_the_catalogs_output_never_more_than_the_room_left() -> None:
    budget = Budget(window=8_000, max_output=1_000, threshold=0.7)
    assert budget.answer_room(1_000) == 1_000
    assert budget.answer_room(7_000) == 8_000 - 7_000 - 400
    assert budget.answer_room(7_900) == 256  # never below a usable answer: the request is shrunk before that
    assert Budget(window=4_000, max_output=1_000, threshold=0.7).input_limit == 4_000 - 1_000 - 200
    # A summary is never asked for more than the catalog's output: a 200k window with a 1,000-token output.
    assert Budget(window=200_000, max_output=1_000, threshold=0.7).summary == 1_000
    assert Budget(window=8_000, max_output=1_000, threshold=0.7).fallback == 800


def test_counting_each_part_once() -> None:
    counter = TokenCounter()
    part = UserPromptPart("hello world")
    message = ModelRequest(parts=[part])
    # As a chat API carries it: the JSON around the message, the text as a quoted JSON string.
    assert counter.message(message) == counter.message(message) == 8 + count_tokens('"hello world"')
    assert list(counter._counts) == [id(part)]


def test_feedback_asking_the_model_to_retry_counts_as_the_message_it_becomes() -> None:
    # pydantic-ai's feedback on an unusable reply reaches the model as a message of its own.
    counter = TokenCounter()
    feedback = RetryFeedbackPart("Not valid: " + "the reply lacked a title. " * 40, retry=RetryInfo("model_retry"))
    shown = counter.message(ModelRequest(parts=[UserPromptPart(feedback.model_response())]))
    assert counter.message(ModelRequest(parts=[feedback])) >= shown > 200  # its own message: never fewer


def test_a_sessions_parts_are_counted_once_across_turns_and_forgotten_once_dropped() -> None:
    counted: list[str] = []

    def count(part: Any) -> int:  # TokenCounter.count takes any part
        counted.append(part.content)
        return 5

    counter = TokenCounter(count=count)
    old, new = UserPromptPart("old"), UserPromptPart("new")
    for turn_messages in ([old], [old, new], [new], [old]):  # the third turn compacted "old" away
        counter.next_turn()
        assert counter.messages([ModelRequest(parts=[p]) for p in turn_messages]) == 13 * len(turn_messages)
    assert counted == ["old", "new", "old"]


async def test_every_turn_of_a_session_shares_one_counter(project: Path, settings: Settings) -> None:
    session = session_for(Script([]), project, settings, ModelInfo("test:m", context_limit=32_000))
    first, second = session.context.requests(no_compaction), session.context.requests(no_compaction)
    assert first.counter is second.counter


# --- through a session -------------------------------------------------------------------------------------


def session_for(script: Script, project: Path, settings: Settings, model: ModelInfo) -> ConversationSession:
    return open_session(settings, model, project, approver=None, mode="yolo", model_factory=script.factory())


def request_tokens(messages: list[ModelMessage]) -> int:
    return TokenCounter().messages(messages)


async def test_a_turn_reading_big_files_stays_within_the_window(project: Path, settings: Settings) -> None:
    model = ModelInfo("test:small", context_limit=8_000, max_output_tokens=1_000)
    for i in range(4):
        (project / f"big{i}.txt").write_text("\n".join(f"{i}.{n} " + "word " * 10 for n in range(150)))
    reads: list[Response] = [[Call("read_file", {"path": f"big{i}.txt"}, f"r{i}")] for i in range(4)]
    script = Script([*reads, [Say("Read them all.")]])
    session = session_for(script, project, settings, model)
    events = [e async for e in session.stream("Read the four big files.")]
    finished = [e for e in events if isinstance(e, ToolCallFinished)]
    assert [e.status for e in finished] == ["completed"] * 4
    budget = session.context.budget
    fixed = session.context.fixed_tokens()
    assert all(fixed + request_tokens(r) <= budget.input_limit for r in script.requests)
    last = script.requests[-1]
    assert any(
        isinstance(p, ToolReturnPart) and isinstance(p.content, str) and p.content.startswith(SUMMARISED)
        for m in last
        for p in m.parts
    )


async def test_a_window_too_small_for_the_overhead_is_said_once(project: Path, settings: Settings) -> None:
    tiny = ModelInfo("test:tiny", context_limit=2_500, max_output_tokens=300)
    script = Script([[Say("one")], [Say("two")]])
    session = session_for(script, project, settings, tiny)
    events = [e for prompt in ("first", "second") async for e in session.stream(prompt)]
    warnings = [e for e in events if isinstance(e, ContextWarning)]
    assert len(warnings) == 1 and "window (2,500 tokens) is small" in warnings[0].message
    # Compacting would leave about what there is, so it is not done every turn.
    assert [e for e in events if isinstance(e, ContextCompacted)] == []


async def test_a_small_window_gets_the_lean_tool_set(project: Path, settings: Settings) -> None:
    offered = {}
    for limit in (8_000, 32_000):
        script = Script([[Say("hi")]])
        session = session_for(script, project, settings, ModelInfo("test:m", context_limit=limit))
        await session.run("hello")
        offered[limit] = script.tools[0]
        full = session.context.tool_tokens()
        assert session.context.fixed_tokens() == session.context.system_tokens() + full
    assert set(offered[32_000]) - set(offered[8_000]) == {"delegate", "update_plan"}
    lean = open_session(settings, ModelInfo("test:m", context_limit=8_000), project, approver=None)
    wide = open_session(settings, ModelInfo("test:m", context_limit=32_000), project, approver=None)
    assert lean.context.tool_tokens() < wide.context.tool_tokens() * 0.6


async def test_a_window_too_small_leaves_the_oldest_history_out_of_the_request_not_the_history() -> None:
    history: list[ModelMessage] = [ModelRequest(parts=[UserPromptPart("the task")])]
    for i in range(6):
        history += [
            ModelResponse(parts=[TextPart(f"reply {i} " + "x " * 300)]),
            ModelRequest(parts=[UserPromptPart(f"u{i}")]),
        ]
    messages = [*history, *turn(result("a", "y" * 40, "a"))]
    tiny = Budget(window=4_000, max_output=1_000, threshold=0.7)  # 2,800 a request; 1,600 of them fixed

    async def nothing_to_compact() -> tuple[list[ModelMessage], str] | None:
        return None

    fitted = await TurnRequests(tiny, lambda: 1_600, nothing_to_compact).fit(messages, 1_600)
    assert TokenCounter().messages(fitted) <= tiny.input_limit - 1_600
    assert fitted[0] == messages[0]  # the first request stays
    assert fitted[-3:] == messages[-3:]  # the turn's own messages stay
    assert len(fitted) < len(messages)


async def test_a_prompt_far_larger_than_the_window_is_cut_and_the_user_told(project: Path, settings: Settings) -> None:
    model = ModelInfo("test:small", context_limit=8_000, max_output_tokens=1_000)
    script = Script([[Say("Looked at both ends.")]])
    session = session_for(script, project, settings, model)
    pasted = "HEAD-MARKER\n" + BIG * 12 + "\nTAIL-MARKER"  # ~9× the window

    events = [e async for e in session.stream(pasted)]

    (warning,) = [e for e in events if isinstance(e, ContextWarning)]
    budget = session.context.budget
    assert warning.message == (
        f"Your message is about {count_tokens(pasted):,} tokens, more than the {budget.prompt:,} one message may "
        "take of test:small's 8,000-token window: the model gets its first and last parts, with a note of the cut. "
        "Attach a smaller part, or name the file so the model can read what it needs."
    )
    (request,) = script.requests
    sent = [p.content for m in request for p in m.parts if isinstance(p, UserPromptPart)][-1]
    assert isinstance(sent, str) and "HEAD-MARKER" in sent and "TAIL-MARKER" in sent
    assert "tokens of this message were cut to fit the model's window" in sent
    assert session.context.fixed_tokens() + request_tokens(request) <= budget.input_limit


async def test_a_prompt_that_fits_is_sent_whole_without_a_warning(project: Path, settings: Settings) -> None:
    script = Script([[Say("ok")]])
    session = session_for(script, project, settings, ModelInfo("test:m", context_limit=32_000))
    events = [e async for e in session.stream("short and sweet " * 200)]
    assert not [e for e in events if isinstance(e, ContextWarning)]


# --- the pieces ------------------------------------------------------------------------------------------


def test_a_history_with_no_user_prompt_starts_its_turn_at_the_beginning() -> None:
    assert turn_start([ModelResponse(parts=[TextPart("hello")]), ModelRequest(parts=[result("a", "x", "a")])]) == 0


def test_a_result_whose_tool_wrote_no_summary_keeps_its_start() -> None:
    plain = ToolReturnPart("run_command", BIG, tool_call_id="c1")  # no ToolReport: no summary to give way to
    short = summarised(plain)
    assert short is not None and isinstance(short.content, str)
    assert short.content.startswith(SUMMARISED + "line 0: data") and short.content.endswith("\n[… rest dropped]")
    assert count_tokens(short.content) < 200
    assert summarised(short) is None  # a summary is not summarised again


async def test_results_give_way_in_a_request_only_until_it_fits() -> None:
    small = "\n".join(f"line {i}" for i in range(300))  # ~1,100 tokens each
    parallel = [result(f"c{i}", f"{i}:{small}", f"summary {i}") for i in range(4)]
    messages: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart("read them")]),
        ModelResponse(parts=[ToolCallPart("read_file", {"path": f"p{i}"}, tool_call_id=f"c{i}") for i in range(4)]),
        ModelRequest(parts=parallel),  # four results of parallel calls in one request
        ModelResponse(parts=[ToolCallPart("read_file", {"path": "last"}, tool_call_id="c9")]),
        ModelRequest(parts=[result("c9", "short", "c9")]),
    ]
    fitted = await TurnRequests(WINDOW, lambda: 3_000, no_compaction).fit(messages, 3_000)
    assert contents(fitted) == [SUMMARISED + "summary 0", SUMMARISED + "summary 1", f"2:{small}", f"3:{small}", "short"]


async def test_a_turn_that_is_itself_too_big_leaves_old_history_out_rather_than_compact_it() -> None:
    history: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart("the task")]),
        ModelResponse(parts=[TextPart("ok")]),
        ModelRequest(parts=[UserPromptPart("and then")]),
        ModelResponse(parts=[TextPart("sure")]),
    ]
    pasted = ModelRequest(parts=[UserPromptPart("data " * 6_000)])  # the turn's own prompt overflows
    fitted = await TurnRequests(WINDOW, lambda: 1_000, no_compaction).fit([*history, pasted], 1_000)
    assert fitted == [history[0], pasted]  # the first request stays; compacting the rest would not have helped


# --- a provider that still finds the request too long -------------------------------------------------------

TOO_LONG = "This model's maximum context length is 8192 tokens. However, your messages resulted in 9500 tokens."


async def test_an_overflow_the_provider_reports_makes_the_turn_s_results_give_way_and_the_request_go_again(
    project: Path, settings: Settings
) -> None:
    (project / "big.txt").write_text(BIG)
    too_long = ModelHTTPError(400, "scripted", {"message": TOO_LONG})
    script = Script([[Call("read_file", {"path": "big.txt"}, "r1")], [Fail(too_long)], [Say("Read it.")]])
    session = session_for(script, project, settings, ModelInfo("test:m", context_limit=32_000))
    events = [e async for e in session.stream("Read big.txt.")]
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Read it."
    assert [e for e in events if isinstance(e, ContextCompacted | TurnFailed)] == []
    _, refused, retried = script.requests
    [whole] = [c for c in contents(refused) if isinstance(c, str)]
    [shrunk] = [c for c in contents(retried) if isinstance(c, str)]
    assert "line 0: data" in whole and not whole.startswith(SUMMARISED)
    assert shrunk.startswith(SUMMARISED) and len(shrunk) < len(whole) // 10


def test_a_pasted_log_is_cut_at_line_ends() -> None:
    log = "\n".join(
        f"2026-11-24T08:00:{i % 60:02d}Z worker-{i} processed batch {i} in {i % 97} ms" for i in range(3_000)
    )
    budget = Budget(window=16_000, max_output=2_000, threshold=0.7)
    cut = fit_prompt(log, budget)
    head, note, tail = cut.split("\n[…")[0], cut.split("\n[…")[1].split("…]\n")[0], cut.split("…]\n")[1]
    lines = set(log.splitlines())
    assert "tokens of this message were cut" in note
    assert head.splitlines() and all(line in lines for line in head.splitlines())  # whole lines only
    assert tail.splitlines() and all(line in lines for line in tail.splitlines())


WIDE_OUTPUT = ModelInfo("test:wide-output", context_limit=16_000, max_output_tokens=64_000)
"""A model whose catalog maximum output is four times its window (some catalogs give a model's output limit
without its window's room in mind)."""


async def test_an_output_maximum_past_half_the_window_reserves_only_half_for_the_answer(
    project: Path, settings: Settings
) -> None:
    budget = Budget.of(WIDE_OUTPUT, 0.7)
    assert budget.reserved_output == 8_000  # half the window, not the catalog's 64,000
    assert budget.input_limit == 16_000 - 8_000 - 800  # the window, the answer's room, the 5% safety margin
    script = Script([[Say("Read it.")]])
    session = open_session(settings, WIDE_OUTPUT, project, approver=None, mode="yolo", model_factory=script.factory())
    events = [e async for e in session.stream("please read " + "words " * 400)]
    assert not [e for e in events if isinstance(e, ContextCompacted | ContextWarning | TurnFailed)]
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Read it."
    assert ("words " * 400).strip() in str(script.requests[0])  # the prompt went whole, not cut to a sliver
