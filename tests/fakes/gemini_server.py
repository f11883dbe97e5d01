"""A scripted Gemini API server for tests (``POST /v1beta/models/{model}:generateContent`` and
``:streamGenerateContent?alt=sse``), standard library only.

The wire format is Gemini's documented one, as pydantic-ai's ``GoogleModel`` (through ``google-genai``) reads it:
each response (or each streamed ``data: {json}`` event, no event names) is a ``GenerateContentResponse``,
``{"candidates": [{"content": {"role": "model", "parts": [...]}, "finishReason", "index"}], "usageMetadata",
"modelVersion", "responseId"}``. Parts are ``{"text"}``, thought parts ``{"text", "thought": true}``, and
``{"functionCall": {"name", "args"}}``; the first part after thinking carries the ``thoughtSignature`` the
model must be sent back (a request whose history holds one of this server's function calls without its
signature gets Gemini's ``400 INVALID_ARGUMENT``, as Gemini 3 models answer). ``finishReason`` and
``usageMetadata`` ``{promptTokenCount, candidatesTokenCount, cachedContentTokenCount, thoughtsTokenCount,
totalTokenCount}`` come with the last event. Errors are Google's JSON shape, ``{"error": {"code", "message",
"status", "details"}}`` (:class:`GeminiError`).

The key is read from ``x-goog-api-key`` (or ``?key=``). Usage is the fake's own bill, as in ``responses_server``:
the request's layout (system instruction, tools, contents) at four characters a token, the cached part what an
implicit prefix cache serves (:class:`tests.fakes.http_fake.PrefixCache`), listed in :attr:`GeminiServer.bills`.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from tests.fakes.http_fake import FakeProvider, Handler, PrefixCache, RecordedRequest, freeze_pieces, tokens_of

__all__ = ["Bill", "FunctionCall", "GeminiError", "GeminiServer", "Reply", "running_gemini_server"]

DEFAULT_MODEL = "gemini-2.5-flash"

_PATH = re.compile(r"^/v1beta/models/(?P<model>[^/:]+):(?P<method>generateContent|streamGenerateContent)$")


@dataclass(frozen=True)
class FunctionCall:
    """One function call the model makes."""

    name: str
    args: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Reply:
    """One response: thoughts, then text, then function calls, each piece of ``thoughts`` and ``text`` an event
    of its own when streamed. ``finish_reason`` defaults to ``STOP`` (Gemini says ``STOP`` after function calls
    too). ``cut=True`` ends a stream after its parts, with no ``finishReason`` (a connection dropped)."""

    text: Sequence[str] = ()
    thoughts: Sequence[str] = ()
    function_calls: Sequence[FunctionCall] = ()
    finish_reason: str = "STOP"
    cut: bool = False

    def __post_init__(self) -> None:
        freeze_pieces(self, ("text", "thoughts"), ("function_calls",))


@dataclass(frozen=True)
class GeminiError:
    """An error in Google's JSON shape. The constructors are the errors Gemini sends."""

    code: int
    status: str
    message: str
    details: Sequence[Mapping[str, Any]] = ()
    headers: Mapping[str, str] = field(default_factory=dict)

    @property
    def body(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message, "status": self.status}
        if self.details:
            error["details"] = [dict(d) for d in self.details]
        return {"error": error}

    @classmethod
    def invalid_argument(cls, message: str) -> GeminiError:
        return cls(400, "INVALID_ARGUMENT", message)

    @classmethod
    def too_many_tokens(cls, requested: int = 1_200_000, limit: int = 1_048_576) -> GeminiError:
        """The ``400`` for a prompt over the model's window."""
        return cls.invalid_argument(
            f"The input token count ({requested}) exceeds the maximum number of tokens allowed ({limit})."
        )

    @classmethod
    def api_key_invalid(cls) -> GeminiError:
        """Gemini's answer to a wrong key: a ``400`` (not a 401) whose reason says so."""
        return cls(
            400,
            "INVALID_ARGUMENT",
            "API key not valid. Please pass a valid API key.",
            [
                {
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": "API_KEY_INVALID",
                    "domain": "googleapis.com",
                }
            ],
        )

    @classmethod
    def permission_denied(cls) -> GeminiError:
        return cls(
            403,
            "PERMISSION_DENIED",
            "Method doesn't allow unregistered callers (callers without established identity). "
            "Please use API Key or other form of API consumer identity to call this API.",
        )

    @classmethod
    def resource_exhausted(cls, retry_delay_seconds: int = 7) -> GeminiError:
        """A ``429``: quota or rate exceeded, with the ``RetryInfo`` Gemini sends."""
        return cls(
            429,
            "RESOURCE_EXHAUSTED",
            "You exceeded your current quota, please check your plan and billing details.",
            [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": f"{retry_delay_seconds}s"}],
        )

    @classmethod
    def unavailable(cls) -> GeminiError:
        """The ``503`` of an overloaded model."""
        return cls(503, "UNAVAILABLE", "The model is overloaded. Please try again later.")


@dataclass(frozen=True)
class Bill:
    """What the fake billed one request."""

    prompt_tokens: int
    cached_tokens: int
    candidates_tokens: int
    thoughts_tokens: int


ScriptedReply = Reply | GeminiError


def layout(body: Mapping[str, Any]) -> str:
    """A request as a prefix cache sees it: system instruction, tools, then each content in order."""
    parts = [json.dumps(body.get("systemInstruction"), sort_keys=True), json.dumps(body.get("tools"), sort_keys=True)]
    parts += [json.dumps(content, sort_keys=True) for content in body.get("contents") or []]
    return "\n".join(parts)


def signature(index: int) -> str:
    """The thought signature this server gives request ``index``'s reply (base64, as Gemini's are)."""
    return base64.b64encode(f"signature-{index}".encode()).decode()


class GeminiServer(FakeProvider):
    """A scripted Gemini API server on ``127.0.0.1``; see the module docstring."""

    name = "fake-gemini-server"

    def __init__(self, *, expected_api_key: str | None = None) -> None:
        super().__init__()
        self.cache = PrefixCache()
        self.expected_api_key = expected_api_key
        self._bills: dict[int, Bill] = {}
        self._signed_calls: dict[str, str] = {}
        """The signature each function call this server made was given, by function name and args."""

    def env(self, api_key: str = "test-key") -> dict[str, str]:
        """The key variable and the base URL variable (google-genai's own, which codling reads too), pointing a
        client at this server."""
        return {"GEMINI_API_KEY": api_key, "GOOGLE_GEMINI_BASE_URL": self.url}

    def _counted(self) -> list[tuple[int, RecordedRequest]]:
        return [(i, r) for i, r in enumerate(self.recorded) if _PATH.match(r.path) and r.body is not None]

    @property
    def requests(self) -> list[dict[str, Any]]:
        """The JSON bodies of the model requests received, in order."""
        return [r.body for _, r in self._counted() if r.body is not None]

    @property
    def headers(self) -> list[dict[str, str]]:
        """The headers of each request in :attr:`requests` (lowercased names: ``x-goog-api-key``, ...)."""
        return [dict(r.headers) for _, r in self._counted()]

    @property
    def bills(self) -> list[Bill]:
        """What each answered request was billed, in order."""
        with self._condition:
            bills = dict(self._bills)
        return [bills[i] for i, _ in self._counted() if i in bills]

    def no_reply(self, index: int) -> GeminiError:
        return GeminiError(500, "INTERNAL", f"fake Gemini server: no scripted reply for request #{index}")

    def route(self, handler: Handler, request: RecordedRequest, index: int) -> None:
        match = _PATH.match(request.path)
        key = request.headers.get("x-goog-api-key") or dict(
            p.partition("=")[::2] for p in request.query.split("&") if p
        ).get("key")
        if not key:
            failure = GeminiError.permission_denied()
        elif self.expected_api_key is not None and key != self.expected_api_key:
            failure = GeminiError.api_key_invalid()
        elif request.method != "POST" or match is None:
            failure = GeminiError(404, "NOT_FOUND", f"Requested entity was not found: {request.path}")
        elif request.body is None:
            failure = GeminiError.invalid_argument("Invalid JSON payload received.")
        elif (missing := self._unsigned_call(request.body)) is not None:
            failure = GeminiError.invalid_argument(
                f"Function call is missing a thought_signature in functionCall parts. This is required for tools "
                f"to work correctly, and missing thought_signature may lead to degraded model performance. "
                f"Additional data, function call `{missing}`"
            )
        else:
            reply = self.next_reply(request.body, index)
            if isinstance(reply, GeminiError):
                failure = reply
            else:
                stream = match.group("method") == "streamGenerateContent"
                self._answer(handler, request.body, match.group("model"), index, reply, stream)
                return
        handler.send_json(failure.code, failure.body, failure.headers)

    def _unsigned_call(self, body: dict[str, Any]) -> str | None:
        """The name of a function call of this server's that comes back without the signature it was given."""
        with self._condition:
            signed = dict(self._signed_calls)
        for content in body.get("contents") or []:
            if content.get("role") != "model":
                continue
            for part in content.get("parts") or []:
                call = part.get("functionCall")
                if call is None:
                    continue
                expected = signed.get(_call_key(call.get("name"), call.get("args") or {}))
                if expected is not None and part.get("thoughtSignature") != expected:
                    return str(call.get("name"))
        return None

    def _answer(
        self, handler: Handler, body: dict[str, Any], model: str, index: int, reply: Reply, stream: bool
    ) -> None:
        bill = Bill(
            prompt_tokens=tokens_of(layout(body)),
            cached_tokens=self.cache.serve(layout(body)),
            candidates_tokens=tokens_of("".join(reply.text) + json.dumps([dict(c.args) for c in reply.function_calls])),
            thoughts_tokens=tokens_of("".join(reply.thoughts)),
        )
        sig = signature(index)
        with self._condition:
            self._bills[index] = bill
            # Gemini signs the first function call of a reply (with thinking on, every reply that has one).
            if reply.function_calls:
                first = reply.function_calls[0]
                self._signed_calls[_call_key(first.name, first.args)] = sig
        parts = _parts(reply, sig)
        usage: dict[str, Any] = {
            "promptTokenCount": bill.prompt_tokens,
            "candidatesTokenCount": bill.candidates_tokens,
            "totalTokenCount": bill.prompt_tokens + bill.candidates_tokens + bill.thoughts_tokens,
            "promptTokensDetails": [{"modality": "TEXT", "tokenCount": bill.prompt_tokens}],
        }
        if bill.cached_tokens:
            usage["cachedContentTokenCount"] = bill.cached_tokens
        if bill.thoughts_tokens:
            usage["thoughtsTokenCount"] = bill.thoughts_tokens
        common = {"modelVersion": model, "responseId": f"fake-gemini-{index}"}
        if not stream:
            whole = {"content": {"role": "model", "parts": parts}, "finishReason": reply.finish_reason, "index": 0}
            handler.send_json(200, {"candidates": [whole], "usageMetadata": usage, **common})
            return
        handler.start_events()
        for n, part in enumerate(parts):
            candidate: dict[str, Any] = {"content": {"role": "model", "parts": [part]}, "index": 0}
            last = n == len(parts) - 1 and not reply.cut
            if last:
                candidate["finishReason"] = reply.finish_reason
            event: dict[str, Any] = {"candidates": [candidate], **common}
            # Every event carries usage so far; only the last one's counts are final.
            event["usageMetadata"] = usage if last else {"promptTokenCount": bill.prompt_tokens}
            handler.send_event(event)
        handler.end_events()


def _call_key(name: Any, args: Mapping[str, Any]) -> str:
    return json.dumps([name, dict(args)], sort_keys=True)


def _parts(reply: Reply, sig: str) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = [{"text": piece, "thought": True} for piece in reply.thoughts]
    parts += [{"text": piece} for piece in reply.text]
    parts += [{"functionCall": {"name": call.name, "args": dict(call.args)}} for call in reply.function_calls]
    if not parts:
        parts = [{"text": ""}]
    # The signature goes on the first function call, else on the last part after thinking (Gemini's rule).
    signed = next((p for p in parts if "functionCall" in p), parts[-1] if reply.thoughts else None)
    if signed is not None:
        signed["thoughtSignature"] = sig
    return parts


@contextmanager
def running_gemini_server(*, expected_api_key: str | None = None) -> Iterator[GeminiServer]:
    """A started :class:`GeminiServer`, stopped on exit."""
    with GeminiServer(expected_api_key=expected_api_key) as server:
        yield server
