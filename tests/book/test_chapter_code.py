"""The chapters show the idea, not the plumbing: copied library code holds no argument checks,
no chapter imports a private name, and the bookkeeping of an experiment (glue calls and the
regression asserts beside them) sits in cells that the page hides."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
MARKER = re.compile(r"^# Same code as (lecturelib(?:\.\w+)+)\s*$", re.M)
GLUE = re.compile(r"^\s*glue(_all)?\(", re.M)

# The copied cells allowed over 40 lines, each with its reason (at most three). A long class
# is shown method by method instead (booktools.sync: a cell marked with a method).
LONG_COPIES = {
    "lecturelib.efficiency.speculative.speculative_generate":
        "one loop per round: draft K tokens, verify them in one target call, accept, "
        "roll the caches back",
    "lecturelib.transformers.bpe.train_bpe":
        "one loop per merge: pop the most frequent pair, merge it where it occurs, update "
        "the counts it changed",
}

# A raise that is part of the idea: exhaustive search refuses, inside its loop, a search that
# has grown past the size it can enumerate.
IDEA_RAISES = {"lecturelib.transformers.decoding.exhaustive_search"}


def code_cells(nb: Path) -> list[dict]:
    cells = json.loads(nb.read_text(encoding="utf-8"))["cells"]
    return [c for c in cells if c["cell_type"] == "code"]


def source(cell: dict) -> str:
    return "".join(cell["source"])


def parse(code: str) -> ast.Module:
    return ast.parse("\n".join(
        "pass" if line.lstrip().startswith(("%", "!")) else line
        for line in code.splitlines()))


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_private_names_imported(nb):
    private = [f"{node.module}.{a.name}" for c in code_cells(nb)
               for node in ast.walk(parse(source(c)))
               if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("lecturelib")
               for a in node.names if a.name.startswith("_")]
    assert not private, f"private names imported: {private}"


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_copied_code_is_the_algorithm(nb):
    """Argument checks (a raised TypeError or ValueError) live in the check functions beside
    a copied object, which it calls in one line; only runtime conditions may raise."""
    found = []
    for c in code_cells(nb):
        code = source(c)
        if not MARKER.search(code) or set(MARKER.findall(code)) <= IDEA_RAISES:
            continue
        for node in ast.walk(parse(code)):
            if isinstance(node, ast.Raise) and node.exc is not None:
                exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
                if isinstance(exc, ast.Name) and exc.id in ("TypeError", "ValueError"):
                    found.append(f"{MARKER.findall(code)}: line {node.lineno}")
    assert not found, f"argument checks inside copied code: {found}"


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_copied_cells_are_short_or_one_model(nb):
    long = []
    for c in code_cells(nb):
        code = source(c)
        names = MARKER.findall(code)
        if names and len(code.splitlines()) > 40 and not (
                len(names) == 1 and names[0] in LONG_COPIES):
            long.append((names, len(code.splitlines())))
    assert not long, f"copied cells over 40 lines (split them, one object each): {long}"


def test_at_most_three_long_copies_each_with_its_reason():
    assert len(LONG_COPIES) <= 3 and all(LONG_COPIES.values())


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_glue_sits_in_hidden_bookkeeping_cells(nb):
    """A cell that glues is tagged remove-cell (exercises' check cells aside)."""
    shown = [i for i, c in enumerate(code_cells(nb))
             if GLUE.search(source(c)) and "remove-cell" not in c["metadata"].get("tags", [])]
    assert not shown, f"code cells {shown} glue but are shown: move the glue to the " \
                      f"experiment's bookkeeping cell (tag remove-cell)"


# Axes methods that return an artist: as a cell's last expression the value would be shown
# beside the figure, and the figure's name would label two outputs.
RETURNS_ARTIST = {"legend", "text", "annotate", "plot", "bar", "barh", "imshow", "scatter",
                  "axhline", "axvline", "set_title", "set_xlabel", "set_ylabel", "suptitle",
                  "colorbar", "fill_between", "hist"}


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_figure_cells_show_only_the_figure(nb):
    found = []
    for c in code_cells(nb):
        if "figure" not in c["metadata"].get("mystnb", {}):
            continue
        body = parse(source(c)).body
        last = body[-1] if body else None
        if source(c).rstrip().endswith(";"):  # IPython shows nothing after a semicolon
            continue
        if (isinstance(last, ast.Expr) and isinstance(last.value, ast.Call)
                and isinstance(last.value.func, ast.Attribute)
                and last.value.func.attr in RETURNS_ARTIST):
            found.append(c["metadata"]["mystnb"]["figure"].get("name"))
    assert not found, f"figure cells ending in an expression with a value: {found}"
