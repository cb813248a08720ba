"""Checks that notebooks and tests use after new tensor code: named shapes and close comparisons.

>>> import torch
>>> dims = shape(torch.zeros(2, 5, 8), "b t d", b=2)
>>> dims
{'b': 2, 't': 5, 'd': 8}
>>> close(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.0 + 1e-7]))
"""

from __future__ import annotations

import torch

Tensor = torch.Tensor


def shape(x: Tensor, axes: str, **expected: int) -> dict[str, int]:
    """Assert that ``x`` has the named axes ``axes`` (letters separated by spaces) and the given
    sizes; return the size of every axis by name.

    An axis name used twice must have the same size both times (``"b t t"`` for a square matrix
    per batch). Raises ``AssertionError`` that names the axis, its expected and its actual size.
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"shape() checks a torch.Tensor; got {type(x).__name__}")
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


def max_abs_diff(a: Tensor, b: Tensor) -> float:
    """The largest absolute elementwise difference (0.0 for empty tensors)."""
    if a.shape != b.shape:
        raise ValueError(f"shapes differ: {tuple(a.shape)} vs {tuple(b.shape)}")
    if a.numel() == 0:
        return 0.0
    return (a.detach().double() - b.detach().double()).abs().max().item()


def close(actual: Tensor, expected: Tensor, *, atol: float = 1e-5, rtol: float = 1e-5,
          name: str = "tensors") -> None:
    """Assert ``actual ≈ expected`` elementwise (``|a - e| <= atol + rtol·|e|``).

    The error says how many elements differ, the largest difference and where it is, so a
    notebook reader sees at once whether it is a rounding issue or a bug.
    """
    for label, t in (("actual", actual), ("expected", expected)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"close() compares torch.Tensors; {label} is {type(t).__name__}")
    if actual.shape != expected.shape:
        raise AssertionError(
            f"{name}: shapes differ, {tuple(actual.shape)} vs expected {tuple(expected.shape)}"
        )
    a, e = actual.detach().double().cpu(), expected.detach().double().cpu()
    if torch.equal(torch.isnan(a), torch.isnan(e)):
        a = a.nan_to_num(0.0, posinf=float("inf"), neginf=float("-inf"))  # keep infinities
        e = e.nan_to_num(0.0, posinf=float("inf"), neginf=float("-inf"))
    # an infinity matches only the same infinity (the tolerance test would pass 5 vs inf)
    finite = torch.isfinite(a) & torch.isfinite(e)
    bad = ~((a == e) | (finite & ((a - e).abs() <= atol + rtol * e.abs())))
    if bad.any():
        diff = (a - e).abs().nan_to_num(float("inf"), posinf=float("inf")).masked_fill(~bad, -1.0)
        flat = int(diff.argmax())
        where = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), a.shape))
        raise AssertionError(
            f"{name}: {int(bad.sum())} of {a.numel()} elements differ; largest |diff| "
            f"{diff.flatten()[flat].item():.3g} at index {where} "
            f"(actual {a.flatten()[flat].item():.6g}, expected {e.flatten()[flat].item():.6g}; "
            f"atol {atol:g}, rtol {rtol:g})"
        )
