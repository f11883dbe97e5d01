"""Sanitising the message list before every model request (a pydantic-ai history processor).

Providers reject histories with empty messages, tool calls without results, or results without calls. The
text history across turns cannot produce those, but a turn can (a cancelled or failed tool, a retried request),
so every request is checked: empty text parts and messages are dropped, a tool call with no result gets a
synthetic "aborted" result, and a result whose call is not in the preceding response is dropped.

Roles alternate, as many chat templates (Mistral's, most vLLM and Ollama ones) insist: a history that starts
with a response (a greeting persisted before the first request) gets a short user lead-in, consecutive
text-only responses (a special turn's result after a reply) are merged into one, and so are consecutive user
messages (the user messages a compaction kept, its summary and the next prompt), blank-line separated.
"""

from __future__ import annotations

from typing import Any

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

ABORTED = "aborted: this tool call never finished"

SESSION_OPENED = "(The user opened this session.)"
"""The user lead-in placed before a history that starts with the assistant (a greeting)."""


def _result_id(part: Any) -> str | None:
    if isinstance(part, ToolReturnPart):
        return part.tool_call_id
    return None


def _clean_response(message: ModelResponse) -> ModelResponse | None:
    parts = [p for p in message.parts if not (isinstance(p, TextPart) and not p.content)]
    if not parts:
        return None
    return message if len(parts) == len(message.parts) else _with_parts(message, parts)


def _with_parts(message: Any, parts: list[Any]) -> Any:
    from dataclasses import replace

    return replace(message, parts=parts)


def sanitize_messages(messages: list[ModelMessage]) -> list[ModelMessage]:
    """The messages with empty parts and messages removed and every tool call paired with exactly one result."""
    out: list[ModelMessage] = []
    pending: dict[str, str] = {}  # call id → tool name, for the calls of the last response
    for index, message in enumerate(messages):
        last = index == len(messages) - 1
        if isinstance(message, ModelResponse):
            if pending:
                out.append(_aborted_request(pending))
                pending = {}
            cleaned = _clean_response(message)
            if cleaned is None:
                continue
            if not out:
                out.append(ModelRequest(parts=[UserPromptPart(SESSION_OPENED)]))
            elif isinstance(out[-1], ModelResponse) and _text_only(out[-1]) and _text_only(cleaned):
                out[-1] = _with_parts(out[-1], [*out[-1].parts, *cleaned.parts])
                continue
            out.append(cleaned)
            pending = {p.tool_call_id: p.tool_name for p in cleaned.parts if isinstance(p, ToolCallPart)}
            continue
        parts = []
        for part in message.parts:
            call_id = _result_id(part)
            if call_id is None:
                parts.append(part)
            elif call_id in pending:
                pending.pop(call_id)
                parts.append(part)
            # else: a result without its call is dropped
        parts.extend(ToolReturnPart(name, ABORTED, tool_call_id=cid) for cid, name in pending.items())
        pending = {}
        if parts or (last and message.instructions):
            out.append(message if parts == list(message.parts) else _with_parts(message, parts))
    if pending:
        out.append(_aborted_request(pending))
    return _merge_user_messages(out)


def _user_only(message: ModelMessage) -> bool:
    return (
        isinstance(message, ModelRequest)
        and bool(message.parts)
        and all(isinstance(p, UserPromptPart) for p in message.parts)
    )


def _merge_user_messages(messages: list[ModelMessage]) -> list[ModelMessage]:
    """Consecutive requests holding only user prompts (and several prompts in one request) as one request
    with one prompt; the last request's instructions and metadata stay."""
    out: list[ModelMessage] = []
    for message in messages:
        if _user_only(message) and out and _user_only(out[-1]):
            out[-1] = _with_parts(message, [*out[-1].parts, *message.parts])
        else:
            out.append(message)
    return [_one_prompt(m) if _user_only(m) and len(m.parts) > 1 else m for m in out]


def _one_prompt(message: Any) -> Any:
    contents = [p.content for p in message.parts]
    if all(isinstance(c, str) for c in contents):
        content: Any = "\n\n".join(contents)
    else:
        content = []
        for c in contents:
            items = [c] if isinstance(c, str) else list(c)
            if content and items and isinstance(items[0], str) and isinstance(content[-1], str):
                content[-1] = content[-1] + "\n\n" + items[0]
                items = items[1:]
            content.extend(items)
    last = message.parts[-1]
    from dataclasses import replace

    return _with_parts(message, [replace(last, content=content)])


def _text_only(message: ModelResponse) -> bool:
    return all(isinstance(p, TextPart) for p in message.parts)


def _aborted_request(pending: dict[str, str]) -> ModelRequest:
    return ModelRequest(parts=[ToolReturnPart(name, ABORTED, tool_call_id=cid) for cid, name in pending.items()])


def orphans(messages: list[ModelMessage]) -> list[str]:
    """Tool call ids that break pairing: calls with no result in the next request, results with no call in
    the previous response (empty when the list is well formed)."""
    problems: list[str] = []
    calls: set[str] = set()
    for message in messages:
        if isinstance(message, ModelResponse):
            problems.extend(f"call {cid} has no result" for cid in calls)
            calls = {p.tool_call_id for p in message.parts if isinstance(p, ToolCallPart)}
            continue
        results = {cid for p in message.parts if (cid := _result_id(p)) is not None}
        problems.extend(f"result {cid} has no call" for cid in results - calls)
        problems.extend(f"call {cid} has no result" for cid in calls - results)
        calls = set()
    problems.extend(f"call {cid} has no result" for cid in calls)
    return problems
