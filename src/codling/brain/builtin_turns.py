"""The built-in special turns: summarize (compaction), title and greeting.

Each is a function returning a ``SpecialTurnConfig``; run it with ``ConversationSession.execute_special_turn``.

* ``summarize_turn``: replace-above with the preserve-system-context filter. The model writes a handoff summary
  of a transcript (``prompts/compact.md``); the history becomes the kept recent user messages plus the summary.
  An unusable answer, a failure or a timeout persists the deterministic fallback instead. Compaction
  (``brain/compactor.py``) runs through it.
* ``title_turn``: ephemeral. A short session title from the first request and reply (``prompts/title.md``);
  its fallback is the first request on one line. Nothing enters the history, so the model never sees it again.
* ``greeting_turn``: persist-result with the default filter. Only the greeting (``prompts/greeting.md``) enters
  the history, as an assistant message; the request that asked for it does not.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import cache, partial
from importlib import resources
from typing import Any

from codling.brain.context import compaction
from codling.brain.interactions import DEFAULT, PRESERVE_SYSTEM_CONTEXT, Interaction
from codling.brain.special_config import SpecialTurnConfig
from codling.llm.tokens import truncate_to_tokens
from codling.text import clip

SUMMARY_TIMEOUT = 180.0
"""Seconds the summarizer may take in all before the deterministic fallback is used."""
SUMMARY_IDLE_TIMEOUT = 30.0
"""Seconds the summarizer may stay silent (before its first byte or between two) before the fallback is used:
its answer streams, so a long summary has time, and a hung summarizer costs this, not the 120 s a user turn
waits."""

TITLE_TIMEOUT = 30.0
TITLE_MAX_TOKENS = 1_000
"""A cap against runaway answers, not a length: reasoning models (o-series, gpt-5) spend part of it thinking
and would answer nothing under a tight cap. A title itself is a dozen tokens."""
TITLE_MAX_CHARS = 60
FALLBACK_TITLE_CHARS = 80

GREETING_TIMEOUT = 30.0
GREETING_MAX_TOKENS = 1_000
"""As for titles: room for reasoning models to think before two sentences."""


@cache
def prompt_text(name: str) -> str:
    """The text of ``prompts/<name>.md``."""
    return resources.files("codling.brain").joinpath(f"prompts/{name}.md").read_text(encoding="utf-8").strip()


def summarize_turn(
    transcript: str,
    *,
    history: bool = False,
    instructions: str | None = None,
    keep: Sequence[Interaction] = (),
    max_tokens: int | None = None,
    fallback: Callable[[], str] | None = None,
    metadata: dict[str, Any] | None = None,
    shrink: Callable[[SpecialTurnConfig], SpecialTurnConfig | None] | None = None,
    length: int | None = None,
    kept: Sequence[str] | None = None,
) -> SpecialTurnConfig:
    """Summarize the conversation and replace the history by ``keep`` plus the summary; ``instructions`` are
    the user's wishes for the summary (``/compact <instructions>``); ``shrink`` gives a smaller request when the
    provider finds it too long; ``kept`` are the texts of the user messages that stay beside the summary, which
    the request names.

    With ``history`` the summarizer reads the session's history laid out as a user turn's request (its system
    prompt and tool definitions, tools switched off), the summary request last, so a provider's prefix cache
    serves all the conversation it was just sent; ``transcript`` (see ``compaction.compaction_input``) then
    only checks the answer. Without, ``transcript`` is the whole input, under the summarizer's own
    instructions."""
    config = SpecialTurnConfig(
        summarize_prompt(transcript, instructions, length, kept),
        turn_type="summarize",
        messages=(),  # the transcript is the whole input: no history, no tools
        instructions=compaction.compaction_prompt(),
        timeout=SUMMARY_TIMEOUT,
        idle_timeout=SUMMARY_IDLE_TIMEOUT,
        force_non_streaming=False,
        max_tokens=max_tokens,
        persistence="replace-above",
        persistence_filter=PRESERVE_SYSTEM_CONTEXT,
        keep=tuple(keep),
        accept=partial(compaction.usable, transcript=transcript),
        fallback=fallback,
        metadata=metadata or {},
        shrink=shrink,
    )
    if not history:
        return config
    request = summarize_prompt(compaction.compaction_prompt(), instructions, length, kept)
    return replace(config, prompt=request, messages=None, instructions=None, share_prefix=True)


SUMMARY_WORDS_PER_TOKEN = 0.75
"""Words asked for per token of the summary's room (English runs about 0.75 words a token)."""
SUMMARY_HEADROOM = 1.25
"""The summarizer's ``max_tokens`` over the length it is asked for: a summary of paths, names and numbers runs
more tokens a word than prose, and one that overruns a little must not be cut off mid-sentence."""


def summarize_prompt(
    text: str, instructions: str | None = None, length: int | None = None, kept: Sequence[str] | None = None
) -> str:
    """The summarizer's request: ``text`` (the transcript, or the summary request after the history), then the
    user's wishes for the summary, if any, its length (``length`` tokens: it must fit the window beside what
    stays) and the user messages kept word for word beside it (``kept``; None: not said)."""
    prompt = text
    if instructions:
        prompt += f"\n\n---\nThe user asked that the summary also: {instructions}"
    if length:
        prompt += f"\n\n---\nKeep the summary under about {int(length * SUMMARY_WORDS_PER_TOKEN):,} words."
    if kept is not None:
        prompt += "\n\n---\n" + kept_note(kept)
    return prompt


def kept_note(kept: Sequence[str]) -> str:
    """Which of the user's messages stay word for word beside the summary, each by its start."""
    if not kept:
        return "None of the user's messages is kept beside the summary: it must carry what they asked and said."
    starts = "\n".join(f'- "{clip(" ".join(text.split()), 100)}"' for text in kept)
    return f"Kept word for word beside the summary (do not copy them out), the user's messages that begin:\n{starts}"


def title_turn(request: str, reply: str = "", *, model: str | None = None) -> SpecialTurnConfig:
    """Name a session after its first ``request`` (and the start of the ``reply``), with ``model`` if given
    (else the session's); ephemeral."""
    prompt = "First request:\n" + truncate_to_tokens(request, 1_000)
    if reply.strip():
        prompt += "\n\nStart of the reply:\n" + truncate_to_tokens(reply, 300)
    return SpecialTurnConfig(
        prompt,
        turn_type="title",
        messages=(),
        instructions=prompt_text("title"),
        model=model,
        timeout=TITLE_TIMEOUT,
        max_tokens=TITLE_MAX_TOKENS,
        persistence="ephemeral",
        accept=lambda output: bool(clean_title(output)),
        fallback=lambda: fallback_title(request),
    )


def greeting_turn() -> SpecialTurnConfig:
    """Greet the user of a new session (with the session's own instructions: it knows the project)."""
    return SpecialTurnConfig(
        prompt_text("greeting"),
        turn_type="greeting",
        messages=(),
        timeout=GREETING_TIMEOUT,
        max_tokens=GREETING_MAX_TOKENS,
        persistence="persist-result",
        persistence_filter=DEFAULT,
    )


_TITLE_LABEL = re.compile(r"^(?:session\s+)?title\s*:\s*", re.IGNORECASE)


def clean_title(text: str) -> str:
    """A model's title answer as a title: its first non-empty line without labels, quotes, markup or a final
    period, at most ``TITLE_MAX_CHARS`` characters (cut at a word); "" when nothing is left."""
    line = next((line.strip() for line in text.splitlines() if line.strip()), "")
    line = _TITLE_LABEL.sub("", line.lstrip("#* "))
    line = " ".join(line.strip().strip("\"'`*“”‘’").split()).rstrip(".").strip()
    if len(line) <= TITLE_MAX_CHARS:
        return line
    cut = line[: TITLE_MAX_CHARS - 1].rsplit(" ", 1)[0].rstrip(",;:-")
    return cut + "…"


def fallback_title(request: str) -> str:
    """A title without the model: the request on one line, trimmed to 80 characters."""
    text = " ".join(request.split())
    return text if len(text) <= FALLBACK_TITLE_CHARS else text[: FALLBACK_TITLE_CHARS - 1].rstrip() + "…"
