"""booktools.exercises: exercises found in a chapter, student versions of the chapters."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from booktools import exercises

ROOT = Path(__file__).resolve().parents[2]

SOLUTION = """\
def bigram_counts(tokens):
    counts = {}
    # BEGIN SOLUTION
    for a, b in zip(tokens, tokens[1:]):
        counts[a, b] = counts.get((a, b), 0) + 1
    # END SOLUTION
    return counts"""


def test_strip_solution_keeps_indentation_and_the_rest():
    student = exercises.strip_solution(SOLUTION)
    assert student.splitlines() == [
        "def bigram_counts(tokens):",
        "    counts = {}",
        "    raise NotImplementedError  # your solution here",
        "    return counts",
    ]
    namespace: dict = {}
    exec(student, namespace)  # noqa: S102 - our own test code
    with pytest.raises(NotImplementedError):
        namespace["bigram_counts"]("abc")
    exec(SOLUTION, namespace)  # noqa: S102
    assert namespace["bigram_counts"]("abab") == {("a", "b"): 2, ("b", "a"): 1}


def test_two_blocks_at_top_level():
    src = "# BEGIN SOLUTION\nx = 1\n# END SOLUTION\ny = 2\n# BEGIN SOLUTION\nz = 3\n# END SOLUTION"
    stub = "raise NotImplementedError  # your solution here"
    assert exercises.strip_solution(src) == f"{stub}\ny = 2\n{stub}"


def test_code_without_markers_is_unchanged():
    assert exercises.strip_solution("a = 1\nb = 2") == "a = 1\nb = 2"


def notebook() -> dict:
    return {"cells": [
        {"cell_type": "markdown", "metadata": {"tags": ["solution"]},
         "source": "# BEGIN SOLUTION\nkept in markdown"},
        {"cell_type": "code", "id": "s1", "metadata": {"tags": ["solution", "hide-input", "x"]},
         "source": SOLUTION.splitlines(keepends=True), "outputs": [], "execution_count": None},
        {"cell_type": "code", "id": "c1", "metadata": {},
         "source": "# BEGIN SOLUTION\nnot a solution cell\n# END SOLUTION", "outputs": [],
         "execution_count": None},
    ], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def test_student_version():
    nb = notebook()
    original = json.dumps(nb)
    student = exercises.student_version(nb)
    assert json.dumps(nb) == original  # the input is not modified
    md, sol, other = student["cells"]
    assert sol["source"] == exercises.strip_solution(SOLUTION)
    assert sol["metadata"]["tags"] == ["answer", "x"]
    assert md == nb["cells"][0] and other == nb["cells"][2]  # only tagged code cells change


def test_command_line_writes_student_versions(tmp_path, capsys):
    src = tmp_path / "01_demo.ipynb"
    src.write_text(json.dumps(notebook()), encoding="utf-8")
    assert exercises.main([str(src), "--out", str(tmp_path / "student")]) == 0
    out = json.loads((tmp_path / "student" / "01_demo.ipynb").read_text(encoding="utf-8"))
    assert out == exercises.student_version(notebook())
    assert capsys.readouterr().out.strip() == str(tmp_path / "student" / "01_demo.ipynb")


def test_command_line_without_notebooks_says_what_to_pass(capsys):
    with pytest.raises(SystemExit) as exit_:
        exercises.main(["--out", "student"])
    assert exit_.value.code == 2
    assert "name the notebooks, or pass --toc" in capsys.readouterr().err


def test_zip_per_chapter_holds_the_student_version(tmp_path):
    src = tmp_path / "01_demo.ipynb"
    src.write_text(json.dumps(notebook()), encoding="utf-8")
    written = exercises.write_student(src, tmp_path / "out", make_zip=True)
    assert written == [tmp_path / "out/01_demo.ipynb", tmp_path / "out/01_demo.zip"]
    with zipfile.ZipFile(written[1]) as zf:
        assert zf.namelist() == ["01_demo.ipynb"]
        assert zf.read("01_demo.ipynb").decode() == written[0].read_text(encoding="utf-8")
    again = exercises.write_student(src, tmp_path / "again", make_zip=True)
    assert again[1].read_bytes() == written[1].read_bytes()  # reproducible


def test_toc_option_writes_every_chapter_of_the_toc(tmp_path, monkeypatch, capsys):
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: index\nchapters:\n"
                                       "  - file: notebooks/01_demo\n  - file: notebooks/02_x\n")
    for name in ("01_demo", "02_x", "03_not_in_toc"):
        (tmp_path / f"notebooks/{name}.ipynb").write_text(json.dumps(notebook()))
    monkeypatch.chdir(tmp_path)
    assert exercises.main(["--toc", "--out", "student", "--zip"]) == 0
    assert sorted(p.name for p in (tmp_path / "student").iterdir()) == [
        "01_demo.ipynb", "01_demo.zip", "02_x.ipynb", "02_x.zip"]


def chapter(*cells: tuple[str, str, list[str]]) -> dict:
    return {"cells": [{"cell_type": kind, "id": f"c{i}", "metadata": {"tags": tags},
                       "source": source} for i, (kind, source, tags) in enumerate(cells)]}


def test_exercises_are_found_by_their_numbered_statements():
    nb = chapter(
        ("markdown", "# Title\n\n**1. Not an exercise.** bold prose", []),
        ("code", "setup = 1", []),
        ("markdown", "## Exercises\n\n**1. Tune the smoothing.** Find k.", []),
        ("code", "# BEGIN SOLUTION\nk = 1\n# END SOLUTION", ["solution", "hide-input"]),
        ("code", "assert k == 1", []),
        ("markdown", "**Exercise 9.2 (streaming decoding).** Write it.", []),
        ("code", "data = [1]", []),
        ("code", "# BEGIN SOLUTION\ny = 2\n# END SOLUTION", ["answer"]),
        ("code", "assert y == 2", []),
        ("markdown", "A remark inside the exercise.", []),
        ("code", "assert y > 0", []),
        ("markdown", "## References", []),
        ("code", "print('after')", []),
    )
    found = exercises.exercises(nb)
    assert [(e.number, e.title, e.statement, e.solutions, e.checks) for e in found] == [
        (1, "Tune the smoothing", 2, [3], [4]),
        (2, "streaming decoding", 5, [7], [6, 8, 10]),
    ]


def test_a_heading_after_the_statement_ends_the_exercise():
    nb = chapter(("markdown", "**1. A.** text", []),
                 ("code", "# BEGIN SOLUTION\na = 1\n# END SOLUTION", ["solution"]),
                 ("markdown", "**2. B.** text\n\n## References", []),
                 ("code", "x = 1", []))
    assert [(e.number, e.checks) for e in exercises.exercises(nb)] == [(1, [])]


@pytest.mark.parametrize("nb", sorted((ROOT / "notebooks").glob("*.ipynb")), ids=lambda p: p.stem)
def test_student_versions_keep_the_exercises_of_the_chapters(nb):
    solution = json.loads(nb.read_text(encoding="utf-8"))
    student = exercises.student_version(solution)
    found = exercises.exercises(solution)
    assert found == exercises.exercises(student)  # the grader finds them in either version
    for e in found:
        for i in e.solutions:
            text = "".join(student["cells"][i]["source"])
            assert "raise NotImplementedError" in text and "# BEGIN SOLUTION" not in text
