"""Slash commands: a prompt that is exactly ``/name [argument]`` runs one of these instead of a model turn.

They are turns like any other (recorded, replayed, shown in every client), answered by codling itself: their
reply is a ``TextDelta``. ``/model`` and ``/mode`` also change the session (``SettingsChanged``, which the
history records and an editor shows in its pickers). ``/init`` is the exception: it is a model turn with the
prompt of ``prompts/init.md`` (see ``turns.turn_text``), unless the project already has an AGENTS.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from codling.brain.context.pins import describe_pins
from codling.brain.context.report import describe_context
from codling.brain.events import Event, SettingsChanged, TextDelta
from codling.brain.slash import COMMAND_HINTS, COMMANDS
from codling.config import MODE_DESCRIPTIONS, PERMISSION_MODES, parse_mode
from codling.errors import ConfigError
from codling.tools.approval import always_covers

if TYPE_CHECKING:
    from codling.brain.host import SessionHost
    from codling.brain.turn_context import TurnContext

AGENTS_FILE = "AGENTS.md"


async def run_slash_command(turn: TurnContext, name: str, argument: str) -> None:
    """Run the slash command ``name`` within ``turn`` (the pins it changes were changed as the turn started;
    ``/compact`` is a compaction: ``turn_kinds/command.py`` runs it)."""
    session, turn_id, send = turn.session, turn.id, turn.send

    def say(text: str) -> None:
        send(TextDelta(turn_id, text))

    match name:
        case "pin":
            say(f"Pinned: {argument}" if argument else "Say what to pin: /pin TEXT (for example /pin use tabs).")
        case "unpin" if not argument.strip().isdigit():
            say("Say which pin to drop by its number: /unpin N (/pins lists them).")
        case "pins" | "unpin":  # unpin N is done: what is pinned now
            say(describe_pins(session.state.pins))
        case "mode":
            say(_mode(session, turn_id, send, argument))
        case "model":
            say(_model(session, turn_id, send, argument))
        case "usage":
            say(describe_usage(session))
        case "context":
            say(describe_context(session))
        case "permissions":
            say(_permissions(session, argument))
        case "init":
            say(
                f"{AGENTS_FILE} already exists in {session.state.cwd}, so /init leaves it alone. Ask me to "
                "improve it, or delete it and run /init again."
            )
        case _:
            say(describe_commands())


def describe_commands(commands: Mapping[str, str] = COMMANDS, hints: Mapping[str, str] = COMMAND_HINTS) -> str:
    """/help's answer: every command with what it takes and does (markdown; a client may add its own)."""
    lines = ["Commands (type them as the whole prompt):", ""]
    for name, description in commands.items():
        hint = f" [{hints[name]}]" if name in hints else ""
        lines.append(f"- `/{name}{hint}`: {description}")
    return "\n".join(lines)


def _mode(session: SessionHost, turn_id: str, send: Callable[[Event], None], argument: str) -> str:
    if not argument:
        rows = [
            f"- `{m}`{' (current)' if m == session.state.mode else ''}: {MODE_DESCRIPTIONS[m][1]}"
            for m in PERMISSION_MODES
        ]
        return "Permission modes (switch with /mode NAME):\n\n" + "\n".join(rows)
    try:
        mode = parse_mode(argument)
    except ConfigError as e:
        return f"Mode not changed: {e}."
    session.set_mode(mode)
    send(SettingsChanged(turn_id, mode=mode))
    return f"Mode: {mode}. {MODE_DESCRIPTIONS[mode][1]}"


def _model(session: SessionHost, turn_id: str, send: Callable[[Event], None], argument: str) -> str:
    current = session.state.model
    menu = session.options.models
    if not argument:
        ids = menu.available(current.id) if menu is not None else [current.id]
        rows = [f"- `{i}`{' (current)' if i == current.id else ''}" for i in ids]
        return "Models you can switch to (with /model ID):\n\n" + "\n".join(rows)
    if menu is None:
        return "This session cannot switch models."
    try:
        model = menu.choose(argument)
    except ConfigError as e:
        return f"Model not changed: {e}."
    session.set_model(model)
    send(SettingsChanged(turn_id, model=model.id))
    known = "" if model.known else f" (not in the catalog: assuming a {model.context_limit:,}-token context)"
    return f"Model: {model.id}{known}. The conversation so far goes with it."


def _permissions(session: SessionHost, argument: str) -> str:
    """/permissions: the rules in force and this session's "always" answers; ``save`` makes the answers for
    whole programs rules in every session."""
    permissions = session.deps.permissions
    if argument.strip() == "save":
        saved = permissions.save_always()
        if saved is None:
            return "This session has nowhere to save rules."
        commands, path = saved
        if not commands:
            return 'This session has no "always" answer for a whole program to save (exact commands stay its own).'
        listed = ", ".join(f"`{command}`" for command in commands)
        return f"Saved as rules in every session ({path}): allow {listed}."
    lines = ["Your rules in force (deny wins, then ask, then allow):", ""]
    rules = permissions.rules.rules
    lines += [f"- {rule.verdict} `{' '.join(rule.words)}` ({rule.source})" for rule in rules] or ["- none"]
    answers = sorted(permissions.remembered)
    lines += ["", 'This session\'s "always" answers:', ""]
    lines += [f"- {always_covers(key)}" + (f": `{key[1]}`" if key[0] == "execute-exact" else "") for key in answers]
    if not answers:
        lines.append("- none")
    lines += ["", '`/permissions save` makes the "always" answers for whole programs rules in every session.']
    return "\n".join(lines)


def describe_usage(session: SessionHost) -> str:
    """/usage's answer: how full the context is, and what the session has spent."""
    state = session.state
    usage = session.context.usage_event("")
    share = usage.used / usage.size if usage.size else 0.0
    spent = state.spent
    lines = [
        f"- Context: {usage.used:,} of {usage.size:,} tokens ({share:.0%}) with {state.model.id}",
        f"- This session: {spent.input_tokens:,} input and {spent.output_tokens:,} output tokens in "
        f"{spent.requests:,} model requests",
    ]
    if spent.cache_read_tokens or spent.cache_write_tokens:
        share_cached = spent.cache_read_tokens / spent.input_tokens if spent.input_tokens else 0.0
        lines.append(
            f"- Prompt cache: {spent.cache_read_tokens:,} input tokens read from it ({share_cached:.0%} of input), "
            f"{spent.cache_write_tokens:,} written to it"
        )
    if state.cost is not None:
        lines.append(f"- Cost: about ${state.cost:,.4f} at list prices")
    if (price := state.model.price) is not None:
        cached = f", ${price.cache_read:g} read from its cache" if price.cache_read is not None else ""
        cached += f", ${price.cache_write:g} written to it" if price.cache_write is not None else ""
        lines.append(
            f"- {state.model.id} costs ${price.input:g} per million input tokens{cached}"
            f"{',' if cached else ''} and ${price.output:g} per million output"
        )
    return "\n".join(lines)
