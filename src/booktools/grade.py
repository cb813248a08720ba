"""Grade a chapter's exercises: run the notebook cell by cell and report each exercise.

The notebook runs in a fresh kernel in the ``smoke`` profile (``LECTURELIB_PROFILE=smoke``; the
checks test the code, not the size of the models) and keeps going after a cell fails. An exercise
(see ``booktools.exercises``) passes when none of its cells raised; otherwise the report
gives the message of its first failing check (or of its solution cell when only that failed)::

    python -m booktools.grade student/01_language_models.ipynb

prints one row per exercise and exits with the number of failures (``make grade NB=...``).
Failing cells outside the exercises are reported in one more row, since the exercises usually
depend on them.

``grade_versions`` grades a chapter and its student version together: the cells before the first
solution are the same in both and run once; the solution notebook continues from there; then the
names and the global random states of that point are restored and the student version runs its
own copy of the remaining cells. Objects that the solution cells changed in place stay changed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from booktools import exercises as _exercises
from lecturelib.validate import check_int

PROFILES = ("smoke", "cpu", "gpu", "auto")
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")

# Run in the kernel (not stored in its history) before the solution cells and before the student
# cells: remember, then restore, the names and the global random states.
_SNAPSHOT = """
def _lecturelib_grade_state():
    import random
    saved = {"names": dict(globals()), "random": random.getstate()}
    try:
        import numpy
        saved["numpy"] = numpy.random.get_state()
    except ImportError:
        pass
    try:
        import torch
        saved["torch"] = torch.get_rng_state()
    except ImportError:
        pass

    def restore():
        names = globals()
        names.clear()
        names.update(saved["names"])
        names.pop("_lecturelib_grade_state", None)
        random.setstate(saved["random"])
        if "numpy" in saved:
            numpy.random.set_state(saved["numpy"])
        if "torch" in saved:
            torch.set_rng_state(saved["torch"])

    return restore


_lecturelib_grade_restore = _lecturelib_grade_state()
"""
_RESTORE = "_lecturelib_grade_restore()"


@dataclass
class ExerciseResult:
    number: int
    title: str
    passed: bool
    message: str = (
        ""  # the first failure: a check's if a check failed, else the solution's
    )
    check_failed: bool = False  # a check cell (not only the solution cell) raised


@dataclass
class Report:
    notebook: str
    profile: str
    exercises: list[ExerciseResult]
    other_errors: dict[int, str] = field(default_factory=dict)  # cell index -> message
    wall_s: float = 0.0
    executed: dict | None = field(
        default=None, repr=False
    )  # the notebook with its outputs

    @property
    def failures(self) -> int:
        """Failed exercises, plus one when cells outside the exercises failed."""
        return sum(not e.passed for e in self.exercises) + bool(self.other_errors)

    def table(self, width: int = 100) -> str:
        passed = sum(e.passed for e in self.exercises)
        lines = [
            f"{self.notebook} (profile {self.profile}, {self.wall_s:.0f} s): "
            f"{passed} of {len(self.exercises)} exercises passed",
            f"{'exercise':>8}  {'result':6}  message",
        ]
        for e in self.exercises:
            lines.append(
                f"{e.number:>8}  {'passed' if e.passed else 'FAILED':6}  "
                f"{_shorten(e.message, width - 18)}"
            )
        if self.other_errors:
            where = ", ".join(str(i) for i in self.other_errors)
            first = next(iter(self.other_errors.values()))
            lines.append(
                f"{'other':>8}  {'FAILED':6}  "
                f"{_shorten(f'cells {where}: {first}', width - 18)}"
            )
        return "\n".join(lines)


def _shorten(text: str, width: int) -> str:
    line = text.splitlines()[0] if text else ""
    return line if len(line) <= width else line[: width - 1] + "…"


def error_message(output: dict) -> str:
    """One line for a cell's error output: ``AssertionError: msg``; an assertion without a message
    is named by its failing line (``AssertionError: assert best_k in candidate_ks``)."""
    ename, evalue = output.get("ename", "Error"), str(output.get("evalue", "")).strip()
    if evalue:
        return f"{ename}: {evalue}"
    marked = [
        ANSI.sub("", line)
        for tb in output.get("traceback", [])
        for line in tb.splitlines()
        if "---->" in ANSI.sub("", line)
    ]
    if marked:
        code = re.sub(r"^-*>\s*\d+\s*", "", marked[-1].strip()).strip()
        if code.startswith("raise NotImplementedError  # your solution here"):
            return f"{ename}: the exercise is not solved yet"
        return f"{ename}: {code}"
    return ename


class _Kernel:
    """One kernel that runs the cells of a notebook and collects the error of each."""

    def __init__(self, client):
        self.client = client
        self.died_in: int | None = None  # the cell during which the kernel died

    def run_cells(
        self, nb: dict, start: int, stop: int, errors: dict[int, str]
    ) -> None:
        """Run code cells ``start..stop-1`` of ``nb``, storing their outputs in ``nb``;
        ``errors[i]``: the error message of cell i."""
        import nbformat
        from nbclient.exceptions import DeadKernelError

        self.client.nb = node = nbformat.reads(
            json.dumps(nb), as_version=4
        )  # joins sources
        for i in range(start, stop):
            cell = node.cells[i]
            if cell.cell_type != "code":
                continue
            if self.died_in is not None:
                errors[i] = (
                    f"not run: the kernel died while running cell {self.died_in}"
                )
                continue
            try:
                self.client.execute_cell(cell, i)
            except DeadKernelError:
                self.died_in = i
                errors[i] = "the kernel died while running this cell (out of memory?)"
                continue
            outputs = node.cells[i].get("outputs", [])
            nb["cells"][i]["outputs"] = json.loads(json.dumps(outputs))
            found = [o for o in outputs if o.output_type == "error"]
            if found:
                errors[i] = error_message(found[0])

    def run_internal(self, code: str) -> None:
        import nbformat

        if self.died_in is not None:
            return
        self.client.nb = nbformat.v4.new_notebook(
            cells=[nbformat.v4.new_code_cell(code)]
        )
        cell = self.client.execute_cell(self.client.nb.cells[0], 0, store_history=False)
        found = [o for o in cell.get("outputs", []) if o.output_type == "error"]
        if found:
            raise RuntimeError(
                f"grading set-up failed in the kernel: {error_message(found[0])}"
            )


@contextmanager
def _kernel(cwd: Path, profile: str, timeout: int):
    import nbformat
    from nbclient import NotebookClient

    env = {
        **os.environ,
        "LECTURELIB_PROFILE": profile,
        "LECTURELIB_PROGRESS": "summary",
        "MPLBACKEND": "agg",
    }
    env.pop("LECTURELIB_RECORD", None)
    client = NotebookClient(
        nbformat.v4.new_notebook(),
        timeout=timeout,
        allow_errors=True,
        interrupt_on_timeout=True,
        kernel_name="python3",
        resources={"metadata": {"path": str(cwd)}},
    )
    with client.setup_kernel(env=env, cwd=str(cwd)):
        yield _Kernel(client)


def report(
    nb: dict,
    errors: dict[int, str],
    name: str,
    profile: str,
    wall_s: float = 0.0,
    executed: dict | None = None,
) -> Report:
    """Per exercise of ``nb``: passed, or the first failing check's message (``errors``: cell
    index -> message of every cell that raised)."""
    results, inside = [], set()
    for ex in _exercises.exercises(nb):
        inside.update(ex.solutions, ex.checks)
        checks = [errors[i] for i in sorted(ex.checks) if i in errors]
        solutions = [errors[i] for i in sorted(ex.solutions) if i in errors]
        failed = checks or solutions
        results.append(
            ExerciseResult(
                ex.number,
                ex.title,
                not failed,
                failed[0] if failed else "",
                bool(checks),
            )
        )
    others = {i: m for i, m in sorted(errors.items()) if i not in inside}
    return Report(name, profile, results, others, round(wall_s, 1), executed)


def check_grade(path, profile: str, timeout: int) -> Path:
    """The arguments of :func:`grade`; returns ``path`` as a Path."""
    if not isinstance(path, (str, Path)) or not str(path).endswith(".ipynb"):
        raise ValueError(f"path must be a .ipynb file; got {path!r}")
    if not Path(path).is_file():
        raise ValueError(f"path must be an existing notebook; {path} does not exist")
    if profile not in PROFILES:
        raise ValueError(f"profile must be one of {PROFILES}; got {profile!r}")
    check_int(timeout, "timeout (seconds per cell)", 1)
    return Path(path)


def grade(path: str | Path, profile: str = "smoke", timeout: int = 600) -> Report:
    """Run the notebook at ``path`` top to bottom in a fresh kernel (working directory: its
    folder) and report its exercises. ``timeout``: seconds allowed per cell."""
    path = check_grade(path, profile, timeout)
    nb = json.loads(path.read_text(encoding="utf-8"))
    _exercises.exercises(nb)  # refuses a malformed notebook before starting a kernel
    errors: dict[int, str] = {}
    t0 = time.perf_counter()
    with _kernel(path.resolve().parent, profile, timeout) as kernel:
        kernel.run_cells(nb, 0, len(nb["cells"]), errors)
    return report(nb, errors, str(path), profile, time.perf_counter() - t0, nb)


def grade_versions(
    path: str | Path, profile: str = "smoke", timeout: int = 600
) -> tuple[Report, Report]:
    """Grade the chapter at ``path`` and its student version (``exercises.student_version``)
    in one kernel, running the cells they share once; returns ``(solution, student)``."""
    path = check_grade(path, profile, timeout)
    solution = json.loads(path.read_text(encoding="utf-8"))
    student = _exercises.student_version(solution)
    differ = [
        i
        for i, (a, b) in enumerate(zip(solution["cells"], student["cells"]))
        if "".join(a["source"]) != "".join(b["source"])
    ]
    first = differ[0] if differ else len(solution["cells"])
    shared: dict[int, str] = {}
    errors_solution: dict[int, str] = {}
    errors_student: dict[int, str] = {}
    t0 = time.perf_counter()
    with _kernel(path.resolve().parent, profile, timeout) as kernel:
        kernel.run_cells(solution, 0, first, shared)
        t1 = time.perf_counter()
        kernel.run_internal(_SNAPSHOT)
        kernel.run_cells(solution, first, len(solution["cells"]), errors_solution)
        t2 = time.perf_counter()
        kernel.run_internal(_RESTORE)
        kernel.run_cells(student, first, len(student["cells"]), errors_student)
        t3 = time.perf_counter()
    t_solution, t_student = t2 - t0, (t1 - t0) + (t3 - t2)
    for i in range(first):  # the shared cells' outputs
        if "outputs" in solution["cells"][i]:
            student["cells"][i]["outputs"] = solution["cells"][i]["outputs"]
    name = str(path)
    return (
        report(
            solution, {**shared, **errors_solution}, name, profile, t_solution, solution
        ),
        report(
            student,
            {**shared, **errors_student},
            f"{name}, student version",
            profile,
            t_student,
            student,
        ),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m booktools.grade",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument("--profile", default="smoke", choices=PROFILES)
    parser.add_argument(
        "--timeout", type=int, default=600, help="seconds allowed per cell"
    )
    args = parser.parse_args(argv)
    failures = 0
    for path in args.notebooks:
        result = grade(path, args.profile, args.timeout)
        print(result.table())
        failures += result.failures
    return min(failures, 100)  # exit statuses wrap at 256


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
