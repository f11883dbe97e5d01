"""Serve a scripted chat-completions model (a responder of ``openai_server.py``) on the Anthropic fake.

The scripted sessions of the tests and the bench (``fidelity.py``, ``long_session.py``) are written against the
chat-completions wire format: they read a request's ``messages`` and ``tools`` and answer with text or tool
calls. :class:`ChatBridge` lets the same script play the model behind ``anthropic_server.py``, so the same
session can be billed under Anthropic's cache rules: each Anthropic request is shown to the script as the
chat-completions request it corresponds to (system prompt, user and assistant messages, tool calls and their
results as ``tool`` messages, tool definitions as functions), and its answer is turned back into Anthropic's
(text, ``tool_use`` blocks with the script's ids, a ``prompt is too long`` 400 for a context overflow).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from tests.fakes import openai_server
from tests.fakes.anthropic_server import ErrorReply, Reply, ScriptedReply, ToolUse

ChatResponder = Callable[[dict[str, Any]], openai_server.ScriptedReply]

_OVERFLOW = re.compile(r"maximum context length is (\d+) tokens\. However, your messages resulted in (\d+) tokens")


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content or [] if isinstance(b, dict) and b.get("type") == "text")


def _message(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The chat-completions messages of one Anthropic message."""
    content = message.get("content")
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])
    if message.get("role") == "assistant":
        calls = [
            {
                "id": b["id"],
                "type": "function",
                "function": {"name": b["name"], "arguments": json.dumps(b.get("input") or {})},
            }
            for b in blocks
            if b.get("type") == "tool_use"
        ]
        chat: dict[str, Any] = {"role": "assistant", "content": _text(blocks) or None}
        return [{**chat, "tool_calls": calls} if calls else chat]
    out = [
        {"role": "tool", "tool_call_id": b["tool_use_id"], "content": _text(b.get("content"))}
        for b in blocks
        if b.get("type") == "tool_result"
    ]
    if text := _text([b for b in blocks if b.get("type") == "text"]):
        out.append({"role": "user", "content": text})
    return out


def chat_body(body: Mapping[str, Any]) -> dict[str, Any]:
    """The chat-completions request an Anthropic Messages request corresponds to."""
    messages: list[dict[str, Any]] = []
    if system := _text(body.get("system")):
        messages.append({"role": "system", "content": system})
    for message in body.get("messages") or []:
        messages += _message(message)
    tools = [
        {
            "type": "function",
            "function": {"name": t["name"], "description": t.get("description", ""), "parameters": t["input_schema"]},
        }
        for t in body.get("tools") or []
        if "input_schema" in t
    ]
    return {"model": body.get("model"), "messages": messages, **({"tools": tools} if tools else {})}


class ChatBridge:
    """A responder for ``anthropic_server.py`` that asks a chat-completions ``script`` what to answer."""

    def __init__(self, script: ChatResponder) -> None:
        self.script = script

    def __call__(self, body: dict[str, Any]) -> ScriptedReply:
        answer = self.script(chat_body(body))
        if isinstance(answer, openai_server.ErrorReply):
            message = str(answer.message)
            if found := _OVERFLOW.search(message):
                return ErrorReply.prompt_too_long(tokens=int(found[2]), maximum=int(found[1]))
            return ErrorReply(answer.status, "api_error", message)
        uses = [ToolUse(c.name, json.loads(c.arguments_json), c.id) for c in answer.tool_calls]
        output = answer.usage.completion_tokens if answer.usage is not None else None
        return Reply(text=list(answer.text), tool_uses=uses, output_tokens=output)
