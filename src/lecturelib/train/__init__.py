"""One training loop for the whole book.

``fit`` trains any ``nn.Module`` given a way to get batches and a loss, and returns a
:class:`History`; it never plots. Its loop reads like the algorithm::

    for step in range(start, steps):
        loss, norm = trainer.train_step()      # accumulate gradients, clip, update, schedule
        trainer.record(loss, norm)             # history and progress bar
        trainer.maybe_evaluate()               # every evaluation.every steps and after the last
        trainer.show_progress()                # live loss, evaluation, tokens/s
        trainer.maybe_checkpoint()             # every checkpointing.every steps and at the end

and every refinement is a piece of its own rather than a branch in that loop:
:class:`Precision` (bf16 autocast, or fp16 with a gradient scaler, on GPUs; full precision on
CPU), :class:`BatchSource` (where the batch of each micro-step comes from, so a resumed run reads
the data from where it stopped), gradient accumulation over ``accumulate`` micro-batches,
:mod:`lecturelib.train.distributed` (DistributedDataParallel under ``torchrun``: each process trains
on its shard of every batch), and :mod:`lecturelib.train.checkpoint` (atomic, checksummed files).
A run that several chapters make (the same model, the same recipe) is trained once:
:func:`fit_once` (:mod:`lecturelib.train.once`). The :class:`Trainer` and the
:class:`History` it fills live in
:mod:`lecturelib.train.trainer` (re-exported here); :func:`fit` and its argument check
:func:`check_fit` here.

    def loss_fn(model, batch):
        x, y = batch
        return F.cross_entropy(model(x).flatten(0, 1), y.flatten())

    hist = fit(model, get_batch, loss_fn, steps=500, lr=3e-3, clip=1.0,
               evaluation=Evaluation(lambda m: {"loss": val_loss(m)}, every=100))

What to evaluate and when is one :class:`Evaluation`; what to checkpoint and when, and whether
to resume, one :class:`Checkpointing`.

``batches`` is a function ``step -> batch``, a list of batches (cycled), or another iterable such
as a ``DataLoader`` (cycled; such a run cannot resume). Batches are tensors or nested
tuples/lists/dicts of tensors; they are moved to the model's device.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from lecturelib.train import checkpoint as ckpt
from lecturelib.train import distributed  # noqa: F401
from lecturelib.train.batches import (  # noqa: F401
    Batch,
    BatchSource,
    count_tokens,
    model_device,
    to_device,
)
from lecturelib.train.optim import adamw, decay_groups, warmup_cosine  # noqa: F401
from lecturelib.train.precision import Precision, amp_dtype, autocast_dtype  # noqa: F401
from lecturelib.train.progress import PROGRESS_ENV, progress_bar  # noqa: F401
from lecturelib.train.once import fit_once  # noqa: F401
from lecturelib.train.trainer import (  # noqa: F401
    History,
    Trainer,
    evaluate,
    grad_norm,
    rng_state,
    set_rng_state,
)
from lecturelib.validate import (
    check_bool,
    check_callable,
    check_int,
    check_number,
    check_type,
)


@dataclass(frozen=True)
class Evaluation:
    """What to evaluate and when: ``fn(model) -> {metric: value}`` runs in eval mode every
    ``every`` steps (``None``: only after the last step) and always after the last step."""

    fn: Callable[[nn.Module], dict[str, float]]
    every: int | None = None

    def __post_init__(self):
        check_callable(self.fn, "Evaluation.fn")
        if self.every is not None:
            check_int(self.every, "Evaluation.every", 1)


@dataclass(frozen=True)
class Checkpointing:
    """What to checkpoint and when: the whole run (model, optimizer, schedule, random
    numbers, history) is written atomically to ``path`` every ``every`` steps (``None``:
    only at the end) and at the end. With ``resume=True`` an existing checkpoint is verified
    and loaded, and training continues from its step with the same data, random numbers,
    optimizer and schedule, so an interrupted run ends exactly where an uninterrupted one
    would."""

    path: str | Path
    every: int | None = None
    resume: bool = False

    def __post_init__(self):
        object.__setattr__(self, "path", ckpt.check_path(self.path))
        if self.every is not None:
            check_int(self.every, "Checkpointing.every", 1)
        check_bool(self.resume, "Checkpointing.resume")


def check_fit(
    model, steps, clip, accumulate, evaluation, checkpointing, log_every
) -> None:
    """The arguments of :func:`fit`."""
    check_type(model, "model", nn.Module, "a torch.nn.Module")
    check_int(steps, "steps", 1)
    check_int(accumulate, "accumulate", 1)
    check_int(log_every, "log_every", 1)
    if clip is not None:
        check_number(clip, "clip", 0, low_open=True)
    if clip is not None and any(getattr(m, "sparse", False) for m in model.modules()):
        raise ValueError(
            "clip cannot be used with sparse embedding gradients; pass clip=None"
        )
    if evaluation is not None:
        check_type(evaluation, "evaluation", Evaluation, "a train.Evaluation or None")
    if checkpointing is not None:
        check_type(
            checkpointing,
            "checkpointing",
            Checkpointing,
            "a train.Checkpointing or None",
        )
    if not any(p.requires_grad for p in model.parameters()):
        raise ValueError("the model has no trainable parameters")


def fit(
    model: nn.Module,
    batches: Callable[[int], Batch] | Iterable[Batch],
    loss_fn: Callable[[nn.Module, Batch], torch.Tensor],
    *,
    steps: int,
    lr: float = 1e-3,
    optimizer: torch.optim.Optimizer | None = None,
    scheduler: Any | None = None,
    clip: float | None = None,
    accumulate: int = 1,
    evaluation: Evaluation | None = None,
    checkpointing: Checkpointing | None = None,
    amp: bool | str = "auto",
    progress: bool = True,
    desc: str = "training",
    log_every: int = 1,
) -> History:
    """Train ``model`` for ``steps`` optimisation steps and return its :class:`History`.

    - ``optimizer`` defaults to AdamW at ``lr``; ``scheduler`` (if any) steps once per step.
    - ``clip``: clip the global gradient norm to this value (the unclipped norm is recorded).
    - ``accumulate``: micro-batches per step; their gradients are averaged, so a step sees a
      batch ``accumulate`` times larger than one call of ``batches`` gives.
    - ``evaluation``: what to evaluate and when (:class:`Evaluation`).
    - ``checkpointing``: where to checkpoint, how often, and whether to resume
      (:class:`Checkpointing`).
    - ``amp``: mixed precision on CUDA (see :class:`Precision`); full precision on CPU.
    - Under ``torchrun`` (after :func:`lecturelib.train.distributed.init`) every process
      trains on its shard of each batch and DistributedDataParallel averages the gradients.
    """
    check_fit(model, steps, clip, accumulate, evaluation, checkpointing, log_every)
    params = [p for p in model.parameters() if p.requires_grad]
    source = BatchSource(batches)
    trainer = Trainer(
        model,
        loss_fn,
        source,
        optimizer or torch.optim.AdamW(params, lr=lr),
        scheduler,
        Precision(model_device(model), amp),
        steps,
        clip,
        accumulate,
        evaluation.fn if evaluation else None,
        evaluation.every if evaluation else None,
        checkpointing.path if checkpointing else None,
        checkpointing.every if checkpointing else None,
        log_every,
    )
    if checkpointing and checkpointing.resume and checkpointing.path.exists():
        state = ckpt.load(checkpointing.path, map_location=trainer.device)
        _resume(trainer, state, source, steps)
    model.train()
    trainer.bar = progress_bar(
        range(trainer.step, steps),
        steps,
        trainer.step,
        desc,
        progress and trainer.dist.is_main,
    )
    for _ in trainer.bar:
        loss, norm = trainer.train_step()
        trainer.record(loss, norm)
        trainer.maybe_evaluate()
        trainer.show_progress()
        trainer.maybe_checkpoint()
    return trainer.history


def _resume(trainer: Trainer, state: dict, source: BatchSource, steps: int) -> None:
    if state["step"] > steps:
        raise ValueError(
            f"the checkpoint is at step {state['step']}, beyond steps={steps}; pass "
            f"steps >= {state['step']} or another checkpoint path"
        )
    if state["step"] > 0 and not source.seekable:
        raise ValueError(
            "cannot resume with batches from an iterator or DataLoader: it cannot "
            "be positioned at the checkpoint's step; pass a function step -> batch "
            "or a list of batches"
        )
    trainer.load_state_dict(state)


def count_parameters(model: nn.Module, trainable_only: bool = True) -> int:
    """Number of (trainable) parameters."""
    return sum(
        p.numel() for p in model.parameters() if p.requires_grad or not trainable_only
    )
