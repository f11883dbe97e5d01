"""A provider cannot make a turn lie, hang or wait silently: cut streams, stalls and retries, end to end through
the session against the loopback OpenAI server (tests/fakes/openai_server.py), with the real OpenAI client
built by ``llm/providers.py``."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from dataclasses import replace
from io import StringIO
from pathlib import Path

import pytest
from acp import helpers

from codling.acp.translate import translate
from codling.brain.drive import CUT_OFF, stalled
from codling.brain.events import Event, ProviderRetrying, TextDelta, TurnEnded, TurnFailed, TurnStarted
from codling.brain.factory import open_session
from codling.brain.retries import RetryPolicy
from codling.brain.session import ConversationSession
from codling.cli.render import TerminalRenderer
from codling.config import Settings
from codling.llm.catalog import ModelInfo
from codling.llm.providers import build_model
from codling.store.records import event_record
from tests.fakes.deadlines import deadline
from tests.fakes.openai_server import ErrorReply, OpenAIServer, Reply, ToolCall, running_server

MODEL = ModelInfo("openai-chat:fake-model", context_limit=100_000)


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with running_server() as server:
        yield server


class FakeSleep:
    """Records each wait and returns at once (or never, with ``forever``)."""

    def __init__(self, *, forever: bool = False) -> None:
        self.waits: list[float] = []
        self.forever = forever

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
        if self.forever:
            await asyncio.Event().wait()


def session_on(
    server: OpenAIServer, project: Path, settings: Settings, sleep: FakeSleep, idle: float = 120.0
) -> ConversationSession:
    session = open_session(
        replace(settings, titles=False, stream_idle_timeout=idle),
        MODEL,
        project,
        approver=None,
        mode="read-only",
        model_factory=lambda model_id: build_model(model_id, idle_timeout=idle, env=server.env()),
    )
    session.options = replace(session.options, retry=RetryPolicy(sleep=sleep))
    return session


async def turn(session: ConversationSession, prompt: str = "hi") -> list[Event]:
    async with asyncio.timeout(deadline(10)):  # liveness only
        return [event async for event in session.stream(prompt)]


def text_of(events: list[Event]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def retries(events: list[Event]) -> list[ProviderRetrying]:
    return [e for e in events if isinstance(e, ProviderRetrying)]


# -- a stream cut short --------------------------------------------------------------------------------------


async def test_a_stream_cut_without_finish_reason_fails_the_turn_and_keeps_the_partial_reply(
    server: OpenAIServer, project: Path, settings: Settings
) -> None:
    server.enqueue(Reply(text=["Half an ", "answer"], cut=True))
    session = session_on(server, project, settings, FakeSleep())

    events = await turn(session)

    assert text_of(events) == "Half an answer"
    assert isinstance(events[0], TurnStarted)
    assert [e for e in events if isinstance(e, TurnFailed)] == [TurnFailed(events[0].turn_id, CUT_OFF, "provider")]
    assert isinstance(events[-1], TurnEnded) and events[-1].error
    assert session.state.entries[-1].text == f"Half an answer\n\n[Error] {CUT_OFF}"
    assert len(server.requests) == 1  # output had been shown: never retried


async def test_a_complete_stream_is_a_complete_reply(server: OpenAIServer, project: Path, settings: Settings) -> None:
    server.enqueue(Reply(text=["Whole ", "answer"]))
    session = session_on(server, project, settings, FakeSleep())

    events = await turn(session)

    assert text_of(events) == "Whole answer"
    assert not [e for e in events if isinstance(e, TurnFailed)]
    assert session.state.entries[-1].text == "Whole answer"


# -- a stream that stalls ------------------------------------------------------------------------------------


async def test_a_stalled_stream_fails_the_turn_after_the_idle_timeout(
    server: OpenAIServer, project: Path, settings: Settings
) -> None:
    # Chunk 0 opens the message; 1 and 2 carry text; then the server sends nothing more.
    server.enqueue(Reply(text=["Partial ", "reply"], stall_after=3))
    session = session_on(server, project, settings, FakeSleep(), idle=0.5)

    events = await turn(session)

    assert isinstance(events[0], TurnStarted)
    assert [e for e in events if isinstance(e, TurnFailed)] == [TurnFailed(events[0].turn_id, stalled(0.5), "provider")]
    assert "No data from the model provider for 0.5 s" in stalled(0.5)
    assert session.state.entries[-1].text == f"Partial reply\n\n[Error] {stalled(0.5)}"


async def test_a_provider_silent_before_answering_fails_the_turn_after_the_idle_timeout(
    server: OpenAIServer, project: Path, settings: Settings
) -> None:
    server.enqueue(Reply(text=["never sent"], stall_after=0))
    sleep = FakeSleep()
    session = session_on(server, project, settings, sleep, idle=0.5)

    events = await turn(session)

    assert isinstance(events[0], TurnStarted)
    assert [e for e in events if isinstance(e, TurnFailed)] == [TurnFailed(events[0].turn_id, stalled(0.5), "provider")]
    assert sleep.waits == []  # a timeout is not retried: the user would wait the whole timeout again


# -- retries -------------------------------------------------------------------------------------------------


async def test_a_long_retry_after_is_capped_shown_and_the_retry_completes_the_turn(
    server: OpenAIServer, project: Path, settings: Settings
) -> None:
    server.enqueue(ErrorReply.rate_limited(retry_after=120), Reply(text="finally"))
    sleep = FakeSleep()
    session = session_on(server, project, settings, sleep)

    events = await turn(session)

    assert sleep.waits == [30.0]
    assert isinstance(events[0], TurnStarted)
    turn_id = events[0].turn_id
    (waiting, retrying) = retries(events)
    assert waiting == ProviderRetrying(turn_id, waiting.call_id, 2, 3, 30.0, "HTTP 429")
    assert retrying == replace(waiting, status="retrying")
    assert waiting.title == "Model provider busy (HTTP 429): retrying in 30 s (attempt 2 of 3)"
    assert text_of(events) == "finally"
    assert isinstance(events[-1], TurnEnded) and not events[-1].error
    assert len(server.requests) == 2


async def test_a_503_is_retried_after_a_backoff(server: OpenAIServer, project: Path, settings: Settings) -> None:
    server.enqueue(ErrorReply.server_error(status=503), Reply(text="back"))
    sleep = FakeSleep()
    session = session_on(server, project, settings, sleep)

    events = await turn(session)

    assert sleep.waits == [1.0]
    assert [(r.reason, r.status) for r in retries(events)] == [("HTTP 503", "waiting"), ("HTTP 503", "retrying")]
    assert text_of(events) == "back"


async def test_exhausted_retries_fail_the_turn_with_a_readable_error(
    server: OpenAIServer, project: Path, settings: Settings
) -> None:
    server.enqueue(*[ErrorReply.server_error("still down", status=503)] * 3)
    sleep = FakeSleep()
    session = session_on(server, project, settings, sleep)

    events = await turn(session)

    assert sleep.waits == [1.0, 2.0]
    (failed,) = [e for e in events if isinstance(e, TurnFailed)]
    assert failed.message == (
        "The model provider returned HTTP 503 for fake-model: still down "
        "(gave up after 3 attempts; try again later, or choose another model)"
    )
    assert len(server.requests) == 3


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_an_unreachable_provider_is_retried_visibly_then_named_with_what_to_fix(
    project: Path, settings: Settings
) -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    sleep = FakeSleep()
    session = open_session(
        replace(settings, titles=False),
        MODEL,
        project,
        approver=None,
        mode="read-only",
        model_factory=lambda model_id: build_model(model_id, env={"OPENAI_BASE_URL": url, "OPENAI_API_KEY": "k"}),
    )
    session.options = replace(session.options, retry=RetryPolicy(sleep=sleep))

    events = await turn(session)

    assert [r.title for r in retries(events) if r.status == "waiting"] == [
        "Model provider unreachable (connection failed): retrying in 1 s (attempt 2 of 3)",
        "Model provider unreachable (connection failed): retrying in 2 s (attempt 3 of 3)",
    ]
    (failed,) = [e for e in events if isinstance(e, TurnFailed)]
    assert failed.message == (
        "Could not connect to the model provider for fake-model (Connection error); check that the "
        f"chat-completions API at {url}/ is reachable from here, or set OPENAI_BASE_URL if the server is "
        "elsewhere (gave up after 3 attempts; try again later, or choose another model)"
    )


@pytest.mark.parametrize(
    ("status", "advice"),
    [
        (
            401,
            "the chat-completions API at {url} refused the key in OPENAI_API_KEY: check that it is valid for this "
            "server (`codling login` stores another)",
        ),
        (
            403,
            "the chat-completions API at {url} refused the key in OPENAI_API_KEY: check that it is valid for this "
            "server (`codling login` stores another)",
        ),
        (
            404,
            "the chat-completions API at {url} may not serve a model named 'fake-model': check the model name "
            "(see `codling models`) and OPENAI_BASE_URL",
        ),
    ],
)
async def test_a_refused_request_says_which_variable_or_name_to_check(
    server: OpenAIServer, project: Path, settings: Settings, status: int, advice: str
) -> None:
    server.enqueue(ErrorReply(status, "nope"))
    session = session_on(server, project, settings, FakeSleep())

    events = await turn(session)

    (failed,) = [e for e in events if isinstance(e, TurnFailed)]
    expected = advice.format(url=server.base_url.rstrip("/") + "/")
    assert failed.message == f"The model provider returned HTTP {status} for fake-model: nope; {expected}"
    assert len(server.requests) == 1


async def test_a_refusal_that_waiting_cannot_fix_is_not_retried(
    server: OpenAIServer, project: Path, settings: Settings
) -> None:
    server.enqueue(ErrorReply(400, "bad request"))
    sleep = FakeSleep()
    session = session_on(server, project, settings, sleep)

    events = await turn(session)

    assert sleep.waits == [] and retries(events) == []
    assert len(server.requests) == 1


async def test_cancel_during_a_retry_wait_ends_the_turn_at_once(
    server: OpenAIServer, project: Path, settings: Settings
) -> None:
    server.enqueue(ErrorReply.rate_limited(retry_after=120))
    session = session_on(server, project, settings, FakeSleep(forever=True))
    events: list[Event] = []

    async with asyncio.timeout(deadline(10)):
        async for event in session.stream("hi"):
            events.append(event)
            if isinstance(event, ProviderRetrying) and event.status == "waiting":
                session.cancel()

    assert isinstance(events[-1], TurnEnded) and events[-1].stop_reason == "cancelled"
    assert [r.status for r in retries(events)] == ["waiting", "cancelled"]
    assert len(server.requests) == 1


# -- how a retry is shown, and that it is never recorded ------------------------------------------------------


WAITING = ProviderRetrying("t1", "retry-1", 2, 3, 30.0, "HTTP 429")


def test_the_editor_sees_a_card_completed_when_the_retry_starts() -> None:
    assert translate(WAITING) == [
        helpers.start_tool_call(
            "retry-1",
            "Model provider busy (HTTP 429): retrying in 30 s (attempt 2 of 3)",
            kind="other",
            status="in_progress",
        )
    ]
    assert translate(replace(WAITING, status="retrying")) == [helpers.update_tool_call("retry-1", status="completed")]
    assert translate(replace(WAITING, status="cancelled")) == [helpers.update_tool_call("retry-1", status="failed")]


async def test_the_terminal_prints_the_wait_on_stderr() -> None:
    out, err = StringIO(), StringIO()
    renderer = TerminalRenderer(out, err=err, color=False, interactive=False)

    for status in ("waiting", "retrying"):
        await renderer(replace(WAITING, status=status))

    assert err.getvalue() == "Model provider busy (HTTP 429): retrying in 30 s (attempt 2 of 3)\n"
    assert out.getvalue() == ""


def test_a_retry_is_never_recorded() -> None:
    assert event_record(WAITING, "20261122-0b9f3c2a41de") is None


def test_retry_delays_honour_retry_after_within_the_cap() -> None:
    policy = RetryPolicy(max_attempts=3, max_delay=30.0, base_delay=1.0)
    assert [policy.delay(n, None) for n in (1, 2, 3, 6)] == [1.0, 2.0, 4.0, 30.0]
    assert [policy.delay(1, after) for after in (0.25, 12.0, 120.0)] == [0.25, 12.0, 30.0]


# -- text that cannot be encoded ---------------------------------------------------------------------------


async def test_a_lone_surrogate_from_the_provider_is_cleaned_and_poisons_nothing(
    server: OpenAIServer, project: Path, settings: Settings
) -> None:
    # The server's JSON carries "\ud800", which decodes to a lone surrogate: shown to a client or a terminal,
    # or sent in the next request, it cannot be encoded as UTF-8.
    # The first reply also calls a tool, so the same turn sends the reply back in its next request.
    (project / "a.txt").write_text("hello\n")
    call = ToolCall("read_file", {"path": "a.txt"})
    server.enqueue(Reply(text=["hi \ud800 ", "there"], reasoning=["think \udfff"], tool_calls=[call]))
    server.enqueue(Reply(text=["read it"]))
    server.enqueue(Reply(text=["second answer"]))
    session = session_on(server, project, settings, FakeSleep())
    out = StringIO()
    session.subscribe(TerminalRenderer(out, err=out, color=False, interactive=False))

    first = await turn(session)
    second = await turn(session, "and now?")

    assert text_of(first) == "hi \ufffd thereread it"
    assert all(not isinstance(e, TurnFailed) for e in first + second)
    assert text_of(second) == "second answer"
    assert "hi \ufffd there" in str(server.requests[-1]["messages"])
    out.getvalue().encode("utf-8")  # what the terminal got is writable
