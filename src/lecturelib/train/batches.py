"""Batches for the training loop: where each micro-step's batch comes from, and moving it.

A batch is a tensor or nested tuples/lists/dicts (NamedTuples too) of tensors.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import nn

from lecturelib.validate import describe

Batch = Any


def to_device(batch: Batch, device: torch.device) -> Batch:
    """Move a tensor, or nested tuples/lists/dicts of tensors, to `device`; a NamedTuple's
    `host_fields` (a class attribute: names of its fields) stay where they are."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=True)
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):  # a NamedTuple
        host = getattr(batch, "host_fields", ())
        moved = (
            b if f in host else to_device(b, device)
            for f, b in zip(batch._fields, batch)
        )
        return type(batch)(*moved)
    if isinstance(batch, (list, tuple)):
        return type(batch)(to_device(b, device) for b in batch)
    if isinstance(batch, dict):
        return {k: to_device(v, device) for k, v in batch.items()}
    return batch


def count_tokens(batch: Batch) -> int:
    """Elements of the first integer tensor in `batch` (the input ids of a language model's
    `(x, y)`); 0 when the batch holds no integer tensor."""
    if isinstance(batch, torch.Tensor):
        return batch.numel() if not batch.dtype.is_floating_point else 0
    parts = batch.values() if isinstance(batch, dict) else batch
    if isinstance(parts, (list, tuple)) or isinstance(batch, dict):
        for part in parts:
            if n := count_tokens(part):
                return n
    return 0


def model_device(model: nn.Module) -> torch.device:
    """The device of a model's first parameter (CPU for a model without parameters)."""
    p = next(model.parameters(), None)
    return p.device if p is not None else torch.device("cpu")


def check_batches(batches) -> None:
    """`batches` must not be one batch: a tensor would be iterated row by row and a dict
    key by key, each row or key taken as a batch."""
    if isinstance(batches, torch.Tensor):
        raise TypeError(
            f"batches must be a function step -> batch, a list of batches or a "
            f"DataLoader, not a tensor (got {describe(batches)}: fit would take each "
            f"row as a batch); pass [x] to train on this one batch every step, or "
            f"lambda step: x[...] to draw a batch per step"
        )
    if isinstance(batches, dict):
        raise TypeError(
            "batches must be a function step -> batch, a list of batches or a "
            "DataLoader, not a dict (fit would take each key as a batch); pass [batch] "
            "to train on this one batch every step"
        )


class BatchSource:
    """The batch of micro-step `i`. A function is called with `i` and a list is indexed
    (`i mod len`), so a resumed run continues with the very batches an uninterrupted one would
    have used; any other iterable (a `DataLoader`) is cycled and cannot be positioned."""

    def __init__(self, batches: Callable[[int], Batch] | Iterable[Batch]):
        self.seekable = True
        check_batches(batches)
        if callable(batches) and not isinstance(batches, torch.utils.data.DataLoader):
            self.get = batches
        elif isinstance(batches, (list, tuple)):
            if not batches:
                raise ValueError("batches is an empty list; pass at least one batch")
            self.get = lambda i: batches[i % len(batches)]
        elif isinstance(batches, Iterable):
            self.seekable, iterator = False, self._cycle(batches)
            self.get = lambda i: next(iterator)
        else:
            raise TypeError(
                f"batches must be a function step -> batch, a list of batches or an "
                f"iterable such as a DataLoader; got {type(batches).__name__}"
            )

    @staticmethod
    def _cycle(
        batches,
    ):  # re-iterates each pass (a DataLoader reshuffles); caches nothing
        while True:
            empty = True
            for batch in batches:
                empty = False
                yield batch
            if empty:  # an iterator already used up: never loop forever
                raise ValueError(
                    "batches yielded nothing; an iterator can be read only once, so "
                    "pass a list, a DataLoader or a function step -> batch"
                )

    def __call__(self, i: int) -> Batch:
        return self.get(i)
