"""One training loop for the whole book.

`fit` trains any `nn.Module` given a way to get batches and a loss, and returns a
`History`; it never plots. Its loop reads like the algorithm::

    for step in range(start, steps):
        loss, norm = trainer.train_step()      # accumulate gradients, clip, update, schedule
        trainer.record(loss, norm)             # history and progress bar
        trainer.maybe_evaluate()               # every evaluation.every steps and after the last
        trainer.show_progress()                # live loss, evaluation, tokens/s
        trainer.maybe_checkpoint()             # every checkpointing.every steps and at the end

and every refinement is a piece of its own rather than a branch in that loop:
`Precision` (bf16 autocast, or fp16 with a gradient scaler, on GPUs; full precision on
CPU), `BatchSource` (where the batch of each micro-step comes from, so a resumed run reads
the data from where it stopped), gradient accumulation over `accumulate` micro-batches,
`lecturelib.train.distributed` (DistributedDataParallel under `torchrun`: each process trains
on its shard of every batch), and `lecturelib.train.checkpoint` (atomic, checksummed files).
A run that several chapters make (the same model, the same recipe) is trained once:
`fit_once` (`lecturelib.train.once`). The `Trainer` and the
`History` it fills live in
`lecturelib.train.trainer`, `fit` and its argument check `check_fit` in
`lecturelib.train.loop`; this package only re-exports them.

    def loss_fn(model, batch):
        x, y = batch
        return F.cross_entropy(model(x).flatten(0, 1), y.flatten())

    hist = fit(model, get_batch, loss_fn, steps=500, lr=3e-3, clip=1.0,
               evaluation=Evaluation(lambda m: {"loss": val_loss(m)}, every=100))

What to evaluate and when is one `Evaluation`; what to checkpoint and when, and whether
to resume, one `Checkpointing`.

`batches` is a function `step -> batch`, a list of batches (cycled), or another iterable such
as a `DataLoader` (cycled; such a run cannot resume). Batches are tensors or nested
tuples/lists/dicts of tensors; they are moved to the model's device.
"""

from __future__ import annotations

from lecturelib.train import checkpoint, distributed  # noqa: F401
from lecturelib.train.batches import (  # noqa: F401
    Batch,
    BatchSource,
    count_tokens,
    model_device,
    to_device,
)
from lecturelib.train.loop import (  # noqa: F401
    Checkpointing,
    Evaluation,
    check_fit,
    count_parameters,
    fit,
)
from lecturelib.train.once import fit_once  # noqa: F401
from lecturelib.train.optim import adamw, decay_groups, warmup_cosine  # noqa: F401
from lecturelib.train.precision import Precision, amp_dtype, autocast_dtype  # noqa: F401
from lecturelib.train.progress import PROGRESS_ENV, progress_bar  # noqa: F401
from lecturelib.train.trainer import (  # noqa: F401
    History,
    Trainer,
    evaluate,
    grad_norm,
    rng_state,
    set_rng_state,
)
