"""A recorded reply reads as it did live (issue 32 item 6): styled, the transcript (`sessions show`, and the last turn
a resumed chat shows) renders its markdown block by block at the terminal's width; plain (NO_COLOR, a pipe), it is
the text the model wrote."""

from __future__ import annotations

import io
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from codling.brain.events import Event, TextDelta, TurnEnded, TurnStarted, Usage
from codling.brain.prompt import TextBlock
from codling.cli.chat import Chat
from codling.cli.chat_ports import ChatViews
from codling.cli.render import TerminalRenderer
from codling.cli.session_plan import plan_session
from codling.cli.transcript import print_transcript
from codling.config import Settings
from codling.llm.catalog import Catalog, ModelInfo
from codling.store.header import SessionHeader
from codling.store.ids import new_session_id
from codling.store.index import SessionStore

MODEL = ModelInfo("test:scripted", context_limit=100_000)
REPLY = """# Setting it up

Install it with **care**, then run the *checks*: the paragraph runs past a narrow window's edge ENDPARA.

- a list item that is long enough to need a second line at forty columns ENDITEM
- another item

```sh
curl -fsSL https://example.com/install.sh | sh -s -- --yes --prefix=/usr/local/long/path ENDCODE
```

Done."""
STARTED = TurnStarted("t1", "set it up", False, datetime(2025, 1, 2, 8, 30, tzinfo=UTC), (TextBlock("set it up"),))
TURN: list[Event] = [STARTED, TextDelta("t1", REPLY), TurnEnded("t1", "end_turn", Usage())]
ESCAPES = re.compile(r"\x1b\[[0-9;]*m")


def plain(markdown: str) -> str:
    """The characters of ``markdown`` a reader sees, spaces dropped: no fences, markers, emphasis marks."""
    kept = [re.sub(r"^\s*(#+ |[-*] )", "", line) for line in markdown.splitlines() if not line.startswith("```")]
    return "".join("".join(kept).replace("*", "").split())


def shown(output: str) -> str:
    """What a terminal shows of ``output``, spaces dropped: no escape codes, bullets or rules."""
    return "".join(re.sub(r"[•\u2500-\u257f]", "", ESCAPES.sub("", output)).split())


@pytest.mark.parametrize("width", [40, 80])
async def test_a_styled_transcript_renders_the_reply_s_markdown_as_live(
    width: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", str(width))  # how rich learns a terminal's width when it cannot ask it
    out = io.StringIO()
    print_transcript(TURN, out, color=True)
    reply = out.getvalue().split(" set it up\n", 1)[1]  # after the prompt's line
    text = ESCAPES.sub("", reply)
    assert "**" not in text and "# Setting" not in text and "```" not in text  # rendered, not raw
    assert "\x1b[1m" in reply  # bold: the heading, **care**
    assert shown(text) == plain(REPLY)  # every character, in order, none cut at the width
    assert max(len(line) for line in text.splitlines()) <= width
    # Drawn as the live renderer drew it, deltas and all.
    live = io.StringIO()
    renderer = TerminalRenderer(live, color=True, interactive=False)
    await renderer(STARTED)
    for start in range(0, len(REPLY), 9):
        await renderer(TextDelta("t1", REPLY[start : start + 9]))
    await renderer(TurnEnded("t1", "end_turn", Usage()))
    renderer.close()
    assert reply == live.getvalue()


def test_a_plain_transcript_keeps_the_text_as_written() -> None:
    out = io.StringIO()
    print_transcript(TURN, out, color=False)
    assert out.getvalue() == f"Turn 1 · {STARTED.started_at.astimezone():%Y-%m-%d %H:%M}\n> set it up\n{REPLY}\n"


async def test_a_resumed_chat_renders_its_last_turn_s_markdown(
    settings: Settings, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "40")  # how rich learns a terminal's width when it cannot ask it
    store = SessionStore(settings.home)
    header = SessionHeader(new_session_id(), project, MODEL.id, "ask")
    recorder = store.recorder(header, file := store.create(header))
    for event in TURN:
        await recorder(event)
    file.close()
    catalog = Catalog({MODEL.id: MODEL})
    plan = plan_session(settings, catalog, None, project, header.session_id, False, False)
    out = io.StringIO()

    class Leave:
        async def read(self) -> str:
            raise EOFError

        def abort(self) -> None:
            pass

    renderer = TerminalRenderer(out, color=True, interactive=False)
    chat = Chat(settings, catalog, plan, None, input=Leave(), views=lambda: ChatViews(renderer), out=out, color=True)
    assert await chat.run() == 0
    intro = ESCAPES.sub("", out.getvalue())
    last_turn = intro.split(" set it up\n", 1)[1].split("Resumed session", 1)[0]
    assert "**" not in last_turn and "# Setting" not in last_turn and "```" not in last_turn
    assert shown(last_turn) == plain(REPLY)
    assert max(len(line) for line in last_turn.splitlines()) <= 40
