"""Gemini end to end in process: a codling session on ``google:`` drives pydantic-ai's ``GoogleModel`` (through
google-genai, on the client ``llm/providers.py`` builds) over HTTP against the loopback Gemini server
(tests/fakes/gemini_server.py): streamed thinking and text, thought signatures sent back across tool calls, images,
visible retries, refusals, a wrong key, overflow and the prompt cache's reads in usage and cost. The fake itself is
first checked over raw HTTP against Gemini's documented wire format."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx2
import pytest
from pydantic_ai.exceptions import ModelHTTPError

from codling.brain.events import (
    CompactionStarted,
    ProviderRetrying,
    TextDelta,
    ThoughtDelta,
    ToolCallFinished,
    TurnEnded,
)
from codling.brain.failures import describe_failure
from codling.brain.prompt import ImageBlock, TextBlock
from codling.brain.session import ConversationSession
from codling.config import Settings
from codling.llm.catalog import ModelInfo, load_catalog
from codling.llm.providers import CONNECT_TIMEOUT, Endpoint, build_model
from tests.fakes.deadlines import deadline
from tests.fakes.gemini_server import FunctionCall, GeminiError, GeminiServer, Reply, running_gemini_server, signature
from tests.fakes.http_fake import MIN_CACHED_TOKENS
from tests.fakes.provider_session import FakeSleep, failures, provider_session, text_of, turn

PATH = "/v1beta/models/gemini-2.5-flash"


@pytest.fixture
def server() -> Iterator[GeminiServer]:
    with running_gemini_server(expected_api_key="g-key") as server:
        yield server


def post(server: GeminiServer, body: dict[str, Any], *, stream: bool = True, key: str = "g-key") -> tuple[int, Any]:
    """(status, parsed body): the list of streamed events, or the JSON object."""
    method = "streamGenerateContent?alt=sse" if stream else "generateContent"
    request = urllib.request.Request(
        f"{server.url}{PATH}:{method}",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "x-goog-api-key": key},
    )
    try:
        with urllib.request.urlopen(request, timeout=deadline(30)) as response:
            raw = response.read().decode()
            status = response.status
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())
    if stream:
        return status, [json.loads(line[6:]) for line in raw.split("\n") if line.startswith("data: ")]
    return status, json.loads(raw)


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "parts": [{"text": text}]}


def test_a_streamed_reply_has_thoughts_text_a_signature_and_final_usage(server: GeminiServer) -> None:
    server.enqueue(Reply(thoughts=["Thinking it over."], text=["Hello ", "there."]))

    status, events = post(server, {"contents": [user("hi")]})

    assert status == 200
    parts = [p for e in events for p in e["candidates"][0]["content"]["parts"]]
    assert parts[0] == {"text": "Thinking it over.", "thought": True}
    assert "".join(p["text"] for p in parts if not p.get("thought")) == "Hello there."
    assert parts[-1]["thoughtSignature"] == signature(0)
    assert [e["candidates"][0].get("finishReason") for e in events] == [None, None, "STOP"]
    usage = events[-1]["usageMetadata"]
    assert usage["thoughtsTokenCount"] > 0 and usage["candidatesTokenCount"] > 0
    assert usage["totalTokenCount"] == sum(
        usage[k] for k in ("promptTokenCount", "candidatesTokenCount", "thoughtsTokenCount")
    )


def test_a_function_call_must_come_back_with_its_thought_signature(server: GeminiServer) -> None:
    server.enqueue(Reply(thoughts="Read it.", function_calls=[FunctionCall("read_file", {"path": "a.py"})]))
    _, events = post(server, {"contents": [user("read a.py")]})
    thought, call = [p for e in events for p in e["candidates"][0]["content"]["parts"]]
    assert thought == {"text": "Read it.", "thought": True} and call["thoughtSignature"] == signature(0)
    assert call["functionCall"] == {"name": "read_file", "args": {"path": "a.py"}}
    answer = {"role": "user", "parts": [{"functionResponse": {"name": "read_file", "response": {"ok": 1}}}]}

    unsigned = {"role": "model", "parts": [{"functionCall": call["functionCall"]}]}
    status, error = post(server, {"contents": [user("read a.py"), unsigned, answer]})
    assert status == 400 and error["error"]["status"] == "INVALID_ARGUMENT"
    assert "thought_signature" in error["error"]["message"]

    server.enqueue(Reply(text="It sets x."))
    status, events = post(server, {"contents": [user("read a.py"), {"role": "model", "parts": [call]}, answer]})
    assert status == 200 and events[-1]["candidates"][0]["content"]["parts"] == [{"text": "It sets x."}]


def test_a_repeated_prefix_is_billed_as_cached_content(server: GeminiServer) -> None:
    history = [user("notes " * 1500)]
    server.enqueue(Reply(text="Noted."), Reply(text="Again."))

    _, first = post(server, {"contents": history}, stream=False)
    _, second = post(server, {"contents": [*history, {"role": "model", "parts": [{"text": "Noted."}]}, user("and?")]})

    assert "cachedContentTokenCount" not in first["usageMetadata"]
    cached = second[-1]["usageMetadata"]["cachedContentTokenCount"]
    assert cached >= MIN_CACHED_TOKENS and cached >= 0.9 * first["usageMetadata"]["promptTokenCount"]
    assert [b.cached_tokens for b in server.bills] == [0, cached]


@pytest.mark.parametrize(
    ("error", "status", "code"),
    [
        (GeminiError.too_many_tokens(), 400, "INVALID_ARGUMENT"),
        (GeminiError.resource_exhausted(), 429, "RESOURCE_EXHAUSTED"),
        (GeminiError.unavailable(), 503, "UNAVAILABLE"),
    ],
)
def test_errors_come_in_googles_shape(server: GeminiServer, error: GeminiError, status: int, code: str) -> None:
    server.enqueue(error)
    got, body = post(server, {"contents": [user("hi")]})
    assert got == status and body["error"]["status"] == code and body["error"]["code"] == status


def test_a_wrong_key_is_a_400_saying_so(server: GeminiServer) -> None:
    status, body = post(server, {"contents": [user("hi")]}, key="wrong")
    assert status == 400 and body["error"]["details"][0]["reason"] == "API_KEY_INVALID"
    assert server.requests and not server.bills  # received, not billed


def test_geminis_wrong_key_400_tells_the_user_to_check_the_key() -> None:
    body = GeminiError.api_key_invalid().body["error"]
    message = describe_failure(ModelHTTPError(400, "gemini-2.5-flash", body), Endpoint("google:gemini-2.5-flash"))
    assert "API key not valid" in message
    assert "GOOGLE_API_KEY or GEMINI_API_KEY" in message and "valid" in message
    # Any other 400 is about the request, not the key.
    other = describe_failure(
        ModelHTTPError(400, "gemini-2.5-flash", GeminiError.too_many_tokens().body["error"]),
        Endpoint("google:gemini-2.5-flash"),
    )
    assert "GEMINI_API_KEY" not in other


# -- a codling session on the real GoogleModel ---------------------------------------------------------------

MODEL = ModelInfo("google:gemini-2.5-flash", context_limit=1_048_576, thinking=True, images=True)
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="


def session_on(
    server: GeminiServer,
    project: Path,
    settings: Settings,
    *,
    api_key: str = "g-key",
    model: ModelInfo = MODEL,
    sleep: FakeSleep | None = None,
    env: dict[str, str] | None = None,
) -> ConversationSession:
    return provider_session(server.env(api_key) if env is None else env, model, project, settings, sleep=sleep)


def either(fields: dict[str, Any], name: str) -> Any:
    """A field by its proto name or its JSON (lowerCamel) name: Gemini's JSON parser takes both, and google-genai
    sends some nested fields as pydantic-ai spells them."""
    head, *rest = name.split("_")
    return fields.get(name, fields.get(head + "".join(w.title() for w in rest)))


def model_parts(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for c in body["contents"] if c.get("role") == "model" for p in c["parts"]]


def test_a_google_model_is_built_on_codlings_client_pointed_at_the_base_url() -> None:
    model = build_model(
        "google:gemini-2.5-flash",
        idle_timeout=30,
        env={"GEMINI_API_KEY": "g-key", "GOOGLE_GEMINI_BASE_URL": "http://127.0.0.1:9"},
    )
    options = model.client._api_client._http_options  # type: ignore[attr-defined]
    assert (model.base_url or "").startswith("http://127.0.0.1:9")
    assert options.retry_options is not None and options.retry_options.attempts == 1  # codling retries, visibly
    client = options.httpx_async_client
    assert isinstance(client, httpx2.AsyncClient)
    assert (client.timeout.read, client.timeout.connect) == (30, CONNECT_TIMEOUT)
    # google-gla, the Gemini API's older name in pydantic-ai and the bundled catalog, is the same model.
    assert build_model("google-gla:gemini-2.5-flash", env={"GOOGLE_API_KEY": "k"}).model_name == "gemini-2.5-flash"


def test_a_google_model_id_finds_the_catalogs_google_gla_entry() -> None:
    catalog = load_catalog()
    info = catalog.get("google:gemini-2.5-flash")
    assert info.known and info.id == "google:gemini-2.5-flash"
    assert info == replace(catalog.get("google-gla:gemini-2.5-flash"), id=info.id)
    assert not catalog.get("google:gemini-0-nonexistent").known


async def test_streamed_thinking_and_text_reach_the_session(
    server: GeminiServer, project: Path, settings: Settings
) -> None:
    server.enqueue(Reply(thoughts=["Weighing ", "it up."], text=["Hello ", "from ", "Gemini."]))
    session = session_on(server, project, settings)

    events = await turn(session, "Say hello")

    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert deltas[0] == "Hello " and "".join(deltas) == "Hello from Gemini."  # streamed: the first piece at once
    assert "".join(e.text for e in events if isinstance(e, ThoughtDelta)) == "Weighing it up."
    assert not failures(events)
    (request,) = server.recorded
    assert request.path == "/v1beta/models/gemini-2.5-flash:streamGenerateContent" and request.query == "alt=sse"
    assert request.headers["x-goog-api-key"] == "g-key" and "key=" not in request.query
    (body,) = server.requests
    assert either(body["generationConfig"]["thinkingConfig"], "include_thoughts") is True  # so its thoughts stream
    assert session.state.entries[-1].text == "Hello from Gemini."


async def test_multi_step_tool_use_sends_each_thought_signature_back(
    server: GeminiServer, project: Path, settings: Settings
) -> None:
    server.enqueue(
        Reply(thoughts="Read the app.", function_calls=[FunctionCall("read_file", {"path": "src/app.py"})]),
        Reply(thoughts="Now the README.", function_calls=[FunctionCall("read_file", {"path": "README.md"})]),
        Reply(text="greet returns 'hello'; the README is a title."),
    )
    session = session_on(server, project, settings)

    events = await turn(session, "What does greet return?")

    assert not failures(events), failures(events)
    assert text_of(events) == "greet returns 'hello'; the README is a title."
    assert len([e for e in events if isinstance(e, ToolCallFinished) and e.status == "completed"]) == 2
    first, second, third = server.requests
    calls = [p for p in model_parts(second) if "functionCall" in p]
    assert [(c["functionCall"]["args"], c["thoughtSignature"]) for c in calls] == [
        ({"path": "src/app.py"}, signature(0))
    ]
    answers = [p["functionResponse"] for c in second["contents"] for p in c["parts"] if "functionResponse" in p]
    assert [a["name"] for a in answers] == ["read_file"] and "return 'hello'" in json.dumps(answers)
    assert [p["thoughtSignature"] for p in model_parts(third) if "functionCall" in p] == [signature(0), signature(1)]
    assert first["contents"] == second["contents"][: len(first["contents"])]  # the conversation only grows


async def test_an_image_is_sent_as_inline_data(server: GeminiServer, project: Path, settings: Settings) -> None:
    server.enqueue(Reply(text="A red pixel."))
    session = session_on(server, project, settings)

    events = await turn(session, (TextBlock("What is this?"), ImageBlock(PNG, "image/png", "file:///p/shot.png")))

    assert text_of(events) == "A red pixel."
    (body,) = server.requests
    (image,) = [p["inlineData"] for c in body["contents"] for p in c["parts"] if "inlineData" in p]
    assert image["data"] == PNG and either(image, "mime_type") == "image/png"


async def test_resource_exhausted_waits_its_retry_delay_and_unavailable_is_retried(
    server: GeminiServer, project: Path, settings: Settings
) -> None:
    sleep = FakeSleep()
    server.enqueue(GeminiError.resource_exhausted(retry_delay_seconds=7), GeminiError.unavailable(), Reply(text="ok"))
    session = session_on(server, project, settings, sleep=sleep)

    events = await turn(session)

    waits = [e for e in events if isinstance(e, ProviderRetrying) and e.status == "waiting"]
    assert [(w.attempt, w.reason) for w in waits] == [(2, "HTTP 429"), (3, "HTTP 503")]
    assert sleep.waits[0] == 7.0  # Gemini's RetryInfo retryDelay, not a guess
    assert text_of(events) == "ok" and not failures(events)
    assert len(server.requests) == 3 and server.requests[0] == server.requests[2]


async def test_a_refused_request_fails_the_turn_with_the_providers_reason(
    server: GeminiServer, project: Path, settings: Settings
) -> None:
    server.enqueue(GeminiError.invalid_argument("Unable to process input image. Please retry or report it."))
    session = session_on(server, project, settings)

    events = await turn(session)

    (failed,) = failures(events)
    assert "HTTP 400" in failed.message and "Unable to process input image" in failed.message
    assert "GEMINI_API_KEY" not in failed.message  # not about the key
    assert len(server.requests) == 1  # a 400 is not retried
    assert isinstance(events[-1], TurnEnded) and events[-1].error


async def test_a_wrong_key_fails_the_turn_naming_the_key_variables(project: Path, settings: Settings) -> None:
    with running_gemini_server(expected_api_key="g-right") as server:
        session = session_on(server, project, settings, api_key="g-wrong")
        events = await turn(session)

    (failed,) = failures(events)
    assert failed.reason == "auth"  # Gemini's 400 API_KEY_INVALID is a refused key
    assert "API key not valid" in failed.message and "GOOGLE_API_KEY or GEMINI_API_KEY" in failed.message
    assert len(server.requests) == 1  # not retried


async def test_an_input_over_the_window_compacts_and_the_turn_goes_on(
    server: GeminiServer, project: Path, settings: Settings
) -> None:
    server.enqueue(
        Reply(text="Noted."),
        GeminiError.too_many_tokens(),
        Reply(text="## Goal\nShip the parser.\n## User constraints and preferences\nThe codeword is heron."),
        Reply(text="The codeword is heron."),
    )
    session = session_on(server, project, settings)

    await turn(session, "The codeword is heron.")
    events = await turn(session, "What is the codeword?")

    assert [e.reason for e in events if isinstance(e, CompactionStarted)] == ["overflow"]
    assert not failures(events) and text_of(events) == "The codeword is heron."
    overflowing, _summarising, retried = server.requests[1:]
    assert overflowing["contents"] != retried["contents"]
    assert "input token count" not in text_of(events)


async def test_cached_content_tokens_reach_usage_and_cost(
    server: GeminiServer, project: Path, settings: Settings
) -> None:
    model = load_catalog().get("google:gemini-2.5-flash")
    assert model.price is not None and model.price.cache_read is not None
    long_prompt = "Remember these notes. " + "lorem ipsum dolor sit amet " * 400  # well past 1,024 tokens
    server.enqueue(Reply(text="Noted."), Reply(text="Still noted."))
    session = session_on(server, project, settings, model=model)

    first = await turn(session, long_prompt)
    second = await turn(session, "And now?")

    ends = [next(e for e in events if isinstance(e, TurnEnded)) for events in (first, second)]
    bills = server.bills
    assert bills[0].cached_tokens == 0 and bills[1].cached_tokens >= MIN_CACHED_TOKENS
    assert [end.usage.cache_read_tokens for end in ends] == [b.cached_tokens for b in bills]
    assert [end.usage.input_tokens for end in ends] == [b.prompt_tokens for b in bills]  # reads included
    usage, cost = ends[1].usage, ends[1].cost
    assert cost is not None
    assert cost == pytest.approx(model.price.cost(usage.input_tokens, usage.output_tokens, usage.cache_read_tokens))
    assert cost < model.price.cost(usage.input_tokens, usage.output_tokens)  # the reads were cheaper


async def test_a_stream_cut_before_its_finish_reason_fails_the_turn_keeping_the_text(
    server: GeminiServer, project: Path, settings: Settings
) -> None:
    server.enqueue(Reply(text=["The answer is ", "forty"], cut=True))
    session = session_on(server, project, settings)

    events = await turn(session)

    (failed,) = failures(events)
    assert "cut off" in failed.message
    assert text_of(events) == "The answer is forty"
    assert len(server.requests) == 1  # output had reached the user: not retried


async def test_an_unreachable_base_url_names_the_variable_to_fix(
    server: GeminiServer, project: Path, settings: Settings
) -> None:
    nowhere = {"GEMINI_API_KEY": "g-key", "GOOGLE_GEMINI_BASE_URL": "http://127.0.0.1:9"}  # (discard: closed)
    session = session_on(server, project, settings, env=nowhere)

    events = await turn(session)

    (failed,) = failures(events)
    assert "Could not connect" in failed.message and "GOOGLE_GEMINI_BASE_URL" in failed.message
    assert len([e for e in events if isinstance(e, ProviderRetrying) and e.status == "waiting"]) == 2  # visibly
