"""Which kind of turn a prompt starts (``turn_for``)."""

from __future__ import annotations

from codling.brain.commands import AGENTS_FILE
from codling.brain.prompt import PromptBlock, cap_prompt
from codling.brain.slash import PROMPT_COMMANDS
from codling.brain.turn_context import TurnContext
from codling.brain.turn_kinds.command import CommandTurn
from codling.brain.turn_kinds.streamed import PromptTurn
from codling.brain.turn_kinds.user import UserTurn
from codling.brain.turns import command_of


def turn_for(turn: TurnContext, blocks: tuple[PromptBlock, ...]) -> PromptTurn:
    """The turn ``blocks`` start: a slash command codling answers, or a user turn (a prompt command such as
    ``/init`` is one, unless what it would make exists already)."""
    capped = cap_prompt(blocks)
    command = command_of(capped.blocks)
    prompted = command is not None and command[0] in PROMPT_COMMANDS
    if command is not None and (not prompted or (turn.state.cwd / AGENTS_FILE).exists()):
        return CommandTurn(turn, capped.blocks, capped.cut, command)
    return UserTurn(turn, capped.blocks, capped.cut, command)
