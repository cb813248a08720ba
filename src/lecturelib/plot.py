"""The book's figure style and the plots every chapter reuses.

Every helper takes `ax=None` (a new figure is made) and returns the axes, so a chapter can
compose panels. One colour per model family throughout the book (`FAMILY_COLORS`), from the
colour-blind-safe Okabe–Ito palette.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib as mpl
import matplotlib.axes
import matplotlib.pyplot as plt
import numpy as np

from lecturelib.validate import check_type, is_real

# Okabe & Ito (2008), "Color Universal Design": distinguishable with all common colour deficiencies.
OKABE_ITO = {
    "black": "#000000",
    "orange": "#E69F00",
    "sky": "#56B4E9",
    "green": "#009E73",
    "yellow": "#F0E442",
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "purple": "#CC79A7",
    "grey": "#999999",
}

FAMILY_COLORS = {
    "uniform": OKABE_ITO["grey"],
    "unigram": OKABE_ITO["grey"],
    "ngram": OKABE_ITO["yellow"],
    "bigram": OKABE_ITO["yellow"],
    "ffnn": OKABE_ITO["orange"],
    "rnn": OKABE_ITO["sky"],
    "lstm": OKABE_ITO["blue"],
    "gru": OKABE_ITO["green"],
    "attention": OKABE_ITO["purple"],
    "transformer": OKABE_ITO["vermillion"],
    "ssm": OKABE_ITO["black"],
}

FIGSIZE = (6.0, 3.5)


def family_color(name: str) -> str:
    """The book colour of a model family (`"rnn"`, `"lstm"`, ...)."""
    check_type(name, "name", str, "a str naming a model family")
    key = name.lower()
    if key not in FAMILY_COLORS:
        raise ValueError(
            f"unknown model family {name!r}; expected one of {sorted(FAMILY_COLORS)}"
        )
    return FAMILY_COLORS[key]


def use_book_style() -> None:
    """Set matplotlib defaults for the book: SVG output in notebooks, size, palette, grid."""
    mpl.rcParams.update(
        {
            "figure.figsize": FIGSIZE,
            "figure.dpi": 100,
            "savefig.bbox": "tight",
            "axes.prop_cycle": mpl.cycler(
                color=[
                    OKABE_ITO[c]
                    for c in (
                        "blue",
                        "orange",
                        "green",
                        "vermillion",
                        "purple",
                        "sky",
                        "yellow",
                        "black",
                    )
                ]
            ),
            "axes.spines.top": False,
            "axes.spines.right": False,
            "axes.grid": True,
            "grid.alpha": 0.3,
            "font.size": 10,
            "axes.titlesize": 11,
            "legend.frameon": False,
            "svg.fonttype": "none",
            "image.cmap": "viridis",
        }
    )
    try:  # only inside IPython; plain scripts and tests keep their backend
        from matplotlib_inline.backend_inline import set_matplotlib_formats

        set_matplotlib_formats("svg")
    except Exception:  # pragma: no cover - no inline backend outside a kernel
        pass


def plain_log_ticks(ax, axis: str = "y"):
    """Label a log-scaled axis (`axis` "x" or "y") with plain numbers (`6`, `10`, `20`)
    instead of `6×10⁰`."""
    from matplotlib.ticker import FuncFormatter, LogLocator

    check_axes(ax, allow_none=False)
    if axis not in ("x", "y"):
        raise ValueError(f"axis must be 'x' or 'y'; got {axis!r}")
    fmt = FuncFormatter(lambda v, _: f"{v:g}")
    target = ax.yaxis if axis == "y" else ax.xaxis
    target.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    target.set_major_formatter(fmt)
    target.set_minor_formatter(FuncFormatter(lambda v, _: ""))
    return ax


def check_axes(ax, allow_none: bool = True) -> None:
    """`ax` must be a matplotlib `Axes` (or None, when `allow_none`: a new figure)."""
    if ax is None and allow_none:
        return
    what = "a matplotlib Axes or None" if allow_none else "a matplotlib Axes"
    check_type(ax, "ax", mpl.axes.Axes, what)


def _check_mapping(value, name: str, what: str, allow_none: bool = False) -> None:
    if value is not None or not allow_none:
        check_type(value, name, Mapping, f"a dict of {what}")


def _axes(ax):
    check_axes(ax)
    if ax is None:
        _, ax = plt.subplots(figsize=FIGSIZE)
    return ax


def curves(
    series: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    ax=None,
    *,
    xlabel: str = "step",
    ylabel: str = "loss (nats/token)",
    logy: bool = False,
    colors: Mapping[str, str] | None = None,
    styles: Mapping[str, str] | None = None,
):
    """Plot named `(x, y)` series, e.g. learning curves: `{"train": (steps, losses)}`."""
    _check_mapping(series, "series", "name -> (x, y)")
    if not series:
        raise ValueError(
            "series must hold at least one named (x, y) pair; got an empty dict"
        )
    for name, pair in series.items():
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise TypeError(
                f"series[{name!r}] must be an (x, y) pair of sequences; got "
                f"{type(pair).__name__}"
            )
        x, y = pair
        if not (hasattr(x, "__len__") and hasattr(y, "__len__")):
            raise TypeError(
                f"series[{name!r}]: x and y must be sequences; got "
                f"{type(x).__name__} and {type(y).__name__}"
            )
        if len(x) != len(y):
            raise ValueError(
                f"series {name!r}: x has {len(x)} points but y has {len(y)}"
            )
    _check_mapping(colors, "colors", "name -> colour", allow_none=True)
    _check_mapping(styles, "styles", "name -> line style", allow_none=True)
    ax = _axes(ax)
    for name, (x, y) in series.items():
        kw = {}
        if colors and name in colors:
            kw["color"] = colors[name]
        ax.plot(x, y, (styles or {}).get(name, "-"), label=name, **kw)
    ax.set(xlabel=xlabel, ylabel=ylabel)
    if logy:
        ax.set_yscale("log")
        plain_log_ticks(ax)
    ax.legend()
    return ax


def history(
    hist, ax=None, *, metric: str = "loss", logy: bool = False, label: str = ""
):
    """Learning curves of a `lecturelib.train.History`: training loss and, if it was
    evaluated, the evaluation metric of the same name."""
    if not all(
        hasattr(hist, a) for a in ("steps", "train_loss", "eval_steps", "evals")
    ):
        raise TypeError(
            f"hist must be a lecturelib.train.History; got {type(hist).__name__}"
        )
    if hist.evals and metric not in hist.evals:
        raise ValueError(
            f"metric must be one of the evaluated metrics {sorted(hist.evals)}; "
            f"got {metric!r}"
        )
    check_type(label, "label", str, "a str")
    prefix = f"{label} " if label else ""
    series = {f"{prefix}train": (hist.steps, hist.train_loss)}
    if metric in hist.evals:
        series[f"{prefix}eval"] = (hist.eval_steps, hist.evals[metric])
    return curves(series, ax, logy=logy, styles={f"{prefix}eval": "o-"})


def heatmap(
    matrix,
    ax=None,
    *,
    xticklabels: Sequence[str] | None = None,
    yticklabels: Sequence[str] | None = None,
    xlabel: str = "",
    ylabel: str = "",
    cbar_label: str = "",
    cmap: str = "viridis",
    vmin: float | None = None,
    vmax: float | None = None,
    annotate: bool = False,
):
    """A labelled heatmap of a 2-D array (attention weights, gate activations, ...)."""
    try:
        m = np.asarray(
            matrix.detach().cpu() if hasattr(matrix, "detach") else matrix, dtype=float
        )
    except (TypeError, ValueError):
        raise TypeError(
            f"matrix must be a 2-D array of numbers (a tensor, an array or nested "
            f"lists); got {type(matrix).__name__}"
        ) from None
    if m.ndim != 2:
        raise ValueError(f"heatmap needs a 2-D matrix; got shape {m.shape}")
    if 0 in m.shape:
        raise ValueError(
            f"matrix must have at least one row and one column; got shape {m.shape}"
        )
    for labels, setter, n in (
        (xticklabels, "x", m.shape[1]),
        (yticklabels, "y", m.shape[0]),
    ):
        if labels is not None and len(labels) != n:
            raise ValueError(
                f"{setter}ticklabels has {len(labels)} labels for {n} columns/rows"
            )
    if vmin is not None and vmax is not None and not vmin < vmax:
        raise ValueError(f"vmin must be below vmax; got vmin={vmin}, vmax={vmax}")
    ax = _axes(ax)
    im = ax.imshow(
        m, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto", interpolation="nearest"
    )
    for labels, setter, n in (
        (xticklabels, "x", m.shape[1]),
        (yticklabels, "y", m.shape[0]),
    ):
        if labels is not None:
            getattr(ax, f"set_{setter}ticks")(range(n))
            getattr(ax, f"set_{setter}ticklabels")(
                labels, rotation=90 if setter == "x" else 0
            )
    if annotate:
        for (i, j), v in np.ndenumerate(m):
            ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=7, color="w")
    ax.grid(False)
    ax.set(xlabel=xlabel, ylabel=ylabel)
    ax.figure.colorbar(im, ax=ax, label=cbar_label)
    return ax


def bars(
    values: Mapping[str, float],
    ax=None,
    *,
    ylabel: str = "",
    colors=None,
    fmt="{:.2f}",
    logy: bool = False,
):
    """A labelled bar chart of named values, each bar annotated with its value."""
    _check_mapping(values, "values", "name -> number")
    if not values:
        raise ValueError(
            "values must hold at least one named number; got an empty dict"
        )
    for name, v in values.items():
        scalar = (
            hasattr(v, "item") and getattr(v, "ndim", None) == 0
        )  # 0-d tensor or array
        if not (is_real(v) or scalar):
            raise TypeError(
                f"values[{name!r}] must be a number; got {v!r} ({type(v).__name__})"
            )
    _check_mapping(colors, "colors", "name -> colour", allow_none=True)
    if not isinstance(fmt, str):
        raise TypeError(
            f"fmt must be a format string such as '{{:.2f}}'; got {type(fmt).__name__}"
        )
    ax = _axes(ax)
    names = list(values)
    heights = [float(values[n]) for n in names]
    colors = [(colors or {}).get(n, OKABE_ITO["blue"]) for n in names]
    rects = ax.bar(names, heights, color=colors)
    ax.bar_label(rects, labels=[fmt.format(h) for h in heights], padding=2)
    ax.set(ylabel=ylabel)
    if logy:
        ax.set_yscale("log")
        plain_log_ticks(ax)
    ax.grid(axis="x", visible=False)
    return ax
