"""The facts a summary assembled without the model keeps: found in the history, carried from earlier summaries."""

from __future__ import annotations

from codling.brain.context.facts import (
    FACTS_HEADING,
    HistoryFacts,
    carried_facts,
    grouped,
    history_facts,
    ranked_facts,
    ungrouped,
)
from codling.brain.context.fallback import FallbackInput, fallback_summary
from codling.brain.state import SUMMARY_PREFIX, HistoryEntry

E = HistoryEntry.of

READ = (
    "[Tool calls in this turn]\n"
    "- Read src/settings.py (done):\n"
    "    Read src/settings.py: lines 1-300 of 300\n"
    + "".join(f"    {i + 1}\tRULE_{i} = {i}\n" for i in range(5))
    + "    6\tMAX_WORKERS = 12\n"
    "    7\tdef workers():\n"
    "- Run `make serve` (done):\n"
    "    `make serve` in /p → exit code 0\n"
    "    Listening on port 8744\n"
    "    ok\n"
)


def test_facts_are_found_wherever_they_stand_and_by_whom() -> None:
    entries = [
        E(
            "user",
            "I checked yesterday and the retry budget turned out to be 17 attempts, which explains the slowness. "
            "Staging DB: pg-stage-4.internal:6432. Why does it time out? Please look.",
        ),
        E(
            "assistant",
            "Let me look at the settings. We'll use orjson for serialization from here on. The checksum of the "
            "fixture is 0x5A3F, so the test pins it.\n\n" + READ,
        ),
    ]
    assert history_facts(entries) == HistoryFacts(
        tools=("MAX_WORKERS = 12 (settings.py)", "Listening on port 8744 (Run `make serve`)"),
        assistant=(
            "Assistant: We'll use orjson for serialization from here on.",
            "Assistant: The checksum of the fixture is 0x5A3F, so the test pins it.",
        ),
        user=(
            "User: I checked yesterday and the retry budget turned out to be 17 attempts, which explains the slowness.",
            "User: Staging DB: pg-stage-4.internal:6432.",
        ),
    )


def test_a_later_value_of_a_name_replaces_the_earlier_and_code_and_questions_are_not_facts() -> None:
    entries = [
        E("assistant", "Done.\n\n[Tool calls in this turn]\n- Read a.py (done):\n    1\tTIMEOUT = 30\n"),
        E("user", "Is port 80 free?\n```\nPORT = 80\n```"),
        E("assistant", "Done.\n\n[Tool calls in this turn]\n- Read a.py (done):\n    1\tTIMEOUT = 45\n"),
    ]
    assert history_facts(entries) == HistoryFacts(tools=("TIMEOUT = 45 (a.py)",))


def test_an_earlier_summary_s_facts_are_carried_not_nested() -> None:
    model_summary = (
        SUMMARY_PREFIX + "## Goal\nPort the lexer.\n\n## Progress and decisions\n- The staging port is 8431.\n"
        "\n## Next steps\n- Fix the 2 failing tests."  # (soon stale: not carried)
    )
    fallback = fallback_summary(FallbackInput(facts=["User: ticket PROJ-4411"], first_request="step 1 of 3"), 400)
    entries = [E("summary", model_summary), E("summary", SUMMARY_PREFIX + fallback)]
    # Of the fallback only its facts section: its first request's "step 1 of 3" is rebuilt from the state.
    assert carried_facts(entries) == ["The staging port is 8431.", "User: ticket PROJ-4411"]
    assert FACTS_HEADING in fallback and "step 1 of 3" in fallback


def test_the_fallback_keeps_what_the_user_said_first_when_facts_do_not_all_fit() -> None:
    facts = [f"NAME_{i}X = {i}0 (Read big.py)" for i in range(60)] + ["User: the release codename is BLUE-HERON"]
    summary = fallback_summary(FallbackInput(facts=facts), 300)
    assert "BLUE-HERON" in summary and "NAME_0X" not in summary


def test_sections_keep_their_keys_apart_and_search_matches_lose_their_location() -> None:
    calls = (
        "[Tool calls in this turn]\n"
        "- Read config/quotas.toml (done):\n"
        "    1\t[tenants.initech]\n"
        "    2\texport_rows_per_day = 86000\n"
        "    3\t[tenants.acme]\n"
        "    4\texport_rows_per_day = 40000\n"
        "- Search for /LEGACY_/ in src (done):\n"
        '    src/billing/rates.py:12:LEGACY_RATE_TABLE = "rates-2019q3"\n'
        "    src/billing/rates.py:13:LEGACY_TENANTS = {'a': LEGACY_RATE_TABLE}\n"
    )
    assert history_facts([E("assistant", "Done.\n\n" + calls)]).tools == (
        "tenants.initech.export_rows_per_day = 86000 (quotas.toml)",
        "tenants.acme.export_rows_per_day = 40000 (quotas.toml)",
        'LEGACY_RATE_TABLE = "rates-2019q3" (Search for /LEGACY_/ in src)',
    )


def test_requests_are_not_facts_and_decisions_are_carried_without_a_number() -> None:
    said = "In src/ingest/handlers.py, make handle_6 reject empty payloads. The batch window starts at 02:40 UTC."
    assert history_facts([E("user", said)]).user == ("User: The batch window starts at 02:40 UTC.",)
    decision = "Assistant: We'll use orjson for serialization from here on."
    fallback = fallback_summary(FallbackInput(facts=[decision]), 400)
    assert carried_facts([E("summary", SUMMARY_PREFIX + fallback)]) == [decision]


def test_facts_rank_by_who_said_them_newer_before_carried_and_a_cut_one_said_once_whole() -> None:
    whole = "User: This is for ticket PROJ-4411, so keep the change small."
    fallback = fallback_summary(
        FallbackInput(facts=["OLD = 1 (a.py)", "Assistant: We'll use orjson.", whole[:40] + "…"]), 400
    )
    entries = [
        E("summary", SUMMARY_PREFIX + fallback),
        E("user", whole.removeprefix("User: ")),
        E(
            "assistant",
            "I chose port 9317 for the metrics server.\n\n"
            "[Tool calls in this turn]\n- Read b.py (done):\n    1\tNEW = 2\n",
        ),
    ]
    assert ranked_facts(entries) == [
        "OLD = 1 (a.py)",
        "NEW = 2 (b.py)",
        "Assistant: We'll use orjson.",
        "Assistant: I chose port 9317 for the metrics server.",
        whole,
    ]


def test_a_source_s_values_share_one_line_and_are_carried_back_one_by_one() -> None:
    facts = ["A = 1 (settings.py)", "B = 2 (settings.py)", "User: port 8431", "C = 3 (settings.py)", "x (Run make)"]
    assert grouped(facts) == [
        "(settings.py) A = 1; B = 2",
        "User: port 8431",
        "(settings.py) C = 3",
        "(Run make) x",
    ]
    fallback = fallback_summary(FallbackInput(facts=facts), 400)
    assert "- (settings.py) A = 1; B = 2\n" in fallback
    assert carried_facts([E("summary", SUMMARY_PREFIX + fallback)]) == facts
    assert ungrouped("User: (a) b") == ["User: (a) b"]
