"""One training loop for the whole book.

``fit`` trains any ``nn.Module`` given a way to get batches and a loss; it shows a progress bar with
the live loss, evaluates periodically, clips gradients, saves and resumes checkpoints, and uses
mixed precision on a GPU (bf16 where supported, otherwise fp16 with a gradient scaler). It returns a
:class:`History`; it never plots.

    def loss_fn(model, batch):
        x, y = batch
        return F.cross_entropy(model(x).flatten(0, 1), y.flatten())

    hist = fit(model, get_batch, loss_fn, steps=500, lr=3e-3, clip=1.0,
               eval_fn=lambda m: {"loss": val_loss(m)}, eval_every=100)

``batches`` is either a function ``step -> batch`` (random windows of a corpus) or an iterable
(a ``DataLoader``), which is cycled. Batches may be tensors or nested tuples/lists/dicts of
tensors; they are moved to the model's device.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

Batch = Any


@dataclass
class History:
    """What happened during training, step by step."""

    steps: list[int] = field(default_factory=list)
    train_loss: list[float] = field(default_factory=list)
    grad_norm: list[float] = field(default_factory=list)
    lr: list[float] = field(default_factory=list)
    eval_steps: list[int] = field(default_factory=list)
    evals: dict[str, list[float]] = field(default_factory=dict)
    seconds: float = 0.0

    def final(self, metric: str) -> float:
        """The last evaluated value of ``metric``."""
        if not self.evals.get(metric):
            raise KeyError(f"no evaluation of {metric!r}; evaluated: {sorted(self.evals)}")
        return self.evals[metric][-1]

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> History:
        return cls(**d)


def to_device(batch: Batch, device: torch.device) -> Batch:
    """Move a tensor, or nested tuples/lists/dicts of tensors, to ``device``."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=True)
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):  # a NamedTuple
        return type(batch)(*(to_device(b, device) for b in batch))
    if isinstance(batch, (list, tuple)):
        return type(batch)(to_device(b, device) for b in batch)
    if isinstance(batch, dict):
        return {k: to_device(v, device) for k, v in batch.items()}
    return batch


def model_device(model: nn.Module) -> torch.device:
    """The device of a model's first parameter (CPU for a model without parameters)."""
    p = next(model.parameters(), None)
    return p.device if p is not None else torch.device("cpu")


def amp_dtype(device: torch.device, amp: bool | str = "auto") -> torch.dtype | None:
    """The autocast dtype: bf16 on GPUs that support it, fp16 on older GPUs (e.g. the T4), and
    ``None`` (full precision) on CPU or when ``amp`` is False."""
    if amp not in (True, False, "auto"):
        raise ValueError(f"amp must be True, False or 'auto'; got {amp!r}")
    if not amp or device.type != "cuda":
        return None
    return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16


def _batch_source(batches: Callable[[int], Batch] | Iterable[Batch]) -> Callable[[int], Batch]:
    if callable(batches) and not isinstance(batches, torch.utils.data.DataLoader):
        return batches
    if not isinstance(batches, Iterable):
        raise TypeError(
            f"batches must be a function step -> batch or an iterable of batches; "
            f"got {type(batches).__name__}"
        )
    def cycle():  # re-iterates each pass (a DataLoader reshuffles); caches nothing
        while True:
            empty = True
            for batch in batches:
                empty = False
                yield batch
            if empty:  # an empty iterable, or an iterator already used up: never loop forever
                raise ValueError("batches yielded nothing; an iterator can be read only once, so "
                                 "pass a list, a DataLoader or a function step -> batch")

    iterator = cycle()
    return lambda step: next(iterator)


@torch.no_grad()
def grad_norm(params: list[torch.Tensor]) -> torch.Tensor:
    """The global L2 norm of the gradients, sparse ones (from ``nn.Embedding(sparse=True)``) too."""
    norms = [(p.grad.coalesce().values() if p.grad.is_sparse else p.grad).float().norm()
             for p in params if p.grad is not None]
    return torch.stack(norms).norm() if norms else torch.tensor(0.0)


@torch.no_grad()
def evaluate(model: nn.Module, eval_fn: Callable[[nn.Module], dict[str, float]]) -> dict[str, float]:
    """Run ``eval_fn(model)`` in eval mode without gradients, then restore the mode."""
    was_training = model.training
    model.eval()
    try:
        out = eval_fn(model)
    finally:
        model.train(was_training)
    if not isinstance(out, dict):
        raise TypeError(f"eval_fn must return a dict of metric -> number; got {type(out).__name__}")
    return {k: float(v) for k, v in out.items()}


def save_checkpoint(path: str | Path, model, optimizer, scheduler, scaler, step, hist) -> None:
    """Write a checkpoint atomically (a crash never leaves a half-written file)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict() if scheduler is not None else None,
        "scaler": scaler.state_dict() if scaler is not None else None,
        "step": step,
        "history": hist.to_dict(),
        "rng_cpu": torch.get_rng_state(),
    }
    tmp = path.with_suffix(path.suffix + ".tmp")
    torch.save(state, tmp)
    tmp.replace(path)


def load_checkpoint(path, model, optimizer, scheduler=None, scaler=None) -> tuple[int, History]:
    """Restore a checkpoint written by :func:`fit`; returns ``(step, history)``."""
    state = torch.load(path, map_location=model_device(model), weights_only=True)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    if scheduler is not None and state["scheduler"] is not None:
        scheduler.load_state_dict(state["scheduler"])
    if scaler is not None and state["scaler"] is not None:
        scaler.load_state_dict(state["scaler"])
    torch.set_rng_state(state["rng_cpu"].cpu())
    return state["step"], History.from_dict(state["history"])


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
    - ``eval_fn(model) -> {metric: value}`` runs every ``eval_every`` steps and after the last.
    - ``checkpoint``: a file written every ``checkpoint_every`` steps and at the end; with
      ``resume=True`` an existing checkpoint is loaded (``weights_only=True``) and training
      continues from its step, so an interrupted run ends where an uninterrupted one would.
    """
    if not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be a positive int; got {steps!r}")
    if clip is not None and clip <= 0:
        raise ValueError(f"clip must be a positive gradient norm or None; got {clip}")
    if clip is not None and any(getattr(m, "sparse", False) for m in model.modules()):
        raise ValueError("clip cannot be used with sparse embedding gradients; pass clip=None")
    if eval_every is not None and eval_fn is None:
        raise ValueError("eval_every is set but there is no eval_fn to run")
    if resume and checkpoint is None:
        raise ValueError("resume=True needs a checkpoint path")
    device = model_device(model)
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError("the model has no trainable parameters")
    optimizer = optimizer or torch.optim.AdamW(params, lr=lr)
    dtype = amp_dtype(device, amp)
    scaler = torch.amp.GradScaler("cuda") if dtype == torch.float16 else None
    get_batch = _batch_source(batches)

    hist, start = History(), 0
    if resume and Path(checkpoint).exists():
        start, hist = load_checkpoint(checkpoint, model, optimizer, scheduler, scaler)
    model.train()
    t0 = time.perf_counter() - hist.seconds
    bar = _progress(range(start, steps), steps, start, desc, progress)
    for step in bar:
        batch = to_device(get_batch(step), device)
        autocast = (torch.autocast(device.type, dtype=dtype) if dtype is not None
                    else contextlib.nullcontext())
        with autocast:
            loss = loss_fn(model, batch)
        if not torch.isfinite(loss):
            raise FloatingPointError(f"loss became {loss.item()} at step {step}; lower the "
                                     "learning rate or clip gradients")
        optimizer.zero_grad(set_to_none=True)
        (scaler.scale(loss) if scaler else loss).backward()
        if scaler:
            scaler.unscale_(optimizer)
        norm = grad_norm(params)
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(params, clip)
        (scaler.step(optimizer), scaler.update()) if scaler else optimizer.step()
        if scheduler is not None:
            scheduler.step()
        if (step + 1) % log_every == 0 or step + 1 == steps:
            hist.steps.append(step + 1)
            hist.train_loss.append(loss.item())
            hist.grad_norm.append(norm.item())
            hist.lr.append(optimizer.param_groups[0]["lr"])
        if eval_fn is not None and ((eval_every and (step + 1) % eval_every == 0)
                                    or step + 1 == steps):
            for k, v in evaluate(model, eval_fn).items():
                hist.evals.setdefault(k, []).append(v)
            hist.eval_steps.append(step + 1)
        if hasattr(bar, "set_postfix") and hist.train_loss:
            shown = {"loss": f"{hist.train_loss[-1]:.3f}"}
            shown.update({k: f"{v[-1]:.3f}" for k, v in hist.evals.items()})
            bar.set_postfix(shown, refresh=False)
        hist.seconds = time.perf_counter() - t0
        if checkpoint and checkpoint_every and (step + 1) % checkpoint_every == 0:
            save_checkpoint(checkpoint, model, optimizer, scheduler, scaler, step + 1, hist)
    if checkpoint:
        save_checkpoint(checkpoint, model, optimizer, scheduler, scaler, steps, hist)
    return hist


PROGRESS_ENV = "LECTURELIB_PROGRESS"  # "bar" (default), "summary" (one line at the end), "off"


class _Summary:
    """Stands in for a progress bar where live updates cannot be shown (the rendered book, tests):
    prints one line with the final postfix when the loop ends."""

    def __init__(self, iterable, total, desc):
        self.iterable, self.total, self.desc, self.postfix = iterable, total, desc, {}
        self.t0 = time.perf_counter()

    def __iter__(self):
        yield from self.iterable
        shown = ", ".join(f"{k} {v}" for k, v in self.postfix.items())
        print(f"{self.desc}: {self.total} steps in {time.perf_counter() - self.t0:.1f} s; {shown}")

    def set_postfix(self, postfix, refresh=False):
        self.postfix = postfix


def _progress(iterable, total, initial, desc, enabled):
    mode = os.environ.get(PROGRESS_ENV, "bar")
    if mode not in ("bar", "summary", "off"):
        raise ValueError(f"${PROGRESS_ENV} must be bar, summary or off; got {mode!r}")
    if not enabled or mode == "off":
        return iterable
    if mode == "summary":
        return _Summary(iterable, total, desc)
    from tqdm.auto import tqdm

    return tqdm(iterable, total=total, initial=initial, desc=desc, mininterval=0.5)


def count_parameters(model: nn.Module, trainable_only: bool = True) -> int:
    """Number of (trainable) parameters."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)


def warmup_cosine(optimizer: torch.optim.Optimizer, steps: int, warmup: int = 0):
    """Linear warm-up over ``warmup`` steps, then cosine decay to zero at ``steps``; pass the
    result as ``fit(..., optimizer=optimizer, scheduler=...)``."""
    if not 0 <= warmup < steps:
        raise ValueError(f"need 0 <= warmup < steps; got warmup={warmup}, steps={steps}")

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return 0.5 * (1 + math.cos(math.pi * min(1.0, (step - warmup) / (steps - warmup))))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
