"""MCP tools as codling shows them, and MCP results as text for the model (no MCP import: duck-typed)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from codling.text import plain_terminal_text
from codling.tools.ports import ToolKind

MAX_DESCRIPTION_CHARS = 2_000
"""Most characters of a server's description of a tool that reach the model (a server writes what it likes)."""


@dataclass(frozen=True)
class McpTool:
    """One tool of an MCP server, under the name the model knows it by."""

    name: str
    """The model-facing name (``mcp__SERVER__TOOL``, see ``names.py``)."""
    server: str
    tool: str
    """The server's own name for it."""
    title: str
    description: str
    parameters: dict[str, Any] = field(hash=False)
    kind: ToolKind = "other"


def tool_of(server: str, raw: Any, name: str) -> McpTool:
    """``raw`` (an MCP SDK ``Tool``) as an :class:`McpTool` named ``name``."""
    annotations = getattr(raw, "annotations", None)
    title = str(getattr(raw, "title", None) or getattr(annotations, "title", None) or raw.name)
    description = " ".join(str(raw.description or "").split())
    if len(description) > MAX_DESCRIPTION_CHARS:
        description = description[: MAX_DESCRIPTION_CHARS - 1] + "…"
    schema = getattr(raw, "input_schema", None) or getattr(raw, "inputSchema", None) or {}
    parameters = dict(schema) if isinstance(schema, dict) else {"type": "object"}
    parameters.setdefault("type", "object")
    return McpTool(
        name=name,
        server=server,
        tool=str(raw.name),
        title=_oneline(title, 80),
        description=f"[MCP server {server}] {description}".strip(),
        parameters=parameters,
        kind=_kind(annotations),
    )


def _kind(annotations: Any) -> ToolKind:
    """A fitting kind for an editor's icon, from the server's hints (only ever shown, never trusted)."""
    if annotations is None or not _hint(annotations, "read_only_hint", "readOnlyHint"):
        return "other"
    return "fetch" if _hint(annotations, "open_world_hint", "openWorldHint") else "read"


def _hint(annotations: Any, name: str, legacy: str) -> bool:
    """A hint under the MCP SDK's v2 name, or its v1 name (looked up only when the v2 one is not there)."""
    value = getattr(annotations, name, None)
    if value is None and name not in getattr(type(annotations), "model_fields", {}):
        value = getattr(annotations, legacy, None)
    return bool(value)


def _oneline(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def result_text(content: list[Any], structured: Any = None) -> str:
    """A call's content blocks as plain text (``plain_terminal_text``): text as it is, an embedded text resource's text,
    what any other block is (an image, audio, a binary resource, a link); the structured result when there is no
    content."""
    parts = [_block_text(block) for block in content]
    if not parts and structured is not None:
        return json.dumps(structured, ensure_ascii=False, indent=1)
    # A server that runs commands passes their colours and progress bars on: the model reads plain text.
    return plain_terminal_text("\n".join(parts))


def _block_text(block: Any) -> str:
    kind = getattr(block, "type", "")
    if kind == "text":
        return str(block.text)
    if kind in ("image", "audio"):
        mime = getattr(block, "mime_type", None) or getattr(block, "mimeType", "")
        size = len(str(getattr(block, "data", ""))) * 3 // 4
        return f"[{kind} ({mime}, about {size:,} bytes): not shown to the model]"
    if kind == "resource":
        resource = block.resource
        text = getattr(resource, "text", None)
        return str(text) if text is not None else f"[binary resource {resource.uri}]"
    if kind == "resource_link":
        return f"[resource {getattr(block, 'uri', '')}]"
    return f"[{kind or 'unknown'} content]"


def describe_exception(error: BaseException) -> str:
    """What went wrong, in one line: the innermost error of an exception group, with its type when its text
    alone would not say much."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    cause: BaseException | None = error
    while cause is not None:  # a program that is not there, however deep fastmcp wrapped it
        if isinstance(cause, FileNotFoundError) and cause.filename:
            return f"no such program: {cause.filename}"
        cause = cause.__cause__ or cause.__context__
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
