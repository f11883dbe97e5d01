"""`codling chat`'s loop, in process: inputs become turns of a recorded session, the chat's own commands switch
sessions or leave, Ctrl-C and Ctrl-D leave as documented. The input line is scripted; the model is a
FunctionModel; the sessions are real files under a private CODLING_HOME."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import io
import signal
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage, ModelRequest, UserPromptPart

from codling.brain.events import TurnEnded, TurnStarted
from codling.brain.slash import COMMANDS
from codling.cli.chat import EXIT_HINT, Chat, _home_relative
from codling.cli.chat_commands import CHAT_COMMANDS, ChatCommand, Prompt, UnknownCommand, describe_chat, parse_line
from codling.cli.chat_ports import ChatInput, ChatViews
from codling.cli.notify import Notifier
from codling.cli.render import TerminalRenderer
from codling.cli.session_plan import SessionPlan, open_live, plan_session
from codling.config import Settings
from codling.errors import CodlingError, ConfigError
from codling.llm.catalog import Catalog, ModelInfo
from codling.store.index import SessionStore
from codling.tools.ports import Answer, Approver, PermissionRequest
from codling.vocabulary import PermissionMode
from tests.fakes.approver import ScriptedApprover
from tests.fakes.deadlines import deadline
from tests.fakes.scenarios import Call, Gate, Say, Script, Until, user_prompt

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


def chat_in(
    settings: Settings,
    project: Path,
    typed: ChatInput,
    script: Script,
    plan: SessionPlan | None = None,
    mode: PermissionMode | None = "yolo",
    *,
    out: io.StringIO | None = None,
    approver: Approver | None = None,
    notifier: Notifier | None = None,
    **extra: Any,
) -> tuple[Chat, io.StringIO]:
    """A chat on a scripted model, its terminal a StringIO (``out``, or a new one); ``extra`` goes to Chat."""
    out = out if out is not None else io.StringIO()
    catalog = Catalog({MODEL.id: MODEL})
    plan = plan or plan_session(settings, catalog, MODEL.id, project, None, False, False)
    renderer = TerminalRenderer(out, color=False, interactive=False)
    chat = Chat(
        settings,
        catalog,
        plan,
        mode,
        input=typed,
        views=lambda: ChatViews(renderer, approver, notifier),
        out=out,
        color=False,
        model_factory=script.factory(),
        **extra,
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


KEY = "sk-ant-api03-" + "Q" * 40
"""A key of Anthropic's shape, in no variable: one the user types."""


async def test_a_key_typed_into_the_chat_reaches_the_model_but_is_not_stored(settings: Settings, project: Path) -> None:
    script = Script([[Say("Noted.")]])
    chat, _ = chat_in(settings, project, Typed(f"deploy with this key:\n{KEY}"), script)
    assert await chat.run() == 0
    assert prompts(script) == [f"deploy with this key:\n{KEY}"]  # the user meant the model to have it
    [session] = SessionStore(settings.home).list()
    directory = settings.home / "sessions" / session.session_id
    stored = (directory / "history.jsonl").read_bytes() + (directory / "meta.json").read_bytes()
    assert KEY.encode() not in stored and b"QQQQ" not in stored
    assert b'"kind":"turn_start","prompt":[{"type":"text","text":"deploy with this key:\\n[redacted]"}]' in stored
    assert b'"title": "deploy with this key: [redacted]"' in stored


class ModeAtEachRead(Typed):
    """The input line, scripted, noting the mode the chat says it is in (what the line shows) at each read."""

    def __init__(self, *items: str | type[BaseException]) -> None:
        super().__init__(*items)
        self.chat: Chat | None = None
        self.modes: list[str] = []

    async def read(self) -> str:
        assert self.chat is not None
        self.modes.append(self.chat.mode())
        return await super().read()


async def test_continuing_a_session_left_in_another_mode_says_so_and_each_line_has_the_live_mode(
    settings: Settings, project: Path
) -> None:
    first, _ = chat_in(settings, project, Typed("hello"), Script([[Say("Hi.")]]), mode="yolo")
    assert await first.run() == 0
    plan = plan_session(settings, Catalog({MODEL.id: MODEL}), MODEL.id, project, None, True, False)
    typed = ModeAtEachRead("/mode read-only", "/mode ask")
    chat, out = chat_in(settings, project, typed, Script([]), plan=plan, mode=None)
    typed.chat = chat
    assert await chat.run() == 0
    assert "yolo mode ·" in out.getvalue()
    assert "Continuing in yolo mode, as this session was left (the default is ask); /mode changes it." in out.getvalue()
    assert typed.modes == ["yolo", "read-only", "ask"]


async def test_a_new_session_or_an_explicit_mode_is_not_announced_as_restored(
    settings: Settings, project: Path
) -> None:
    first, out = chat_in(settings, project, Typed("hello"), Script([[Say("Hi.")]]), mode="yolo")
    assert await first.run() == 0
    assert "Continuing in" not in out.getvalue()
    plan = plan_session(settings, Catalog({MODEL.id: MODEL}), MODEL.id, project, None, True, False)
    chat, out = chat_in(settings, project, Typed(), Script([]), plan=plan, mode="ask")
    assert await chat.run() == 0
    assert "ask mode ·" in out.getvalue() and "Continuing in" not in out.getvalue()


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
    chat, out = chat_in(settings, project, Typed("/resume 19990101-0123456789ab", "hello"), Script([[Say("Hi.")]]))
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


def ctrl_c() -> None:
    """Ctrl-C as the terminal sends it when no input line is reading the keys: SIGINT, to this thread."""
    signal.pthread_kill(threading.get_ident(), signal.SIGINT)


async def test_ctrl_c_twice_during_a_turn_cancels_it_and_leaves_once_it_ended(
    settings: Settings, project: Path
) -> None:
    gate = Gate()
    script = Script([[Say("Working on it"), Until(gate)]])
    typed = Typed("go", "never read")
    chat, out = chat_in(settings, project, typed, script)
    running = asyncio.create_task(chat.run())
    await gate.arrival()
    ctrl_c()
    ctrl_c()
    assert await asyncio.wait_for(running, deadline(10)) == 0
    assert typed.items == ["never read"]  # it left after the cancelled turn, without asking for more
    shown = out.getvalue()
    assert EXIT_HINT not in shown and "continue it with: codling chat --resume" in shown
    [summary] = SessionStore(settings.home).list()
    assert turns(SessionStore(settings.home)) == {summary.session_id: ["go"]}


class InterruptedRead:
    """An input read during which Ctrl-C arrives twice as a signal (not as a key of the line); the read ends
    only when the chat aborts it."""

    def __init__(self) -> None:
        self.aborted = asyncio.Event()
        self.reads = 0

    async def read(self) -> str:
        self.reads += 1
        ctrl_c()
        ctrl_c()
        await asyncio.wait_for(self.aborted.wait(), 10)
        raise EOFError

    def abort(self) -> None:
        self.aborted.set()


async def test_ctrl_c_twice_with_no_turn_running_leaves(settings: Settings, project: Path) -> None:
    typed = InterruptedRead()
    chat, _ = chat_in(settings, project, typed, Script([]))
    assert await asyncio.wait_for(chat.run(), 10) == 0
    assert typed.aborted.is_set() and typed.reads == 1
    assert SessionStore(settings.home).list() == []


async def test_help_lists_the_commands_and_keys(settings: Settings, project: Path) -> None:
    chat, out = chat_in(settings, project, Typed("/help"), Script([]))
    assert await chat.run() == 0
    shown = out.getvalue()
    assert all(f"/{name}" in shown for name in [*CHAT_COMMANDS, *COMMANDS])
    assert "Ctrl-C cancels a running turn" in shown
    assert SessionStore(settings.home).list() == []  # /help is the chat's: no session, no turn


async def test_resume_with_no_session_yet_says_how_to_start_one(settings: Settings, project: Path) -> None:
    chat, out = chat_in(settings, project, Typed("/resume"), Script([]))
    assert await chat.run() == 0
    assert "there is no session to resume yet; start one with `codling run` or `codling chat`" in out.getvalue()


async def test_resuming_the_session_the_chat_is_in_changes_nothing(settings: Settings, project: Path) -> None:
    script = Script([[Say("One.")], [Say("Two.")]])
    typed = Typed("first", "/resume", "/resume 1", "second")
    chat, out = chat_in(settings, project, typed, script)
    assert await chat.run() == 0
    assert "That is this session." in out.getvalue()
    assert list(turns(SessionStore(settings.home)).values()) == [["first", "second"]]
    assert out.getvalue().count("continue it with: codling chat --resume") == 1  # it was never closed meanwhile


async def test_an_image_for_a_model_that_cannot_see_is_named_and_the_user_told(
    settings: Settings, project: Path
) -> None:
    (project / "shot.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 16)
    script = Script([[Say("I only know its name.")]])
    chat, out = chat_in(settings, project, Typed("what is in @shot.png?"), script)
    assert await chat.run() == 0
    assert f"{MODEL.id} cannot see images; it is only told their names." in out.getvalue()
    assert prompts(script)[0].startswith("what is in @shot.png?\n\n[image attached: shot.png (image/png)]")


async def test_a_session_another_writer_holds_cannot_start_and_the_chat_says_so(
    settings: Settings, project: Path
) -> None:
    catalog = Catalog({MODEL.id: MODEL})
    first = plan_session(settings, catalog, MODEL.id, project, None, False, False)
    holder = open_live(settings, first, "yolo", None, model_titles=False)  # e.g. another codling process
    try:
        resumed = plan_session(settings, catalog, None, project, holder.id, False, False)
        script = Script([])
        chat, out = chat_in(settings, project, Typed("hello", "/usage"), script, plan=resumed)
        assert await chat.run() == 0
    finally:
        await holder.close()
    said = (
        f"The session cannot start: session {holder.id} is open in another codling process (this process); close "
        "it there first"
    )
    assert out.getvalue().count(said) == 2
    assert script.requests == [] and prompts(script) == []
    assert turns(SessionStore(settings.home)) == {holder.id: []}


class WatchedKeys:
    """The terminal's keys during a turn, scripted: the test presses Esc by calling what the chat gave
    `watching`; `state` says whether the keys are being watched, paused (a question reads the terminal) or idle."""

    def __init__(self) -> None:
        self.state = "idle"
        self.on_escape: Callable[[], None] | None = None
        self.turns_watched = 0

    @contextlib.contextmanager
    def watching(self, on_escape: Callable[[], None]) -> Iterator[None]:
        self.state, self.on_escape = "watching", on_escape
        self.turns_watched += 1
        try:
            yield
        finally:
            self.state, self.on_escape = "idle", None

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        before, self.state = self.state, "paused"
        try:
            yield
        finally:
            self.state = before

    def escape(self) -> None:
        assert self.on_escape is not None, "Esc pressed while no turn is watched"
        self.on_escape()


async def test_esc_cancels_the_running_turn_and_the_chat_reads_on(settings: Settings, project: Path) -> None:
    gate = Gate()
    script = Script([[Say("Working on it"), Until(gate)], [Say("Next.")]])
    typed = Typed("go", "and then")
    keys = WatchedKeys()
    chat, out = chat_in(settings, project, typed, script, keys=keys)
    running = asyncio.create_task(chat.run())
    await gate.arrival()
    assert keys.state == "watching"
    keys.escape()
    assert await asyncio.wait_for(running, deadline(10)) == 0
    assert typed.items == [] and keys.turns_watched == 2 and keys.state == "idle"
    assert EXIT_HINT not in out.getvalue()  # Esc cancels the turn; it arms nothing for leaving
    store = SessionStore(settings.home)
    [summary] = store.list()
    events = store.read(summary.session_id).events
    assert [e.stop_reason for e in events if isinstance(e, TurnEnded)] == ["cancelled", "end_turn"]
    assert turns(store) == {summary.session_id: ["go", "and then"]}


async def test_a_permission_question_reads_the_terminal_with_the_keys_paused(settings: Settings, project: Path) -> None:
    keys = WatchedKeys()
    states: list[str] = []

    class Asking(ScriptedApprover):
        async def ask(self, request: PermissionRequest) -> Answer:
            states.append(keys.state)
            return await super().ask(request)

    script = Script([[Call("run_command", {"command": "echo hi"}, "c1")], [Say("Done.")]])
    chat, _ = chat_in(settings, project, Typed("run it"), script, mode="ask", approver=Asking("allow_once"), keys=keys)
    assert await asyncio.wait_for(chat.run(), 10) == 0
    assert states == ["paused"]
    assert keys.state == "idle"


class Loading:
    """The model stack loading in the background (cli/preload.py), resolved by the test."""

    def __init__(self) -> None:
        self.done: concurrent.futures.Future[CodlingError | None] = concurrent.futures.Future()
        self.starts = 0
        self.started = asyncio.Event()

    def start(self) -> None:
        self.starts += 1
        self.started.set()


class WaitingRead:
    """An input line the user is still typing into: the read ends only when the chat aborts it."""

    def __init__(self) -> None:
        self.reading = asyncio.Event()
        self.aborted = asyncio.Event()

    async def read(self) -> str:
        self.reading.set()
        await self.aborted.wait()
        raise EOFError

    def abort(self) -> None:
        self.aborted.set()


async def test_a_model_that_cannot_be_loaded_ends_the_chat_while_the_user_types(
    settings: Settings, project: Path
) -> None:
    """The input line opens before the model stack is loaded (cli/preload.py); a model that then turns out
    unusable is said at once and the chat leaves with exit 2, no session recorded."""
    loading = Loading()
    typed = WaitingRead()
    chat, out = chat_in(settings, project, typed, Script([]), preload=loading)
    running = asyncio.create_task(chat.run())
    await asyncio.wait_for(typed.reading.wait(), 10)  # the input line is open: nothing waited for the model
    failure = ConfigError("cannot use model 'nosuch:model'")
    threading.Thread(target=loading.done.set_result, args=(failure,)).start()
    assert await asyncio.wait_for(running, deadline(10)) == 2
    assert out.getvalue().endswith("codling: cannot use model 'nosuch:model'\n")
    assert SessionStore(settings.home).list() == []


async def test_the_first_turn_waits_for_the_model_stack(settings: Settings, project: Path) -> None:
    loading = Loading()
    script = Script([[Say("Hi.")]])
    chat, out = chat_in(settings, project, Typed("hello"), script, preload=loading)
    running = asyncio.create_task(chat.run())
    # The turn started the loading (no input line was drawn here to start it) and now waits for it.
    await asyncio.wait_for(loading.started.wait(), deadline(10))
    assert script.requests == [] and not running.done() and loading.starts == 1
    loading.done.set_result(None)
    assert await asyncio.wait_for(running, deadline(10)) == 0
    assert prompts(script) == ["hello"] and "Hi." in out.getvalue()


async def test_a_first_prompt_on_an_unusable_model_is_not_run(settings: Settings, project: Path) -> None:
    loading = Loading()
    loading.done.set_result(ConfigError("model 'x:y' needs X_API_KEY"))
    script = Script([[Say("never")]])
    chat, out = chat_in(settings, project, Typed("never read"), script, preload=loading)
    assert await asyncio.wait_for(chat.run("hello"), 10) == 2
    assert script.requests == [] and "codling: model 'x:y' needs X_API_KEY" in out.getvalue()
    assert SessionStore(settings.home).list() == []
