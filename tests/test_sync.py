"""lecturelib.sync: marked notebook cells stay equal to the library; notebooks are normalised."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest

from lecturelib import metrics, sync

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
MARK = "# Same code as lecturelib.metrics.perplexity"


def write_nb(path: Path, cells: list[dict], **extra) -> Path:
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4,
                                "nbformat_minor": 4, **extra}), encoding="utf-8")
    return path


def code(source: str, **extra) -> dict:
    return {"cell_type": "code", "metadata": {}, "source": source.splitlines(keepends=True),
            "outputs": [], "execution_count": None, **extra}


def markdown(source: str) -> dict:
    return {"cell_type": "markdown", "metadata": {}, "source": source}


def library(*objs) -> str:
    return "\n\n".join(inspect.getsource(o).rstrip() for o in objs)


def test_notebooks_match_library():
    notebooks = sorted(NOTEBOOKS.glob("*.ipynb"))
    assert notebooks, f"no notebooks in {NOTEBOOKS}"
    problems = [p for nb in notebooks for p in sync.drift(nb)]
    assert not problems, ("notebook cells differ from lecturelib; run "
                          "python -m lecturelib.sync --fix notebooks/*.ipynb:\n" + "\n".join(problems))


def test_exact_copy_has_no_drift(tmp_path):
    nb = write_nb(tmp_path / "nb.ipynb", [
        markdown(MARK + "\n(in markdown: ignored)"),
        code("import math"),
        code(MARK + "\n" + library(metrics.perplexity) + "\n   \n"),  # trailing blanks are fine
    ])
    cells = sync.marked_cells(nb)
    assert [(c.index, c.names) for c in cells] == [(2, ["lecturelib.metrics.perplexity"])]
    assert sync.drift(nb) == []


def test_a_changed_line_is_drift_and_fix_repairs_it(tmp_path):
    source = library(metrics.perplexity).replace("return math.exp(value)", "return 2 ** value")
    nb = write_nb(tmp_path / "nb.ipynb", [code("x = 1"), code(MARK + "\n" + source)])
    assert sync.drift(nb) == ["nb.ipynb cell 1 differs from lecturelib.metrics.perplexity"]
    assert sync.fix(nb) == 1
    assert sync.drift(nb) == []
    cells = json.loads(nb.read_text(encoding="utf-8"))["cells"]
    assert "".join(cells[1]["source"]) == MARK + "\n" + library(metrics.perplexity)
    assert "".join(cells[0]["source"]) == "x = 1"
    assert sync.fix(nb) == 0  # nothing left to do


def test_several_objects_in_one_cell(tmp_path):
    marks = MARK + "\n# Same code as lecturelib.metrics.nats_to_bits\n"
    good = library(metrics.perplexity, metrics.nats_to_bits)
    nb = write_nb(tmp_path / "nb.ipynb", [code(marks + good)])
    assert sync.drift(nb) == []
    write_nb(nb, [code(marks + library(metrics.perplexity))])
    assert len(sync.drift(nb)) == 1


def test_resolve():
    assert sync.resolve("lecturelib.metrics.perplexity") is metrics.perplexity
    from lecturelib.train import History

    assert sync.resolve("lecturelib.train.History.final") is History.final
    for bad in ("lecturelib.metrics.no_such_thing", "lecturelib.no_such_module.f"):
        with pytest.raises(ValueError, match="no attribute path"):
            sync.resolve(bad)


def test_normalise_strips_outputs_and_sets_metadata(tmp_path):
    output = {"output_type": "stream", "name": "stdout", "text": ["hi\n"]}
    nb = write_nb(tmp_path / "nb.ipynb", [
        code("print('hi')", outputs=[output], execution_count=3,
             metadata={"tags": ["hide-input"], "collapsed": True, "execution": {"x": 1}}),
        markdown("# Title"),
    ])
    assert sync.normalise(nb) is True
    data = json.loads(nb.read_text(encoding="utf-8"))
    assert data["metadata"] == sync.METADATA and data["nbformat_minor"] >= 5
    first, second = data["cells"]
    assert first["outputs"] == [] and first["execution_count"] is None
    assert first["metadata"] == {"tags": ["hide-input"]}
    assert first["id"] and second["id"] and first["id"] != second["id"]
    assert "outputs" not in second
    assert sync.normalise(nb) is False  # idempotent
    assert nb.read_text(encoding="utf-8").endswith("}\n")


def test_committed_notebooks_are_normalised(tmp_path):
    for nb in sorted(NOTEBOOKS.glob("*.ipynb")):
        copy = tmp_path / nb.name
        copy.write_bytes(nb.read_bytes())
        assert sync.normalise(copy) is False, (
            f"{nb.name} is not normalised: run python -m lecturelib.sync --normalise {nb}")
