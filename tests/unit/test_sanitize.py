"""The message sanitizer run before every model request."""

from __future__ import annotations

from pydantic_ai.messages import (
    BinaryContent,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from codling.brain.sanitize import ABORTED, SESSION_OPENED, orphans, sanitize_messages


def call(cid: str) -> ToolCallPart:
    return ToolCallPart("read_file", {"path": "a"}, tool_call_id=cid)


def result(cid: str) -> ToolReturnPart:
    return ToolReturnPart("read_file", "text", tool_call_id=cid)


def shape(messages: list[ModelMessage]) -> list[tuple[str, list[tuple[str, str, str]]]]:
    """Messages without timestamps: (kind, [(part kind, content or tool name, call id)])."""
    out: list[tuple[str, list[tuple[str, str, str]]]] = []
    for m in messages:
        parts: list[tuple[str, str, str]] = [
            (p.part_kind, str(getattr(p, "content", getattr(p, "tool_name", ""))), getattr(p, "tool_call_id", ""))
            for p in m.parts
        ]
        out.append((m.kind, parts))
    return out


def test_well_formed_history_is_left_alone() -> None:
    messages: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart("hi")]),
        ModelResponse(parts=[TextPart("looking"), call("a")]),
        ModelRequest(parts=[result("a")]),
    ]
    assert sanitize_messages(messages) == messages
    assert orphans(messages) == []


def test_a_call_without_result_gets_an_aborted_result() -> None:
    messages: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart("hi")]),
        ModelResponse(parts=[call("a"), call("b")]),
        ModelRequest(parts=[result("a")]),
    ]
    assert orphans(messages) == ["call b has no result"]
    cleaned = sanitize_messages(messages)
    assert shape(cleaned[-1:]) == [("request", [("tool-return", "text", "a"), ("tool-return", ABORTED, "b")])]
    assert orphans(cleaned) == []


def test_a_result_without_its_call_is_dropped_and_empty_messages_go() -> None:
    messages: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart("hi")]),
        ModelResponse(parts=[TextPart("")]),
        ModelRequest(parts=[result("ghost"), UserPromptPart("again")]),
    ]
    assert orphans(messages) == ["result ghost has no call"]
    # What is left are two user messages in a row: they go as one, so roles alternate.
    assert shape(sanitize_messages(messages)) == [("request", [("user-prompt", "hi\n\nagain", "")])]


def test_calls_followed_by_another_response_are_closed_in_between() -> None:
    messages: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart("hi")]),
        ModelResponse(parts=[call("a")]),
        ModelResponse(parts=[TextPart("next")]),
    ]
    cleaned = sanitize_messages(messages)
    assert shape(cleaned) == [
        ("request", [("user-prompt", "hi", "")]),
        ("response", [("tool-call", "read_file", "a")]),
        ("request", [("tool-return", ABORTED, "a")]),
        ("response", [("text", "next", "")]),
    ]
    assert orphans(cleaned) == []


def test_a_history_that_starts_with_the_assistant_gets_a_user_lead_in() -> None:
    messages: list[ModelMessage] = [
        ModelResponse(parts=[TextPart("Hi! Ready.")]),
        ModelRequest(parts=[UserPromptPart("fix it")]),
    ]
    assert shape(sanitize_messages(messages)) == [
        ("request", [("user-prompt", SESSION_OPENED, "")]),
        ("response", [("text", "Hi! Ready.", "")]),
        ("request", [("user-prompt", "fix it", "")]),
    ]


def test_consecutive_text_responses_merge_but_tool_calls_stay_apart() -> None:
    messages: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart("hi")]),
        ModelResponse(parts=[TextPart("hello")]),
        ModelResponse(parts=[TextPart("also this")]),
        ModelRequest(parts=[UserPromptPart("go")]),
    ]
    assert shape(sanitize_messages(messages)) == [
        ("request", [("user-prompt", "hi", "")]),
        ("response", [("text", "hello", ""), ("text", "also this", "")]),
        ("request", [("user-prompt", "go", "")]),
    ]
    with_call: list[ModelMessage] = [
        messages[0],
        ModelResponse(parts=[TextPart("hello")]),
        ModelResponse(parts=[call("a")]),
    ]
    assert [m.kind for m in sanitize_messages(with_call)] == ["request", "response", "response", "request"]


def test_user_messages_in_a_row_become_one_so_roles_alternate() -> None:
    # After a compaction: the kept user messages, the summary, then the next prompt (with an image).
    image = BinaryContent(b"\x89PNG", media_type="image/png")
    messages: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart("kept 1")]),
        ModelRequest(parts=[UserPromptPart("kept 2")]),
        ModelRequest(parts=[UserPromptPart("[Summary] …")]),
        ModelRequest(parts=[UserPromptPart(["look at this", image])], instructions="be brief"),
        ModelResponse(parts=[TextPart("ok")]),
    ]
    merged = sanitize_messages(messages)
    assert [type(m).__name__ for m in merged] == ["ModelRequest", "ModelResponse"]
    first = merged[0]
    assert isinstance(first, ModelRequest) and first.instructions == "be brief"
    (part,) = first.parts
    assert isinstance(part, UserPromptPart)
    assert part.content == ["kept 1\n\nkept 2\n\n[Summary] …\n\nlook at this", image]
