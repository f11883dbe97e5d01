"""How the scripted models of the tests tell codling's summarize request from a user turn, and read the
conversation it asks them to summarise.

codling sends the summarizer the session's history laid out as a user turn's request, its summary request last
(so a provider's prefix cache serves the conversation), or, when the history does not fit beside it, a
transcript under the summarizer's own instructions. ``transcript_of_body`` and ``transcript_of`` give the
conversation of either in the transcript's form (``### User``, ``### Assistant`` and ``### Earlier summary``
blocks, then the request's closing lines: the user's wishes and the length), so a scripted summarizer reads
both alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart

from codling.brain.context.layout import CONTEXT_CLOSE, CONTEXT_OPEN
from codling.brain.state import SUMMARY_END, SUMMARY_PREFIX
from tests.fakes.openai_server import text_of

MARK = "You are writing a handoff summary"
"""The first words of codling's summary request (``brain/prompts/compact.md``)."""


def is_summary_body(body: Mapping[str, Any]) -> bool:
    """Whether a chat-completions request is codling's summarize request (either form), also when it is asked
    again after an answer pydantic-ai sent back (an empty one): the summary request never enters the history,
    so no user turn's request holds it."""
    messages = body.get("messages") or []
    system = " ".join(text_of(m.get("content")) for m in messages if m.get("role") in ("system", "developer"))
    return MARK in system or any(MARK in text_of(m.get("content")) for m in messages if m.get("role") == "user")


def transcript_of_body(body: Mapping[str, Any]) -> str:
    """The conversation a summarize request (chat completions) asks to summarise, as a transcript."""
    messages = [m for m in body.get("messages") or [] if m.get("role") not in ("system", "developer")]
    system = " ".join(text_of(m.get("content")) for m in body.get("messages") or [] if m.get("role") == "system")
    last = text_of(messages[-1].get("content")) if messages else ""
    if MARK in system:  # the transcript form: the request is the transcript
        return last
    asked = max(i for i, m in enumerate(messages) if m.get("role") == "user" and MARK in text_of(m.get("content")))
    said = [(str(m.get("role")), text_of(m.get("content"))) for m in messages[:asked]]
    return _transcript([*said, ("user", text_of(messages[asked].get("content")))])


def is_summary_request(messages: list[ModelMessage]) -> bool:
    """Whether a FunctionModel's messages are codling's summarize request (either form), also after the tool
    call a summarizer should not have made was refused."""
    last = messages[-1] if messages else None
    if not isinstance(last, ModelRequest):
        return False
    asked = next((m for m in reversed(messages) if isinstance(m, ModelRequest) and _prompt(m)), last)
    return MARK in (last.instructions or "") or MARK in _prompt(asked)


def transcript_of(messages: list[ModelMessage]) -> str:
    """The conversation a summarize request (FunctionModel messages) asks to summarise, as a transcript."""
    last = messages[-1]
    assert isinstance(last, ModelRequest)
    if MARK in (last.instructions or ""):
        return _prompt(last)
    asked = max(i for i, m in enumerate(messages) if isinstance(m, ModelRequest) and _prompt(m))
    said: list[tuple[str, str]] = []
    for message in messages[: asked + 1]:
        if isinstance(message, ModelResponse):
            said.append(("assistant", "\n\n".join(p.content for p in message.parts if isinstance(p, TextPart))))
        else:
            said.append(("user", _prompt(message)))
    return _transcript(said)


def _prompt(request: ModelRequest) -> str:
    return "\n\n".join(str(p.content) for p in request.parts if isinstance(p, UserPromptPart))


def _transcript(said: list[tuple[str, str]]) -> str:
    """``said`` (role, text) as a transcript; the last user message holds the summary request, whose closing
    lines (after its instructions) end the transcript."""
    *before, (_, last) = said
    conversation, _, request = last.partition(MARK)
    closing = request.partition("\n\n---\n")[2]
    blocks: list[str] = []
    for role, text in [*before, ("user", conversation)]:
        if role == "assistant":
            blocks.append(f"### Assistant\n{text.strip()}")
            continue
        text = _without_context(text)
        if SUMMARY_PREFIX.strip() in text:
            head, _, rest = text.partition(SUMMARY_PREFIX.strip())
            summary, _, tail = rest.partition(SUMMARY_END.strip())
            blocks += [f"### User\n{head.strip()}", f"### Earlier summary\n{summary.strip()}", f"### User\n{tail}"]
        else:
            blocks.append(f"### User\n{text}")
    body = "\n\n".join(b for b in (block.strip() for block in blocks) if b not in ("### User", "### Assistant"))
    return f"{body}\n\n---\n{closing}" if closing else body


def _without_context(text: str) -> str:
    """``text`` without the context blocks codling puts before a prompt."""
    while CONTEXT_OPEN in text and CONTEXT_CLOSE in text:
        head, _, rest = text.partition(CONTEXT_OPEN)
        text = head + rest.partition(CONTEXT_CLOSE)[2]
    return text.strip()
