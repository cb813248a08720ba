"""Bad input to booktools.grade: each row is a call, the exception it raises and a pattern
its message must match (the argument, what was expected, what was given)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from booktools import grade


@pytest.fixture
def tmp(tmp_path) -> Path:
    (tmp_path / "nb.ipynb").write_text(json.dumps({"cells": [], "metadata": {}, "nbformat": 4,
                                                   "nbformat_minor": 5}))
    (tmp_path / "notes.txt").write_text("x")
    return tmp_path


CASES = [
    # (id, call(tmp), exception, message pattern)
    ("grade: not a notebook", lambda t: grade.grade(t / "notes.txt"), ValueError,
     r"path must be a .ipynb file; got .*notes.txt"),
    ("grade: missing", lambda t: grade.grade(t / "missing.ipynb"), ValueError,
     r"path must be an existing notebook; .*missing.ipynb does not exist"),
    ("grade: not a path", lambda t: grade.grade(3), ValueError,
     r"path must be a .ipynb file; got 3"),
    ("grade: profile", lambda t: grade.grade(t / "nb.ipynb", "fast"), ValueError,
     r"profile must be one of \('smoke', 'cpu', 'gpu', 'auto'\); got 'fast'"),
    ("grade: timeout zero", lambda t: grade.grade(t / "nb.ipynb", timeout=0), ValueError,
     r"timeout \(seconds per cell\) must be an int >= 1; got int 0"),
    ("grade: timeout float", lambda t: grade.grade(t / "nb.ipynb", timeout=1.5), ValueError,
     r"timeout .*must be an int >= 1; got float 1.5"),
    ("grade_versions: profile", lambda t: grade.grade_versions(t / "nb.ipynb", "GPU"),
     ValueError, r"profile must be one of .*; got 'GPU'"),
    ("report: not a notebook", lambda t: grade.report([], {}, "x", "smoke"), TypeError,
     r"nb must be a parsed notebook .*; got list"),
]


@pytest.mark.parametrize("call, error, message", [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_bad_input_raises_a_clear_error(tmp, call, error, message):
    with pytest.raises(error, match=message):
        call(tmp)
