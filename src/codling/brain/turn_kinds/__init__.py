"""The kinds of turn a user's prompt starts, one class each, with the lifecycle of ``brain/turn_task.py``:
``user.UserTurn`` (the model), ``command.CommandTurn`` (a slash command codling answers), and the
``compaction.Compaction`` step either may run, around what they share (``streamed.PromptTurn``);
``choice.turn_for`` picks one for a prompt. (Special turns are ``special_turns.SpecialTask``.)"""
