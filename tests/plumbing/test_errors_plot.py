"""lecturelib.plot refuses bad input with a message that names the argument, what was expected
and what was given, before it draws anything."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure
import pytest

from lecturelib import plot
from lecturelib.train import History

AX = Figure().add_subplot()  # outside pyplot: it opens no figure
HIST = History(steps=[1, 2], train_loss=[2.0, 1.0], eval_steps=[2], evals={"loss": [1.5]})

CASES = [
    (lambda: plot.family_color("perceptron"), ValueError,
     r"unknown model family 'perceptron'; expected one of \[.*'rnn'.*\]"),
    (lambda: plot.family_color(None), TypeError,
     r"name must be a str naming a model family; got NoneType"),
    (lambda: plot.plain_log_ticks(None), TypeError, r"ax must be a matplotlib Axes; got NoneType"),
    (lambda: plot.plain_log_ticks(AX, axis="z"), ValueError, r"axis must be 'x' or 'y'; got 'z'"),
    (lambda: plot.curves({}), ValueError, r"series must hold at least one named \(x, y\) pair"),
    (lambda: plot.curves([([0, 1], [1, 0])]), TypeError,
     r"series must be a dict of name -> \(x, y\); got list"),
    (lambda: plot.curves({"a": [1.0, 0.5, 0.2]}), TypeError,
     r"series\['a'\] must be an \(x, y\) pair of sequences; got list"),
    (lambda: plot.curves({"a": (3, 4)}), TypeError,
     r"series\['a'\]: x and y must be sequences; got int and int"),
    (lambda: plot.curves({"a": ([0, 1], [1, 2, 3])}), ValueError,
     r"series 'a': x has 2 points but y has 3"),
    (lambda: plot.curves({"a": ([0], [1])}, ax="left"), TypeError,
     r"ax must be a matplotlib Axes or None; got str"),
    (lambda: plot.curves({"a": ([0], [1])}, colors=["red"]), TypeError,
     r"colors must be a dict of name -> colour; got list"),
    (lambda: plot.curves({"a": ([0], [1])}, styles="o-"), TypeError,
     r"styles must be a dict of name -> line style; got str"),
    (lambda: plot.history({"steps": [1], "train_loss": [1.0]}), TypeError,
     r"hist must be a lecturelib.train.History; got dict"),
    (lambda: plot.history(HIST, metric="bleu"), ValueError,
     r"metric must be one of the evaluated metrics \['loss'\]; got 'bleu'"),
    (lambda: plot.history(HIST, label=3), TypeError, r"label must be a str; got int"),
    (lambda: plot.heatmap(np.zeros(3)), ValueError,
     r"heatmap needs a 2-D matrix; got shape \(3,\)"),
    (lambda: plot.heatmap(np.zeros((2, 2, 2))), ValueError, r"2-D matrix; got shape \(2, 2, 2\)"),
    (lambda: plot.heatmap(np.zeros((0, 3))), ValueError,
     r"matrix must have at least one row and one column; got shape \(0, 3\)"),
    (lambda: plot.heatmap([["a", "b"]]), TypeError,
     r"matrix must be a 2-D array of numbers .*; got list"),
    (lambda: plot.heatmap(np.zeros((2, 2)), xticklabels=list("abc")), ValueError,
     r"xticklabels has 3 labels for 2 columns/rows"),
    (lambda: plot.heatmap(np.zeros((2, 3)), yticklabels=["a"]), ValueError,
     r"yticklabels has 1 labels for 2"),
    (lambda: plot.heatmap(np.zeros((2, 2)), vmin=1, vmax=0), ValueError,
     r"vmin must be below vmax; got vmin=1, vmax=0"),
    (lambda: plot.heatmap(np.zeros((2, 2)), ax=np.zeros(2)), TypeError,
     r"ax must be a matplotlib Axes or None; got ndarray"),
    (lambda: plot.bars({}), ValueError,
     r"values must hold at least one named number; got an empty dict"),
    (lambda: plot.bars([1.0, 2.0]), TypeError,
     r"values must be a dict of name -> number; got list"),
    (lambda: plot.bars({"rnn": "3.2"}), TypeError,
     r"values\['rnn'\] must be a number; got '3.2' \(str\)"),
    (lambda: plot.bars({"rnn": None}), TypeError, r"values\['rnn'\] must be a number; got None"),
    (lambda: plot.bars({"rnn": [1.0, 2.0]}), TypeError,
     r"values\['rnn'\] must be a number; got \[1.0, 2.0\]"),
    (lambda: plot.bars({"rnn": 1.0}, colors="red"), TypeError,
     r"colors must be a dict of name -> colour; got str"),
    (lambda: plot.bars({"rnn": 1.0}, fmt=2), TypeError,
     r"fmt must be a format string such as '\{:.2f\}'; got int"),
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_bad_input(call, error, message):
    before = plt.get_fignums()
    with pytest.raises(error, match=message):
        call()
    assert plt.get_fignums() == before, "bad input left a figure behind"
