"""The prefix-cache model the bench measures codling's requests with."""

from __future__ import annotations

from codling.brain.context.requests import SUMMARISED
from codling.llm.tokens import count_tokens
from tests.fakes.model_reads import read_metrics
from tests.fakes.prefix_cache import cache_share, cached_tokens, common_prefix, layout


def test_a_cache_serves_128_token_steps_from_1024_tokens_on() -> None:
    assert [cached_tokens(n) for n in (0, 1_023, 1_024, 1_151, 1_152, 5_000)] == [0, 0, 1_024, 1_024, 1_152, 4_992]


def test_the_common_prefix() -> None:
    assert [common_prefix(a, b) for a, b in [("", "x"), ("abc", "abd"), ("abc", "abc"), ("ab", "abc")]] == [0, 2, 3, 2]


def test_a_request_that_extends_the_previous_one_is_served_its_prefix() -> None:
    system = {"role": "system", "content": "word " * 3_000}
    first = {"messages": [system, {"role": "user", "content": "one"}]}
    extended = {"messages": [*first["messages"], {"role": "assistant", "content": "two"}]}
    rewritten = {"messages": [{"role": "system", "content": "changed " + "word " * 3_000}]}
    served, total = cache_share([first, extended, rewritten])
    assert layout(extended).startswith(layout(first)[:-1])
    assert 2_900 < served < total / 3  # the second request is served its prefix; the rewritten one nothing


def test_what_the_model_reads_is_measured_from_the_requests() -> None:
    line = "a line of context that is long enough to count when it is said twice"
    squashed = SUMMARISED + "Read a.py: lines 1-900"
    fresh = {
        "messages": [
            {"role": "user", "content": f"{line}\n{line}\nok\x1b[31m"},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "c1"}]},
            {"role": "tool", "tool_call_id": "c1", "content": squashed},
        ]
    }
    metrics = read_metrics([fresh], input_limit=10_000, tool_output=2_000)
    assert (metrics.requests, metrics.control_characters, metrics.fresh_squashed) == (1, 1, 1)
    assert metrics.repeated_tokens == count_tokens(line)
    # A request with no room for the whole result had to squash it.
    assert read_metrics([fresh], input_limit=500, tool_output=2_000).fresh_squashed == 0
