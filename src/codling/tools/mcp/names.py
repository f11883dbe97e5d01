"""The names the model sees for MCP tools: ``mcp__SERVER__TOOL``, safe for every provider and unique.

Providers accept tool names of ``[A-Za-z0-9_-]`` up to 64 characters (OpenAI's rule, the strictest). A
server's and a tool's names are whatever their authors (or an attacker) chose, so each is reduced to those
characters; a name that had to be cut or changed, or that would collide with one already given, gets a short
hash of the original so two different tools can never share a name, and no MCP tool can take the name of one
of codling's own tools (those have no ``__``).
"""

from __future__ import annotations

import hashlib
import re

PREFIX = "mcp__"
MAX_NAME = 64
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")
_SEPARATOR = "__"


def safe_part(name: str, limit: int) -> str:
    """``name`` in the allowed characters, runs of ``_`` squeezed (``__`` separates server and tool), at most
    ``limit`` characters; ``x`` when nothing is left."""
    cleaned = re.sub(r"_{2,}", "_", _UNSAFE.sub("_", name)).strip("_-")
    return cleaned[:limit] or "x"


def tool_name(server: str, tool: str, taken: set[str]) -> str:
    """The model-facing name of ``server``'s tool ``tool``, not in ``taken`` (the caller adds it there)."""
    server_part = safe_part(server, 20)
    room = MAX_NAME - len(PREFIX) - len(server_part) - len(_SEPARATOR)
    tool_part = safe_part(tool, room)
    name = f"{PREFIX}{server_part}{_SEPARATOR}{tool_part}"
    if tool_part == tool and server_part == server and name not in taken:
        return name
    digest = hashlib.sha256(f"{server}\0{tool}".encode("utf-8", "surrogatepass")).hexdigest()
    for length in range(6, len(digest) + 1):
        suffix = "_" + digest[:length]
        candidate = f"{PREFIX}{server_part}{_SEPARATOR}{tool_part[: room - len(suffix)]}{suffix}"
        if candidate not in taken:
            return candidate
    raise AssertionError("a sha-256 digest cannot collide with every shorter prefix of itself")
