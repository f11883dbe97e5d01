"""One declarative mapping between the brain's frozen dataclasses and the history's pydantic models.

A record (or a part of one) that stands for a dataclass field by field says so with a ``Mirror``: which
dataclass, the fields that are converted or named otherwise (``convert``), the dataclass's fields that are never
written (``live_only``), those rebuilt from the record when it is read (``derived``) and the record's fields the
writer supplies itself (``given``). Every other field has the same name and value on both sides, so both
directions (``model_for``, ``Mirrored.value``) are generated from the one declaration, and adding a recorded
field to an event is the field on the event and the same field, with its docstring, on its record (the tables of
docs/history-format.md are generated from the records); ``mirror_problems`` (a test runs it over every record and
part) names a field on one side only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel


def _same(value: Any) -> Any:
    return value


@dataclass(frozen=True)
class Convert:
    """How one record field's value is made from the dataclass's (``write``) and back (``read``); ``name`` is the
    dataclass's name for it when that is not the record's."""

    write: Callable[[Any], Any] = _same
    read: Callable[[Any], Any] = _same
    name: str | None = None


_SAME = Convert()


@dataclass(frozen=True)
class Mirror:
    """A model that stands for the dataclass ``of``, field by field (see the module's docstring)."""

    of: type[Any]
    convert: Mapping[str, Convert] = field(default_factory=dict)
    """By the model's field name: the fields converted or named otherwise (the rest are copied as they are)."""
    live_only: frozenset[str] = frozenset()
    """The dataclass's fields never written (they take their defaults when read)."""
    derived: Mapping[str, Callable[[Any], Any]] = field(default_factory=dict)
    """By the dataclass's field name: values rebuilt from the whole model when read (they win over ``convert``)."""
    given: frozenset[str] = frozenset()
    """The model's fields that do not come from the dataclass: the writer passes them to ``model_for``."""


class Mirrored(BaseModel):
    """A pydantic model with a ``Mirror`` (``MIRROR``); ``ENVELOPE`` names its own fields no dataclass has (a
    record's version, time, session and kind)."""

    MIRROR: ClassVar[Mirror]
    ENVELOPE: ClassVar[frozenset[str]] = frozenset()

    def value(self) -> Any:
        """The dataclass this model stands for."""
        mirror = self.MIRROR
        values = {
            _their_name(mirror, name): _convert(mirror, name).read(getattr(self, name))
            for name in _mirrored(type(self))
        }
        values.update({name: rebuild(self) for name, rebuild in mirror.derived.items()})
        return mirror.of(**values)


M = TypeVar("M", bound=Mirrored)


def model_for(model: type[M], value: object, **given: Any) -> M:
    """The ``model`` standing for ``value`` (a ``model.MIRROR.of``), with the fields the writer supplies."""
    mirror = model.MIRROR
    assert isinstance(value, mirror.of), f"{model.__name__} stands for {mirror.of.__name__}, not {value!r}"
    values = {
        name: _convert(mirror, name).write(getattr(value, _their_name(mirror, name))) for name in _mirrored(model)
    }
    return model.model_validate(values | given)


def part(model: type[Mirrored]) -> Convert:
    """A field holding a mirrored part (``UsagePart`` for ``Usage``)."""
    return Convert(write=lambda value: model_for(model, value), read=lambda held: held.value())


def optional(convert: Convert) -> Convert:
    """``convert`` for a field that may be None on both sides."""
    return Convert(
        write=lambda value: None if value is None else convert.write(value),
        read=lambda held: None if held is None else convert.read(held),
        name=convert.name,
    )


def many(convert: Convert | None = None, name: str | None = None) -> Convert:
    """A tuple in the dataclass, a list in the record, each item converted by ``convert``."""
    each = convert or _SAME
    return Convert(
        write=lambda items: [each.write(item) for item in items],
        read=lambda held: tuple(each.read(item) for item in held),
        name=name,
    )


PATH = Convert(write=str, read=Path)
"""A path, written as a string."""


def mirror_problems(model: type[Mirrored]) -> list[str]:
    """What keeps ``model`` from standing for its dataclass whole: a field on one side with none on the other,
    or a declaration naming a field that does not exist. Empty when the mapping is complete."""
    mirror = model.MIRROR
    theirs = {f.name for f in fields(mirror.of)}
    if "kind" in model.ENVELOPE:
        theirs.discard("kind")  # an event's kind is its class; the record's kind is the record's own
    problems: list[str] = []
    mapped: set[str] = set()
    for name in _mirrored(model):
        their = _their_name(mirror, name)
        mapped.add(their)
        if their not in theirs:
            problems.append(
                f"{model.__name__}.{name} has no field {their!r} in {mirror.of.__name__}: remove it, or name the "
                f"field it records (Convert(name=…)), or list it in `given` if the writer supplies it"
            )
    for name in sorted(theirs - mapped - mirror.live_only - set(mirror.derived)):
        problems.append(
            f"{mirror.of.__name__}.{name} is not recorded: add a field {name!r} to {model.__name__} (and to "
            f"docs/history-format.md), or list it in {model.__name__}'s Mirror `live_only`"
        )
    for name in sorted((mirror.live_only | set(mirror.derived)) - theirs):
        problems.append(f"{model.__name__}'s Mirror names {mirror.of.__name__}.{name}, which does not exist")
    for name in sorted(set(mirror.convert) - set(model.model_fields)):
        problems.append(f"{model.__name__}'s Mirror converts {name!r}, which is not one of its fields")
    return problems


def _mirrored(model: type[Mirrored]) -> list[str]:
    skip = model.ENVELOPE | model.MIRROR.given
    return [name for name in model.model_fields if name not in skip]


def _their_name(mirror: Mirror, name: str) -> str:
    convert = mirror.convert.get(name)
    return convert.name if convert is not None and convert.name is not None else name


def _convert(mirror: Mirror, name: str) -> Convert:
    return mirror.convert.get(name) or _SAME
