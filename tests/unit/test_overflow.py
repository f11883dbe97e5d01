"""Every provider's way of saying "the context is too long" is recognised (with its numbers), and nothing else."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.exceptions import ModelContextWindowExceededError, ModelHTTPError

from codling.brain.context.overflow import Overflow, is_context_overflow, overflow_of
from codling.brain.events import CompactionStarted, TextDelta, TurnFailed
from codling.brain.factory import open_session
from codling.brain.provider_retries import retry_reason
from codling.config import Settings
from codling.llm.catalog import ModelInfo
from codling.llm.providers import build_model
from tests.fakes.deadlines import deadline
from tests.fakes.openai_server import ErrorReply, OpenAIServer, Reply, running_server
from tests.fakes.summarizer import is_summary_body


def error(status: int, body: Any) -> ModelHTTPError:
    return ModelHTTPError(status, "test:model", body)


def openai_body(message: str, code: str | None = None, type_: str = "invalid_request_error") -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "code": code}}


WORDINGS = [
    (
        "openai",
        400,
        openai_body(
            "This model's maximum context length is 8192 tokens. However, your messages resulted in 9500 tokens. "
            "Please reduce the length of the messages.",
            "context_length_exceeded",
        ),
        Overflow("openai", 9500, 8192),
    ),
    (
        "vllm",
        400,
        openai_body(
            "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the "
            "messages, 1000 in the completion). Please reduce the length of the messages or completion.",
            type_="BadRequestError",
        ),
        Overflow("vllm", 5000, 4096),
    ),
    (
        "vllm-decoder",
        400,
        openai_body("The decoder prompt (length 9000) is longer than the maximum model length of 8192."),
        Overflow("vllm", 9000, 8192),
    ),
    (
        "llama.cpp-counts",
        400,
        {
            "error": {
                "code": 400,
                "message": "request (4390 tokens) exceeds the available context size (4096 tokens), try increasing it",
                "type": "exceed_context_size_error",
                "n_prompt_tokens": 4390,
                "n_ctx": 4096,
            }
        },
        Overflow("llama.cpp", 4390, 4096),
    ),
    (
        "llama.cpp-500",
        500,
        {
            "error": {
                "code": 500,
                "message": "the request exceeds the available context size. try increasing the context size or "
                "enable context shift",
                "type": "exceed_context_size_error",
            }
        },
        Overflow("llama.cpp"),
    ),
    (
        "llama.cpp-server-error",
        500,
        {"error": {"code": 500, "message": "Context size has been exceeded.", "type": "server_error"}},
        Overflow("llama.cpp"),
    ),
    (
        "llama-cpp-python",
        400,
        openai_body("Requested tokens (2285) exceed context window of 2048"),
        Overflow("llama-cpp-python", 2285, 2048),
    ),
    (
        "ollama",
        400,
        {"error": {"message": "prompt too long; exceeded max context length by 1200 tokens"}},
        Overflow("ollama"),  # the number is the excess, neither the request's size nor the window
    ),
    (
        "lm-studio",
        400,
        {
            "error": "Trying to keep the first 5000 tokens when context the overflows. However, the model is loaded "
            "with context length of only 4096 tokens, which is not enough. Try to load the model with a larger "
            "context length, or provide a shorter input"
        },
        Overflow("lm-studio", 5000, 4096),
    ),
    (
        "anthropic",
        400,
        {
            "type": "error",
            "error": {"type": "invalid_request_error", "message": "prompt is too long: 210000 tokens > 200000 maximum"},
        },
        Overflow("anthropic", 210000, 200000),
    ),
    (
        "anthropic-max-tokens",
        400,
        {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": "input length and `max_tokens` exceed context limit: 198000 + 8192 > 200000, decrease "
                "input length or `max_tokens` and try again",
            },
        },
        Overflow("anthropic", 206192, 200000),  # input + max_tokens: what was compared with the window
    ),
    (
        "gemini",
        400,
        {
            "error": {
                "code": 400,
                "message": "The input token count (1200293) exceeds the maximum number of tokens allowed (1048576).",
                "status": "INVALID_ARGUMENT",
            }
        },
        Overflow("gemini", 1200293, 1048576),
    ),
    (
        "openrouter",
        400,
        openai_body(
            "This endpoint's maximum context length is 128000 tokens. However, you requested about 130512 tokens "
            "(122320 of text input, 8192 in the output). Please reduce the length of either one, or use the "
            '"middle-out" transform to compress your prompt automatically.'
        ),
        Overflow("openrouter", 130512, 128000),
    ),
    (
        "mistral",
        400,
        openai_body(
            "Prompt contains 40000 tokens and 0 draft tokens, too large for model with 32768 maximum context length"
        ),
        Overflow("mistral", 40000, 32768),
    ),
    (
        "openai-completions-legacy",
        400,
        openai_body(
            "This model's maximum context length is 4097 tokens, however you requested 4231 tokens (3975 in your "
            "prompt; 256 for the completion). Please reduce your prompt; or completion length."
        ),
        Overflow("vllm", 4231, 4097),
    ),
    (
        "vllm-input-tokens",
        400,
        {
            "object": "error",
            "message": "This model's maximum context length is 32768 tokens. However, your request has 40000 input "
            "tokens. Please reduce the length of the input messages.",
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        },
        Overflow("vllm", 40000, 32768),
    ),
    (
        "vllm-max-tokens",
        400,
        openai_body(
            "'max_tokens' or 'max_completion_tokens' is too large: 8000. This model's maximum context length is "
            "4096 tokens and your request has 2778 input tokens (8000 > 4096 - 2778). None",
            type_="BadRequestError",
        ),
        Overflow("vllm", 10778, 4096),
    ),
    (
        "vllm-total-length",
        400,
        openai_body(
            "The prompt (total length 25938) is too long to fit into the model (context length 4096). Make sure "
            "that `max_model_len` is no smaller than the number of text tokens plus multimodal tokens.",
            type_="BadRequestError",
        ),
        Overflow("vllm", 25938, 4096),
    ),
    (
        "vllm-scheduler",
        400,
        openai_body("Input prompt (35247 tokens) is too long and exceeds limit of 32768"),
        Overflow("vllm", 35247, 32768),
    ),
    (
        "ollama-input-length",
        500,
        {"error": "the input length exceeds the context length"},
        Overflow("ollama"),
    ),
    (
        "lm-studio-keep",
        400,
        {"error": "The number of tokens to keep from the initial prompt is greater than the context length"},
        Overflow("lm-studio"),
    ),
    (
        "mistral-images",
        400,
        openai_body(
            "Prompt contains 300000 tokens and 0 images, too large for model with 262144 maximum context length"
        ),
        Overflow("mistral", 300000, 262144),
    ),
    (
        "together",
        400,
        openai_body("The input (516368 tokens) is longer than the model's context length (262144 tokens)."),
        Overflow("together", 516368, 262144),
    ),
    (
        "xai",
        400,
        openai_body("This model's maximum prompt length is 131072 but the request contains 140000 tokens."),
        Overflow("xai", 140000, 131072),
    ),
    (
        "kimi",
        400,
        openai_body("Your request exceeded model token limit: 262144 (requested: 300000)"),
        Overflow("kimi", 300000, 262144),
    ),
    (
        "llama.cpp-unwrapped",
        400,
        # What pydantic-ai's OpenAI model holds: the SDK unwraps the body's "error" object.
        {
            "code": 400,
            "message": "the request exceeds the available context size. try increasing the context size or enable "
            "context shift",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": 14429,
            "n_ctx": 8192,
        },
        Overflow("llama.cpp", 14429, 8192),  # the body's own fields give the numbers the message does not
    ),
    (
        "llama.cpp-n_ctx",
        400,
        {"error": {"code": 400, "message": "the request exceeds the available context size (n_ctx: 4096)"}},
        Overflow("llama.cpp", None, 4096),
    ),
    (
        "lm-studio-window-only",
        400,
        {"error": "The model is loaded with context length of only 4096 tokens, which is not enough."},
        Overflow("lm-studio", None, 4096),
    ),
    (
        "tgi-input-and-output",
        422,
        {
            "error": "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 4096. Given: 4000 "
            "`inputs` tokens and 500 `max_new_tokens`",
            "error_type": "validation",
        },
        Overflow("tgi", 4500, 4096),  # input + max_new_tokens: what was compared with the window
    ),
    (
        "tgi-input",
        422,
        {"error": "Input validation error: `inputs` must have less than 2048 tokens. Given: 2222"},
        Overflow("tgi", 2222, 2048),
    ),
    (
        "anthropic-413",
        413,
        {
            "type": "error",
            "error": {"type": "request_too_large", "message": "Request exceeds the maximum allowed number of bytes."},
        },
        Overflow("http-413"),
    ),
    (
        "nginx-413",
        413,
        "<html><head><title>413 Request Entity Too Large</title></head><body><center><h1>413 Request Entity Too "
        "Large</h1></center><hr><center>nginx</center></body></html>",
        Overflow("http-413"),
    ),
    (
        "proxy-code-only",
        413,
        openai_body("Request rejected", "context_length_exceeded"),
        Overflow("generic"),
    ),
]


@pytest.mark.parametrize(("status", "body", "expected"), [w[1:] for w in WORDINGS], ids=[w[0] for w in WORDINGS])
def test_each_providers_overflow_wording_is_recognised_with_its_numbers(
    status: int, body: Any, expected: Overflow
) -> None:
    e = error(status, body)
    assert overflow_of(e) == expected
    assert is_context_overflow(e)
    assert retry_reason(e) is None  # the same request would fail the same way: never retried as it is


NOT_OVERFLOWS = [
    ("rate-limit", 429, openai_body("Rate limit reached for requests", "rate_limit_exceeded")),
    ("auth", 401, openai_body("Incorrect API key provided", "invalid_api_key")),
    ("server-error", 500, {"error": {"message": "upstream connect error", "type": "server_error"}}),
    ("tool-calls", 400, openai_body("maximum number of tool calls exceeded")),
    ("bad-model", 404, openai_body("The model `gpt-9` does not exist", "model_not_found")),
    ("overflow-words-but-not-a-request-error", 503, openai_body("maximum context length is 8192 tokens")),
    ("max-output-tokens", 400, openai_body("max_tokens: 21333 > 4096, which is the maximum allowed number of output")),
    ("quota", 429, openai_body("You exceeded your current quota, please check your plan", "insufficient_quota")),
    ("tool-call-limit", 400, openai_body("The maximum number of tool calls per response was reached")),
    ("llama.cpp-loading", 503, {"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}}),
]


@pytest.mark.parametrize(("status", "body"), [n[1:] for n in NOT_OVERFLOWS], ids=[n[0] for n in NOT_OVERFLOWS])
def test_other_errors_are_not_overflows(status: int, body: Any) -> None:
    e = error(status, body)
    assert overflow_of(e) is None
    assert not is_context_overflow(e)


def test_pydantic_ais_own_overflow_error_still_gives_the_providers_numbers() -> None:
    # pydantic-ai recognises OpenAI's context_length_exceeded code itself; the message still states the window.
    message = "This model's maximum context length is 8192 tokens. However, your messages resulted in 9500 tokens."
    e = ModelHTTPError.for_category(
        ModelContextWindowExceededError, status_code=400, model_name="m", body=openai_body(message)
    )
    assert overflow_of(e) == Overflow("openai", 9500, 8192)
    bare = ModelContextWindowExceededError("m", "the context window was exceeded")
    assert overflow_of(bare) == Overflow("pydantic-ai")


GUESSED = [
    ("message-length", 400, openai_body("The message length exceeds the limit of this deployment")),
    ("token-limit", 400, {"detail": "Token limit exceeded for this request"}),
    ("input-too-large", 400, {"error": {"message": "Input too large, shorten it and try again"}}),
    ("413-without-a-body", 413, None),
    ("413-any-wording", 413, {"error": "Request rejected by the gateway"}),
]


@pytest.mark.parametrize(("status", "body"), [g[1:] for g in GUESSED], ids=[g[0] for g in GUESSED])
def test_an_unknown_wording_that_speaks_of_a_size_passed_is_taken_for_an_overflow(status: int, body: Any) -> None:
    e = error(status, body)
    assert overflow_of(e) == Overflow("unrecognised", guessed=True)
    assert retry_reason(e) is None


NOT_GUESSED = [
    ("output-limit", 400, openai_body("max_tokens must be at most 4096 for this model")),
    ("tpm", 400, openai_body("Rate limit exceeded: 30000 tokens per min")),
    ("quota", 400, openai_body("You have exceeded your token quota for the month")),
    ("validation-422", 422, {"error": "Input validation error: `temperature` must be strictly positive"}),
    ("server-500", 500, {"error": "prompt too long for the buffer"}),  # 500: only known wordings
    ("no-size-word", 400, openai_body("Invalid value for 'messages[2].role': expected one of system, user")),
    ("no-subject", 400, openai_body("The maximum number of images was exceeded")),
]


@pytest.mark.parametrize(("status", "body"), [n[1:] for n in NOT_GUESSED], ids=[n[0] for n in NOT_GUESSED])
def test_other_sizes_passed_are_not_taken_for_an_overflow(status: int, body: Any) -> None:
    assert overflow_of(error(status, body)) is None


def test_the_model_name_does_not_make_an_error_an_overflow() -> None:
    e = ModelHTTPError(400, "long-context-prompt-8k", {"error": {"message": "Invalid request"}})
    assert overflow_of(e) is None


def test_numbers_with_thousands_separators_are_read_whole() -> None:
    e = error(400, openai_body("prompt is too long: 215,432 tokens > 200,000 maximum"))
    found = overflow_of(e)
    assert found is not None and (found.requested, found.limit) == (215_432, 200_000)


def test_an_exception_that_is_no_http_error_is_no_overflow() -> None:
    assert overflow_of(ValueError("prompt is too long: 9 tokens > 8 maximum")) is None


# --- end to end: a local server's overflow makes the session compact and retry ---------------------------------

LLAMA_CPP_OVERFLOWS = [
    ErrorReply(
        400,
        "request (9000 tokens) exceeds the available context size (8192 tokens), try increasing it",
        type="exceed_context_size_error",
    ),
    # Older llama-server builds: only the wording says it (no overflow type or code).
    ErrorReply(500, "Context size has been exceeded.", type="server_error"),
]


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with running_server() as s:
        yield s


UNKNOWN_WORDING = ErrorReply(400, "The prompt exceeds what this deployment accepts.", type="bad_request")


def fresh_session(server: OpenAIServer, project: Path, settings: Settings) -> Any:
    return open_session(
        replace(settings, titles=False),
        ModelInfo("openai-chat:fake-model", context_limit=100_000),
        project,
        approver=None,
        mode="read-only",
        model_factory=lambda model_id: build_model(model_id, env=server.env()),
    )


@pytest.mark.parametrize("overflow", LLAMA_CPP_OVERFLOWS, ids=["400-with-counts", "500-wording-only"])
async def test_a_llama_cpp_overflow_compacts_the_history_and_the_turn_goes_on(
    server: OpenAIServer, project: Path, settings: Settings, overflow: ErrorReply
) -> None:
    # Through the real OpenAI client (llm/providers.py) and pydantic-ai's error mapping, as a user's llama-server
    # answers: the session recognises the wording, compacts once and retries the request.
    session = fresh_session(server, project, settings)
    server.enqueue(
        Reply(text=["Noted."]),
        overflow,
        Reply(text=["## Goal\nShip the parser.\n## User constraints and preferences\nThe codeword is heron."]),
        Reply(text=["The codeword is heron."]),
    )
    async with asyncio.timeout(deadline(20)):  # liveness only
        await session.run("The codeword is heron.")
        events = [event async for event in session.stream("What is the codeword?")]

    assert [e.reason for e in events if isinstance(e, CompactionStarted)] == ["overflow"]
    assert [type(e) for e in events if isinstance(e, TurnFailed)] == []
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "The codeword is heron."
    overflowing, summarizing, retried = server.requests[1:]
    # The summarizer reads the history as the turns send it, their tools offered (the lean set of the window
    # learned from the error, as the retried request's) and switched off.
    assert is_summary_body(summarizing) and summarizing["tool_choice"] == "none"
    assert summarizing["tools"] == retried["tools"] and summarizing["messages"][:2] == overflowing["messages"][:2]
    assert overflowing["messages"] != retried["messages"]
    assert "The codeword is heron." in json.dumps(retried["messages"])  # kept, or in the summary
    assert len(server.requests) == 4


async def test_an_overflow_in_an_unknown_wording_compacts_and_retries_once(
    server: OpenAIServer, project: Path, settings: Settings
) -> None:
    session = fresh_session(server, project, settings)
    server.enqueue(
        Reply(text=["Noted."]),
        UNKNOWN_WORDING,
        Reply(text=["## Goal\nShip the parser.\n## User constraints and preferences\nThe codeword is heron."]),
        Reply(text=["The codeword is heron."]),
    )
    async with asyncio.timeout(deadline(20)):  # liveness only
        await session.run("The codeword is heron.")
        events = [event async for event in session.stream("What is the codeword?")]

    assert [e.reason for e in events if isinstance(e, CompactionStarted)] == ["overflow"]
    assert [e for e in events if isinstance(e, TurnFailed)] == []
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "The codeword is heron."
    assert len(server.requests) == 4
    assert session.state.learned_window is None  # the error named no window


async def test_an_unknown_wording_that_comes_again_fails_the_turn_with_the_providers_own_message(
    server: OpenAIServer, project: Path, settings: Settings
) -> None:
    session = fresh_session(server, project, settings)
    server.enqueue(Reply(text=["Noted."]), UNKNOWN_WORDING, Reply(text=["## Goal\nShip it."]), UNKNOWN_WORDING)
    async with asyncio.timeout(deadline(20)):  # liveness only
        await session.run("The codeword is heron.")
        events = [event async for event in session.stream("What is the codeword?")]

    assert [e.reason for e in events if isinstance(e, CompactionStarted)] == ["overflow"]  # once: never a loop
    [failed] = [e for e in events if isinstance(e, TurnFailed)]
    assert "The prompt exceeds what this deployment accepts." in failed.message
    assert "still too long" not in failed.message  # it may be no overflow at all: the provider's word stands
    assert len(server.requests) == 4
