"""lecturelib: the tested helper package of the executable textbook on sequence models.

Names used throughout the book and this package:

- widths and counts: `d_model, n_heads, d_head, n_layers, seq_len, vocab_size, d_state,
  d_inner`;
- tensor axes: `b` batch, `t` time (sequence position), `d` width, `h` heads,
  `v` vocabulary, `n` state.

The package is laid out like the book. The plumbing every chapter uses sits at the top:
`runtime` (`setup`), `data`, `tasks`, `metrics`, `plot`, `check` (named shapes and
close comparisons, shown in the chapters), `validate` (the argument checks every public
function calls), `records` (benchmark records) and the trainer `train` with its pieces
(`train.batches`, `optim`, `precision`, `progress`, `checkpoint`, `distributed`).
The topic code is grouped as the book's parts are, each part's docstring naming its chapters'
modules: `recurrence` (Part I), `transformers` (II), `pretraining` (III), `efficiency`
(IV), `long_context` (V), `state_space` (VI) and `posttraining` (VII). A topic module imports only plumbing and
the modules of earlier chapters; the `[tool.importlinter]` contracts of `pyproject.toml`
state that order and `tests/book/test_layers.py` checks it.

The book's own tooling (building the book, notebook sync, student versions, grading) is a
package of its own beside this one, `booktools`; nothing here imports it.
"""

# OpenMP's wait policy is left at the runtime's default (idle threads spin briefly, then
# sleep): on two quiet cores it trains chapter 11's GPT twice as fast as OMP_WAIT_POLICY=PASSIVE,
# and beside a busy process it loses less than unbounded spinning (ACTIVE) does. The numbers:
# benchmarks/results/omp_wait_policy.json. A reader may still set the variable before starting.

from lecturelib.version import __version__
from lecturelib.runtime import Run, setup


def glue(name: str, value, display: bool = False) -> None:
    """Store `value` under `name` for the book's prose (myst-nb `glue`); a no-op where
    myst-nb is not installed (e.g. on Colab), so notebooks run anywhere."""
    if hasattr(value, "item") and getattr(value, "ndim", None) == 0:
        value = (
            value.item()
        )  # numpy and 0-d torch scalars: glue formats plain Python numbers
    if isinstance(value, str) and "$" in value:
        raise ValueError(
            f"glued text {name!r} is shown as plain text, so its TeX would stay untypeset; "
            f"write it without '$' (got {value!r})"
        )
    try:
        from myst_nb import glue as _glue
    except ImportError:
        return
    _glue(name, value, display=display)


def glue_all(values: dict | None = None, /, **named) -> None:
    """`glue` every entry of the dict `values` and every keyword, in one call:
    `glue_all(alpha=-slope, predicted=predicted)` or `glue_all(results)`."""
    values = {**(values or {}), **named}
    if not all(isinstance(k, str) and k for k in values):
        raise TypeError(f"glue names must be non-empty strings; got {list(values)}")
    for name, value in values.items():
        glue(name, value)


__all__ = ["Run", "setup", "glue", "glue_all", "__version__"]
