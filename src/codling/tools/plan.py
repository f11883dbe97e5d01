"""The update_plan tool: the model's list of steps for the task at hand, shown to the user as a plan.

The tool changes nothing on disk; its output carries the steps (``ToolOutput.plan``), which the turn loop turns
into a ``PlanUpdated`` event (an ACP ``plan`` update, a checklist in the terminal, a ``plan`` record).
"""

from __future__ import annotations

from pydantic_ai import RunContext

from codling.errors import ToolError
from codling.tools.base import ToolOutput
from codling.tools.deps import ToolDeps
from codling.vocabulary import STATUS_MARKS, PlanStep

MAX_STEPS = 50


async def update_plan(ctx: RunContext[ToolDeps], steps: list[PlanStep], explanation: str | None = None) -> ToolOutput:
    """Show the user your plan for the task: the whole list of steps, each with its status.

    Use it for work of three or more steps, not for a single quick action. Send the complete list every time
    (it replaces the previous one). Keep exactly one step in_progress while you work, and mark each step
    completed as soon as it is done, before starting the next. Add, split or drop steps as you learn more.

    Args:
        steps: Every step of the plan, in order: a short imperative sentence, its status (pending,
            in_progress or completed) and its priority (high, medium or low).
        explanation: Optionally, one sentence on why the plan changed.
    """
    if not steps:
        raise ToolError("the plan has no steps; send every step of the plan, each with its status")
    if len(steps) > MAX_STEPS:
        raise ToolError(f"the plan has {len(steps)} steps; keep it to {MAX_STEPS} or fewer, merging small ones")
    if any(not s.step.strip() for s in steps):
        raise ToolError("a step has no text; describe every step in a short sentence")
    if sum(s.status == "in_progress" for s in steps) > 1:
        raise ToolError("more than one step is in_progress; keep exactly one step in_progress at a time")
    steps = [PlanStep(" ".join(s.step.split()), s.status, s.priority) for s in steps]  # one line each
    done = sum(s.status == "completed" for s in steps)
    text = plan_text(steps)
    note = f"{explanation.strip()}\n" if explanation and explanation.strip() else ""
    return ToolOutput(
        text=f"Plan updated ({done} of {len(steps)} steps completed).",
        summary=f"{note}Plan ({done}/{len(steps)} done):\n{text}",
        plan=tuple(steps),
    )


def plan_text(steps: list[PlanStep] | tuple[PlanStep, ...]) -> str:
    """The plan as a checklist, one line per step: ``[x] done``, ``[>] doing``, ``[ ] to do``."""
    return "\n".join(f"{STATUS_MARKS[s.status]} {s.step}" for s in steps)
