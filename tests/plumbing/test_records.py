"""lecturelib.records: benchmark records are written whole or not at all."""

from __future__ import annotations

import json

import pytest

from lecturelib import records

GOOD = {"benchmark": "b", "what": "w", "command": "python b.py", "machine": records.machine()}


def test_save_writes_a_record_that_load_reads_back(tmp_path):
    path = records.save(dict(GOOD, seconds=1.5), tmp_path / "sub" / "b.json")
    assert records.load("b", tmp_path / "sub") == json.loads(json.dumps(dict(GOOD, seconds=1.5)))
    assert [p.name for p in path.parent.iterdir()] == ["b.json"]


def test_a_record_that_cannot_be_written_leaves_the_old_one_and_no_temporary_file(tmp_path):
    path = records.save(GOOD, tmp_path / "b.json")
    before = path.read_text()
    with pytest.raises(TypeError):
        records.save(dict(GOOD, seconds=object()), path)
    assert path.read_text() == before
    assert [p.name for p in tmp_path.iterdir()] == ["b.json"]


def test_missing_fields_names_each_missing_field():
    assert records.missing_fields(GOOD) == []
    assert records.missing_fields({"what": "w"}) == ["benchmark", "command", "machine"]
    assert records.missing_fields(dict(GOOD, machine={"cpu_count": 2})) == ["machine.date"]
