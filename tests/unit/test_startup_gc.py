"""Start-up imports run without the cyclic garbage collector, which always comes back (``codling.startup``)."""

from __future__ import annotations

import gc
import importlib
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from codling.startup import imports_without_gc
from tests.fakes.deadlines import deadline


@pytest.fixture(autouse=True)
def collector() -> Iterator[None]:
    """Each test starts with the collector on and nothing frozen, and leaves it so."""
    gc.enable()
    gc.unfreeze()
    yield
    gc.unfreeze()
    gc.enable()


def test_the_collector_is_off_inside_and_on_again_after() -> None:
    with imports_without_gc():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_the_collector_comes_back_after_a_failure_inside() -> None:
    with pytest.raises(ValueError), imports_without_gc():
        raise ValueError("boom")
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off() -> None:
    gc.disable()
    with imports_without_gc():
        pass
    assert not gc.isenabled()


def test_overlapping_stretches_from_two_threads_turn_it_on_when_the_last_ends() -> None:
    inside, leave = threading.Event(), threading.Event()

    def other() -> None:
        with imports_without_gc():
            inside.set()
            leave.wait(deadline(10))

    thread = threading.Thread(target=other)
    thread.start()
    try:
        assert inside.wait(deadline(10))
        with imports_without_gc():
            pass
        assert not gc.isenabled()  # the other thread's stretch is still running
    finally:
        leave.set()
        thread.join(deadline(10))
    assert gc.isenabled()


def test_only_a_stretch_that_imported_modules_freezes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with imports_without_gc():
        [object() for _ in range(10)]
    assert gc.get_freeze_count() == 0  # nothing imported: cyclic garbage of the moment stays collectable

    (tmp_path / "freshly_imported_module.py").write_text("VALUE = [1, 2, 3]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        with imports_without_gc():
            importlib.import_module("freshly_imported_module")
        assert gc.get_freeze_count() > 0  # the modules' objects are out of the collector's way for good
    finally:
        sys.modules.pop("freshly_imported_module", None)
