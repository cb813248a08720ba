"""Data-parallel training on several processes with DistributedDataParallel.

Launched as `torchrun --nproc_per_node=N script.py`, the same script runs in N processes
(one per GPU, or N CPU processes). `init` joins them into a process group (NCCL on GPUs,
gloo on CPUs); `lecturelib.train.fit` then gives every process the model wrapped in
`DistributedDataParallel` and its own shard of each batch (rows `rank·b/N` to
`(rank+1)·b/N`). After `backward` DDP all-reduces the gradients to their mean over the
processes, which is the gradient of the mean loss over the whole batch, so N processes take the
same steps as one process on the whole batch, N times faster on N devices. Run alone (no
`torchrun`) everything here is a no-op.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn

from lecturelib.validate import check_int


@dataclass(frozen=True)
class Distributed:
    """This process's place in the group: `rank` of `world` processes."""

    rank: int = 0
    world: int = 1

    def __post_init__(self):
        check_int(self.world, "world", 1)
        check_int(self.rank, "rank", 0, self.world - 1)

    @property
    def is_main(self) -> bool:
        """Rank 0 shows the progress bar and writes checkpoints."""
        return self.rank == 0

    def wrap(self, model: nn.Module) -> nn.Module:
        if self.world == 1:
            return model
        device = next(model.parameters()).device
        ids = [device.index] if device.type == "cuda" else None
        return nn.parallel.DistributedDataParallel(model, device_ids=ids)

    def shard(self, batch):
        """This process's rows of every tensor in `batch` (split along the first axis)."""
        if self.world == 1:
            return batch
        if isinstance(batch, torch.Tensor):
            if batch.dim() == 0:
                return batch
            if batch.shape[0] % self.world:
                raise ValueError(
                    f"a batch of {batch.shape[0]} rows cannot be split evenly over "
                    f"{self.world} processes; use a multiple of {self.world}"
                )
            return batch.chunk(self.world)[self.rank]
        if isinstance(batch, tuple) and hasattr(batch, "_fields"):
            return type(batch)(*(self.shard(b) for b in batch))
        if isinstance(batch, (list, tuple)) and is_rows(batch):
            return type(batch)(self.rows(list(batch)))
        if isinstance(batch, (list, tuple)):
            return type(batch)(self.shard(b) for b in batch)
        if isinstance(batch, dict):
            return {k: self.shard(v) for k, v in batch.items()}
        return batch

    def rows(self, values: list) -> list:
        """This process's share of a list of per-row values (labels, texts), split as
        a tensor's rows are: kept whole, it would no longer line up with the sharded
        tensors beside it."""
        if len(values) % self.world:
            raise ValueError(
                f"a list of {len(values)} per-row values cannot be split evenly over "
                f"{self.world} processes; use a multiple of {self.world}"
            )
        n = len(values) // self.world
        return values[self.rank * n : (self.rank + 1) * n]

    def sync_gradients(self, net: nn.Module, last: bool):
        """All-reduce gradients only after the last micro-batch of an accumulated step."""
        if self.world == 1 or last:
            return contextlib.nullcontext()
        return net.no_sync()

    def mean(self, value: float) -> float:
        if self.world == 1:
            return value
        t = torch.tensor([value], dtype=torch.float64)
        dist.all_reduce(t)
        return t.item() / self.world

    def barrier(self) -> None:
        if self.world > 1:
            dist.barrier()


def is_rows(values) -> bool:
    """Whether a list or tuple holds per-row values (numbers, strings, ...: no tensor
    or container), which `Distributed.shard` splits like a tensor's rows; a list
    of tensors or containers is a batch's fields, sharded one by one."""
    return len(values) > 0 and not any(
        isinstance(v, (torch.Tensor, list, tuple, dict)) for v in values
    )


def current() -> Distributed:
    """This process's rank and world size (rank 0 of 1 when not distributed)."""
    if dist.is_available() and dist.is_initialized():
        return Distributed(dist.get_rank(), dist.get_world_size())
    return Distributed()


def init(backend: str | None = None) -> Distributed:
    """Join the process group that `torchrun` set up (a no-op without `torchrun`):
    NCCL when CUDA is available, gloo otherwise; each process takes GPU `LOCAL_RANK`."""
    if int(os.environ.get("WORLD_SIZE", "1")) == 1 or (
        dist.is_available() and dist.is_initialized()
    ):
        return current()
    if backend not in (None, "nccl", "gloo"):
        raise ValueError(
            f"backend must be 'nccl', 'gloo' or None (choose); got {backend!r}"
        )
    backend = backend or ("nccl" if torch.cuda.is_available() else "gloo")
    if backend == "nccl":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group(backend)
    return current()


def close() -> None:
    """Leave the process group (call at the end of a `torchrun` script)."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
