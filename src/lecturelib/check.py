"""Checks that notebooks and tests use after new tensor code: named shapes and close comparisons;
and the claims the prose makes about measurements (`claim`, `compare`).

>>> import torch
>>> dims = shape(torch.zeros(2, 5, 8), "b t d", b=2)
>>> dims
{'b': 2, 't': 5, 'd': 8}
>>> close(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.0 + 1e-7]))
"""

from __future__ import annotations

import math
import numbers

import numpy as np
import torch

from lecturelib.validate import check_int, is_real

Tensor = torch.Tensor


def _tensor(x, name: str, func: str) -> Tensor:
    if not isinstance(x, torch.Tensor):
        raise TypeError(
            f"{func}(): {name} must be a torch.Tensor; got {type(x).__name__}"
        )
    return x


def shape(x: Tensor, axes: str, **expected: int) -> dict[str, int]:
    """Assert that `x` has the named axes `axes` (letters separated by spaces) and the given
    sizes; return the size of every axis by name.

    An axis name used twice must have the same size both times (`"b t t"` for a square matrix
    per batch). Raises `AssertionError` that names the axis, its expected and its actual size.
    """
    _tensor(x, "x", "shape")
    if not isinstance(axes, str):
        raise TypeError(
            f"shape(): axes must be a str of axis names such as 'b t d'; "
            f"got {type(axes).__name__}"
        )
    for axis, size in expected.items():
        if isinstance(size, numbers.Integral) and not isinstance(size, bool):
            size = int(size)  # a NumPy integer counts as an int
        check_int(size, f"shape(): the size of axis {axis!r}", 0)
    names = axes.split()
    if x.dim() != len(names):
        raise AssertionError(
            f"expected {len(names)} axes ({axes}), got {x.dim()} with shape {tuple(x.shape)}"
        )
    unknown = set(expected) - set(names)
    if unknown:
        raise ValueError(f"sizes given for axes not in {axes!r}: {sorted(unknown)}")
    dims: dict[str, int] = {}
    for name, size in zip(names, x.shape):
        if name in dims and dims[name] != size:
            raise AssertionError(
                f"axis {name!r} appears twice in ({axes}) with sizes {dims[name]} and {size}; "
                f"shape {tuple(x.shape)}"
            )
        dims[name] = size
        if name in expected and expected[name] != size:
            raise AssertionError(
                f"axis {name!r} of ({axes}) should be {expected[name]}, got {size}; "
                f"shape {tuple(x.shape)}"
            )
    return dims


def _widen(*ts: Tensor) -> list[Tensor]:
    """Detached CPU copies in float64, or complex128 when any of them is complex."""
    wide = torch.complex128 if any(t.is_complex() for t in ts) else torch.float64
    return [t.detach().cpu().to(wide) for t in ts]


def max_abs_diff(a: Tensor, b: Tensor) -> float:
    """The largest absolute elementwise difference (0.0 for empty tensors); for complex
    tensors the largest modulus `|a - b|`."""
    _tensor(a, "a", "max_abs_diff")
    _tensor(b, "b", "max_abs_diff")
    if a.shape != b.shape:
        raise ValueError(
            f"max_abs_diff(): a and b must have one shape; got {tuple(a.shape)} "
            f"vs {tuple(b.shape)}"
        )
    if a.numel() == 0:
        return 0.0
    a, b = _widen(a, b)
    return (a - b).abs().max().item()


def _tolerance(value: float, name: str) -> float:
    if not is_real(value):
        raise TypeError(
            f"close(): {name} must be a real number; got {type(value).__name__}"
        )
    if not value >= 0:  # also refuses NaN
        raise ValueError(f"close(): {name} must be a number >= 0; got {value}")
    return float(value)


def _mismatch(a: Tensor, e: Tensor, atol: float, rtol: float) -> Tensor:
    """Where real tensors `a` and `e` differ beyond the tolerance. NaN matches NaN; an
    infinity matches only the same infinity (the tolerance test would pass 5 vs inf)."""
    finite = torch.isfinite(a) & torch.isfinite(e)
    within = finite & ((a - e).abs() <= atol + rtol * e.abs())
    return ~((a == e) | (torch.isnan(a) & torch.isnan(e)) | within)


def close(
    actual: Tensor,
    expected: Tensor,
    *,
    atol: float = 1e-5,
    rtol: float = 1e-5,
    name: str = "tensors",
) -> None:
    """Assert `actual ≈ expected` elementwise (`|a - e| <= atol + rtol·|e|`).

    Complex tensors are compared on their real and their imaginary parts. The error says how
    many elements differ, the largest difference and where it is, so a notebook reader sees at
    once whether it is a rounding issue or a bug.
    """
    _tensor(actual, "actual", "close")
    _tensor(expected, "expected", "close")
    atol, rtol = _tolerance(atol, "atol"), _tolerance(rtol, "rtol")
    if not isinstance(name, str):
        raise TypeError(f"close(): name must be a str; got {type(name).__name__}")
    if actual.shape != expected.shape:
        raise AssertionError(
            f"{name}: shapes differ, {tuple(actual.shape)} vs expected {tuple(expected.shape)}"
        )
    a, e = _widen(actual, expected)
    if a.is_complex():
        bad = _mismatch(a.real, e.real, atol, rtol) | _mismatch(
            a.imag, e.imag, atol, rtol
        )
    else:
        bad = _mismatch(a, e, atol, rtol)
    if bad.any():
        diff = (
            (a - e)
            .abs()
            .nan_to_num(float("inf"), posinf=float("inf"))
            .masked_fill(~bad, -1.0)
        )
        flat = int(diff.argmax())
        where = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), a.shape))
        raise AssertionError(
            f"{name}: {int(bad.sum())} of {a.numel()} elements differ; largest |diff| "
            f"{diff.flatten()[flat].item():.3g} at index {where} "
            f"(actual {a.flatten()[flat].item():.6g}, expected {e.flatten()[flat].item():.6g}; "
            f"atol {atol:g}, rtol {rtol:g})"
        )


def _truth(holds, func: str) -> bool:
    """`holds` as a bool: a bool, a NumPy bool or a one-element bool tensor."""
    if isinstance(holds, torch.Tensor):
        if holds.dtype != torch.bool or holds.numel() != 1:
            raise TypeError(
                f"{func}(): holds must be one truth value; got a {holds.dtype} tensor "
                f"of shape {tuple(holds.shape)}"
            )
        return bool(holds)
    if isinstance(holds, (bool, np.bool_)):
        return bool(holds)
    raise TypeError(
        f"{func}(): holds must be a bool (a comparison); got {type(holds).__name__}"
    )


def _measured(measured: dict) -> str:
    def show(v):
        if isinstance(v, torch.Tensor) and v.numel() == 1:
            v = v.item()
        return f"{v:.4g}" if isinstance(v, float) else repr(v)

    return ", ".join(f"{k}={show(v)}" for k, v in measured.items())


def claim(says: str, holds, **measured) -> None:
    """Assert a sentence that the prose says about a measurement; the values go in the error.

    >>> claim("the GPT's loss is below the LSTM's", 1.52 < 1.60, gpt=1.52, lstm=1.60)

    A build in which the sentence no longer holds stops here, naming the sentence and the
    measured values, as it stops on a typed number that disagrees with its glued value.
    """
    if not isinstance(says, str) or not says.strip():
        raise TypeError(
            f"claim(): says must be the sentence, a non-empty str; got {says!r}"
        )
    if not _truth(holds, "claim"):
        values = f" (measured: {_measured(measured)})" if measured else ""
        raise AssertionError(
            f"the text says {says!r}, the measurement does not{values}"
        )


def compare(
    a, b, *, lower: str, higher: str, same: str | None = None, within=0.0
) -> str:
    """The word for how `a` compares with `b`, for the prose to glue instead of typing it.

    `lower` when `a < b - within`, `higher` when `a > b + within`, else `same`
    (`within` is the difference the measurement cannot resolve, e.g. two standard errors).

    >>> compare(5.40, 4.80, lower="below", higher="above")
    'above'
    >>> compare(2.09, 2.11, lower="below", higher="above", same="level with", within=0.05)
    'level with'

    Without `same`, a difference inside `within` raises: the prose has no word for a tie.
    """
    for name, word in (("lower", lower), ("higher", higher)):
        if not isinstance(word, str) or not word:
            raise TypeError(f"compare(): {name} must be a non-empty str; got {word!r}")
    if same is not None and not isinstance(same, str):
        raise TypeError(f"compare(): same must be a str or None; got {same!r}")
    a, b, within = (
        float(v.item()) if isinstance(v, torch.Tensor) and v.numel() == 1 else v
        for v in (a, b, within)
    )
    for name, v in (("a", a), ("b", b), ("within", within)):
        if not is_real(v):
            raise TypeError(f"compare(): {name} must be a real number; got {v!r}")
        if math.isnan(v):
            raise ValueError(
                f"compare(): {name} is NaN: a failed measurement has no order"
            )
    if within < 0:
        raise ValueError(f"compare(): within must be >= 0; got {within}")
    if a < b - within:
        return lower
    if a > b + within:
        return higher
    if same is None:
        raise AssertionError(
            f"compare(): {a:.4g} and {b:.4g} differ by no more than within={within:.4g}, "
            f"and the text has no word for the same (pass same=...)"
        )
    return same
