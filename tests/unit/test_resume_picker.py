"""The resume picker reaches every session of a directory (issue 32 item 6): 26 sessions recorded through the real
SessionStore, the oldest reached by paging and by a word of its title, with `codling -r`'s picker and the chat's
/resume."""

from __future__ import annotations

import io
import os
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from codling.brain.events import SessionTitled, TextDelta, TurnEnded, TurnStarted, Usage
from codling.brain.prompt import TextBlock
from codling.cli.chat import Chat
from codling.cli.chat_ports import ChatViews
from codling.cli.picker import PAGE_SIZE, pick_session
from codling.cli.render import TerminalRenderer
from codling.cli.session_plan import plan_session, resumable
from codling.config import Settings
from codling.llm.catalog import Catalog, ModelInfo
from codling.store.header import SessionHeader
from codling.store.ids import new_session_id
from codling.store.index import SessionStore
from tests.fakes.scenarios import Script

MODEL = ModelInfo("test:scripted", context_limit=100_000)
COUNT = 26
OLDEST_TITLE = "Port the lexer to Rust"
RETITLED = "Compiler front end"
"""A session the model titled: its first request holds words its title does not."""


async def record(store: SessionStore, cwd: Path, prompt: str, updated: float, title: str | None = None) -> str:
    """A one-turn session in ``cwd`` titled by its ``prompt`` (or by the model: ``title``), last updated at
    ``updated``; its id."""
    header = SessionHeader(new_session_id(), cwd, MODEL.id, "ask")
    file = store.create(header)
    recorder = store.recorder(header, file)
    started = TurnStarted("t1", prompt, False, datetime.now(UTC), (TextBlock(prompt),))
    for event in (started, TextDelta("t1", "Done."), TurnEnded("t1", "end_turn", Usage())):
        await recorder(event)
    if title is not None:
        await recorder(SessionTitled(title, "model"))
    file.close()
    os.utime(store.history_path(header.session_id), (updated, updated))
    return header.session_id


@pytest.fixture
async def recorded(settings: Settings, project: Path) -> list[str]:
    """26 sessions in ``project``, newest first; the oldest, the 26th, titled :data:`OLDEST_TITLE`."""
    store = SessionStore(settings.home)
    base = datetime(2026, 11, 20, tzinfo=UTC).timestamp()
    ids = [await record(store, project, OLDEST_TITLE, base)]
    ids += [await record(store, project, f"Session number {n}", base + 60 * n) for n in range(1, COUNT - 1)]
    ids += [await record(store, project, "Make the parser fast with a Pratt loop", base + 3600, title=RETITLED)]
    return ids[::-1]


def test_the_picker_pages_to_the_last_session_and_filters_by_a_word(
    settings: Settings, project: Path, recorded: list[str]
) -> None:
    sessions, where = resumable(settings, project)
    assert len(sessions) == COUNT

    store = SessionStore(settings.home)

    def pick(answers: str) -> tuple[str | None, str]:
        out = io.StringIO()
        chosen = pick_session(
            sessions,
            input=io.StringIO(answers),
            output=out,
            now=datetime.now(UTC),
            where=where,
            about=lambda session: store.first_request(session.session_id),  # as plan.pick gives it
        )
        return chosen, out.getvalue()

    chosen, shown = pick(f"m\nm\n{COUNT}\n")
    assert chosen == recorded[-1]
    assert listed(shown) == COUNT  # every session shown once, a page at a time
    assert shown.startswith(f"Sessions in {project} ({COUNT}, newest first):\n")
    assert f" 26. {OLDEST_TITLE}  · " in shown
    chosen, shown = pick("lexer\n1\n")
    assert chosen == recorded[-1]
    assert f"matching “lexer” (1 of {COUNT}):\n  1. {OLDEST_TITLE}  · " in shown
    chosen, shown = pick("pratt PARSER\n\n")  # words of its first request, which the model's title lacks
    assert chosen == recorded[0]
    assert f"matching “pratt PARSER” (1 of {COUNT}):\n  1. {RETITLED}  · " in shown


def listed(shown: str) -> int:
    """How many session lines ``shown`` holds."""
    return len(re.findall(r"\d+\. [^\n]* · [^\n]* · \d{8}-[0-9a-f]{12}\n", shown))


class Typed:
    """The chat's input line, scripted; Ctrl-D after the last line."""

    def __init__(self, *lines: str) -> None:
        self.lines = list(lines)

    async def read(self) -> str:
        if not self.lines:
            raise EOFError
        return self.lines.pop(0)

    def abort(self) -> None:
        self.lines.clear()


async def chat(settings: Settings, project: Path, *lines: str) -> str:
    """What a chat in ``project`` shows for the typed ``lines`` (no turn is run)."""
    catalog = Catalog({MODEL.id: MODEL})
    plan = plan_session(settings, catalog, MODEL.id, project, None, False, False)
    out = io.StringIO()
    renderer = TerminalRenderer(out, color=False, interactive=False)
    typed = Typed(*lines)
    the_chat = Chat(
        settings,
        catalog,
        plan,
        "yolo",
        input=typed,
        views=lambda: ChatViews(renderer),
        out=out,
        color=False,
        model_factory=Script([]).factory(),
    )
    assert await the_chat.run() == 0
    return out.getvalue()


async def test_resume_more_pages_on_and_numbers_name_what_was_listed(
    settings: Settings, project: Path, recorded: list[str]
) -> None:
    shown = await chat(settings, project, "/resume", "/resume more", "/resume more", "/resume more", f"/resume {COUNT}")
    assert listed(shown) == COUNT
    assert f"/resume more shows {COUNT - PAGE_SIZE} more" in shown
    assert "That is all of them (26); /resume WORDS lists those holding the words." in shown
    assert f"Resumed session {recorded[-1]} “{OLDEST_TITLE}”" in shown


async def test_resume_words_list_the_sessions_holding_them(
    settings: Settings, project: Path, recorded: list[str]
) -> None:
    shown = await chat(settings, project, "/resume LEXER rust", "/resume 1")
    assert f"matching “LEXER rust” (1 of {COUNT}):\n  1. {OLDEST_TITLE}  · " in shown
    assert f"Resumed session {recorded[-1]} “{OLDEST_TITLE}”" in shown
    shown = await chat(settings, project, "/resume pratt", "/resume 1")  # in its first request, not its title
    assert f"matching “pratt” (1 of {COUNT}):\n  1. {RETITLED}  · " in shown
    assert f"Resumed session {recorded[0]} “{RETITLED}”" in shown


async def test_resume_of_a_number_not_listed_or_words_nothing_holds_says_so(
    settings: Settings, project: Path, recorded: list[str]
) -> None:
    shown = await chat(settings, project, "/resume 12", "/resume", "/resume 12", "/resume parsnip")
    assert shown.count("12 is not one of the numbers /resume listed; /resume lists them.") == 2  # 10 were shown
    assert f"No session in {project} has “parsnip” in its title, first request or id. /resume lists them all." in shown
    assert "Resumed session" not in shown
