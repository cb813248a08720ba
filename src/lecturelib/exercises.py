"""Student versions of the chapters: exercise solutions removed, their checks kept as graders.

In a chapter, the worked solution of an exercise is a code cell tagged ``solution``; the part a
student must write sits between ``# BEGIN SOLUTION`` and ``# END SOLUTION``. This module writes a
copy of the notebook in which that part is replaced by ``raise NotImplementedError`` (keeping the
indentation), so that the exercise's check cell fails until the student solves it::

    python -m lecturelib.exercises notebooks/01_language_models.ipynb --out student/
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

BEGIN = re.compile(r"^(\s*)# BEGIN SOLUTION\s*$")
END = re.compile(r"^\s*# END SOLUTION\s*$")


def strip_solution(source: str) -> str:
    """Replace every ``# BEGIN SOLUTION`` … ``# END SOLUTION`` block by a stub."""
    out, inside = [], False
    for n, line in enumerate(source.splitlines(), 1):
        if m := BEGIN.match(line):
            if inside:
                raise ValueError(f"line {n}: BEGIN SOLUTION inside another solution block")
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
        tags = cell.get("metadata", {}).get("tags", [])
        if cell["cell_type"] == "code" and "solution" in tags:
            source = "".join(cell["source"])
            if not any(BEGIN.match(line) for line in source.splitlines()):
                raise ValueError(f"solution cell {cell.get('id')} has no # BEGIN SOLUTION block")
            cell["source"] = strip_solution(source)
            cell["metadata"]["tags"] = [t for t in tags if t not in ("solution", "hide-input")]
    return nb


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lecturelib.exercises", description=__doc__)
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, required=True, help="folder for the student versions")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for path in args.notebooks:
        nb = student_version(json.loads(path.read_text(encoding="utf-8")))
        (args.out / path.name).write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n",
                                          encoding="utf-8")
        print(f"{args.out / path.name}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
