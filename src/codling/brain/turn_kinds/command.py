"""A slash command answered by codling (``CommandTurn``): a turn like any other (recorded, replayed, shown in
every client) that the history does not keep; ``/compact`` runs a compaction (``compaction.py``), the others
``commands.run_slash_command``."""

from __future__ import annotations

from codling.brain.commands import run_slash_command
from codling.brain.rewinding import run_rewind
from codling.brain.turn_kinds.compaction import Compaction
from codling.brain.turn_kinds.streamed import PromptTurn
from codling.brain.turn_task import perform


class CommandTurn(PromptTurn):
    """A slash command codling answers itself (see the module's docstring)."""

    kind = "command"

    async def work(self) -> None:
        """Run the command (the pins it changes were changed as the turn started)."""
        assert self.command is not None, "a command turn has its command"
        name, argument = self.command
        if name == "compact":
            await perform(Compaction(self.turn, "command", argument or None))
        elif name in ("undo", "rewind"):
            await run_rewind(self.turn, name, argument)
        else:
            await run_slash_command(self.turn, name, argument)
