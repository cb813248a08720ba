"""Bad input to lecturelib.records: the error and its message."""

from __future__ import annotations

import pytest

from lecturelib import records

GOOD = {"benchmark": "b", "what": "w", "command": "c", "machine": {"date": "today"}}

CASES = [
    (lambda: records.load("../secrets"), ValueError,
     r"name must be a record's file name without .json; got '../secrets'"),
    (lambda: records.load(3), ValueError, r"name must be a record's file name .*; got 3"),
    (lambda: records.save([1], "/tmp/x.json"), TypeError, r"record must be a dict; got list"),
    (lambda: records.save({"benchmark": "b", "what": "w", "command": "c"}, "/tmp/x.json"),
     ValueError, r"a benchmark record must say machine \(.*\); got keys \['benchmark'"),
    (lambda: records.save({"benchmark": "b", "what": "w", "command": "c", "machine": {}},
                          "/tmp/x.json"), ValueError, r"must say machine.date"),
    (lambda: records.save(dict(GOOD), "/tmp/x.txt"), ValueError,
     r"path must end in .json; got /tmp/x.txt"),
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_bad_input_is_refused_with_a_clear_message(call, error, message):
    with pytest.raises(error, match=message):
        call()
