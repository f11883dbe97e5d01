"""docs/history-format.md cannot drift from the record models: its reference is generated from them, and its
example lines are records whose every field the models have."""

from __future__ import annotations

import json
import re

from codling.store.records import RECORD
from tests.history_format import BEGIN, DOC, END, record_models, render


def test_the_documents_record_reference_is_the_models() -> None:
    text = DOC.read_text()
    generated = text[text.index(BEGIN) : text.index(END) + len(END)]
    assert generated == render(), (
        "docs/history-format.md differs from the record models: run `python -m tests.history_format`"
    )


def test_every_record_kind_has_its_section() -> None:
    kinds = re.findall(r"^### `([a-z_]+)`$", DOC.read_text(), flags=re.MULTILINE)
    assert kinds == [model.model_fields["kind"].default for model in record_models()]


def test_the_example_lines_are_records_naming_only_their_fields() -> None:
    text = DOC.read_text()
    example = text[text.index("## Example") :]
    lines = [line for line in example.splitlines() if line.startswith("{")]
    assert len(lines) >= 5
    for line in lines:
        data = json.loads(line)
        record = RECORD.validate_python(data)
        names = {info.alias or name for name, info in type(record).model_fields.items()}
        assert set(data) <= names, f"the example's {data['kind']} record names fields it does not have"
