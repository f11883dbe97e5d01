"""Shell completion of codling's values: session ids, model ids and permission modes (``codling
--install-completion`` sets it up for bash, zsh, fish or PowerShell).

bash splits the words it hands a completion at ``:`` and ``=`` (``COMP_WORDBREAKS``), so ``codling -m openai:gp``
reached typer as ``-m``, ``openai``, ``:``, ``gp``: the model was read as ``openai`` and ``gp`` as the prompt, and
nothing was offered. :class:`BashWords` (registered for bash by the typer group, ``cli/typer_app.py``) joins the
pieces back into the words typed and answers with what bash replaces: the part after the word's last break,
as bash-completion's ``__ltrim_colon_completions`` does. It works with the script typer installs, unchanged.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from codling.config import PERMISSION_MODES, load_settings
from codling.errors import CodlingError

WORD_BREAKS = frozenset(":=")
"""The characters of bash's default ``COMP_WORDBREAKS`` that occur inside codling's words (model ids, ``--opt=``);
bash makes each run of them a word of its own."""


def sessions(incomplete: str) -> list[tuple[str, str]]:
    """Session ids starting with ``incomplete``, newest first, each with its title as help. (Shells complete
    by prefix only; the part after the date alone is matched when the command runs.)"""
    from codling.cli.home import open_store

    try:
        listed = open_store(load_settings()).list()
    except CodlingError:
        return []  # a broken setup is said when the command runs, not in the middle of typing it
    return [(s.session_id, s.title or "") for s in listed if s.session_id.startswith(incomplete)]


def models(incomplete: str) -> list[str]:
    """Catalog model ids starting with ``incomplete``."""
    from codling.llm.catalog import load_catalog
    from codling.paths import user_catalog_file

    try:
        catalog = load_catalog(user_catalog_file(load_settings().home))
    except CodlingError:
        return []
    return [info.id for info in catalog if info.id.startswith(incomplete)]


def modes(incomplete: str) -> list[str]:
    """Permission modes starting with ``incomplete``."""
    return [mode for mode in PERMISSION_MODES if mode.startswith(incomplete)]


@dataclass(frozen=True)
class CompletionWords:
    """A command line being completed in bash, its words as typed."""

    args: tuple[str, ...]
    """The words before the one being completed (the program's name left out)."""
    incomplete: str
    """The word being completed, whole (``openai:gp``)."""
    replaced: str
    """What bash replaces of it: the part after its last word break (``gp``; empty right after a ``:``)."""

    def reply(self, value: str) -> str:
        """``value``, a completion of :attr:`incomplete` (of its value, for ``--option=value``), as bash must get
        it: the text that replaces :attr:`replaced`."""
        option, equals, _ = self.incomplete.partition("=")
        whole = f"{option}={value}" if equals and option.startswith("-") else value
        kept = self.incomplete[: len(self.incomplete) - len(self.replaced)]
        return whole[len(kept) :] if whole.startswith(kept) else value


def bash_words(words: Sequence[str], current: int) -> CompletionWords:
    """The words of ``COMP_WORDS`` (the program's name first) joined back where bash broke them at a
    :data:`WORD_BREAKS` run, and which of them is completed (``COMP_CWORD``: past the last word, a new one)."""
    merged: list[str] = []
    replaced = ""
    glue = False
    for index, word in enumerate(words[1 : current + 1], start=1):
        breaks = bool(word) and set(word) <= WORD_BREAKS
        if merged and (glue or breaks):
            merged[-1] += word
        else:
            merged.append(word)
        glue = breaks
        if index == current:
            replaced = "" if breaks else word
    if current >= len(words) or not merged:  # the cursor starts a new word
        return CompletionWords(tuple(merged), "", "")
    return CompletionWords(tuple(merged[:-1]), merged[-1], replaced)


def routed(args: Sequence[str], incomplete: str, commands: Collection[str]) -> list[str]:
    """``args`` as the command line will run them (``cli/argv.py``, on a terminal: the chat), so that the chat's
    options at the top level complete as the chat's (``codling -m openai:gp``, ``codling --mo``); the first word,
    when none of codling's own options starts so, is the chat's too."""
    from codling.cli.argv import TOP_LEVEL_OPTIONS, Refusal, route

    if not args:
        own = not incomplete.startswith("-") or any(option.startswith(incomplete) for option in TOP_LEVEL_OPTIONS)
        return [] if own else ["chat"]
    target = route(args, commands, stdin_tty=True, stdout_tty=True)
    return list(args) if isinstance(target, Refusal) else target


def use_bash_words() -> None:
    """Complete in bash with :class:`BashWords` (typer registers its own class each time it builds the app)."""
    from typer._click.shell_completion import add_completion_class

    add_completion_class(_bash_words_class(), "bash")


@functools.cache
def _bash_words_class() -> type[Any]:
    # Made on first use: typer's completion classes are private, and only completion needs this one.
    from typer._click.shell_completion import split_arg_string
    from typer._completion_classes import BashComplete

    class BashWords(BashComplete):
        """typer's bash completion, reading the words as they were typed (:func:`bash_words`) and answering
        with the text bash replaces (:meth:`CompletionWords.reply`)."""

        def complete(self) -> str:
            """The completions, one a line, of the word ``COMP_WORDS`` and ``COMP_CWORD`` point at."""
            words = bash_words(split_arg_string(os.environ["COMP_WORDS"]), int(os.environ["COMP_CWORD"]))
            args = routed(words.args, words.incomplete, getattr(self.cli, "commands", {}))
            items = self.get_completions(args, words.incomplete)
            return "\n".join(words.reply(str(item.value)) for item in items)

    return BashWords
