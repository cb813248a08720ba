"""The argument checks that chapters 6-8 import from ``seq2seq`` under the names
``check_sizes`` and ``check_ids``, with signatures other than those of
``lecturelib.validate``: ``check_owner_sizes(owner, **sizes)`` and
``check_token_ids(ids, vocab_size, name, axes)``. Chapters 1-5 use
``lecturelib.validate``; remove this module once chapters 6-8 do too.
"""

from __future__ import annotations

import torch


def check_owner_sizes(owner: str, **sizes) -> None:
    """Raise a ValueError naming ``owner`` and the size unless every size is a positive
    int: ``check_sizes("Encoder", d_model=0)`` raises."""
    for name, n in sizes.items():
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"{owner}: {name} must be a positive int; got {n!r}")


def check_token_ids(ids, vocab_size: int, name: str, axes: str = "(b, t)") -> None:
    """Raise a ValueError naming ``name`` unless ``ids`` is a 2-D integer tensor of ids
    in ``0 .. vocab_size-1`` (float ids would be truncated, negative ones wrap
    around)."""
    if (
        not isinstance(ids, torch.Tensor)
        or ids.dim() != 2
        or ids.is_floating_point()
        or ids.is_complex()
        or ids.dtype == torch.bool
    ):
        got = (
            f"{ids.dtype} {tuple(ids.shape)}"
            if isinstance(ids, torch.Tensor)
            else type(ids).__name__
        )
        raise ValueError(f"{name} must be {axes} integer token ids; got {got}")
    if ids.numel() and (ids.min() < 0 or ids.max() >= vocab_size):
        raise ValueError(
            f"{name} must lie in 0..{vocab_size - 1} "
            f"(vocab_size={vocab_size}); "
            f"got values from {int(ids.min())} to {int(ids.max())}"
        )


# the old names, which chapters 6-8 import from seq2seq
check_ids, check_sizes = check_token_ids, check_owner_sizes
