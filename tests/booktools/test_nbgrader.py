"""Student versions for nbgrader courses: a chapter in nbgrader's source format, graded by
nbgrader itself in a temporary course (offline): the worked solutions get full marks, the
released student version zero."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from booktools import exercises

nbgrader_apps = pytest.importorskip("nbgrader.apps")  # a test dependency (pyproject: test)
from nbgrader.api import Gradebook  # noqa: E402
from traitlets.config import Config  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.filterwarnings("ignore::sqlalchemy.exc.SAWarning")  # nbgrader's own


@pytest.fixture(autouse=True)
def scripts_on_path(monkeypatch):
    """nbgrader runs its database migrations with the ``alembic`` script beside this Python,
    which is not on PATH when the virtualenv is not activated (``make test``)."""
    bindir = str(Path(sys.executable).parent)
    monkeypatch.setenv("PATH", bindir + os.pathsep + os.environ.get("PATH", ""))


def code(source: str, tags=(), id_: str = "") -> dict:
    return {"cell_type": "code", "id": id_, "metadata": {"tags": list(tags)},
            "source": source, "outputs": [], "execution_count": None}


def tiny_chapter() -> dict:
    md = {"cell_type": "markdown", "id": "m1", "metadata": {},
          "source": "## Exercises\n\n**1. Squares.** Write `square`."}
    md2 = {"cell_type": "markdown", "id": "m2", "metadata": {},
           "source": "**2. Sums.** Write `total`."}
    return {"cells": [
        code("import math", id_="c0"),
        md,
        code("def square(x):\n    # BEGIN SOLUTION\n    return x * x\n    # END SOLUTION",
             ("solution", "hide-input"), "s1"),
        code("assert square(3) == 9 and square(-2) == 4", id_="k1"),
        md2,
        code("def total(xs):\n    # BEGIN SOLUTION\n    return math.fsum(xs)\n"
             "    # END SOLUTION", ("solution", "hide-input"), "s2"),
        code("assert total([0.5, 0.25]) == 0.75", id_="k2"),
        code("assert total([]) == 0", id_="k3"),
    ], "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                   "language": "python"}},
        "nbformat": 4, "nbformat_minor": 5}


def test_nbgrader_source_marks_answers_checks_and_locked_cells():
    nb = tiny_chapter()
    out = exercises.nbgrader_source(nb, points=2)
    meta = [c["metadata"].get("nbgrader") for c in out["cells"]]
    assert meta[1] is None and meta[4] is None  # markdown stays editable
    assert [(m["grade_id"], m["solution"], m["grade"], m["locked"], m.get("points"))
            for m in meta if m] == [
        ("locked-c0", False, False, True, None),
        ("ex1-answer", True, False, False, None),
        ("ex1-check", False, True, True, 2),
        ("ex2-answer", True, False, False, None),
        ("ex2-check-1", False, True, True, 2),
        ("ex2-check-2", False, True, True, 2),
    ]
    assert [c["id"] for c in out["cells"]] == [c["id"] for c in nb["cells"]]
    assert "hide-input" not in out["cells"][2]["metadata"]["tags"]
    assert nb == tiny_chapter()  # the chapter itself is not changed


@pytest.mark.parametrize("points", [0, -1, 1.5, True, "1"])
def test_nbgrader_source_refuses_points_that_are_not_a_positive_int(points):
    with pytest.raises(ValueError, match=r"points must be an int >= 1; got"):
        exercises.nbgrader_source(tiny_chapter(), points=points)


def grade(course: Path, stem: str) -> dict[str, tuple[float, float]]:
    """Generate assignment ``stem`` of the course, submit its source (the solutions) as
    student ``solution`` and its released version as student ``student``, autograde both;
    return each student's (score, max score)."""
    config = Config()
    config.CourseDirectory.root = str(course)
    config.Execute.timeout = 600
    api = nbgrader_apps.NbGraderAPI(config=config)
    result = api.generate_assignment(stem, force=True, create=True)
    assert result["success"], result["log"]
    source = course / "source" / stem / f"{stem}.ipynb"
    released = course / "release" / stem / f"{stem}.ipynb"
    for student, nb in (("solution", source), ("student", released)):
        folder = course / "submitted" / student / stem
        folder.mkdir(parents=True)
        shutil.copy(nb, folder / nb.name)
        result = api.autograde(stem, student, force=True, create=True)
        assert result["success"], result["log"]
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        return {s: (gb.find_submission(stem, s).score, gb.find_submission(stem, s).max_score)
                for s in ("solution", "student")}


def test_nbgrader_gives_the_solutions_full_marks_and_the_student_version_zero(tmp_path):
    chapter = tmp_path / "01_tiny.ipynb"
    chapter.write_text(json.dumps(tiny_chapter()), encoding="utf-8")
    course = tmp_path / "course"
    exercises.write_nbgrader(chapter, course)
    scores = grade(course, "01_tiny")
    released_text = (course / "release" / "01_tiny" / "01_tiny.ipynb").read_text()
    assert "return x * x" not in released_text  # nbgrader removed the solution
    assert scores == {"solution": (3.0, 3.0), "student": (0.0, 3.0)}


@pytest.mark.slow
def test_a_chapter_graded_by_nbgrader(tmp_path, monkeypatch):
    monkeypatch.setenv("LECTURELIB_PROFILE", "smoke")
    monkeypatch.setenv("MPLBACKEND", "agg")
    course = tmp_path / "course"
    exercises.write_nbgrader(ROOT / "notebooks" / "06_self_attention.ipynb", course)
    scores = grade(course, "06_self_attention")
    full = scores["solution"][1]
    assert full == 3.0  # three exercises, one check cell each
    assert scores == {"solution": (full, full), "student": (0.0, full)}
