"""Exercises: where they are in a chapter, and student versions with the solutions removed.

An exercise is a markdown statement that starts with its number in bold (``**2. Title.**`` or
``**Exercise 3.2 (title).**``), a code cell tagged ``solution`` (the worked solution; the part a
student must write sits between ``# BEGIN SOLUTION`` and ``# END SOLUTION``) and check cells that
assert the solution is right. It runs up to the next statement or the next heading.

A student version replaces each solution part by ``raise NotImplementedError`` (keeping the
indentation) and tags the cell ``answer`` instead of ``solution`` (unfolded), so that the check
cells fail until the student solves the exercise::

    python -m booktools.exercises notebooks/01_language_models.ipynb --out student/
    python -m booktools.exercises --toc --out _build/student --zip   # make student

``--toc`` takes every chapter of ``_toc.yml``; ``--zip`` also writes ``NN_slug.zip`` per chapter;
``--nbgrader`` also writes each chapter in nbgrader's source format, as the course folder
``nbgrader/source/NN_slug/NN_slug.ipynb`` (:func:`nbgrader_source`): an instructor copies it into
an nbgrader course's ``source/`` and runs ``nbgrader generate_assignment NN_slug``.
``booktools.grade`` runs a notebook and reports each exercise's checks.
"""

from __future__ import annotations

import argparse
import json
import re
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

BEGIN = re.compile(r"^(\s*)# BEGIN SOLUTION\s*$")
END = re.compile(r"^\s*# END SOLUTION\s*$")
STATEMENT = re.compile(
    r"^\*\*(?:Exercise\s+\d+\.)?(?P<n>\d+)[.\s(](?P<title>[^*]*)\*\*", re.M
)
HEADING = re.compile(r"^#{1,6}\s", re.M)
ANSWER_TAGS = (
    "solution",
    "answer",
)  # the worked solution; its stub in a student version


@dataclass
class Exercise:
    number: int  # as written in the statement: 3 for "**3. ...**" and "**Exercise 7.3 ...**"
    title: str
    statement: int  # index of the markdown cell that states it
    solutions: list[int] = field(
        default_factory=list
    )  # cells tagged solution (or answer)
    checks: list[int] = field(default_factory=list)  # the exercise's other code cells


def _tags(cell: dict) -> list[str]:
    return cell.get("metadata", {}).get("tags", [])


def _source(cell: dict) -> str:
    return "".join(cell["source"])


def exercises(nb: dict) -> list[Exercise]:
    """The exercises of notebook ``nb`` (parsed JSON), in order. A statement without a solution
    cell is prose, not an exercise; a solution cell outside any exercise is an error."""
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        raise TypeError(
            f"nb must be a parsed notebook (a dict with a 'cells' list); "
            f"got {type(nb).__name__}"
        )
    found: list[Exercise] = []
    current: Exercise | None = None
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "markdown":
            text = _source(cell)
            statements = list(STATEMENT.finditer(text))
            headings = [m.start() for m in HEADING.finditer(text)]
            if statements:
                m = statements[-1]
                current = Exercise(int(m.group("n")), m.group("title").strip(" .()"), i)
                found.append(current)
                if headings and headings[-1] > m.start():
                    current = None
            elif headings:
                current = None
        elif cell["cell_type"] == "code":
            if any(t in ANSWER_TAGS for t in _tags(cell)):
                if current is None:
                    raise ValueError(
                        f"solution cell {i} (id {cell.get('id')}) follows no "
                        "numbered exercise statement such as '**1. Title.**'"
                    )
                current.solutions.append(i)
            elif current is not None:
                current.checks.append(i)
    return [e for e in found if e.solutions]


def strip_solution(source: str) -> str:
    """Replace every ``# BEGIN SOLUTION`` … ``# END SOLUTION`` block by a stub."""
    out, inside = [], False
    for n, line in enumerate(source.splitlines(), 1):
        if m := BEGIN.match(line):
            if inside:
                raise ValueError(
                    f"line {n}: BEGIN SOLUTION inside another solution block"
                )
            inside = True
            out.append(f"{m.group(1)}raise NotImplementedError  # your solution here")
        elif END.match(line):
            if not inside:
                raise ValueError(f"line {n}: END SOLUTION without BEGIN SOLUTION")
            inside = False
        elif not inside:
            out.append(line)
    if inside:
        raise ValueError("a BEGIN SOLUTION block is never closed by END SOLUTION")
    return "\n".join(out)


def student_version(nb: dict) -> dict:
    """A copy of notebook ``nb`` (parsed JSON) with the solutions stripped and shown unfolded."""
    nb = json.loads(json.dumps(nb))
    for cell in nb["cells"]:
        tags = _tags(cell)
        if cell["cell_type"] == "code" and "solution" in tags:
            source = _source(cell)
            if not any(BEGIN.match(line) for line in source.splitlines()):
                raise ValueError(
                    f"solution cell {cell.get('id')} has no # BEGIN SOLUTION block"
                )
            cell["source"] = strip_solution(source)
            kept = [t for t in tags if t not in ("solution", "hide-input")]
            cell["metadata"]["tags"] = ["answer", *kept]
    return nb


NBGRADER_SCHEMA = 3  # nbgrader's cell metadata schema (nbgrader 0.6 and later)


def nbgrader_source(nb: dict, points: int = 1) -> dict:
    """A copy of notebook ``nb`` in nbgrader's source format, for an nbgrader course.

    Each exercise's solution cell becomes an autograded answer cell (nbgrader replaces its
    ``# BEGIN SOLUTION`` ... ``# END SOLUTION`` block by a stub in the student version), each
    of its check cells an autograded test cell worth ``points``, locked; every other code cell
    is locked too (read-only: setup, taught code, experiments). Markdown stays editable. The
    cells keep their ids, and the grade ids name the exercise: ``ex2-answer``, ``ex2-check``.
    """
    if not isinstance(points, int) or isinstance(points, bool) or points < 1:
        raise ValueError(f"points must be an int >= 1; got {points!r}")
    found = exercises(nb)
    nb = json.loads(json.dumps(nb))
    roles: dict[int, tuple[str, bool, bool]] = {}  # cell -> (grade id, solution, grade)
    for e in found:
        for k, i in enumerate(e.solutions):
            suffix = f"-{k + 1}" if len(e.solutions) > 1 else ""
            roles[i] = (f"ex{e.number}-answer{suffix}", True, False)
        for k, i in enumerate(e.checks):
            suffix = f"-{k + 1}" if len(e.checks) > 1 else ""
            roles[i] = (f"ex{e.number}-check{suffix}", False, True)
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "code":
            continue
        grade_id, solution, grade = roles.get(
            i, (f"locked-{cell.get('id', i)}", False, False)
        )
        meta = {
            "grade": grade,
            "grade_id": grade_id,
            "locked": not solution,
            "schema_version": NBGRADER_SCHEMA,
            "solution": solution,
            "task": False,
        }
        if grade:
            meta["points"] = points
        cell["metadata"]["nbgrader"] = meta
        if solution:  # shown unfolded, as in the student version
            tags = cell["metadata"].get("tags", [])
            cell["metadata"]["tags"] = [t for t in tags if t != "hide-input"]
    return nb


def write_nbgrader(path: Path, out: Path) -> Path:
    """Write ``out/source/<stem>/<stem>.ipynb``, notebook ``path`` in nbgrader's source format
    (:func:`nbgrader_source`); returns the file written."""
    nb = nbgrader_source(json.loads(Path(path).read_text(encoding="utf-8")))
    stem = Path(path).stem
    target = out / "source" / stem / f"{stem}.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(
        json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    return target


def write_student(path: Path, out: Path, make_zip: bool = False) -> list[Path]:
    """Write the student version of the notebook at ``path`` into folder ``out`` (and, with
    ``make_zip``, ``out/<stem>.zip`` holding it); returns the files written."""
    nb = student_version(json.loads(Path(path).read_text(encoding="utf-8")))
    out.mkdir(parents=True, exist_ok=True)
    target = out / Path(path).name
    text = json.dumps(nb, indent=1, ensure_ascii=False) + "\n"
    target.write_text(text, encoding="utf-8")
    written = [target]
    if make_zip:
        archive = out / f"{Path(path).stem}.zip"
        with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
            info = zipfile.ZipInfo(
                target.name, date_time=(1980, 1, 1, 0, 0, 0)
            )  # reproducible
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, text)
        written.append(archive)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m booktools.exercises",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("notebooks", nargs="*", type=Path)
    parser.add_argument(
        "--toc",
        action="store_true",
        help="every chapter of _toc.yml in the current folder",
    )
    parser.add_argument(
        "--out", type=Path, required=True, help="folder for the student versions"
    )
    parser.add_argument(
        "--zip", action="store_true", help="also write one zip per chapter"
    )
    parser.add_argument(
        "--nbgrader",
        action="store_true",
        help="also write each chapter in nbgrader's source format under OUT/nbgrader/source",
    )
    args = parser.parse_args(argv)
    notebooks = list(args.notebooks)
    if args.toc:
        from booktools.toc import toc_notebooks

        notebooks += [Path.cwd() / p for p in toc_notebooks(Path.cwd())]
    if not notebooks:
        parser.error("name the notebooks, or pass --toc for every chapter of _toc.yml")
    for path in notebooks:
        for written in write_student(path, args.out, args.zip):
            print(written)
        if args.nbgrader:
            print(write_nbgrader(path, args.out / "nbgrader"))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
