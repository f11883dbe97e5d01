"""The examples in docs/session-api.md run as written."""

from __future__ import annotations

import re
import runpy
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "session-api.md"
EXAMPLES = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)


def test_the_document_has_examples() -> None:
    assert len(EXAMPLES) >= 3


@pytest.mark.parametrize("code", EXAMPLES, ids=[f"example-{i}" for i in range(len(EXAMPLES))])
def test_example_runs(code: str, tmp_path: Path) -> None:
    script = tmp_path / "example.py"
    script.write_text(code)
    # Run as `python example.py` runs it (as __main__: asyncio.run, module-level code and all), in this
    # interpreter: a separate one would spend seconds importing what this one has imported already.
    runpy.run_path(str(script), run_name="__main__")
