"""lecturelib.plot: every helper returns labelled axes; bad input is refused."""

from __future__ import annotations

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch

from lecturelib import plot
from lecturelib.train import History


def test_family_colours():
    assert plot.family_color("LSTM") == plot.FAMILY_COLORS["lstm"] == plot.OKABE_ITO["blue"]
    assert set(plot.FAMILY_COLORS.values()) <= set(plot.OKABE_ITO.values())
    with pytest.raises(ValueError, match="'rnn'"):
        plot.family_color("perceptron")


def test_book_style():
    plot.use_book_style()
    assert tuple(matplotlib.rcParams["figure.figsize"]) == plot.FIGSIZE
    assert matplotlib.rcParams["axes.prop_cycle"].by_key()["color"][0] == plot.OKABE_ITO["blue"]


def test_curves():
    ax = plot.curves({"train": ([1, 2, 3], [3.0, 2.0, 1.0]), "eval": ([3], [1.5])},
                     xlabel="step", ylabel="loss (nats/token)", logy=True,
                     colors={"train": plot.family_color("rnn")})
    assert ax.get_xlabel() == "step" and ax.get_ylabel() == "loss (nats/token)"
    assert ax.get_yscale() == "log"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["train", "eval"]
    assert matplotlib.colors.to_hex(ax.lines[0].get_color()) == plot.OKABE_ITO["sky"].lower()
    assert list(ax.lines[0].get_ydata()) == [3.0, 2.0, 1.0]


def test_curves_draws_into_given_axes():
    _, ax = plt.subplots()
    assert plot.curves({"a": ([0, 1], [1, 0])}, ax) is ax


def test_history():
    hist = History(steps=[1, 2, 3], train_loss=[3.0, 2.0, 1.0], eval_steps=[3],
                   evals={"loss": [1.2]})
    ax = plot.history(hist, label="lstm")
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["lstm train", "lstm eval"]
    assert ax.get_xlabel() == "step" and ax.get_ylabel().startswith("loss")
    assert len(plot.history(History(steps=[1], train_loss=[1.0])).lines) == 1


def test_heatmap():
    m = torch.softmax(torch.randn(3, 4, generator=torch.Generator().manual_seed(0)), -1)
    ax = plot.heatmap(m, xticklabels=list("abcd"), yticklabels=list("xyz"), xlabel="key",
                      ylabel="query", cbar_label="weight", annotate=True)
    assert ax.get_xlabel() == "key" and ax.get_ylabel() == "query"
    assert [t.get_text() for t in ax.get_xticklabels()] == list("abcd")
    assert [t.get_text() for t in ax.get_yticklabels()] == list("xyz")
    np.testing.assert_allclose(ax.images[0].get_array(), m.numpy(), rtol=1e-6)
    assert len(ax.texts) == 12
    assert ax.figure.axes[-1].get_ylabel() == "weight"  # the colour bar


def test_bars():
    ax = plot.bars({"rnn": 3.25, "lstm": 2.5}, ylabel="perplexity",
                   colors={"rnn": plot.family_color("rnn")})
    assert ax.get_ylabel() == "perplexity"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["rnn", "lstm"]
    assert [r.get_height() for r in ax.patches] == [3.25, 2.5]
    assert [t.get_text() for t in ax.texts] == ["3.25", "2.50"]
    with pytest.raises(ValueError):
        plot.bars({})
