"""lecturelib: the tested helper package of the executable textbook on sequence models.

Names used throughout the book and this package:

- widths and counts: ``d_model, n_heads, d_head, n_layers, seq_len, vocab_size, d_state,
  d_inner``;
- tensor axes: ``b`` batch, ``t`` time (sequence position), ``d`` width, ``h`` heads,
  ``v`` vocabulary, ``n`` state.

Plumbing modules (import no topic module): ``runtime``, ``data``, ``tasks``, ``metrics``,
``plot``, ``check`` and ``_checks`` (argument checks), ``records`` (benchmark records); the
trainer ``train`` with its pieces ``batches``, ``optim``, ``precision``, ``progress``,
``checkpoint`` and ``distributed``.

Topic modules, in book order, each importing only earlier ones: ``lm`` (chapter 1), ``rnn``
(2), ``gated`` (3), ``translation`` and ``seq2seq`` (4), ``attention`` (5), ``self_attention``
(6), ``positions`` and ``positional_lm`` (7), ``transformer`` (8), ``tokenize`` (9),
``decoding`` and ``sampling`` (10), ``gpt`` and ``pretrain`` (11), ``bert``, ``finetune``
and ``t5`` (12), ``peft``, ``quant`` and ``interpret`` (13), ``kvcache``, ``kvattention`` and
``paged`` (14), ``flash``, ``flash_triton`` (imported only to run the Triton kernel) and
``linear_attention`` (15), ``moe`` (16), ``speculative``, ``mtp`` and ``diffusion_lm`` (17),
``longctx``, ``rope_scaling`` and ``eviction`` (18), ``hippo`` and ``ssm`` (19), ``scan``,
``mamba`` and ``hybrid`` (20).

Book tooling (building the book, notebook sync, student versions, grading) lives in the
subpackage ``lecturelib.book``, which no chapter imports.
"""

import os

# OpenMP threads that spin while they wait make small models up to a hundred times slower when
# another process shares the cores (a laptop with a browser open, a CI runner). Passive waiting
# avoids that; it only takes effect when lecturelib is imported before torch, as every chapter does.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

__version__ = "0.1.0"

from lecturelib.runtime import Run, setup  # noqa: E402


def glue(name: str, value, display: bool = False) -> None:
    """Store ``value`` under ``name`` for the book's prose (myst-nb ``glue``); a no-op where
    myst-nb is not installed (e.g. on Colab), so notebooks run anywhere."""
    if hasattr(value, "item") and getattr(value, "ndim", None) == 0:
        value = value.item()  # numpy and 0-d torch scalars: glue formats plain Python numbers
    try:
        from myst_nb import glue as _glue
    except ImportError:
        return
    _glue(name, value, display=display)


__all__ = ["Run", "setup", "glue", "__version__"]
