"""`codling chat`'s loop, in process: inputs become turns of a recorded session, the chat's own commands switch
sessions or leave, Ctrl-C and Ctrl-D leave as documented. The input line is scripted; the model is a
FunctionModel; the sessions are real files under a private CODLING_HOME."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from pydantic_ai.messages import ModelMessage, ModelRequest, UserPromptPart

from codling.brain.events import TurnStarted
from codling.brain.turns import COMMANDS
from codling.cli.chat import (
    CHAT_COMMANDS,
    EXIT_HINT,
    Chat,
    ChatCommand,
    Prompt,
    UnknownCommand,
    _home_relative,
    describe_chat,
    parse_line,
)
from codling.cli.plan import plan_session
from codling.cli.render import TerminalRenderer
from codling.config import Settings
from codling.llm.catalog import Catalog, ModelInfo
from codling.store.index import SessionStore
from tests.fakes.scenarios import Say, Script, user_prompt

MODEL = ModelInfo("test:scripted", context_limit=100_000)


class Typed:
    """The input line, scripted: each item is a line typed, or the exception a key raises (KeyboardInterrupt
    for Ctrl-C on an empty line, EOFError for Ctrl-D); after the last item, Ctrl-D."""

    def __init__(self, *items: str | type[BaseException]) -> None:
        self.items = list(items)
        self.reads = 0

    async def read(self) -> str:
        self.reads += 1
        if not self.items:
            raise EOFError
        item = self.items.pop(0)
        if isinstance(item, str):
            return item
        raise item()

    def abort(self) -> None:
        self.items.clear()


def chat_in(settings: Settings, project: Path, typed: Typed, script: Script) -> tuple[Chat, io.StringIO]:
    out = io.StringIO()
    catalog = Catalog({MODEL.id: MODEL})
    plan = plan_session(settings, catalog, MODEL.id, project, None, False, False)
    renderer = TerminalRenderer(out, color=False, interactive=False)
    chat = Chat(
        settings,
        catalog,
        plan,
        "yolo",
        input=typed,
        renderer=renderer,
        approver=None,
        out=out,
        color=False,
        model_factory=script.factory(),
    )
    return chat, out


def said(message: ModelMessage) -> str:
    """What the user said in a request message, as the model saw it."""
    assert isinstance(message, ModelRequest)
    part = message.parts[-1]
    assert isinstance(part, UserPromptPart) and isinstance(part.content, str)
    return user_prompt(part.content)


def prompts(script: Script) -> list[str]:
    """What the user said in each model request."""
    return [said(request[-1]) for request in script.requests]


def turns(store: SessionStore) -> dict[str, list[str]]:
    """Each recorded session's prompts, by id."""
    return {
        s.session_id: [e.prompt for e in store.read(s.session_id).events if isinstance(e, TurnStarted)]
        for s in store.list()
    }


@pytest.mark.parametrize(
    ("line", "action"),
    [
        ("fix the tests", Prompt("fix the tests")),
        ("  spaced out  \n", Prompt("spaced out")),
        ("", None),
        ("   \n ", None),
        ("/exit", ChatCommand("exit")),
        ("/resume 9f3c", ChatCommand("resume", "9f3c")),
        ("/compact keep the API notes", Prompt("/compact keep the API notes", command=True)),
        ("/usage", Prompt("/usage", command=True)),
        ("/frobnicate now", UnknownCommand("frobnicate")),
        ("/etc/hosts looks odd", Prompt("/etc/hosts looks odd")),  # a path, not a command
        ("why does /usage say 0?", Prompt("why does /usage say 0?")),
    ],
)
def test_what_an_input_asks_for(line: str, action: object) -> None:
    assert parse_line(line) == action


def test_help_names_every_command_of_the_chat_and_of_the_session() -> None:
    shown = describe_chat()
    for name in [*CHAT_COMMANDS, *COMMANDS]:
        assert f"/{name}" in shown
    assert "Ctrl-D" in shown and "@path" in shown


async def test_each_input_is_a_turn_of_one_recorded_session(settings: Settings, project: Path) -> None:
    script = Script([[Say("First answer.")], [Say("Second answer.")]])
    typed = Typed("what is in @README.md?", "and now?")
    chat, out = chat_in(settings, project, typed, script)
    assert await chat.run() == 0
    assert prompts(script) == [
        f"what is in @README.md?\n\n{(project / 'README.md').as_uri()}\n```\n# demo\n```",
        "and now?",
    ]
    [(session_id, recorded)] = turns(SessionStore(settings.home)).items()
    assert recorded == ["what is in @README.md? @README.md", "and now?"]  # the prompt, then what it attached
    shown = out.getvalue()
    assert "attached README.md (1 line)" in shown
    assert "First answer." in shown and "Second answer." in shown
    assert f"continue it with: codling chat --resume {session_id}" in shown


async def test_opening_the_chat_and_leaving_records_nothing(settings: Settings, project: Path) -> None:
    chat, out = chat_in(settings, project, Typed("", "/exit", "never read"), Script([]))
    assert await chat.run() == 0
    assert SessionStore(settings.home).list() == []
    assert "recorded" not in out.getvalue()


async def test_ctrl_c_at_an_empty_prompt_warns_and_a_second_one_leaves(settings: Settings, project: Path) -> None:
    script = Script([[Say("Answer.")]])
    typed = Typed(KeyboardInterrupt, "go on", KeyboardInterrupt, KeyboardInterrupt, "never read")
    chat, out = chat_in(settings, project, typed, script)
    assert await chat.run() == 0
    assert typed.items == ["never read"]  # the first Ctrl-C only warned; a typed line disarmed it
    assert out.getvalue().count(EXIT_HINT) == 2
    assert prompts(script) == ["go on"]


async def test_an_unknown_command_is_refused_without_a_turn(settings: Settings, project: Path) -> None:
    chat, out = chat_in(settings, project, Typed("/frobnicate"), Script([]))
    assert await chat.run() == 0
    assert "/frobnicate is not a command; /help lists them." in out.getvalue()
    assert SessionStore(settings.home).list() == []


async def test_session_commands_run_as_recorded_turns(settings: Settings, project: Path) -> None:
    chat, out = chat_in(settings, project, Typed("/mode read-only", "/usage"), Script([]))
    assert await chat.run() == 0
    [summary] = SessionStore(settings.home).list()
    stored = SessionStore(settings.home).read(summary.session_id)
    assert [e.prompt for e in stored.events if isinstance(e, TurnStarted)] == ["/mode read-only", "/usage"]
    assert stored.mode == "read-only"  # the next user of the session finds it in the mode it was left in
    assert "Context: " in out.getvalue()


async def test_new_starts_another_session_and_resume_goes_back_to_the_first(settings: Settings, project: Path) -> None:
    script = Script([[Say("One.")], [Say("Two.")], [Say("Three.")]])
    typed = Typed("first", "/new", "second", "/resume", "/resume 2", "third")
    chat, out = chat_in(settings, project, typed, script)
    assert await chat.run() == 0
    store = SessionStore(settings.home)
    recorded = turns(store)
    assert sorted(recorded.values()) == [["first", "third"], ["second"]]
    # The resumed session's history went with the third request.
    history = [said(m) for m in script.requests[2] if isinstance(m, ModelRequest)]
    assert history[0] == "first" and history[-1] == "third"
    shown = out.getvalue()
    assert "Sessions in " in shown and "  2. " in shown
    assert "The last turn of this session:" in shown
    assert "Resumed session " in shown


async def test_resume_of_an_unknown_session_says_so_and_stays(settings: Settings, project: Path) -> None:
    chat, out = chat_in(settings, project, Typed("/resume 19990101-nothere", "hello"), Script([[Say("Hi.")]]))
    assert await chat.run() == 0
    assert "Not resumed: " in out.getvalue()
    assert len(SessionStore(settings.home).list()) == 1


def test_the_cwd_is_shown_from_home_only_when_it_is_under_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home, sibling = tmp_path / "me", tmp_path / "me-secrets"
    (home / "proj").mkdir(parents=True)
    sibling.mkdir()
    monkeypatch.setenv("HOME", str(home))
    shown = [_home_relative(p) for p in (home / "proj", home, sibling, sibling / "proj")]
    assert shown == ["~/proj", str(home), str(sibling), str(sibling / "proj")]
