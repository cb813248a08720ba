"""Bad input to booktools.exercises: each row is a call, the exception it raises and a
pattern its message must match (the argument, what was expected, what was given)."""

from __future__ import annotations

import pytest

from booktools import exercises


def nb(*cells: tuple[str, str, list[str]]) -> dict:
    return {"cells": [{"cell_type": kind, "id": f"c{i}", "metadata": {"tags": tags},
                       "source": source} for i, (kind, source, tags) in enumerate(cells)]}


SOLUTION = ("code", "# BEGIN SOLUTION\nx = 1\n# END SOLUTION", ["solution"])

CASES = [
    # (id, call, exception, message pattern)
    ("strip_solution: never closed", lambda: exercises.strip_solution("# BEGIN SOLUTION\nx = 1"),
     ValueError, r"a BEGIN SOLUTION block is never closed by END SOLUTION"),
    ("strip_solution: END first", lambda: exercises.strip_solution("x = 1\n# END SOLUTION"),
     ValueError, r"line 2: END SOLUTION without BEGIN SOLUTION"),
    ("strip_solution: nested", lambda: exercises.strip_solution(
        "# BEGIN SOLUTION\n# BEGIN SOLUTION\n# END SOLUTION"), ValueError,
     r"line 2: BEGIN SOLUTION inside another solution block"),
    ("student_version: no block", lambda: exercises.student_version(nb(
        ("markdown", "**1. A.**", []), ("code", "x = 1", ["solution"]))), ValueError,
     r"solution cell c1 has no # BEGIN SOLUTION block"),
    ("exercises: not a notebook", lambda: exercises.exercises([SOLUTION]), TypeError,
     r"nb must be a parsed notebook \(a dict with a 'cells' list\); got list"),
    ("exercises: solution before any statement", lambda: exercises.exercises(nb(SOLUTION)),
     ValueError, r"solution cell 0 \(id c0\) follows no numbered exercise statement"),
    ("exercises: solution after the exercises' end", lambda: exercises.exercises(nb(
        ("markdown", "**1. A.**", []), SOLUTION, ("markdown", "## References", []), SOLUTION)),
     ValueError, r"solution cell 3 \(id c3\) follows no numbered exercise statement"),
]


@pytest.mark.parametrize("call, error, message", [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_bad_input_raises_a_clear_error(call, error, message):
    with pytest.raises(error, match=message):
        call()
