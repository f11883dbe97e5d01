"""Bash completion of words bash breaks at `:` and `=` (issue 32 item 6): a model id completes, in bash's own
terms (the words as COMP_WORDS holds them, the reply as the text that replaces the part after the last break)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from codling.cli.app import app
from codling.cli.complete import CompletionWords, bash_words
from tests.fakes.cli_runner import clean_env


@pytest.mark.parametrize(
    ("words", "current", "expected"),
    [
        # codling -m openai:gp
        (["codling", "-m", "openai", ":", "gp"], 4, CompletionWords(("-m",), "openai:gp", "gp")),
        # codling -m openai:  (the cursor right after the colon: bash's word is the colon)
        (["codling", "-m", "openai", ":"], 3, CompletionWords(("-m",), "openai:", "")),
        # codling run --model=anthropic:claude-s
        (
            ["codling", "run", "--model", "=", "anthropic", ":", "claude-s"],
            6,
            CompletionWords(("run",), "--model=anthropic:claude-s", "claude-s"),
        ),
        # codling -m openai:gpt-5 --mode a  (a whole id before the word completed is one word again)
        (
            ["codling", "-m", "openai", ":", "gpt-5", "--mode", "a"],
            6,
            CompletionWords(("-m", "openai:gpt-5", "--mode"), "a", "a"),
        ),
        # codling -m  (a new word: the empty last word is gone once typer splits COMP_WORDS)
        (["codling", "-m"], 2, CompletionWords(("-m",), "", "")),
        # a COMP_WORDBREAKS without ':' leaves the id whole: all of it is replaced
        (
            ["codling", "run", "--model", "anthropic:claude-s"],
            3,
            CompletionWords(("run", "--model"), "anthropic:claude-s", "anthropic:claude-s"),
        ),
    ],
)
def test_the_words_are_joined_back_as_typed(words: list[str], current: int, expected: CompletionWords) -> None:
    assert bash_words(words, current) == expected


@pytest.mark.parametrize(
    ("words", "value", "reply"),
    [
        (CompletionWords(("-m",), "openai:gp", "gp"), "openai:gpt-5", "gpt-5"),
        (CompletionWords(("-m",), "openai:", ""), "openai:gpt-5", "gpt-5"),
        (
            CompletionWords(("run",), "--model=anthropic:claude-s", "claude-s"),
            "anthropic:claude-sonnet-4-5",
            "claude-sonnet-4-5",
        ),
        (CompletionWords(("run",), "--mode=", ""), "yolo", "yolo"),
        (CompletionWords(("run",), "--model=op", "op"), "openai:gpt-5", "openai:gpt-5"),
        (
            CompletionWords(("run", "--model"), "anthropic:claude-s", "anthropic:claude-s"),
            "anthropic:claude-sonnet-4-5",
            "anthropic:claude-sonnet-4-5",
        ),
    ],
)
def test_the_reply_is_what_bash_replaces(words: CompletionWords, value: str, reply: str) -> None:
    assert words.reply(value) == reply


def complete(home: Path, *words: str) -> list[str]:
    """What codling answers bash for the last of ``words`` (in process), as typer's installed script asks."""
    env = clean_env(
        home, _CODLING_COMPLETE="complete_bash", COMP_WORDS="\n".join(words), COMP_CWORD=str(len(words) - 1)
    )
    result = CliRunner().invoke(app, [], env=env, prog_name="codling")
    assert result.exit_code == 0, result.output
    return result.stdout.split()


def test_a_model_id_completes_after_its_colon(home: Path) -> None:
    assert complete(home, "codling", "-m", "openai", ":", "gpt-5-") == ["gpt-5-mini", "gpt-5-codex"]
    assert complete(home, "codling", "run", "--model", "anthropic", ":", "claude-s") == [
        "claude-sonnet-5-5",
        "claude-sonnet-4-5",
    ]
    assert complete(home, "codling", "chat", "--model", "=", "anthropic", ":", "claude-h") == ["claude-haiku-4-5"]
    # The chat's options at the top level complete as the chat's, after a whole id too.
    assert complete(home, "codling", "-m", "openai", ":", "gpt-5", "--mode", "a") == ["ask", "accept-edits", "auto"]
    assert complete(home, "codling", "--mode", "=", "y") == ["yolo"]
    assert complete(home, "codling", "--mo") == ["--model", "--mode"]
    assert complete(home, "codling", "s") == ["sessions", "sandbox"]  # the first word: codling's commands
    assert complete(home, "codling", "--v") == ["--version"]  # and options
