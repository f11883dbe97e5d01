"""The delegate tool: hand a self-contained task to a sub-agent (planner, reviewer or coder) that works in a
session of its own and answers with its result (``brain/delegates.py`` runs it, through ``ToolDeps.delegator``)."""

from __future__ import annotations

from pydantic_ai import RunContext

from codling.errors import ToolError
from codling.tools.base import ShownResult, ToolOutput
from codling.tools.deps import ToolDeps
from codling.tools.ports import DelegateRole
from codling.tools.shell import trim_middle
from codling.vocabulary import Location

SUMMARY_REPLY_CHARS = 1_500
"""Most characters of a delegate's answer kept in the call's summary (what later turns see of it)."""


async def delegate(
    ctx: RunContext[ToolDeps], agent: DelegateRole, task: str, context: str = "", carryover: bool = False
) -> ToolOutput:
    """Hand a self-contained task to a sub-agent and get its answer back.

    The sub-agent starts with nothing of this conversation: it gets only the task, the context you give it
    and what the last turns did. Use it for work that is easier with a fresh view:
    - planner: reads the code and returns a step-by-step plan (it shows the plan to the user); it cannot edit
      files or run commands.
    - reviewer: reads the code, may run commands such as tests, and returns concrete findings; it cannot edit
      files.
    - coder: makes a well-specified change (reads, edits, runs commands) and reports what it did.

    Args:
        agent: Which sub-agent: planner, reviewer or coder.
        task: What it should do, stated completely (it cannot ask you questions).
        context: What it needs to know that the task does not say: files, decisions, constraints.
        carryover: Also give it the summary of its own previous run in this session (for follow-ups).
    """
    deps = ctx.deps
    if deps.delegator is None:
        raise ToolError("delegates cannot delegate further; do the work yourself")
    if not task.strip():
        raise ToolError("the task is empty; state what the sub-agent should do")
    outcome = await deps.delegator.delegate(ctx.tool_call_id or "", agent, task.strip(), context.strip(), carryover)
    if outcome.error or outcome.stop_reason != "end_turn":
        # No answer to rely on: say what it did, so the work it did (edits, commands) is not lost.
        why = outcome.error or f"it stopped early ({outcome.stop_reason})"
        done = "\n".join(outcome.steps) or "(no tool calls)"
        partial = f"\nIts last words:\n{trim_middle(outcome.reply, SUMMARY_REPLY_CHARS)}" if outcome.reply else ""
        raise ToolError(f"the {agent} did not finish: {why}\nWhat it did:\n{done}{partial}")
    reply = outcome.reply or "(no answer)"
    task_line = " ".join(task.split())
    summary = f"{agent} on: {task_line[:300]}\n{trim_middle(reply, SUMMARY_REPLY_CHARS)}"
    if outcome.changed:
        summary += "\nFiles it changed: " + ", ".join(deps.workspace.display(p) for p in outcome.changed)
    locations = tuple(Location(p) for p in outcome.changed)
    shown = ShownResult(steps="\n".join(outcome.steps), diffs=outcome.diffs)
    return ToolOutput(text=reply, summary=summary, locations=locations, changed=outcome.changed, shown=shown)
