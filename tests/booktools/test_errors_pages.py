"""Bad input to booktools.pages: each row is a call, the exception it raises and a pattern
its message must match (the argument, what was expected, what was given)."""

from __future__ import annotations

from pathlib import Path

import pytest

from booktools import pages


def chapters_yml(tmp: Path, chapters: str) -> Path:
    (tmp / "book").mkdir(exist_ok=True)
    (tmp / "book/chapters.yml").write_text(f"parts:\n  - title: P\n    chapters:\n{chapters}")
    return tmp


CASES = [
    # (id, call(tmp), exception, message pattern)
    ("load_chapters: gap", lambda t: pages.load_chapters(chapters_yml(
        t, "      - {n: 1, title: A, needs: []}\n      - {n: 3, title: B, needs: []}\n")),
     ValueError, r"chapters must be numbered 1, 2, ...; got \[1, 3\]"),
    ("load_chapters: later prerequisite", lambda t: pages.load_chapters(chapters_yml(
        t, "      - {n: 1, title: A, needs: [2]}\n      - {n: 2, title: B, needs: []}\n")),
     ValueError, r"chapter 1 needs a later chapter: \[2\]"),
    ("write_chapter_map: one string", lambda t: pages.write_chapter_map(
        t, t / "out", "notebooks/01_language_models"), TypeError,
     r"toc_files must be a list of toc entries .*got the single str "
     r"'notebooks/01_language_models'"),
    ("instructors_table: one string", lambda t: pages.instructors_table(
        t, "notebooks/01_language_models", []), TypeError,
     r"toc_files must be a list of toc entries .*got the single str"),
]


@pytest.mark.parametrize("call, error, message", [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_bad_input_raises_a_clear_error(tmp_path, call, error, message):
    with pytest.raises(error, match=message):
        call(tmp_path)
