"""Bad input to lecturelib.book.build: each row is a call, the exception it raises and a pattern
its message must match (the argument, what was expected, what was given)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lecturelib.book import build

SOURCE = {"version": "0.1.0", "commit": None, "modified": False, "pin": "v0.1.0"}


def toc(tmp: Path, text: str) -> Path:
    (tmp / "_toc.yml").write_text(text)
    return tmp


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
    ("source_version: no pyproject", lambda t: build.source_version(t), ValueError,
     r"root must be the repository root holding pyproject.toml"),
]


@pytest.mark.parametrize("call, error, message", [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_bad_input_raises_a_clear_error(tmp_path, call, error, message):
    with pytest.raises(error, match=message):
        call(tmp_path)
