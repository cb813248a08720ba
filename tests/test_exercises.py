"""lecturelib.exercises: student versions of the chapters."""

from __future__ import annotations

import json

import pytest

from lecturelib import exercises

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


@pytest.mark.parametrize("src, match", [
    ("# BEGIN SOLUTION\nx = 1", "never closed"),
    ("x = 1\n# END SOLUTION", "line 2: END SOLUTION without BEGIN"),
    ("# BEGIN SOLUTION\n# BEGIN SOLUTION\n# END SOLUTION", "line 2: BEGIN SOLUTION inside"),
])
def test_unbalanced_markers(src, match):
    with pytest.raises(ValueError, match=match):
        exercises.strip_solution(src)


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
    assert sol["metadata"]["tags"] == ["x"]
    assert md == nb["cells"][0] and other == nb["cells"][2]  # only tagged code cells change


def test_solution_cell_without_a_block():
    nb = notebook()
    nb["cells"][1]["source"] = "x = 1"
    with pytest.raises(ValueError, match="s1"):
        exercises.student_version(nb)


def test_command_line_writes_student_versions(tmp_path, capsys):
    src = tmp_path / "01_demo.ipynb"
    src.write_text(json.dumps(notebook()), encoding="utf-8")
    assert exercises.main([str(src), "--out", str(tmp_path / "student")]) == 0
    out = json.loads((tmp_path / "student" / "01_demo.ipynb").read_text(encoding="utf-8"))
    assert out == exercises.student_version(notebook())
    assert capsys.readouterr().out.strip() == str(tmp_path / "student" / "01_demo.ipynb")
