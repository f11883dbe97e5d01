"""The turn runner: one lifecycle for every kind of turn (``turn_task.perform``), which kind a prompt starts
(``turn_kinds.choice.turn_for``), and what each kind keeps."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from codling.brain.builtin_turns import prompt_text
from codling.brain.events import TextDelta, TurnEnded
from codling.brain.factory import open_session
from codling.brain.prompt import TextBlock
from codling.brain.restore import follow
from codling.brain.session import ConversationSession
from codling.brain.turn_context import TurnContext
from codling.brain.turn_kinds.choice import turn_for
from codling.brain.turn_kinds.command import CommandTurn
from codling.brain.turn_kinds.user import UserTurn
from codling.brain.turn_task import TurnTask, perform
from codling.brain.turns import TurnLog
from codling.config import Settings
from codling.llm.catalog import ModelInfo
from tests.fakes.deadlines import deadline
from tests.fakes.scenarios import Say, Script

MODEL = ModelInfo("test:turn-kinds", context_limit=100_000)


class Recorded(TurnTask[str]):
    """A turn that records its lifecycle; ``run`` waits on ``gate`` or raises ``error``; ``abort`` answers
    ``absorbs``."""

    kind = "user"

    def __init__(self, *, error: Exception | None = None, absorbs: bool = True) -> None:
        self.calls: list[str] = []
        self.error = error
        self.absorbs = absorbs
        self.gate: asyncio.Future[None] | None = None
        self.running = asyncio.Event()
        self.cancelling_at_finish: int | None = None

    def start(self) -> None:
        self.calls.append("start")

    async def run(self) -> None:
        self.calls.append("run")
        self.running.set()
        if self.error is not None:
            raise self.error
        if self.gate is not None:
            await self.gate

    def abort(self, error: Exception | asyncio.CancelledError) -> bool:
        self.calls.append(f"abort:{type(error).__name__}")
        return self.absorbs

    async def finish(self) -> str:
        task = asyncio.current_task()
        assert task is not None
        self.cancelling_at_finish = task.cancelling()
        self.calls.append("finish")
        return "done"


async def test_a_turn_starts_runs_and_finishes_in_that_order() -> None:
    task = Recorded()
    assert await perform(task) == "done"
    assert task.calls == ["start", "run", "finish"]


async def test_a_failure_the_turn_absorbs_is_aborted_then_finished() -> None:
    task = Recorded(error=ValueError("boom"))
    assert await perform(task) == "done"
    assert task.calls == ["start", "run", "abort:ValueError", "finish"]


async def test_a_failure_the_turn_refuses_goes_through_without_finishing() -> None:
    task = Recorded(error=ValueError("boom"), absorbs=False)
    with pytest.raises(ValueError, match="boom"):
        await perform(task)
    assert task.calls == ["start", "run", "abort:ValueError"]


async def test_an_absorbed_cancel_is_taken_back_so_finish_runs_to_its_end() -> None:
    task = Recorded()
    task.gate = asyncio.get_running_loop().create_future()
    running = asyncio.create_task(perform(task))
    await asyncio.wait_for(task.running.wait(), deadline(10))
    running.cancel()
    assert await running == "done"
    assert task.calls == ["start", "run", "abort:CancelledError", "finish"]
    # Taken back: an ``asyncio.timeout`` or task group inside ``finish`` would otherwise end it at once.
    assert task.cancelling_at_finish == 0


async def test_a_cancel_the_turn_refuses_cancels_it() -> None:
    task = Recorded(absorbs=False)
    task.gate = asyncio.get_running_loop().create_future()
    running = asyncio.create_task(perform(task))
    await asyncio.wait_for(task.running.wait(), deadline(10))
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    assert task.calls == ["start", "run", "abort:CancelledError"]


def make_session(project: Path, settings: Settings, script: Script) -> ConversationSession:
    return open_session(settings, MODEL, project, approver=None, mode="yolo", model_factory=script.factory())


def context_of(session: ConversationSession) -> TurnContext:
    return TurnContext("t1", session, TurnLog(1, ""), lambda _item: None, follow, None)


@pytest.mark.parametrize(
    ("prompt", "agents_md", "kind"),
    [
        ("fix the bug", False, UserTurn),
        ("/usage", False, CommandTurn),
        ("/compact keep the plan", False, CommandTurn),
        ("/init", False, UserTurn),  # codling's prompt through the model
        ("/init", True, CommandTurn),  # answered by codling: AGENTS.md is there
        ("/help", False, CommandTurn),
        ("/nosuch", False, UserTurn),  # not a command: a prompt like any other
    ],
)
def test_a_prompt_starts_the_kind_of_turn_it_names(
    project: Path, settings: Settings, prompt: str, agents_md: bool, kind: type
) -> None:
    if agents_md:
        (project / "AGENTS.md").write_text("# guide\n")
    turn = turn_for(context_of(make_session(project, settings, Script([]))), (TextBlock(prompt),))
    assert type(turn) is kind


async def test_an_answered_prompt_command_is_kept_in_the_history_and_a_report_is_not(
    project: Path, settings: Settings
) -> None:
    (project / "AGENTS.md").write_text("# guide\n")
    script = Script([])
    session = make_session(project, settings, script)
    await session.run("/init")
    await session.run("/usage")
    assert script.requests == []  # codling answered both
    entries = [(e.role, e.text) for e in session.state.entries]
    # /init's prompt and codling's answer; /usage leaves no trace in the history.
    assert entries == [("user", prompt_text("init")), ("assistant", entries[1][1])]
    assert entries[1][1].startswith(f"AGENTS.md already exists in {project}")
    await session.close()


async def test_each_turn_gets_a_context_of_its_own(project: Path, settings: Settings) -> None:
    session = make_session(project, settings, Script([[Say("one")], [Say("two")]]))
    seen: list[TurnContext | None] = []

    async def observe(event: object) -> None:
        if isinstance(event, TextDelta | TurnEnded):
            seen.append(session.turns.current)

    session.subscribe(observe)
    first = await session.run("first")
    second = await session.run("second")
    assert (first.text, second.text) == ("one", "two")
    one, two = seen[0], seen[-1]
    assert one is not None and two is not None and one is not two
    assert (one.id, two.id) == (first.turn_id, second.turn_id)
    assert (one.log.turn_number, two.log.turn_number) == (1, 2)
    assert not session.running and one.delivered.is_set()
    await session.close()
