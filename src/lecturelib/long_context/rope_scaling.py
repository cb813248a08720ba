"""Chapter 18: stretching RoPE to contexts longer than the trained one.

A RoPE model trained on windows of `L` tokens has seen the rotation angles `m θ_i`
only for `m < L`. Each method below changes the frequencies `θ_i = b^{-2i/d}` so that
a context of `L' = s·L` tokens (`s >= 1`, the scale) stays, in some sense, inside what
was trained:

- `"none"`: the frequencies unchanged (extrapolation);
- `"pi"`: position interpolation, `θ'_i = θ_i / s` (Chen et al., arXiv:2306.15595);
- `"ntk"`: NTK-aware base change `b' = b·s^{d/(d-2)}` (bloc97, 2023): the fastest pair
  keeps its frequency and the slowest is divided by `s`;
- `"ntk_by_parts"`: pairs whose wavelength `λ_i = 2π/θ_i` fits `r_i = L/λ_i > β`
  times into `L` keep `θ_i`, those with `r_i < α` are interpolated, a ramp
  `γ_i` in between: `θ'_i = (1-γ_i) θ_i/s + γ_i θ_i` (Peng et al., arXiv:2309.00071,
  `α = 1, β = 32`). The paper's equation ramps linearly in `r`; the released YaRN
  code, and Hugging Face's `yarn` rope that YaRN models load with, ramp linearly in
  the pair index `i` between the rounded pairs where `r_i = β` and `r_i = α`
  (`correction_range`, `ramp`). We compute what the models compute: the
  code's ramp;
- `"yarn"`: NTK-by-parts plus an attention temperature, logits multiplied by
  `1/t` with `√(1/t) = 0.1 ln s + 1` (applied, as the paper does, by scaling both the
  rotated queries and keys by `√(1/t)`).

`extend` returns a copy of a chapter 11 `lecturelib.pretraining.gpt.GPT` whose attention
layers use the scaled rotation for `seq_len` positions.

Shapes: `d` d_head, pairs `i = 0..d/2-1`, `t` positions.
"""

from __future__ import annotations

import copy
import math
from dataclasses import replace

import torch

from lecturelib.efficiency import kvcache
from lecturelib.pretraining import gpt
from lecturelib.transformers import positions
from lecturelib.validate import (
    check_ids,
    check_int,
    check_number,
    check_type,
    describe,
    is_int,
)

METHODS = ("none", "pi", "ntk", "ntk_by_parts", "yarn")
ALPHA, BETA = 1.0, 32.0  # NTK-by-parts / YaRN defaults for LLaMA (Peng et al., 2023)


def check_scale(scale) -> None:
    """`scale` (the new context over the trained one) must be a finite number >= 1."""
    if (
        isinstance(scale, bool)
        or not isinstance(scale, (int, float))
        or not math.isfinite(scale)
        or scale < 1
    ):
        raise ValueError(
            f"scale must be a finite number >= 1 (the new context over the "
            f"trained one); got {scale!r}"
        )


def check_method(method) -> None:
    """`method` must be one of `METHODS`."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}; got {method!r}")


def check_ramp(alpha, beta) -> None:
    """The ramp's ends: `0 < alpha < beta` turns over the trained context."""
    numbers = all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in (alpha, beta)
    )
    if not (numbers and 0 < alpha < beta < math.inf):
        raise ValueError(
            f"the ramp needs 0 < alpha < beta; got alpha={alpha!r}, beta={beta!r}"
        )


def check_frequencies(method, scale, train_len, alpha=ALPHA, beta=BETA) -> None:
    """The arguments of `scaled_frequencies` (`d_head` and `base`: see
    `check_ntk_head`, and `positions.frequencies` checks them too)."""
    check_method(method)
    check_scale(scale)
    check_int(train_len, "train_len", 1)
    check_ramp(alpha, beta)


def check_ntk_head(method, d_head) -> None:
    """NTK's base change `b·s^{d/(d-2)}` needs `d_head >= 4` (at 2 it divides by
    zero)."""
    if method == "ntk" and not (is_int(d_head) and d_head >= 4):
        raise ValueError(
            f"method 'ntk' needs an even d_head >= 4 (its exponent is d/(d-2)); got "
            f"{d_head!r}"
        )


def check_correction_range(d_head, train_len, base, alpha, beta) -> None:
    """The arguments of `correction_range`."""
    check_int(d_head, "d_head", 2)
    if d_head % 2:
        raise ValueError(f"d_head must be even (RoPE rotates pairs); got {d_head}")
    check_int(train_len, "train_len", 1)
    check_number(base, "base", 1.0, low_open=True)
    check_ramp(alpha, beta)


def correction_range(
    d_head: int,
    train_len: int,
    base: float = 10000.0,
    alpha: float = ALPHA,
    beta: float = BETA,
) -> tuple[int, int]:
    """The ramp's `(low, high)`: pairs turning `beta`, `alpha` times in `train_len`."""
    check_correction_range(d_head, train_len, base, alpha, beta)

    def pair(r):  # the (fractional) pair index that turns r times over train_len
        return d_head * math.log(train_len / (2 * math.pi * r)) / (2 * math.log(base))

    return max(math.floor(pair(beta)), 0), min(math.ceil(pair(alpha)), d_head - 1)


def check_ramp_pairs(n_pairs, low, high) -> None:
    """The arguments of `ramp`: `n_pairs >= 1` and pairs `0 <= low <= high`
    (ints, as `correction_range` returns them)."""
    check_int(n_pairs, "n_pairs", 1)
    check_int(low, "low", 0)
    if not is_int(high) or high < low:
        raise ValueError(f"high must be an int >= low = {low}; got {describe(high)}")


def ramp(n_pairs: int, low: int, high: int) -> torch.Tensor:
    """`γ_i`: 1 (keep `θ_i`) to pair `low`, 0 (interpolate) from `high`, linear between.
    Shapes: → (n_pairs,) float64."""
    check_ramp_pairs(n_pairs, low, high)
    i = torch.arange(n_pairs, dtype=torch.float64)
    return 1 - ((i - low) / ((high - low) or 1e-3)).clamp(0, 1)


def scaled_frequencies(
    method: str,
    d_head: int,
    scale: float,
    train_len: int,
    base: float = 10000.0,
    alpha: float = ALPHA,
    beta: float = BETA,
) -> torch.Tensor:
    """Float64 frequencies `θ'_i` of `method` for `scale` × the trained `train_len`."""
    check_frequencies(method, scale, train_len, alpha, beta)
    check_ntk_head(method, d_head)
    theta = positions.frequencies(d_head, base)  # (d/2,)
    if method == "none":
        return theta
    if method == "pi":
        return theta / scale
    if method == "ntk":
        return positions.frequencies(d_head, base * scale ** (d_head / (d_head - 2)))
    low, high = correction_range(d_head, train_len, base, alpha, beta)
    gamma = ramp(d_head // 2, low, high)  # 1: keep θ_i, 0: θ_i / s
    return (1 - gamma) * theta / scale + gamma * theta


def yarn_mscale(scale: float) -> float:
    """YaRN's `√(1/t) = 0.1 ln s + 1`, the factor on queries and keys."""
    check_scale(scale)
    return 0.1 * math.log(scale) + 1.0


def check_extend(model, seq_len, method) -> None:
    """The arguments of `extend`: a RoPE GPT read at `seq_len >=` its trained
    length."""
    check_model(model)
    check_method(method)
    check_int(seq_len, "seq_len", 1)
    check_scale(seq_len / getattr(model, "train_len", model.config.seq_len))


def extend(model: gpt.GPT, seq_len: int, method: str = "none") -> gpt.GPT:
    """A copy of `model` that reads `seq_len` tokens with `method`'s RoPE scaling."""
    check_extend(model, seq_len, method)
    train_len = getattr(model, "train_len", model.config.seq_len)
    scale = seq_len / train_len
    theta = scaled_frequencies(
        method, model.config.d_head, scale, train_len, model.config.rope_base
    )
    angles = torch.arange(seq_len, dtype=torch.float64)[:, None] * theta  # (t, d/2)
    m = yarn_mscale(scale) if method == "yarn" else 1.0
    new = copy.deepcopy(model)
    new.config = replace(model.config, seq_len=seq_len)
    new.train_len, new.method = train_len, method
    device = next(model.parameters()).device
    for block in new.blocks:
        block.attn.cos = (m * angles.cos()).float().to(device)  # (t, d/2)
        block.attn.sin = (m * angles.sin()).float().to(device)
    return new


def check_model(model) -> None:
    """`model` must be a chapter-11 GPT with RoPE."""
    kvcache.check_gpt(model, "RoPE scaling")


def check_loss_by_position(model, ids, seq_len, batch_size) -> None:
    """The arguments of `loss_by_position`: a model, a 1-D token stream of at
    least one window of `seq_len` + 1 and a batch size >= 1."""
    check_type(model, "model", torch.nn.Module, "a torch.nn.Module (a gpt.GPT)")
    check_int(batch_size, "batch_size", 1)
    check_int(seq_len, "seq_len", 1)
    check_ids(ids, "ids", dims=1)
    if (len(ids) - 1) // seq_len < 1:
        raise ValueError(
            f"the stream ({len(ids)} tokens) is shorter than one window "
            f"of seq_len={seq_len} + 1"
        )


@torch.no_grad()
def loss_by_position(
    model: torch.nn.Module, ids: torch.Tensor, seq_len: int, batch_size: int = 16
) -> torch.Tensor:
    """Mean next-token loss at each position `0..seq_len-1` of consecutive windows of
    `seq_len` tokens cut from the stream `ids`. Shapes: `(n,)` → `(seq_len,)`."""
    check_loss_by_position(model, ids, seq_len, batch_size)
    n = (len(ids) - 1) // seq_len
    device = next(model.parameters()).device
    x = ids[: n * seq_len].view(n, seq_len)
    y = ids[1 : n * seq_len + 1].view(n, seq_len)
    total = torch.zeros(seq_len)
    was_training = model.training
    model.eval()
    for i in range(0, n, batch_size):
        logits = model(x[i : i + batch_size].to(device))  # (b, t, v)
        loss = torch.nn.functional.cross_entropy(
            logits.transpose(1, 2), y[i : i + batch_size].to(device), reduction="none"
        )
        total += loss.sum(0).cpu()
    model.train(was_training)
    return total / n
