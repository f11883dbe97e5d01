"""The tool definitions a request carries, and their lean form for small windows.

The definitions of codling's tools take about 2,300 tokens of every request, more than a quarter of an
8,000-token window. Below ``LEAN_WINDOW`` tokens codling offers a lean set: the delegate and plan tools are left
out (a sub-agent's own requests would not fit either) and each description is cut to its first paragraph
(``apply_patch`` keeps its whole description: the patch format is in it). Each tool's descriptor
(``ToolSpec.lean``) says which. The parameters are unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from codling.llm.tokens import count_tokens
from codling.tools.ports import DELEGATE_TOOL
from codling.tools.specs import TOOL_SPECS

LEAN_WINDOW = 12_000
"""Windows smaller than this get the lean tool set."""

_counted: dict[tuple[str, str, str], int] = {}


def lean_definition(tool_def: Any) -> Any:
    """A tool definition with its description cut to the first paragraph (unless its descriptor keeps it whole)."""
    spec = TOOL_SPECS.get(tool_def.name)
    if (spec is not None and spec.lean == "whole") or not tool_def.description:
        return tool_def
    return replace(tool_def, description=tool_def.description.split("\n\n", 1)[0].strip())


def definition_tokens(tool_def: Any) -> int:
    """What one tool definition adds to a request, counted as the JSON an OpenAI-style provider receives."""
    parameters = tool_def.parameters_json_schema
    key = (tool_def.name, tool_def.description or "", json.dumps(parameters, sort_keys=True))
    if (known := _counted.get(key)) is None:
        body = {"name": tool_def.name, "description": tool_def.description, "parameters": parameters}
        known = _counted[key] = count_tokens(json.dumps({"type": "function", "function": body}))
    return known


def offered_definitions(names: frozenset[str] | None, *, delegates: bool, lean: bool) -> list[Any]:
    """The definitions of the tools a user turn offers: all of them or ``names``, without ``delegate`` unless
    ``delegates``, in their lean form if ``lean``."""
    from codling.tools.toolset import build_toolset

    tools = build_toolset().wrapped.tools  # type: ignore[attr-defined]
    defs = [t.tool_def for name, t in tools.items() if offered(name, names, delegates=delegates, lean=lean)]
    return [lean_definition(d) for d in defs] if lean else defs


def offered(name: str, names: frozenset[str] | None, *, delegates: bool, lean: bool) -> bool:
    """Whether a user turn offers the tool ``name`` (see ``offered_definitions``)."""
    dropped = lean and (spec := TOOL_SPECS.get(name)) is not None and spec.lean == "dropped"
    return (names is None or name in names) and (delegates or name != DELEGATE_TOOL) and not dropped


def definitions_tokens(tool_defs: Iterable[Any]) -> int:
    """What a request's tool definitions add to it."""
    return sum(definition_tokens(d) for d in tool_defs)
