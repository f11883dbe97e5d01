"""The top-level forms people know from other agents, turned into the command they mean, before typer parses.

``codling "fix the bug"`` is ``codling chat "fix the bug"``; ``codling -c`` and ``codling -r [ID]`` continue
and resume in the chat; any of ``chat``'s options may come first (``codling -m MODEL --mode yolo "go"``).
Without a terminal for the chat (stdin or stdout not one) the same forms are ``codling run``, so a prompt
piped into bare ``codling`` (``echo "say hi" | codling``) runs as ``codling run`` would. A first word that is a
command's name is that command (``codling sessions``); ``codling -- sessions`` (or ``codling run sessions``)
sends it as a prompt. A single word close to a command's name is refused rather than sent to the model as a
prompt (``codling sesions``: a mistyped command). Plain ``codling`` on a terminal is the chat; with stdin a
terminal and stdout not, it prints the help.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass

TOP_LEVEL_OPTIONS = frozenset({"-h", "--help", "-V", "--version", "--install-completion", "--show-completion"})
"""The options of ``codling`` itself; every other option before a prompt is the chat's (or run's)."""

OPTIONS_WITH_VALUE = frozenset(
    {
        "-m",
        "--model",
        "--cwd",
        "--mode",
        "-r",
        "--resume",
        "-o",
        "--output-last-message",
        "-i",
        "--image",
        "--max-requests",
        "--max-cost",
    }
)
"""The options of ``chat`` and ``run`` that take the next word as their value (it is not the prompt)."""

LIGHT_COMMANDS = frozenset({"login", "logout", "models", "sessions"})
"""The commands that run no tool: they need not hide codling's secrets from the commands it runs
(``codling.seal``), so they skip the restart that costs a Python start-up. A test holds every command of the
app to be one of these or of ``TOOL_COMMANDS``."""

TOOL_COMMANDS = frozenset({"acp", "chat", "run", "sandbox"})
"""The commands that run tools (and a prompt, routed to ``chat`` or ``run``; ``sandbox check`` runs commands)."""

_WORD = re.compile(r"[a-z][a-z-]*")


@dataclass(frozen=True)
class Refusal:
    """A command line that is neither a command nor a prompt codling should send: what to say (exit 2)."""

    message: str


def route(args: Sequence[str], commands: Collection[str], *, stdin_tty: bool, stdout_tty: bool) -> list[str] | Refusal:
    """The arguments typer should parse for ``codling ARGS`` (see the module's docstring); ``commands`` are the
    names of codling's commands. ``args`` have been through ``session_args.resume_without_id`` (a bare ``-r`` is
    ``--resume=``)."""
    target = "chat" if stdin_tty and stdout_tty else "run"
    if not args:
        return [target] if target == "chat" or not stdin_tty else []
    first = _first_word(args)
    if first is None:
        if all(arg in TOP_LEVEL_OPTIONS for arg in args):
            return list(args)
        return [target, *args]
    word = args[first]
    if word in commands:
        return list(args)
    if word != "--" and _WORD.fullmatch(word):
        import difflib  # only for a word that may be a mistyped command: argv.py is imported before the seal

        close = difflib.get_close_matches(word, sorted(commands), n=1, cutoff=0.8)
        if close:
            return Refusal(
                f"'{word}' is not a command; did you mean `codling {close[0]}`? To send '{word}' as a prompt, "
                f"use `codling -- {word}` (or `codling run {word}`)."
            )
    return [target, *args]


def runs_tools(args: Sequence[str]) -> bool:
    """Whether ``codling ARGS`` may run tools, and so must be sealed (``codling.seal``): anything but a light
    command, top-level options alone (``--version``, ``--help``) or a ``--help`` anywhere. Decided from the raw
    arguments, before typer (or anything heavy) is imported."""
    if not args:  # the chat, or a prompt from stdin
        return True
    options = args[: args.index("--")] if "--" in args else args
    if any(arg in ("-h", "--help") for arg in options):
        return False
    first = _first_word(args)
    if first is None:
        return not all(arg in TOP_LEVEL_OPTIONS for arg in args)
    return args[first] not in LIGHT_COMMANDS


def _first_word(args: Sequence[str]) -> int | None:
    """The index of the first argument that is neither an option nor an option's value (``--`` counts)."""
    index = 0
    while index < len(args):
        arg = args[index]
        if arg == "--" or arg == "-" or not arg.startswith("-"):
            return index
        index += 2 if _takes_next(arg) else 1
    return None


def _takes_next(option: str) -> bool:
    """Whether the word after ``option`` is its value: ``--model``, ``-m``, and short flags run together as
    click reads them (``-vm MODEL``; in ``-mMODEL`` the value is attached)."""
    if option.startswith("--") or len(option) <= 2:
        return option in OPTIONS_WITH_VALUE
    for position, letter in enumerate(option[1:], start=1):
        if f"-{letter}" in OPTIONS_WITH_VALUE:
            return position == len(option) - 1
    return False
