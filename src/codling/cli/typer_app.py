"""codling's typer apps: help with no value shown after a plain flag, and docstrings that wrap to the terminal.

typer (0.29) puts each option's type after it in ``--help``, flags included, so ``--yes``, ``--json`` and even
``--help`` read ``--yes <bool>`` as if they took a value. A flag takes none: its type is left out. And in its
rich markup mode a single line break of a docstring stays a line break, so a command's help (and its line in
the group's list) broke mid-sentence wherever the source did, at any width: a paragraph is made one line, for
the terminal to wrap. Every command of a :class:`CodlingTyper` gets both, and so does the group itself
(``--version``, the completion options).

And typer (0.29) coerces every parameter of the command it runs, absent ones included, through a pydantic
``TypeAdapter`` it builds for it: importing pydantic for that took ~150 ms of the chat's start, before its input
line. An absent value, or a string for a string parameter, is left as it is without one
(:class:`_DeferredCoercion`); any other value goes through typer's own coercion as before.
"""

from __future__ import annotations

import inspect
import os
import re
from collections.abc import Callable
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup, TyperOption


def _plain_flags(params: list[Any]) -> list[Any]:
    # typer shows an option's metavar, when it has one, instead of its type: an empty one shows nothing.
    for param in params:
        if isinstance(param, TyperOption) and param.is_flag and param.metavar is None:
            param.metavar = ""
        if getattr(param, "_runtime_param", False) is None:  # typer's coercion, not built yet
            param._runtime_param = _DeferredCoercion()
    return params


_LINE_BREAK = re.compile(r"(?<!\n)\n(?!\n)")


def _paragraphs(help: str | None) -> str | None:
    """``help`` with each paragraph (blank lines between them) on one line."""
    return None if help is None else _LINE_BREAK.sub(" ", inspect.cleandoc(help))


class _DeferredCoercion:
    """typer's coercion of one parameter (its ``RuntimeParam`` contract), with no adapter built for a value that
    needs none: an absent one, or a string for a string parameter (the adapter would return either as it is)."""

    def coerce(self, value: Any, param: Any, ctx: Any) -> Any:
        """``value`` as typer would coerce it for ``param``."""
        if value is None:
            return () if param.multiple or param.nargs == -1 else None
        if isinstance(value, str) and param.type_descriptor.annotation is str:
            return value
        param._runtime_param = None  # typer builds its own from here on
        return param.get_runtime_param().coerce(value, param=param, ctx=ctx)


class PlainFlagsCommand(TyperCommand):
    """A typer command whose help shows no type after a flag, its paragraphs wrapped to the terminal."""

    def __init__(self, name: str | None, **kwargs: Any) -> None:
        kwargs["help"] = _paragraphs(kwargs.get("help"))
        super().__init__(name, **kwargs)

    def get_params(self, ctx: Any) -> list[Any]:  # typer's own click: its types are private
        """The command's parameters (``--help`` included), flags without a type to show, coerced without
        pydantic where none is needed."""
        return _plain_flags(super().get_params(ctx))


class PlainFlagsGroup(TyperGroup):
    """A typer group whose help shows no type after a flag, its paragraphs wrapped to the terminal."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs["help"] = _paragraphs(kwargs.get("help"))
        super().__init__(**kwargs)

    def get_params(self, ctx: Any) -> list[Any]:  # typer's own click: its types are private
        """The group's parameters (``--help`` included), flags without a type to show, coerced without
        pydantic where none is needed."""
        return _plain_flags(super().get_params(ctx))

    def main(self, *args: Any, **kwargs: Any) -> Any:
        """Run the group; bash completion reads a model id's ``:`` as part of it (``cli/complete.py``)."""
        if "_CODLING_COMPLETE" in os.environ:  # a shell asks for completions: nothing else pays the import
            from codling.cli.complete import use_bash_words

            use_bash_words()
        return super().main(*args, **kwargs)


class CodlingTyper(typer.Typer):
    """A :class:`typer.Typer` whose group and commands show no type after a flag in their help."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(cls=PlainFlagsGroup, **kwargs)

    def command(self, name: str | None = None, **kwargs: Any) -> Callable[[Any], Any]:
        """As :meth:`typer.Typer.command`, the command made a :class:`PlainFlagsCommand`."""
        kwargs.setdefault("cls", PlainFlagsCommand)
        return super().command(name, **kwargs)
