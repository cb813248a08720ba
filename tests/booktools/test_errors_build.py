"""Bad input to booktools.build: each row is a call, the exception it raises and a pattern
its message must match (the argument, what was expected, what was given)."""

from __future__ import annotations

from pathlib import Path

import pytest

from booktools import build

SOURCE = {"version": "0.1.0", "commit": None, "modified": False, "pin": "main"}


def toc(tmp: Path, text: str) -> Path:
    (tmp / "_toc.yml").write_text(text)
    return tmp


def one_part(tmp: Path) -> Path:
    """A book whose only part holds notebooks/01_a.ipynb."""
    (tmp / "notebooks").mkdir()
    (tmp / "notebooks/01_a.ipynb").write_text("{}")
    return toc(tmp, "root: index\nparts:\n  - caption: Part I\n    chapters:\n"
                    "      - file: notebooks/01_a\n")


def part_record(k: int, pin: str) -> dict:
    return {"source": {**SOURCE, "pin": pin}, "part": {"number": k}, "created": "",
            "total_s": 1.0, "notebooks": []}


CASES = [
    # (id, call(tmp), exception, message pattern)
    ("toc_files: no toc", lambda t: build.toc_files(t), ValueError,
     r"root must be the book's root folder holding _toc.yml; got .*"),
    ("toc_notebooks: no toc", lambda t: build.toc_notebooks(t / "book"), ValueError,
     r"root must be the book's root folder holding _toc.yml; got .*book"),
    ("execute_all: no notebook", lambda t: build.execute_all(
        toc(t, "root: index\n"), t / "stage", "smoke", None, SOURCE), build.BuildError,
     r"no notebook is listed in _toc.yml"),
    ("execute_all: --only matches none", lambda t: build.execute_all(
        toc(t, "root: index\n"), t / "stage", "smoke", "07", SOURCE), build.BuildError,
     r"no notebook in _toc.yml matches '07'"),
    ("execute_part: part 0", lambda t: build.execute_part(one_part(t), 0, "cpu", SOURCE),
     build.BuildError, r"part must be a number from 1 to 1 \(the parts of _toc.yml that hold "
     r"chapters: 1: Part I\); got 0"),
    ("execute_part: past the last part", lambda t: build.execute_part(
        one_part(t), 2, "cpu", SOURCE), build.BuildError, r"from 1 to 1 .*; got 2"),
    ("execute_part: a string", lambda t: build.execute_part(one_part(t), "1", "cpu", SOURCE),
     build.BuildError, r"part must be a number from 1 to 1 .*; got '1'"),
    ("execute_part: no parts", lambda t: build.execute_part(
        toc(t, "root: index\n"), 1, "cpu", SOURCE), build.BuildError,
     r"part must be a number from 1 to 0 \(the parts of _toc.yml that hold chapters: \); "
     r"got 1"),
    ("build: no jobs", lambda t: build.build(one_part(t), "cpu", jobs=0), TypeError,
     r"jobs must be a positive int \(parts executed at once\); got 0"),
    ("execute_parts: jobs a string", lambda t: build.execute_parts(
        one_part(t), [1], "cpu", SOURCE, "2"), TypeError,
     r"jobs must be a positive int \(parts executed at once\); got '2'"),
    ("merge_records: mixed sources", lambda t: build.merge_records(
        [part_record(1, "v1"), part_record(2, "v2")]), build.BuildError,
     r"executed from different sources \(part 1: v1; part 2: v2\); run make book PART=k"),
    ("source_version: no pyproject", lambda t: build.source_version(t), ValueError,
     r"root must be the repository root holding pyproject.toml"),
]


@pytest.mark.parametrize("call, error, message", [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_bad_input_raises_a_clear_error(tmp_path, call, error, message):
    with pytest.raises(error, match=message):
        call(tmp_path)
