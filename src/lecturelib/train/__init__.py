"""One training loop for the whole book.

``fit`` trains any ``nn.Module`` given a way to get batches and a loss, and returns a
:class:`History`; it never plots. Its loop reads like the algorithm::

    for step in range(start, steps):
        loss, norm = trainer.train_step()      # accumulate gradients, clip, update, schedule
        trainer.record(loss, norm)             # history and progress bar
        trainer.maybe_evaluate()               # every eval_every steps and after the last
        trainer.show_progress()                # live loss, evaluation, tokens/s
        trainer.maybe_checkpoint()             # every checkpoint_every steps and at the end

and every refinement is a piece of its own rather than a branch in that loop:
:class:`Precision` (bf16 autocast, or fp16 with a gradient scaler, on GPUs; full precision on
CPU), :class:`BatchSource` (where the batch of each micro-step comes from, so a resumed run reads
the data from where it stopped), gradient accumulation over ``accumulate`` micro-batches,
:mod:`lecturelib.train.distributed` (DistributedDataParallel under ``torchrun``: each process trains
on its shard of every batch), and :mod:`lecturelib.train.checkpoint` (atomic, checksummed files).

    def loss_fn(model, batch):
        x, y = batch
        return F.cross_entropy(model(x).flatten(0, 1), y.flatten())

    hist = fit(model, get_batch, loss_fn, steps=500, lr=3e-3, clip=1.0,
               eval_fn=lambda m: {"loss": val_loss(m)}, eval_every=100)

``batches`` is a function ``step -> batch``, a list of batches (cycled), or another iterable such
as a ``DataLoader`` (cycled; such a run cannot resume). Batches are tensors or nested
tuples/lists/dicts of tensors; they are moved to the model's device.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from lecturelib.train import checkpoint as ckpt
from lecturelib.train import distributed
from lecturelib.train.batches import (
    Batch,
    BatchSource,
    count_tokens,
    model_device,
    to_device,
)  # noqa: F401
from lecturelib.train.optim import adamw, decay_groups, positive_int, warmup_cosine  # noqa: F401
from lecturelib.train.precision import Precision, amp_dtype, autocast_dtype  # noqa: F401
from lecturelib.train.progress import PROGRESS_ENV, progress_bar  # noqa: F401


@dataclass
class History:
    """What happened during training, step by step."""

    steps: list[int] = field(default_factory=list)
    train_loss: list[float] = field(default_factory=list)
    grad_norm: list[float] = field(default_factory=list)
    lr: list[float] = field(default_factory=list)
    eval_steps: list[int] = field(default_factory=list)
    evals: dict[str, list[float]] = field(default_factory=dict)
    eval_seconds: list[float] = field(
        default_factory=list
    )  # training time at each evaluation
    seconds: float = 0.0  # wall time of the whole run, evaluations included
    train_seconds: float = 0.0  # wall time spent in training steps only
    tokens: int = (
        0  # input tokens seen (integer ids in the batches), over all processes
    )

    def final(self, metric: str) -> float:
        """The last evaluated value of ``metric``."""
        if not self.evals.get(metric):
            raise KeyError(
                f"no evaluation of {metric!r}; evaluated: {sorted(self.evals)}"
            )
        return self.evals[metric][-1]

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> History:
        return cls(**d)


@torch.no_grad()
def grad_norm(params: list[torch.Tensor]) -> torch.Tensor:
    """The global L2 norm of the gradients, sparse ones (from ``nn.Embedding(sparse=True)``) too."""
    norms = [
        (p.grad.coalesce().values() if p.grad.is_sparse else p.grad).float().norm()
        for p in params
        if p.grad is not None
    ]
    return torch.stack(norms).norm() if norms else torch.tensor(0.0)


@torch.no_grad()
def evaluate(
    model: nn.Module, eval_fn: Callable[[nn.Module], dict[str, float]]
) -> dict[str, float]:
    """Run ``eval_fn(model)`` in eval mode without gradients, then restore the mode."""
    was_training = model.training
    model.eval()
    try:
        out = eval_fn(model)
    finally:
        model.train(was_training)
    if not isinstance(out, dict):
        raise TypeError(
            f"eval_fn must return a dict of metric -> number; got {type(out).__name__}"
        )
    return {k: float(v) for k, v in out.items()}


@dataclass
class Trainer:
    """The state of one run of :func:`fit` and its named pieces."""

    model: nn.Module  # the model as given (what checkpoints hold)
    loss_fn: Callable[[nn.Module, Batch], torch.Tensor]
    batches: BatchSource
    optimizer: torch.optim.Optimizer
    scheduler: Any
    precision: Precision
    steps: int
    clip: float | None = None
    accumulate: int = 1
    eval_fn: Callable[[nn.Module], dict[str, float]] | None = None
    eval_every: int | None = None
    checkpoint: Path | None = None
    checkpoint_every: int | None = None
    log_every: int = 1
    step: int = 0
    history: History = field(default_factory=History)
    bar: Any = None

    def __post_init__(self):
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        self.dist = distributed.current()
        self.net = self.dist.wrap(self.model)  # the model under DDP when distributed
        self.device = model_device(self.model)
        self.clock = time.perf_counter() - self.history.seconds
        self.train_clock = 0.0

    def micro_batch(self, i: int) -> Batch:
        """The shard of micro-batch ``i`` this process trains on, on the model's device."""
        batch = self.batches(self.step * self.accumulate + i)
        self.history.tokens += count_tokens(batch)
        return to_device(self.dist.shard(batch), self.device)

    def train_step(self) -> tuple[float, float]:
        """One optimisation step: average the gradients of ``accumulate`` micro-batches, clip
        them, update the weights, advance the schedule. Returns the loss and the raw norm."""
        started = time.perf_counter()
        self.optimizer.zero_grad(set_to_none=True)
        total = 0.0
        for i in range(self.accumulate):
            with self.dist.sync_gradients(self.net, last=i == self.accumulate - 1):
                with self.precision.autocast():
                    loss = self.loss_fn(self.net, self.micro_batch(i))
                loss = _checked_loss(loss, self.step) / self.accumulate
                self.precision.backward(loss)
            total += loss.item()
        norm = self.clip_gradients()
        self.precision.step(self.optimizer)
        if self.scheduler is not None:
            self.scheduler.step()
        self.step += 1
        self.train_clock += time.perf_counter() - started
        return total, norm

    def clip_gradients(self) -> float:
        """Unscale (fp16), measure and clip the global gradient norm; returns the raw norm."""
        self.precision.unscale(self.optimizer)
        norm = grad_norm(self.params).item()
        if not math.isfinite(norm) and not self.precision.skips_bad_steps:
            raise FloatingPointError(
                f"the gradient norm became {norm} at step {self.step}; lower "
                "the learning rate or clip gradients"
            )
        if self.clip is not None:
            torch.nn.utils.clip_grad_norm_(self.params, self.clip)
        return norm

    def record(self, loss: float, norm: float) -> None:
        h = self.history
        if self.step % self.log_every == 0 or self.step == self.steps:
            h.steps.append(self.step)
            h.train_loss.append(self.dist.mean(loss))
            h.grad_norm.append(norm)
            h.lr.append(self.optimizer.param_groups[0]["lr"])
        h.train_seconds += self.train_clock
        self.train_clock = 0.0
        h.seconds = time.perf_counter() - self.clock

    def show_progress(self) -> None:
        """Live loss, latest evaluation and tokens per second on the progress bar."""
        h = self.history
        if hasattr(self.bar, "set_postfix") and h.train_loss:
            shown = {"loss": f"{h.train_loss[-1]:.3f}"}
            shown.update({k: f"{v[-1]:.3f}" for k, v in h.evals.items()})
            if h.tokens and h.train_seconds > 0:
                shown["tok/s"] = f"{h.tokens / h.train_seconds:,.0f}"
            self.bar.set_postfix(shown, refresh=False)

    def maybe_evaluate(self) -> None:
        if self.eval_fn is None:
            return
        if not (
            (self.eval_every and self.step % self.eval_every == 0)
            or self.step == self.steps
        ):
            return
        for k, v in evaluate(self.model, self.eval_fn).items():
            self.history.evals.setdefault(k, []).append(v)
        self.history.eval_steps.append(self.step)
        self.history.eval_seconds.append(self.history.train_seconds)

    def maybe_checkpoint(self) -> None:
        if self.checkpoint is None:
            return
        every = self.checkpoint_every and self.step % self.checkpoint_every == 0
        if every or self.step == self.steps:
            self.history.seconds = time.perf_counter() - self.clock
            if self.dist.is_main:
                ckpt.save(self.checkpoint, self.state_dict())
            self.dist.barrier()

    def state_dict(self) -> dict:
        """Everything a resumed run needs to continue exactly: weights, optimizer, schedule,
        gradient scaler, step, history and the random number generators."""
        return {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict()
            if self.scheduler is not None
            else None,
            "precision": self.precision.state_dict(),
            "step": self.step,
            "accumulate": self.accumulate,
            "history": self.history.to_dict(),
            "rng": rng_state(),
        }

    def load_state_dict(self, state: dict) -> None:
        if state["accumulate"] != self.accumulate:
            raise ValueError(
                f"the checkpoint was trained with accumulate={state['accumulate']}; "
                f"got accumulate={self.accumulate}"
            )
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        if self.scheduler is not None and state["scheduler"] is not None:
            self.scheduler.load_state_dict(state["scheduler"])
        self.precision.load_state_dict(state["precision"])
        self.step, self.history = state["step"], History.from_dict(state["history"])
        self.clock = time.perf_counter() - self.history.seconds
        set_rng_state(state["rng"])


def rng_state() -> dict:
    """The state of torch's generators (CPU and, when present, CUDA)."""
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []
    return {"cpu": torch.get_rng_state(), "cuda": cuda}


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["cpu"].cpu())
    if state["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([s.cpu() for s in state["cuda"]])


def _checked_loss(loss, step: int) -> torch.Tensor:
    if not isinstance(loss, torch.Tensor) or loss.dim() != 0:
        shape = (
            tuple(loss.shape) if isinstance(loss, torch.Tensor) else type(loss).__name__
        )
        raise ValueError(
            f"loss_fn must return a scalar tensor (a mean over the batch); got "
            f"{shape}; reduce a per-example loss with .mean()"
        )
    if not torch.isfinite(loss):
        raise FloatingPointError(
            f"loss became {loss.item()} at step {step}; lower the "
            "learning rate or clip gradients"
        )
    return loss


def _check_arguments(
    model,
    steps,
    clip,
    accumulate,
    eval_fn,
    eval_every,
    checkpoint,
    checkpoint_every,
    resume,
    log_every,
) -> None:
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module; got {type(model).__name__}")
    positive_int("steps", steps)
    positive_int("accumulate", accumulate)
    positive_int("log_every", log_every)
    positive_int("eval_every", eval_every, allow_none=True)
    positive_int("checkpoint_every", checkpoint_every, allow_none=True)
    if clip is not None and not (
        isinstance(clip, (int, float)) and math.isfinite(clip) and clip > 0
    ):
        raise ValueError(
            f"clip must be a positive, finite gradient norm or None; got {clip!r}"
        )
    if clip is not None and any(getattr(m, "sparse", False) for m in model.modules()):
        raise ValueError(
            "clip cannot be used with sparse embedding gradients; pass clip=None"
        )
    if eval_every is not None and eval_fn is None:
        raise ValueError("eval_every is set but there is no eval_fn to run")
    if resume and checkpoint is None:
        raise ValueError("resume=True needs a checkpoint path")
    if checkpoint_every is not None and checkpoint is None:
        raise ValueError("checkpoint_every is set but there is no checkpoint path")


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
    eval_fn: Callable[[nn.Module], dict[str, float]] | None = None,
    eval_every: int | None = None,
    checkpoint: str | Path | None = None,
    checkpoint_every: int | None = None,
    resume: bool = False,
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
    - ``eval_fn(model) -> {metric: value}`` runs every ``eval_every`` steps and after the last.
    - ``checkpoint``: a file written every ``checkpoint_every`` steps and at the end; with
      ``resume=True`` an existing checkpoint is verified and loaded and training continues from
      its step with the same data, random numbers, optimizer and schedule, so an interrupted run
      ends exactly where an uninterrupted one would.
    - ``amp``: mixed precision on CUDA (see :class:`Precision`); full precision on CPU.
    - Under ``torchrun`` (after :func:`lecturelib.train.distributed.init`) every process trains on its
      shard of each batch and DistributedDataParallel averages the gradients.
    """
    _check_arguments(
        model,
        steps,
        clip,
        accumulate,
        eval_fn,
        eval_every,
        checkpoint,
        checkpoint_every,
        resume,
        log_every,
    )
    if checkpoint is not None:
        checkpoint = ckpt.check_path(checkpoint)
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError("the model has no trainable parameters")
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
        eval_fn,
        eval_every,
        checkpoint,
        checkpoint_every,
        log_every,
    )
    if resume and checkpoint.exists():
        _resume(
            trainer, ckpt.load(checkpoint, map_location=trainer.device), source, steps
        )
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
