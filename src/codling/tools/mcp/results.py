"""MCP tools as codling shows them, and MCP results as text for the model (no MCP import: duck-typed)."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any

from codling.text import plain_terminal_text
from codling.tools.base import ResourceLink, ToolImage
from codling.vocabulary import ToolKind

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


MODEL_IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
"""Image types every provider that sees images accepts; other images are named, not sent."""

MAX_IMAGE_BYTES = 5_000_000
"""The largest image sent to the model (Anthropic's limit); a bigger one is named, not sent."""


@dataclass(frozen=True)
class McpResult:
    """A call's result: ``text`` for the model (images and links named in it), ``images`` sent along."""

    text: str
    images: tuple[ToolImage, ...] = ()
    links: tuple[ResourceLink, ...] = ()


def result_of(content: list[Any], structured: Any = None, *, images: bool = False) -> McpResult:
    """A call's content blocks as plain text (``plain_terminal_text``): text as it is, an embedded text resource's
    text, a resource link as its name and URI, what any other block is (audio, a binary resource); the structured
    result when there is no content. An image is kept for the model when ``images`` (the model sees them) and it
    is of a type and size providers take (named ``[image 1 …: attached]`` in the text), else named as not shown."""
    parts: list[str] = []
    kept: list[ToolImage] = []
    links = tuple(link for block in content if (link := _link(block)) is not None)
    for block in content:
        image = _image(block) if images else None
        if image is not None:
            kept.append(image)
            parts.append(f"[image {len(kept)} ({image.mime_type}, {len(image.data):,} bytes): attached]")
        else:
            parts.append(_block_text(block, images))
    if not parts and structured is not None:
        return McpResult(json.dumps(structured, ensure_ascii=False, indent=1))
    # A server that runs commands passes their colours and progress bars on: the model reads plain text.
    return McpResult(plain_terminal_text("\n".join(parts)), tuple(kept), links)


def result_text(content: list[Any], structured: Any = None) -> str:
    """:func:`result_of`'s text for a model that does not see images."""
    return result_of(content, structured).text


def _image(block: Any) -> ToolImage | None:
    """An image block's image if the model may be sent it (a provider's type, decodable, not too big)."""
    if getattr(block, "type", "") != "image":
        return None
    mime = str(_field(block, "mime_type", "mimeType") or "").lower()
    data = str(getattr(block, "data", ""))
    if mime not in MODEL_IMAGE_TYPES or len(data) * 3 // 4 > MAX_IMAGE_BYTES:
        return None
    try:
        raw = base64.b64decode(data, validate=True)
    except ValueError:
        return None
    return ToolImage(raw, mime) if raw else None


def _block_text(block: Any, images: bool = False) -> str:
    kind = getattr(block, "type", "")
    if kind == "text":
        return str(block.text)
    if kind in ("image", "audio"):
        mime = _field(block, "mime_type", "mimeType") or ""
        size = len(str(getattr(block, "data", ""))) * 3 // 4
        why = "not shown to the model" if kind == "audio" or not images else "not sent: not an image the model takes"
        return f"[{kind} ({mime}, about {size:,} bytes): {why}]"
    if kind == "resource":
        resource = block.resource
        text = getattr(resource, "text", None)
        return str(text) if text is not None else f"[binary resource {resource.uri}]"
    if kind == "resource_link":
        return _link_text(block)
    return f"[{kind or 'unknown'} content]"


def _field(block: Any, name: str, legacy: str = "") -> Any:
    """A block's field under the MCP SDK's v2 name, or its v1 name where the v2 one is not a field (reading
    the v1 name on a v2 model warns)."""
    value = getattr(block, name, None)
    if value is None and legacy and name not in getattr(type(block), "model_fields", {}):
        value = getattr(block, legacy, None)
    return value


def _link(block: Any) -> ResourceLink | None:
    """A ``resource_link`` block as a :class:`ResourceLink` (None for any other block)."""
    if getattr(block, "type", "") != "resource_link" or not getattr(block, "uri", None):
        return None

    def optional(name: str, legacy: str = "") -> str | None:
        value = _field(block, name, legacy)
        return _oneline(str(value), 300) if value else None

    return ResourceLink(
        uri=str(block.uri),
        name=optional("name") or str(block.uri),
        title=optional("title"),
        mime_type=optional("mime_type", "mimeType"),
        description=optional("description"),
    )


def _link_text(block: Any) -> str:
    """A resource link as the model reads it: ``[resource link: TITLE (NAME) <URI>, MIME: DESCRIPTION]``."""
    name = _oneline(str(getattr(block, "name", "") or ""), 200)
    title = _oneline(str(getattr(block, "title", None) or ""), 200)
    label = f"{title} ({name})" if title and name and title != name else title or name
    mime = _field(block, "mime_type", "mimeType")
    description = _oneline(str(getattr(block, "description", None) or ""), 300)
    text = f"[resource link: {label} <{getattr(block, 'uri', '')}>" if label else f"[resource link <{block.uri}>"
    return text + (f", {mime}" if mime else "") + (f": {description}" if description else "") + "]"


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
