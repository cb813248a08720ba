"""Every chapter follows the anatomy of CONTRIBUTING.md: the Colab cell, the parameters cell,
setup, citations that exist, glued numbers that are glued, exercises with solutions."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from lecturelib.build import toc_notebooks

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
BIB_KEYS = set(re.findall(r"^@\w+\{([^,]+),", (ROOT / "book/references.bib").read_text(), re.M))
REPO_URL = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]


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
    assert f'"lecturelib @ git+{REPO_URL}"' in source(colab), (
        f"the Colab cell must install from repository.url of _config.yml ({REPO_URL})")
    params = [c for c in code if "parameters" in tags(c)]
    assert len(params) == 1 and source(params[0]).split("\n") == ['PROFILE = "auto"', "SEED = 0"]
    assert any("lecturelib.setup(PROFILE, SEED" in source(c) for c in code)
    assert source(cells(nb, "markdown")[0]).startswith("# "), "a chapter starts with its title"


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_citations_exist(nb):
    text = "\n".join(source(c) for c in cells(nb, "markdown"))
    cited = {k.strip() for group in re.findall(r"\{cite(?::\w+)?\}`([^`]+)`", text)
             for k in group.split(",")}
    assert cited, "every chapter cites its sources"
    assert cited <= BIB_KEYS, f"missing from book/references.bib: {sorted(cited - BIB_KEYS)}"


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_glued_numbers_are_glued(nb):
    text = "\n".join(source(c) for c in cells(nb, "markdown"))
    used = set(re.findall(r"\{glue(?::\w+)?\}`([A-Za-z_0-9]+)", text))
    code = "\n".join(source(c) for c in cells(nb, "code"))
    glued = set(re.findall(r"glue\(\s*[\"']([A-Za-z_0-9]+)[\"']", code))
    assert used, "numbers in the prose come from glue"
    assert used <= glued, f"used in the prose but never glued: {sorted(used - glued)}"


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_exercises_have_solutions_and_checks(nb):
    all_cells = cells(nb)
    solutions = [i for i, c in enumerate(all_cells) if "solution" in tags(c)]
    assert len(solutions) >= 3, "every chapter ends with at least three exercises"
    for i in solutions:
        assert "# BEGIN SOLUTION" in source(all_cells[i])
        assert "hide-input" in tags(all_cells[i]), "solutions are folded in the book"
        later = [c for c in all_cells[i + 1:] if c["cell_type"] == "code"]
        assert later and ("assert" in source(later[0]) or "check." in source(later[0])), (
            "the cell after a solution checks it")


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_code_fits_the_book_column(nb):
    """The book shows about 90 characters of code; library code in marker cells may scroll."""
    long = [(i, line) for i, c in enumerate(cells(nb)) if c["cell_type"] == "code"
            and not source(c).startswith("# Same code as") and "remove-cell" not in tags(c)
            for line in source(c).split("\n") if len(line) > 88]
    assert not long, f"code lines over 88 characters: {long[:5]}"
