"""Choosing a session at the terminal: the list offered, the answers understood, and `--resume` with no id."""

from __future__ import annotations

from datetime import UTC, datetime
from io import StringIO
from pathlib import Path

import pytest

from codling.cli.picker import PAGE_SIZE, age, pick_session
from codling.cli.session_args import resume_without_id
from codling.store.index import SessionListing

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def summary(n: int, title: str | None = None) -> SessionListing:
    return SessionListing(
        session_id=f"20261123-{n:012x}",
        cwd=Path("/p"),
        title=title,
        created_at="2026-11-23T10:00:00.000Z",
        updated_at=f"2026-11-23T11:{59 - n:02d}:00.000Z",
        parent=None,
        model="openai:gpt-5",
    )


SESSIONS = [summary(1, "Fix the parser"), summary(2), summary(3, "Port the lexer")]


def pick(answers: str, sessions: list[SessionListing] = SESSIONS) -> tuple[str | None, str]:
    out = StringIO()
    chosen = pick_session(sessions, input=StringIO(answers), output=out, now=NOW, where="in /p")
    return chosen, out.getvalue()


def test_the_list_shows_titles_ages_and_whole_ids_newest_first() -> None:
    chosen, shown = pick("2\n")
    assert chosen == "20261123-000000000002"
    assert shown == (
        "Sessions in /p (3, newest first):\n"
        "  1. Fix the parser  · 2 min ago · 20261123-000000000001\n"
        "  2. (untitled)  · 3 min ago · 20261123-000000000002\n"
        "  3. Port the lexer  · 4 min ago · 20261123-000000000003\n"
        "Resume which? [number, words to filter, Enter: 1, q: none] "
    )


@pytest.mark.parametrize(
    ("answers", "chosen"),
    [
        ("\n", "20261123-000000000001"),  # Enter: the newest
        ("3\n", "20261123-000000000003"),
        ("q\n", None),
        ("", None),  # end of input
        ("9\nx\n1\n", "20261123-000000000001"),  # unclear twice, then clear
        ("9\n0\nnope\n1\n", None),  # three unclear answers: nothing
    ],
)
def test_answers(answers: str, chosen: str | None) -> None:
    assert pick(answers)[0] == chosen


def test_an_unclear_answer_says_so_and_asks_again() -> None:
    _, shown = pick("7\n1\n")
    assert shown.endswith(
        "7 is not one of the numbers shown.\nResume which? [number, words to filter, Enter: 1, q: none] "
    )


def test_a_page_at_a_time_numbered_on() -> None:
    many = [summary(n) for n in range(1, 15)]
    chosen, shown = pick(f"{PAGE_SIZE + 1}\nm\n{PAGE_SIZE + 1}\n", many)
    first, rest = shown.split("11 is not one of the numbers shown.\n")
    assert first.startswith("Sessions in /p (14, newest first):\n") and first.count("\n") == 1 + PAGE_SIZE
    assert first.endswith(", m: 4 more, Enter: 1, q: none] ")
    assert " 11. (untitled)  · 12 min ago · 20261123-00000000000b\n" in rest  # the next page goes on from 11
    assert chosen == many[PAGE_SIZE].session_id
    assert "That is all of them (14)" in pick("m\nm\n", many)[1]


def test_words_list_the_sessions_holding_them_all() -> None:
    chosen, shown = pick("THE lexer\n1\n")
    assert "Sessions in /p matching “THE lexer” (1 of 3):\n  1. Port the lexer  · " in shown
    assert chosen == "20261123-000000000003"
    assert pick("00002\n\n")[0] == "20261123-000000000002"  # an id's part is a word too; Enter: the first shown
    nothing, shown = pick("rust\n*\n2\n")
    assert "No session in /p has “rust” in its title, first request or id. Other words, or * for all.\n" in shown
    assert nothing == "20261123-000000000002"  # * listed them all again


def test_ages() -> None:
    assert [age(stamp, NOW) for stamp in ("2026-11-23T12:00:00Z", "2026-11-23T11:58:59Z", "2026-11-23T09:00:00Z")] == [
        "just now",
        "1 min ago",
        "3 h ago",
    ]
    assert [age(stamp, NOW) for stamp in ("2026-11-22T11:00:00Z", "2026-11-20T12:00:00Z", "garbage")] == [
        "1 day ago",
        "3 days ago",
        "garbage",
    ]


@pytest.mark.parametrize(
    ("argv", "fixed"),
    [
        (["codling", "run", "go on", "--resume"], ["codling", "run", "go on", "--resume="]),
        (["codling", "run", "-r", "--json", "go on"], ["codling", "run", "--resume=", "--json", "go on"]),
        (["codling", "run", "--resume", "abc", "go on"], ["codling", "run", "--resume", "abc", "go on"]),
        (["codling", "run", "-r", "go on"], ["codling", "run", "-r", "go on"]),  # the app reads this as a prompt
    ],
)
def test_resume_without_an_id_asks_for_the_list(argv: list[str], fixed: list[str]) -> None:
    assert resume_without_id(argv) == fixed
