"""`codling models` keeps every character at any width (issue 32): its table folds a value too long for its column
onto more lines instead of cutting it with "…", as the sessions table does."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from rich.console import Console

from codling.cli.models_command import print_models
from tests.fakes.cli_runner import clean_env, codling

WIDTHS = [40, 80, 200]
LONG_ID = "openai-chat:" + "a-local-model-with-a-name-far-longer-than-a-narrow-column-END"
ROWS = [
    ("anthropic:claude-sonnet-4-5", "200,000", "yes", "← selected"),
    (LONG_ID, "1,047,576", "no", ""),
]
SELECTED = "selected: anthropic:claude-sonnet-4-5 (set by model in /home/u/.config/codling/config.toml)"


def shown(output: str) -> str:
    """What a terminal shows of ``output``, spaces and the table's box drawn around the values dropped."""
    return "".join(re.sub(r"[\u2500-\u257f]", "", output).split())


@pytest.mark.parametrize("width", WIDTHS)
def test_the_models_table_keeps_every_character_in_order(width: int) -> None:
    console = Console(record=True, width=width)
    print_models(list(ROWS), SELECTED, console)
    output = console.export_text()
    *table, selected = output.splitlines()
    assert max(len(line) for line in table) <= width  # folded, not left for the terminal to cut or wrap
    assert selected == SELECTED  # one line: the terminal wraps it, a path in it stays whole to copy
    assert "…" not in output
    seen = shown(output)
    # A folded value's lines interleave with its neighbours', so each is looked for on its own, in order, and
    # nothing may be missing in all.
    values = ["model", "context", "limit", "credentials", *(value.replace(" ", "") for row in ROWS for value in row)]
    for value in values:
        assert is_subsequence(value, seen)
    assert len(seen) == sum(map(len, values)) + len(shown(SELECTED))
    assert "1,047,576" in seen  # a number is never split across lines


def is_subsequence(needle: str, haystack: str) -> bool:
    it = iter(haystack)
    return all(char in it for char in needle)


def test_codling_models_at_forty_columns_shows_whole_ids(home: Path) -> None:
    (home / "models.json").write_text(f'{{"models": {{"{LONG_ID}": {{"context_limit": 12345}}}}}}')
    result = codling(clean_env(home, COLUMNS="40"), "models")
    assert result.exit_code == 0, result.stderr
    assert "…" not in result.stdout
    kept = shown(result.stdout)
    assert is_subsequence("anthropic:claude-sonnet-4-5", kept) and is_subsequence(LONG_ID, kept)
    assert max(len(line) for line in result.stdout.splitlines()[:-1]) <= 40
