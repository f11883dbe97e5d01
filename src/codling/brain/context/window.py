"""Learning a model's real window from its server, when the catalog overstates it.

A catalog entry says what a model can take; the server it runs on may take less (a local server started with a
small context, a proxy with its own limit). Two signs give the real window away:

* an overflow error that states the limit (``Overflow.limit``, see ``overflow.py``): the server says it;
* a server that cuts a request silently (Ollama with its default context): the input tokens it reports for a
  request are far below codling's own count of it (less than ``TRUNCATED_SHARE`` of a count above
  ``TRUNCATION_MIN_TOKENS``), or exactly a power of two that codling's count passes by more than
  ``EXACT_CUT_MARGIN`` (Ollama cuts a prompt to exactly its ``num_ctx``, so a request just over the window
  gives itself away at once). The window learned is the next power of two at or above the reported figure:
  older Ollama runners cut to between half the window and all of it, and context sizes are powers of two
  unless set otherwise; a figure at or above the window in use is no sign. Only servers that may cut
  (``may_cut_silently``: Ollama, an OpenAI-compatible server elsewhere than OpenAI) are read this way, on
  every request of a turn (``TurnRequests.reported``).

Either way the session uses the smaller window for the rest of the session (``SessionState.learn_window``),
says so once, records it with each turn's end (``LearnedWindow``) and forgets it when the model is switched.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from codling.llm.catalog import provider_of

TRUNCATED_SHARE = 0.6
"""A server reporting less than this share of codling's count of a request cut it (tokenizers differ by far
less: codling's o200k count is within a few percent of most providers')."""

TRUNCATION_MIN_TOKENS = 2_048
"""Below this, codling's count of a request is no evidence of a cut (small requests vary more, and no server
has a smaller default window)."""

EXACT_CUT_MARGIN = 1.03
"""A report of exactly a power of two is a cut when codling's count is more than this much larger (the counts
of different tokenizers differ by a few percent; a request that happens to count exactly 4,096 tokens is rare,
and then the margin rules it out)."""

MIN_LEARNED_WINDOW = 1_024
"""No smaller window is learned from a report: a figure below it is something else (a cached prefix left out
of the count by a server that should not), not a window."""


@dataclass(frozen=True)
class LearnedWindow:
    """The window a model's server revealed, smaller than the catalog's (recorded with each turn's end)."""

    model: str
    """The model id it was learned for (a window learned for one model says nothing of another)."""
    tokens: int


HOSTED_HOSTS = frozenset({"api.openai.com"})
"""Hosts of OpenAI-compatible APIs that reject an overflow rather than cut it."""


def may_cut_silently(model_id: str, base_url: str | None) -> bool:
    """Whether the server behind ``model_id`` at ``base_url`` is one that may cut a request silently: Ollama,
    or an OpenAI-compatible server at another address than OpenAI's (llama.cpp, LM Studio, vLLM, a proxy).
    Hosted APIs reject an overflow, and some report input tokens in their own way: theirs is never read as a
    cut."""
    if base_url is None:
        return False
    provider = provider_of(model_id)
    if provider == "ollama":
        return True
    return provider.startswith("openai") and urlsplit(base_url).hostname not in HOSTED_HOSTS


def truncated_window(reported: int, estimate: int, window: int) -> int | None:
    """The window a server that cut a request silently has: ``reported`` is the input tokens it reported,
    ``estimate`` codling's own count of the request, ``window`` the one codling uses now; None when the report
    is no sign of a cut (close enough to the count, a small request, or a window no smaller than the one in
    use, or one the request would have fitted)."""
    if reported < MIN_LEARNED_WINDOW or estimate <= TRUNCATION_MIN_TOKENS:
        return None
    learned = 1 << (reported - 1).bit_length()  # the next power of two at or above it
    exact_cut = learned == reported and estimate > reported * EXACT_CUT_MARGIN
    if reported >= estimate * TRUNCATED_SHARE and not exact_cut:
        return None
    if learned >= window or learned >= estimate:
        return None  # no smaller than the window in use, or the request would have fitted: no cut explains it
    return learned


def stated_message(model_id: str, learned: int, before: int, catalog: bool) -> str:
    """What the user is told when a server's overflow error states a window smaller than the one in use."""
    was = f"the catalog's {before:,}" if catalog else f"the {before:,} codling was using"
    return (
        f"The server says {model_id}'s window is {learned:,} tokens, not {was}: codling will use {learned:,} "
        "for the rest of this session."
    )


def truncated_message(model_id: str, learned: int, reported: int, estimate: int) -> str:
    """What the user is told when a server cut a request silently."""
    return (
        f"The server read {reported:,} tokens of a request of about {estimate:,}: it cuts what does not fit its "
        f"window without saying so (Ollama does with its default context). codling will use a window of "
        f"{learned:,} tokens for {model_id} for the rest of this session; give the server a larger context (Ollama: "
        "num_ctx or OLLAMA_CONTEXT_LENGTH) and pick the model again (/model) to use more."
    )
