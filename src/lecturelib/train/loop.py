"""The book's training loop: `fit`, its argument check `check_fit`, what to
evaluate (`Evaluation`) and what to checkpoint (`Checkpointing`) and when, and
`count_parameters`. `lecturelib.train` re-exports them; its docstring shows the loop.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from lecturelib.train import checkpoint as ckpt
from lecturelib.train.batches import Batch, BatchSource, model_device
from lecturelib.train.precision import Precision
from lecturelib.train.progress import progress_bar
from lecturelib.train.trainer import History, Trainer
from lecturelib.validate import (
    check_bool,
    check_callable,
    check_int,
    check_number,
    check_type,
)


@dataclass(frozen=True)
class Evaluation:
    """What to evaluate and when: `fn(model) -> {metric: value}` runs in eval mode every
    `every` steps (`None`: only after the last step) and always after the last step."""

    fn: Callable[[nn.Module], dict[str, float]]
    every: int | None = None

    def __post_init__(self):
        check_callable(self.fn, "Evaluation.fn")
        if self.every is not None:
            check_int(self.every, "Evaluation.every", 1)


@dataclass(frozen=True)
class Checkpointing:
    """What to checkpoint and when: the whole run (model, optimizer, schedule, random
    numbers, history) is written atomically to `path` every `every` steps (`None`:
    only at the end) and at the end. With `resume=True` an existing checkpoint is verified
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
    """The arguments of `fit`."""
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
    """Train `model` for `steps` optimisation steps and return its `History`.

    - `optimizer` defaults to AdamW at `lr` (fused on CUDA); `scheduler` (if any) steps
      once per step.
    - `clip`: clip the global gradient norm to this value (the unclipped norm is recorded).
    - `accumulate`: micro-batches per step; their gradients are averaged, so a step sees a
      batch `accumulate` times larger than one call of `batches` gives.
    - `evaluation`: what to evaluate and when (`Evaluation`).
    - `checkpointing`: where to checkpoint, how often, and whether to resume
      (`Checkpointing`).
    - `amp`: mixed precision on CUDA (see `Precision`); full precision on CPU.
    - Under `torchrun` (after `lecturelib.train.distributed.init`) every process
      trains on its shard of each batch and DistributedDataParallel averages the gradients.
    """
    check_fit(model, steps, clip, accumulate, evaluation, checkpointing, log_every)
    params = [p for p in model.parameters() if p.requires_grad]
    # fused on CUDA: a few kernels for all tensors, and fp16's gradient scaler passes it the overflow flag on
    # the device instead of reading it back at every step
    fused = model_device(model).type == "cuda"
    source = BatchSource(batches)
    trainer = Trainer(
        model,
        loss_fn,
        source,
        optimizer or torch.optim.AdamW(params, lr=lr, fused=fused),
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
