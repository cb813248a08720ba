"""The state of one run of `lecturelib.train.fit`: the `Trainer` and its named
pieces (one optimisation step, clipping, recording, evaluation, checkpoints), the
`History` it returns, and the random-number state a checkpoint keeps."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
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
)
from lecturelib.train.precision import Precision


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
        """The last evaluated value of `metric`."""
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
    """The global L2 norm of the gradients, sparse ones (from `nn.Embedding(sparse=True)`) too."""
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
    """Run `eval_fn(model)` in eval mode without gradients, then restore the mode."""
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
    """The state of one run of `fit` and its named pieces."""

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
        self.pending: list[tuple[int, torch.Tensor, torch.Tensor]] = []
        mps = getattr(self.device, "type", None) == "mps"
        self.sum_dtype = torch.float32 if mps else torch.float64

    def micro_batch(self, i: int) -> Batch:
        """The shard of micro-batch `i` this process trains on, on the model's device."""
        batch = self.batches(self.step * self.accumulate + i)
        self.history.tokens += count_tokens(batch)
        return to_device(self.dist.shard(batch), self.device)

    def train_step(self) -> tuple[torch.Tensor, torch.Tensor]:
        """One optimisation step: average the gradients of `accumulate` micro-batches, clip
        them, update the weights, advance the schedule. Returns the loss and the raw norm as
        tensors on the model's device: nothing waits for the device until `record`
        reads them on a logging step."""
        started = time.perf_counter()
        self.optimizer.zero_grad(set_to_none=True)
        total = None
        for i in range(self.accumulate):
            with self.dist.sync_gradients(self.net, last=i == self.accumulate - 1):
                with self.precision.autocast():
                    loss = self.loss_fn(self.net, self.micro_batch(i))
                loss = _checked_loss(loss) / self.accumulate
                self.precision.backward(loss)
            # float64, as a sum of Python floats (MPS has no float64: float32 there)
            part = loss.detach().to(self.sum_dtype)
            total = part if total is None else total + part
        norm = self.clip_gradients()
        self.precision.step(self.optimizer)
        if self.scheduler is not None:
            self.scheduler.step()
        self.pending.append((self.step, total, norm))
        self.step += 1
        self.train_clock += time.perf_counter() - started
        return total, norm

    def clip_gradients(self) -> torch.Tensor:
        """Unscale (fp16), measure and clip the global gradient norm; returns the raw norm
        (a tensor on the device: `check_pending` checks that it is finite)."""
        self.precision.unscale(self.optimizer)
        norm = grad_norm(self.params)
        if self.clip is not None:
            torch.nn.utils.clip_grad_norm_(self.params, self.clip)
        return norm

    def check_pending(self) -> list[tuple[int, float, float]]:
        """Read back, in one transfer, the losses and norms of the steps since the last
        check, and refuse a non-finite one as soon as it is seen; returns `(step, loss,
        norm)` per step."""
        if not self.pending:
            return []
        steps = [s for s, _, _ in self.pending]
        pairs = [
            torch.stack([loss, norm.to(loss.device, loss.dtype)])
            for _, loss, norm in self.pending
        ]
        started = time.perf_counter()
        values = torch.stack(pairs).tolist()  # the one read-back
        # training time: the host waits here for the device to finish the queued steps
        self.train_clock += time.perf_counter() - started
        self.pending = []
        out = []
        for step, (loss, norm) in zip(steps, values):
            if not math.isfinite(loss):
                raise FloatingPointError(
                    f"loss became {loss} at step {step}; lower the "
                    "learning rate or clip gradients"
                )
            if not math.isfinite(norm) and not self.precision.skips_bad_steps:
                raise FloatingPointError(
                    f"the gradient norm became {norm} at step {step}; lower "
                    "the learning rate or clip gradients"
                )
            out.append((step, loss, norm))
        return out

    def record(self, loss: torch.Tensor, norm: torch.Tensor) -> None:
        """On a logging step, read the losses and norms back (one transfer) and record
        this step's; on any other step, read nothing."""
        h = self.history
        if self.step % self.log_every == 0 or self.step == self.steps:
            _, loss_value, norm_value = self.check_pending()[-1]
            h.steps.append(self.step)
            h.train_loss.append(self.dist.mean(loss_value))
            h.grad_norm.append(norm_value)
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
        self.check_pending()
        for k, v in evaluate(self.model, self.eval_fn).items():
            self.history.evals.setdefault(k, []).append(v)
        self.history.eval_steps.append(self.step)
        self.history.eval_seconds.append(self.history.train_seconds)

    def maybe_checkpoint(self) -> None:
        if self.checkpoint is None:
            return
        every = self.checkpoint_every and self.step % self.checkpoint_every == 0
        if every or self.step == self.steps:
            self.check_pending()
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


def _checked_loss(loss) -> torch.Tensor:
    """A scalar tensor (its value is checked, with the gradient norm, when it is read)."""
    if not isinstance(loss, torch.Tensor) or loss.dim() != 0:
        shape = (
            tuple(loss.shape) if isinstance(loss, torch.Tensor) else type(loss).__name__
        )
        raise ValueError(
            f"loss_fn must return a scalar tensor (a mean over the batch); got "
            f"{shape}; reduce a per-example loss with .mean()"
        )
    return loss
