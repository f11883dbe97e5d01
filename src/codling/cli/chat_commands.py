"""What a chat input asks for: the chat's own slash commands (:data:`CHAT_COMMANDS`), the keys, how a line is read
as a command or a prompt (:func:`parse_line`) and /help's answer (:func:`describe_chat`)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from codling.brain.slash import COMMAND_HINTS, COMMANDS

CHAT_COMMANDS = {
    "new": "Start a new session in this directory (this one stays recorded).",
    "resume": "List the sessions to continue (`more`: the next ones; words: those whose title or id holds them), "
    "or continue one (its number in the list last shown, or its id).",
    "help": "List the commands and keys.",
    "exit": "Leave the chat (Ctrl-D does too).",
    "quit": "Leave the chat.",
}
"""The chat's own commands; every other known command is the session's (``brain/turns.COMMANDS``)."""

KEYS = (
    "Enter sends; Alt-Enter (or Esc, Enter) or a line ending in \\ starts a new line; Up and Down recall what you "
    "sent before.",
    '@path attaches a file (its text, or an image); @"a path with spaces" too. Tab completes /commands and @paths.',
    "Esc or Ctrl-C cancels a running turn; Ctrl-C clears the line; Ctrl-C at an empty prompt, twice, or Ctrl-D leaves.",
)

_COMMAND = re.compile(r"/(?P<name>[A-Za-z][\w-]*)(?:\s+(?P<argument>.*))?", re.DOTALL)


@dataclass(frozen=True)
class ChatCommand:
    """One of :data:`CHAT_COMMANDS`, with what follows its name."""

    name: str
    argument: str = ""


@dataclass(frozen=True)
class UnknownCommand:
    """``/name`` that no command has."""

    name: str


@dataclass(frozen=True)
class Prompt:
    """Text for a turn: a prompt, or a session command (``command``: sent as typed, no mentions attached)."""

    text: str
    command: bool = False


def parse_line(line: str) -> ChatCommand | UnknownCommand | Prompt | None:
    """What an input asks for; None for a blank one. ``/etc/hosts is odd`` is a prompt, not a command."""
    text = line.strip()
    if not text:
        return None
    match = _COMMAND.fullmatch(text)
    if match is None:
        return Prompt(text)
    name, argument = match["name"], (match["argument"] or "").strip()
    if name in CHAT_COMMANDS:
        return ChatCommand(name, argument)
    if name in COMMANDS:
        return Prompt(text, command=True)
    return UnknownCommand(name)


def all_commands() -> dict[str, str]:
    """Every command a chat takes, with what it does: the chat's, then the session's."""
    session = {name: text for name, text in COMMANDS.items() if name not in CHAT_COMMANDS}
    return {**CHAT_COMMANDS, **session}


def describe_chat() -> str:
    """/help's answer (markdown): the commands with what they take, then the keys."""
    from codling.brain.commands import describe_commands

    hints = {**COMMAND_HINTS, "resume": "number, id, more or words"}
    return describe_commands(all_commands(), hints) + "\n\n" + "\n".join(f"- {keys}" for keys in KEYS)
