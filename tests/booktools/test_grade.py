"""booktools.grade: run a notebook cell by cell, keep going after errors, report exercises."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from booktools import exercises, grade

ANSI_TRACEBACK = [
    "\x1b[0;31mAssertionError\x1b[0m  Traceback (most recent call last)",
    "Cell \x1b[0;32mIn[5], line 3\x1b[0m\n\x1b[1;32m      1\x1b[0m x = 1\n"
    "\x1b[0;32m----> 3\x1b[0m \x1b[38;5;28;01massert\x1b[39;00m best_k \x1b[38;5;129;01min"
    "\x1b[39;00m candidate_ks",
    "\x1b[0;31mAssertionError\x1b[0m: ",
]


@pytest.mark.parametrize("output, message", [
    ({"ename": "AssertionError", "evalue": "ranking", "traceback": []},
     "AssertionError: ranking"),
    ({"ename": "AssertionError", "evalue": "", "traceback": ANSI_TRACEBACK},
     "AssertionError: assert best_k in candidate_ks"),
    ({"ename": "NameError", "evalue": "name 'best_k' is not defined", "traceback": []},
     "NameError: name 'best_k' is not defined"),
    ({"ename": "NotImplementedError", "evalue": "", "traceback": [
        "\x1b[0;32m----> 2\x1b[0m     raise NotImplementedError  # your solution here"]},
     "NotImplementedError: the exercise is not solved yet"),
    ({"ename": "KeyboardInterrupt", "evalue": "", "traceback": []}, "KeyboardInterrupt"),
])
def test_error_message_names_the_error_and_the_failing_line(output, message):
    assert grade.error_message(output) == message


def cell(kind: str, source: str, tags: list[str] | None = None) -> dict:
    extra = {"outputs": [], "execution_count": None} if kind == "code" else {}
    return {"cell_type": kind, "id": f"x{abs(hash(source)) % 10**8}",
            "metadata": {"tags": tags or []}, "source": source, **extra}


SOLUTION_TAGS = ["solution", "hide-input"]
DEMO = {"cells": [
    cell("code", "import random\nrandom.seed(0)\ndata = [1, 2, 3]"),
    cell("markdown", "## Exercises\n\n**1. Sum.** Write `total`."),
    cell("code", "# BEGIN SOLUTION\ntotal = sum(data)\n# END SOLUTION", SOLUTION_TAGS),
    cell("code", "assert total == 6, f'total is {total}'"),
    cell("markdown", "**2. Double.** Write `double(v)`."),
    cell("code", "def double(v):\n    # BEGIN SOLUTION\n    return 2 * v\n    # END SOLUTION",
         SOLUTION_TAGS),
    cell("code", "assert double(2) == 4"),
    cell("markdown", "**3. Loose.** A check that ignores the solution."),
    cell("code", "# BEGIN SOLUTION\nz = 1\n# END SOLUTION", SOLUTION_TAGS),
    cell("code", "assert len(data) == 3"),
    cell("markdown", "## References"),
    cell("code", "assert random.random() == 0.8444218515250481, 'first draw after seed 0'"),
], "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
                               "language": "python"}}, "nbformat": 4, "nbformat_minor": 5}


def test_report_of_errors_per_exercise():
    errors = {2: "NotImplementedError: not solved", 3: "AssertionError: total is 5",
              8: "NotImplementedError: not solved", 11: "AssertionError: first draw"}
    r = grade.report(DEMO, errors, "demo.ipynb", "smoke", 1.25)
    assert [(e.number, e.passed, e.message, e.check_failed) for e in r.exercises] == [
        (1, False, "AssertionError: total is 5", True),
        (2, True, "", False),
        (3, False, "NotImplementedError: not solved", False),  # only the solution failed
    ]
    assert r.other_errors == {11: "AssertionError: first draw"} and r.failures == 3
    lines = r.table().splitlines()
    assert lines[0] == "demo.ipynb (profile smoke, 1 s): 1 of 3 exercises passed"
    assert lines[2].split() == ["1", "FAILED", "AssertionError:", "total", "is", "5"]
    assert lines[3].split() == ["2", "passed"]
    assert lines[-1].split()[:4] == ["other", "FAILED", "cells", "11:"]


def test_long_messages_are_cut_to_one_line_in_the_table():
    r = grade.report(DEMO, {3: "AssertionError: " + "x" * 300 + "\nsecond line"}, "d", "smoke")
    row = r.table(width=100).splitlines()[2]
    assert len(row) == 100 and row.endswith("…") and "second" not in row


@pytest.fixture
def demo(tmp_path) -> Path:
    path = tmp_path / "demo.ipynb"
    path.write_text(json.dumps(DEMO), encoding="utf-8")
    return path


@pytest.mark.slow
def test_grade_runs_every_cell_and_keeps_going(demo, tmp_path):
    solution = grade.grade(demo)
    assert solution.failures == 0, solution.table()
    student_path = tmp_path / "student" / "demo.ipynb"
    exercises.write_student(demo, student_path.parent)
    student = grade.grade(student_path)
    assert [(e.number, e.passed, e.check_failed) for e in student.exercises] == [
        (1, False, True), (2, False, True), (3, False, False)]
    assert student.exercises[0].message == "NameError: name 'total' is not defined"
    assert student.exercises[1].message == "NotImplementedError: the exercise is not solved yet"
    assert student.other_errors == {}  # cells after a failure still ran
    executed = student.executed["cells"]
    assert executed[3]["outputs"][0]["ename"] == "NameError"


@pytest.mark.slow
def test_versions_share_the_first_cells_and_restore_names_and_random_state(demo):
    solution, student = grade.grade_versions(demo)
    assert solution.failures == 0, solution.table()
    # names the solution defined are gone, and the first draw after the seed is drawn again
    assert student.exercises[0].message == "NameError: name 'total' is not defined"
    assert student.other_errors == {}
    assert [e.check_failed for e in student.exercises] == [True, True, False]
    assert student.executed["cells"][0]["outputs"] == solution.executed["cells"][0]["outputs"]


@pytest.mark.slow
def test_command_line_prints_the_table_and_exits_with_the_failures(demo, tmp_path, capsys):
    exercises.write_student(demo, tmp_path / "student")
    assert grade.main([str(tmp_path / "student" / "demo.ipynb")]) == 3
    out = capsys.readouterr().out
    assert "0 of 3 exercises passed" in out and "NameError: name 'total'" in out
    assert grade.main([str(demo)]) == 0
