"""Gemini: the loopback Gemini server (tests/fakes/gemini_server.py) speaks the documented wire format, and what
codling says about Gemini models and their errors.

codling reaches Gemini through pydantic-ai's ``GoogleModel``, which needs the ``google-genai`` SDK; this
environment does not install it, so a session cannot be driven over the fake here. The fake is checked over raw
HTTP against the documented format (what ``google-genai`` parses), ready for those tests."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic_ai.exceptions import ModelHTTPError

from codling.brain.turns import describe_failure
from codling.errors import UnknownProviderError
from codling.llm.providers import Endpoint, build_model
from tests.fakes.gemini_server import FunctionCall, GeminiError, GeminiServer, Reply, running_gemini_server, signature
from tests.fakes.http_fake import MIN_CACHED_TOKENS

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
        with urllib.request.urlopen(request, timeout=30) as response:
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


def test_a_gemini_model_without_the_google_sdk_says_what_to_install() -> None:
    pytest.importorskip("pydantic_ai")
    try:
        import google.genai  # noqa: F401
    except ImportError:
        with pytest.raises(UnknownProviderError, match=r"pydantic-ai-slim\[google\]"):
            build_model("google:gemini-2.5-flash", env={"GEMINI_API_KEY": "k"})
    else:
        pytest.skip("google-genai is installed: the model builds")
