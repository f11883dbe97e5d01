"""The context block a turn carries before its prompt: kept in the history with the prompt (the next request
starts with the bytes this one sent), saying only what the blocks the history holds do not, in full again
after a compaction, and the same on restore whatever the day (issue 28: requests that extend the previous
one)."""

from __future__ import annotations

from datetime import date
from pathlib import Path

from pydantic_ai.messages import ModelMessage, ModelRequest, UserPromptPart

from codling.brain.context.layout import (
    CONTEXT_CLOSE,
    CONTEXT_NOTE,
    CONTEXT_OPEN,
    WITHDRAWN_HEADING,
    sections_of,
    unshown,
    withdrawn,
)
from codling.brain.context.pins import FACTS_HEADING, PINS_HEADING
from codling.brain.factory import open_session
from codling.brain.session import ConversationSession
from codling.config import Settings
from codling.llm.catalog import ModelInfo
from codling.store.header import SessionHeader
from codling.store.history import HistoryFile, HistoryRecorder, read_history
from tests.fakes.scenarios import Say, Script, user_prompt
from tests.fakes.summarizer import is_summary_request

MODEL = ModelInfo("test:roomy", context_limit=64_000, max_output_tokens=2_000)
DAY = date(2026, 11, 25)


def block(*body: str, first: bool = False) -> str:
    """A context block; the first of a history says what the tags are."""
    note = f"{CONTEXT_NOTE}\n\n" if first else ""
    return f"{CONTEXT_OPEN}\n{note}" + "\n\n".join(body) + f"\n{CONTEXT_CLOSE}"


def prompts(request: list[ModelMessage]) -> list[str]:
    return [
        str(p.content) for m in request if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, UserPromptPart)
    ]


def test_only_the_lines_no_block_showed_each_under_its_heading() -> None:
    sections = [("", ["Today's date: 2026-11-25"]), *sections_of(f"{PINS_HEADING}\n- a\n- b\n{FACTS_HEADING}\n- c")]
    assert unshown(sections, frozenset()) == (
        f"Today's date: 2026-11-25\n\n{PINS_HEADING}\n- a\n- b\n\n{FACTS_HEADING}\n- c"
    )
    shown = frozenset({"Today's date: 2026-11-25", PINS_HEADING, "- a", FACTS_HEADING, "- c"})
    # A heading said before is named again without its explanation.
    assert unshown(sections, shown) == "# Standing instructions from the user\n- b"
    assert unshown(sections, shown | {"- b"}) == ""


def test_a_withdrawn_pin_is_said_once() -> None:
    said = withdrawn(["a"])
    assert said == (WITHDRAWN_HEADING, ["- (withdrawn) a"]) and withdrawn([]) is None
    assert unshown([said], frozenset({"- a"})) == f"{WITHDRAWN_HEADING}\n- (withdrawn) a"
    assert unshown([said], frozenset({"- a", *said[1]})) == ""


def session_in(project: Path, settings: Settings, script: Script) -> ConversationSession:
    session = open_session(settings, MODEL, project, approver=None, mode="yolo", model_factory=script.factory())
    session.context.today = lambda: DAY
    return session


async def test_each_turn_says_what_is_new_and_the_next_request_extends_the_last(
    project: Path, settings: Settings, tmp_path: Path
) -> None:
    script = Script(
        [],
        fallback=lambda m: (
            [Say("## Goal\nKeep vendor/ as it is.\n\n## Next\nGo on with it.")]
            if is_summary_request(m)
            else [Say("ok")]
        ),
    )
    path = tmp_path / "history.jsonl"
    file = HistoryFile(path, "s1")
    file.write(SessionHeader("s1", project, MODEL.id, "yolo").record())
    session = session_in(project, settings, script)
    session.subscribe(HistoryRecorder(file))
    await session.run("Never touch vendor/. Where is the greeting?")
    first = prompts(script.requests[-1])[-1]
    # The rule is pinned, but the prompt right below says it: the block does not say it again.
    assert first == block("Today's date: 2026-11-25", first=True) + "\n\nNever touch vendor/. Where is the greeting?"

    await session.run("And the farewell?")
    # The request starts with the last one's bytes; nothing new to say, so no block.
    assert prompts(script.requests[-1]) == [first, "And the farewell?"]

    session.context.today = lambda: date(2026, 11, 26)
    await session.run("Go on.")
    assert prompts(script.requests[-1])[-1] == block("Today's date: 2026-11-26") + "\n\nGo on."

    await session.run("/pin use tabs")
    await session.run("Next.")
    # A /pin is in no prompt of the history: the block says it.
    assert prompts(script.requests[-1])[-1] == block(f"{PINS_HEADING}\n- use tabs") + "\n\nNext."

    await session.run("/unpin 1")  # the vendor rule, which the first prompt still states
    await session.run("Then?")
    gone = f"{WITHDRAWN_HEADING}\n- (withdrawn) Never touch vendor/."
    assert prompts(script.requests[-1])[-1] == block(gone) + "\n\nThen?"
    await session.run("More.")
    assert prompts(script.requests[-1])[-1] == "More."  # said once

    await session.run("/compact")
    await session.run("After.")
    # The blocks went with the compacted history: all of it again. The first prompt, kept word for word,
    # still states the withdrawn rule, so it is said withdrawn again.
    sent = prompts(script.requests[-1])[-1]
    assert user_prompt(sent) == "After." and "Never touch vendor/. Where is the greeting?" in sent
    assert block("Today's date: 2026-11-26", f"{PINS_HEADING}\n- use tabs", gone, first=True) in sent
    file.close()

    # Restored another day, the history holds the blocks as they were sent.
    restored = session_in(project, settings, Script([[Say("ok")]]))
    restored.context.today = lambda: date(2026, 12, 24)
    restored.restore(read_history(path).events)
    assert restored.state.entries == session.state.entries
    assert restored.state.shown == session.state.shown
