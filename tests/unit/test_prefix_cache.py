"""The prefix-cache model the bench measures codling's requests with."""

from __future__ import annotations

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
