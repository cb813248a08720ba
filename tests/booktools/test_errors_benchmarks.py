"""Bad input to booktools.benchmarks: each row is a call, the exception it raises and a
pattern its message must match (the argument, what was expected, what was given)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from booktools import benchmarks

GOOD = {"benchmark": "b", "what": "w", "command": "python b.py",
        "machine": {"cpu_count": 2, "date": "2026-01-01T00:00:00+00:00"}}


def results(tmp: Path, **changes) -> Path:
    record = {k: v for k, v in {**GOOD, **changes}.items() if v is not None}
    (tmp / "b.json").write_text(json.dumps(record))
    return tmp


CASES = [
    # (id, call(tmp), exception, message pattern)
    ("load_records: no folder", lambda t: benchmarks.load_records(t / "none"), ValueError,
     r"results must be the folder of benchmark records; got .*none"),
    ("load_records: no command", lambda t: benchmarks.load_records(results(t, command=None)),
     ValueError, r"b.json: a benchmark record must say command \(what was measured, the "
     r"command that made it, the machine and date\)"),
    ("load_records: no what, no machine", lambda t: benchmarks.load_records(
        results(t, what=None, machine=None)), ValueError, r"must say what, machine "),
    ("load_records: no date", lambda t: benchmarks.load_records(
        results(t, machine={"cpu_count": 2})), ValueError, r"must say machine.date "),
]


@pytest.mark.parametrize("call, error, message", [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_bad_input_raises_a_clear_error(tmp_path, call, error, message):
    with pytest.raises(error, match=message):
        call(tmp_path)
