"""Every chapter follows the anatomy of CONTRIBUTING.md: the Colab cell pinned to the package's
release, the parameters cell, setup, citations that exist, glued numbers that are glued, and
exercises whose checks fail on the student version and pass on the solution."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
import yaml

from booktools import exercises, grade, sync
from booktools.build import toc_notebooks

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
BIB_KEYS = set(re.findall(r"^@\w+\{([^,]+),", (ROOT / "book/references.bib").read_text(), re.M))
REPO_URL = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]
BRANCH = sync.repository_branch(ROOT)  # what the Colab cells install (_config.yml)


def cells(nb_path: Path, kind: str | None = None) -> list[dict]:
    nb = json.loads(nb_path.read_text(encoding="utf-8"))
    return [c for c in nb["cells"] if kind is None or c["cell_type"] == kind]


def source(cell: dict) -> str:
    return "".join(cell["source"])


def tags(cell: dict) -> list[str]:
    return cell.get("metadata", {}).get("tags", [])


def test_toc_holds_the_chapters_that_can_be_numbered():
    """Jupyter Book numbers chapters by their position in the toc, so a chapter enters the toc
    exactly when every earlier chapter exists: chapters 01..k, where k+1 is the first missing."""
    numbers = sorted(int(nb.stem[:2]) for nb in NOTEBOOKS)
    first_gap = next(n for n in range(1, len(numbers) + 2) if n not in numbers)
    expected = {nb for nb in NOTEBOOKS if int(nb.stem[:2]) < first_gap}
    listed = [ROOT / p for p in toc_notebooks(ROOT)]
    assert set(listed) == expected, "the toc must list chapters 1.. up to the first missing one"
    assert listed == sorted(listed), "chapters appear in the toc in order"


def test_chapter_map_lists_every_notebook():
    chapters = yaml.safe_load((ROOT / "book/chapters.yml").read_text())["parts"]
    files = {c["n"]: c["file"] for p in chapters for c in p["chapters"] if c.get("file")}
    assert set(files.values()) == {f"notebooks/{nb.stem}" for nb in NOTEBOOKS}
    assert all(int(Path(f).name[:2]) == n for n, f in files.items())


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_opening_cells(nb):
    code = cells(nb, "code")
    colab = code[0]
    assert "remove-cell" in tags(colab), "the first code cell installs lecturelib on Colab"
    assert sync.colab_lines(REPO_URL, BRANCH) in source(colab), (
        f"the Colab cell must install lecturelib from repository.url of _config.yml "
        f"({REPO_URL}) at its branch {BRANCH}: run "
        f"python -m booktools.sync --pin notebooks/*.ipynb")
    assert sync.colab_install(nb) == (REPO_URL, BRANCH)
    params = [c for c in code if "parameters" in tags(c)]
    assert len(params) == 1 and source(params[0]).split("\n") == ['PROFILE = "auto"', "SEED = 0"]
    assert any("lecturelib.setup(PROFILE, SEED" in source(c) for c in code)
    assert source(cells(nb, "markdown")[0]).startswith("# "), "a chapter starts with its title"


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_front_matter_is_imports_parameters_and_one_setup_line(nb):
    """At most 12 visible code lines before the first section: the imports the page needs,
    the parameters and one setup line; the sizes are a table, not a dictionary on screen."""
    visible, seen_title = [], False
    for c in cells(nb):
        if c["cell_type"] == "markdown":
            if seen_title and re.search(r"^## ", source(c), re.M):
                break
            seen_title |= bool(re.search(r"^# ", source(c), re.M))
        elif not {"remove-cell", "remove-input"} & set(tags(c)):
            visible += [line for line in source(c).splitlines() if line.strip()]
    assert len(visible) <= 12, f"{len(visible)} visible lines before the first section"
    assert re.fullmatch(r"run = lecturelib\.setup\(PROFILE, SEED, chapter=\d+[^\n]*\)",
                        visible[-1])
    code = "\n".join(source(c) for c in cells(nb, "code"))
    assert 'run.profile != "smoke" and not run.capped' not in code, "write run.trained"


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_citations_exist(nb):
    text = "\n".join(source(c) for c in cells(nb, "markdown"))
    cited = {k.strip() for group in re.findall(r"\{cite(?::\w+)?\}`([^`]+)`", text)
             for k in group.split(",")}
    assert cited, "every chapter cites its sources"
    assert cited <= BIB_KEYS, f"missing from book/references.bib: {sorted(cited - BIB_KEYS)}"


def glue_all_names(code: str) -> set[str]:
    """The names that ``glue_all(name=value, ...)`` and ``glue_all({"name": value})`` glue."""
    names = set()
    for call in re.finditer(r"glue_all\(", code):
        depth, i = 1, call.end()
        while depth and i < len(code):
            depth += {"(": 1, ")": -1}.get(code[i], 0)
            i += 1
        args = code[call.end():i - 1]
        names |= set(re.findall(r"(?:^|[(,\s])([A-Za-z_]\w*)\s*=(?!=)", args))
        names |= set(re.findall(r"[\"']([A-Za-z_0-9]+)[\"']\s*:", args))
    return names


def test_glue_all_names_are_found():
    code = 'glue_all(a=1, b_2=f(x, y=3) == 2)\nglue_all({"c": 1}, d=g(z))\nh(e=1)'
    assert glue_all_names(code) == {"a", "b_2", "c", "d", "y"}


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_glued_numbers_are_glued(nb):
    text = "\n".join(source(c) for c in cells(nb, "markdown"))
    used = set(re.findall(r"\{glue(?::\w+)?\}`([A-Za-z_0-9]+)", text))
    code = "\n".join(source(c) for c in cells(nb, "code"))
    glued = set(re.findall(r"glue\(\s*[\"']([A-Za-z_0-9]+)[\"']", code))
    glued |= glue_all_names(code)
    assert used, "numbers in the prose come from glue"
    assert used <= glued, f"used in the prose but never glued: {sorted(used - glued)}"


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_escaped_underscore_in_math_text(nb):
    # MathJax shows the backslash of \_ inside \text{...}: a name belongs in code
    text = "\n".join(source(c) for c in cells(nb, "markdown"))
    found = re.findall(r"\\(?:text|mathrm|operatorname)\{[^}]*\\_[^}]*\}", text)
    assert not found, f"write these names as code, not as math text: {found}"


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_exercises_are_numbered_with_a_folded_solution_and_a_check(nb):
    found = exercises.exercises(json.loads(nb.read_text(encoding="utf-8")))
    assert len(found) >= 3, "every chapter ends with at least three exercises"
    assert [e.number for e in found] == list(range(1, len(found) + 1)), "numbered 1, 2, ..."
    for e in found:
        assert all("hide-input" in tags(cells(nb)[i]) for i in e.solutions), (
            f"exercise {e.number}: solutions are folded in the book (tag hide-input)")
        assert e.checks, f"exercise {e.number} has no check cell"


needs_data = pytest.mark.skipif(
    not os.environ.get("LECTURELIB_DATA"),
    reason="LECTURELIB_DATA is unset: grading executes the chapters, which read the book's data "
           "sets from that folder (.ci/run sets it to ../shared/data)")


@pytest.mark.slow
@needs_data
@pytest.mark.parametrize("nb", [ROOT / p for p in toc_notebooks(ROOT)], ids=lambda p: p.stem)
def test_exercise_checks_fail_on_the_student_version_and_pass_on_the_solution(nb):
    """Each chapter runs once in the smoke profile; its student version shares the cells before
    the first exercise (booktools.grade.grade_versions)."""
    solution, student = grade.grade_versions(nb, "smoke")
    assert solution.failures == 0, f"the solutions must pass their checks:\n{solution.table()}"
    loose = [e.number for e in student.exercises if not e.check_failed]
    assert not loose, (f"exercise(s) {loose} of {nb.name}: the check passes without a solution"
                       f"\n{student.table()}")
    assert [e.number for e in student.exercises] == [e.number for e in solution.exercises]


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_code_fits_the_book_column(nb):
    """The book shows 88 characters of code, library code in marker cells included; the
    hidden Colab install cell is held to it too (a reader opens it on Colab)."""
    long = [(i, line) for i, c in enumerate(cells(nb)) if c["cell_type"] == "code"
            for line in source(c).split("\n") if len(line) > 88]
    assert not long, f"code lines over 88 characters: {long[:5]}"


@pytest.mark.parametrize("page", sorted((ROOT / "book").glob("*.md")), ids=lambda p: p.stem)
def test_book_page_code_fits_the_column(page):
    """Fenced code on the book's own pages is held to the same 88 characters (a MyST
    directive's fence, such as a figure's, is not code)."""
    long, fence, code = [], None, False
    for n, line in enumerate(page.read_text(encoding="utf-8").split("\n"), 1):
        stripped = line.lstrip()
        if fence is None and stripped.startswith(("```", "~~~")):
            fence = stripped[:3]
            code = not stripped[3:].lstrip("`~").startswith("{")
        elif fence is not None and stripped.startswith(fence) and not stripped.strip("`~"):
            fence = None
        elif fence is not None and code and len(line) > 88:
            long.append((n, line))
    assert not long, f"code lines over 88 characters: {long[:5]}"


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_control_characters_in_cells(nb):
    """A TeX command written with one backslash in a notebook's JSON (`"\\beta"`) is read as
    a control character (backspace + "eta"), which MathJax shows as an error box."""
    bad = [(i, repr(m.group())) for i, c in enumerate(cells(nb))
           for m in re.finditer(r"[\x00-\x09\x0b-\x1f]", source(c))]
    assert not bad, f"control characters in cells: {bad[:5]}"
