"""Secret values taken out of a session's events before an editor or ``--json`` gets them (issue 29 D8)."""

from __future__ import annotations

from pathlib import Path

from codling.brain.events import Event, TextDelta, ThoughtDelta, ToolCallFinished, ToolCallStarted, TurnEnded
from codling.brain.redaction import EventRedactor
from codling.secrecy import Redactor
from codling.vocabulary import FileDiff

SECRET = "ghp_0123456789abcdefghijABCDEFGHIJ"
REDACT = Redactor([SECRET])


def through(events: list[Event]) -> list[Event]:
    redactor = EventRedactor(REDACT)
    out = [shown for event in events for shown in redactor.feed(event)]
    return [*out, *redactor.flush()]


def test_a_secret_streamed_across_deltas_never_goes_out_whole_or_in_pieces() -> None:
    pieces = ["the token is ", SECRET[:5], SECRET[5:17], SECRET[17:], " ok"]
    out = through([TextDelta("t", piece) for piece in pieces])
    assert all(isinstance(e, TextDelta) for e in out)
    text = "".join(e.text for e in out if isinstance(e, TextDelta))
    assert text == "the token is [redacted] ok"
    assert not any(SECRET[:5] in e.text or SECRET[-5:] in e.text for e in out if isinstance(e, TextDelta))


def test_a_held_piece_goes_out_before_an_event_of_another_kind_in_order() -> None:
    out = through([TextDelta("t", "ends with ghp_"), ThoughtDelta("t", "hm"), TurnEnded("t", "end_turn")])
    assert out == [
        TextDelta("t", "ends with "),
        TextDelta("t", "ghp_"),
        ThoughtDelta("t", "hm"),
        TurnEnded("t", "end_turn"),
    ]


def test_every_text_an_event_carries_is_redacted() -> None:
    started = ToolCallStarted("t", "c1", "write_file", f"Write {SECRET}", "edit", {"content": [SECRET, 1]})
    finished = ToolCallFinished(
        "t",
        "c1",
        "read_file",
        "completed",
        f"1 TOKEN={SECRET}",
        diff=FileDiff(Path("/w/.env"), "", f"TOKEN={SECRET}\n"),
        summary=f"Read .env: TOKEN={SECRET}",
    )
    assert through([started, finished]) == [
        ToolCallStarted("t", "c1", "write_file", "Write [redacted]", "edit", {"content": ["[redacted]", 1]}),
        ToolCallFinished(
            "t",
            "c1",
            "read_file",
            "completed",
            "1 TOKEN=[redacted]",
            diff=FileDiff(Path("/w/.env"), "", "TOKEN=[redacted]\n"),
            summary="Read .env: TOKEN=[redacted]",
        ),
    ]


def test_events_without_secrets_are_the_same_objects() -> None:
    event = ToolCallFinished("t", "c1", "read_file", "completed", "nothing secret")
    assert through([event])[0] is event


def test_a_path_named_after_a_secret_is_redacted() -> None:
    finished = ToolCallFinished(
        "t", "c1", "write_file", "completed", "ok", diff=FileDiff(Path(f"/w/{SECRET}.txt"), "", "x")
    )
    (out,) = through([finished])
    assert isinstance(out, ToolCallFinished) and out.diff is not None
    assert out.diff.path == Path("/w/[redacted].txt")
