"""The slash commands a prompt may consist of: their names, descriptions and what they take (run by
``brain/commands.py``). Light on purpose: the chat completes and lists them before its first turn loads the
brain."""

from __future__ import annotations

COMMAND_PREFIX = "/"


def parse_command(text: str) -> tuple[str, str] | None:
    """``("compact", "keep the API notes")`` for "/compact keep the API notes"; None for an ordinary prompt."""
    stripped = text.strip()
    if not stripped.startswith(COMMAND_PREFIX) or len(stripped) < 2:
        return None
    name, _, rest = stripped[1:].partition(" ")
    return (name, rest.strip()) if name in COMMANDS else None


COMMANDS = {
    "compact": "Summarise the conversation so far to free context (optional: what to keep).",
    "init": "Study the project and write an AGENTS.md describing it for coding agents.",
    "model": "List the models you can switch to, or switch to one.",
    "mode": "List the permission modes, or switch to one.",
    "usage": "Show how full the context is and what the session has spent.",
    "context": "Show what the next request holds: system prompt, instructions, tools, history, pins, and the window.",
    "pin": "Pin a standing instruction: every request carries it, whatever compaction does.",
    "pins": "List the pinned instructions.",
    "unpin": "Drop a pinned instruction by its number in /pins.",
    "undo": "Undo the last turn: put the files and the conversation back as they were before it.",
    "rewind": "List the turns, or put the files, the conversation or both back as before turn N.",
    "permissions": 'Show your rules and this session\'s "always" answers; `save` makes them rules everywhere.',
    "help": "List these commands.",
}
"""Slash commands a prompt may consist of, with their descriptions (run by ``brain/commands.py``)."""

COMMAND_HINTS = {
    "compact": "optional instructions",
    "model": "model id",
    "mode": "read-only, ask, accept-edits or yolo",
    "pin": "the instruction to pin",
    "unpin": "its number",
    "rewind": "N [code|conversation|both]",
    "permissions": "save",
}
"""What each command takes after its name (a command not named here takes nothing)."""

PROMPT_COMMANDS = frozenset({"init"})
"""Commands that are model turns with codling's prompt ``prompts/<name>.md`` (``turn_text``), in the history
as such."""
