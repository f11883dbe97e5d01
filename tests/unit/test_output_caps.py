"""Output caps that hold (issue 32 item 4): a command's output as a tool line shows it, live and in ``codling
sessions show``, after the real capture and the token cap of a tool result: true counts of the lines before the
last six, and every shown line capped in width with how much more it had."""

from __future__ import annotations

import io
from datetime import UTC, datetime
from pathlib import Path

from codling.brain.events import Event, ToolCallFinished, ToolCallStarted, TurnEnded, TurnStarted, Usage
from codling.cli.output_tail import LINE_CHARS, OutputTail, output_tail
from codling.cli.render import TerminalRenderer
from codling.cli.transcript import print_transcript
from codling.text import counted_omission
from codling.tools.deps import ToolDeps
from codling.tools.local import LocalTerminal
from codling.tools.toolset import capped
from tests.fakes.deadlines import deadline

T = "t1"


def default(name: str) -> int:
    """A tool setting's default (``ToolDeps``)."""
    value = ToolDeps.__dataclass_fields__[name].default
    assert isinstance(value, int)
    return value


async def command_events(command: str, tmp_path: Path) -> list[Event]:
    """A turn running ``command`` for real, its result cut as the run_command tool and the toolset cut it."""
    limit = min(default("output_limit"), default("output_tokens") * 4)  # as run_command asks
    result = await LocalTerminal().run(command, cwd=tmp_path, timeout=deadline(60), output_limit=limit)
    text = capped(f"exit code {result.exit_code}\n{result.output}", default("output_tokens"))
    return [
        TurnStarted(T, "go", thinking=False, started_at=datetime(2025, 1, 2, tzinfo=UTC)),
        ToolCallStarted(T, "c1", "run_command", f"Run {command}", "execute", {}),
        ToolCallFinished(T, "c1", "run_command", "completed", text),
        TurnEnded(T, "end_turn", Usage()),
    ]


async def shown_live(events: list[Event], *, color: bool) -> str:
    out = io.StringIO()
    renderer = TerminalRenderer(out, color=color, interactive=False)
    for event in events:
        await renderer(event)
    renderer.close()
    return out.getvalue()


def shown_afterwards(events: list[Event]) -> str:
    out = io.StringIO()
    print_transcript(events, out, color=False)
    return out.getvalue()


async def test_the_lines_before_the_last_six_are_counted_in_full(tmp_path: Path) -> None:
    events = await command_events("seq 1 300000", tmp_path)
    tail = "".join(f"    {n}\n" for n in range(299995, 300001))
    for shown in (await shown_live(events, color=False), shown_afterwards(events)):
        assert f"    … 299,994 earlier lines (--verbose shows all)\n{tail}" in shown


async def test_one_huge_line_is_shown_capped_with_how_much_more_it_had(tmp_path: Path) -> None:
    # 3,000,000 bytes are 4,000,000 characters of base64, on one line.
    events = await command_events("head -c 3000000 /dev/zero | base64 -w0; echo", tmp_path)
    expected = f"    {'A' * LINE_CHARS}… ({4_000_000 - LINE_CHARS:,} more characters)\n"
    for shown in (await shown_live(events, color=False), shown_afterwards(events)):
        assert expected in shown
        assert "earlier lines" not in shown  # it is the only line
        assert len(shown) < 600  # not the ~24 KB the capture kept of it
    assert expected.strip() in await shown_live(events, color=True)


def test_long_lines_are_capped_each_and_the_count_crosses_a_cut() -> None:
    # Ten lines of 1,000 characters, the middle of line 5 to the middle of line 7 cut: 2 line breaks dropped.
    cut = counted_omission(1_000, 2)
    output = "\n".join(["x" * 1_000] * 4 + ["x" * 500, f"[... {cut} ...]", "y" * 500] + ["z" * 1_000] * 3) + "\n"
    tail = output_tail(output, 6)
    assert tail.earlier == 6  # lines 1-4, the cut line 5 and line 6 (in the cut)
    assert tail.lines[0] == "…" + "y" * LINE_CHARS + f"… ({500 - LINE_CHARS:,} more characters)"
    assert tail.lines[1:] == ("z" * LINE_CHARS + f"… ({1_000 - LINE_CHARS:,} more characters)",) * 3


def test_a_cut_inside_one_line_joins_it_back_and_nested_cuts_add_up() -> None:
    inner = f"[... {counted_omission(10_000, 0)} ...]"
    outer = f"[… about 9 tokens cut here ({counted_omission(20_000, 0)}): a tool result may hold at most …]"
    output = f"a\n{'b' * 50}\n{outer}\n{'c' * 30}\n{inner}\n{'d' * 20}\n"
    tail = output_tail(output, 6)
    assert tail.earlier == 0
    assert tail.lines == ("a", "b" * 50 + f"… ({20_000 + 30 + 10_000 + 20:,} more characters)")


def test_only_lines_after_the_last_cut_are_shown_and_one_begun_inside_it_is_marked() -> None:
    output = f"{'a' * 10}\n[... {counted_omission(5, 0)} ...]\nbb\n[... {counted_omission(900, 3)} ...]\nlast\n"
    assert output_tail(output, 6) == output_tail(output, 1)
    assert output_tail(output, 6).lines == ("…last",)
    assert output_tail(output, 6).earlier == 3  # the a…b line, and the two whole lines inside the second cut


def test_verbose_shows_every_line_as_recorded() -> None:
    output = "1\n" + "x" * 5_000 + "\n"
    assert output_tail(output, None) == OutputTail(0, ("1", "x" * 5_000))
