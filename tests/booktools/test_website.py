"""booktools.website: what the build does to the staged copies before rendering."""

from __future__ import annotations

import json

from booktools import website


def test_glue_lines_are_hidden_and_everything_else_kept():
    source = ('acc = evaluate(model)\nglue("acc", acc)\nassert acc > 0.9, acc\n\n'
              'glue("loss",\n     loss)\nfor k, v in table.items():\n    glue(k, v)\n'
              'print(f"{acc:.3f}")')
    assert website.without_glue(source) == 'acc = evaluate(model)\nassert acc > 0.9, acc\n\n' \
                                        'print(f"{acc:.3f}")'


def test_a_loop_that_does_more_than_glue_stays():
    source = "for k, v in table.items():\n    glue(k, v)\n    print(k)"
    assert website.without_glue(source) == source


def test_cells_that_do_not_parse_are_left_alone():
    source = '%pip install x\nglue("a", 1)'
    assert website.without_glue(source) == source


def cell(source: str, tags: list[str], outputs: list | None = None) -> dict:
    return {"cell_type": "code", "metadata": {"tags": tags}, "source": source,
            "outputs": outputs or [], "execution_count": 1}


def test_present_hides_glue_folds_solutions_and_leaves_marker_cells(tmp_path):
    marker = '# Same code as lecturelib.recurrence.lm.f\ndef f():\n    glue("x", 1)'
    nb = {"cells": [
        cell('glue("a", 1)\nglue("b", 2)', []),
        cell('x = 1\nglue("x", x)\nassert x == 1', []),
        {"cell_type": "markdown", "metadata": {}, "source": "**1. Two.** Set y to 2."},
        cell("# BEGIN SOLUTION\ny = 2\n# END SOLUTION", ["solution", "hide-input"]),
        cell("assert y == 2\nprint(y)", [], [{"output_type": "stream", "name": "stdout",
                                               "text": "2\n"}]),
        cell(marker, []),
        {"cell_type": "markdown", "metadata": {}, "source": 'glue("not code", 1)'},
    ], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps(nb))
    website.present(path)
    cells = json.loads(path.read_text())["cells"]
    assert cells[0]["source"] == [] and cells[0]["metadata"]["tags"] == ["remove-input"]
    assert "".join(cells[1]["source"]) == "x = 1\nassert x == 1"
    assert cells[1]["metadata"]["tags"] == []
    assert cells[3]["metadata"]["tags"] == ["solution", "hide-cell"]
    assert cells[3]["metadata"]["mystnb"] == {"code_prompt_show": "Show solution",
                                              "code_prompt_hide": "Hide solution"}
    assert cells[4]["metadata"]["tags"] == ["hide-output"]  # the check's printout
    assert "".join(cells[4]["source"]) == "assert y == 2\nprint(y)"
    assert "".join(cells[5]["source"]) == marker and cells[5]["metadata"]["tags"] == []
    assert cells[6]["source"] == 'glue("not code", 1)'
