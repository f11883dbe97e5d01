"""A user turn (``UserTurn``): the prompt run through the model (``brain/model_turn.py``), after a compaction
when the context would pass its threshold (kept in the history: ``PromptTurn.record``). A prompt command
(``/init``) is one, with codling's prompt."""

from __future__ import annotations

from codling.brain.model_turn import ModelTurn
from codling.brain.turn_kinds.compaction import compact_if_due
from codling.brain.turn_kinds.streamed import PromptTurn


class UserTurn(PromptTurn):
    """The user's prompt through the model (see the module's docstring)."""

    kind = "user"

    async def work(self) -> None:
        """Compact first past the threshold (its own step), then run the prompt through the model."""
        await compact_if_due(self.turn, self.user_text)
        self.stop, self.usage = await ModelTurn(self.turn).run(self.user_text, self.images)
