"""An OpenAI client whose chat-completions requests skip the SDK's request transform.

Before sending, ``AsyncCompletions.create`` walks the whole request against its TypedDict annotations
(``async_maybe_transform``) to rename aliased keys and format dates and files. No chat-completions request type
declares an alias or a format, so for the plain dicts pydantic-ai passes the walk changes nothing, yet it costs
about 0.15 ms per message because every message is tried against each member of the message union: 7–8 ms per
request at 46 messages on this machine, growing with the conversation. :class:`FastOpenAI` sends the same body
without the walk; ``tests/unit/test_openai_client.py`` checks its requests (body and headers) equal the stock
client's.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

from openai import AsyncOpenAI, AsyncStream, NotGiven, Omit, RequestOptions, not_given
from openai.resources.chat import AsyncChat
from openai.resources.chat.completions import AsyncCompletions
from openai.resources.chat.completions.completions import validate_response_format
from openai.types.chat import ChatCompletion, ChatCompletionChunk


class _Completions(AsyncCompletions):  # type: ignore[misc]  # the SDK is not followed (pyproject)
    """Chat completions that send the caller's parameters as they are."""

    async def create(
        self,
        *,
        extra_headers: Any = None,
        extra_query: Any = None,
        extra_body: Any = None,
        timeout: Any = not_given,
        **params: Any,
    ) -> ChatCompletion | AsyncStream[ChatCompletionChunk]:
        """Create a chat completion; the parameters are those of ``AsyncCompletions.create``."""
        body = {name: value for name, value in params.items() if not isinstance(value, NotGiven | Omit)}
        validate_response_format(body.get("response_format"))
        stream = bool(body.get("stream"))
        # The options AsyncCompletions.create sends, without those not given.
        options: RequestOptions = {"security": {"bearer_auth": True}}
        if extra_headers is not None:
            options["headers"] = extra_headers
        if extra_query is not None:
            options["params"] = extra_query
        if extra_body is not None:
            options["extra_json"] = extra_body
        if not isinstance(timeout, NotGiven):
            options["timeout"] = timeout
        return await self._post(
            "/chat/completions",
            body=body,
            options=options,
            cast_to=ChatCompletion,
            stream=stream,
            stream_cls=AsyncStream[ChatCompletionChunk],
        )


class _Chat(AsyncChat):  # type: ignore[misc]  # the SDK is not followed (pyproject)
    @cached_property
    def completions(self) -> AsyncCompletions:
        return _Completions(self._client)


class FastOpenAI(AsyncOpenAI):  # type: ignore[misc]  # the SDK is not followed (pyproject)
    """``AsyncOpenAI`` whose ``chat.completions.create`` sends its parameters without the SDK's transform."""

    @cached_property
    def chat(self) -> AsyncChat:
        return _Chat(self)
