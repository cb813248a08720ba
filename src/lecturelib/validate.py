"""The argument checks of the whole package: one vocabulary, one exception type per kind of
mistake, each message naming the argument, what was expected and what was given.

- an object of the wrong kind (not a tensor, a float tensor where token ids belong, not a
  model of the expected class, not callable): `TypeError`;
- a value out of its range, a size that is not an int >= 1 (`check_int`: an int is a value
  with a range), a tensor of the wrong shape, an option that is not one of the choices:
  `ValueError`.

A taught function keeps its body the algorithm and calls one `check_*` function for its
arguments, defined beside it in its own module and built from these helpers, so that the
chapters copy the idea and the library still refuses bad input clearly.

>>> check_int(0, "d_model", 1)
Traceback (most recent call last):
...
ValueError: d_model must be an int >= 1; got int 0
"""

from __future__ import annotations

import math
import numbers

import torch


def describe(value) -> str:
    """A short description of a value for error messages: dtype and shape of a tensor."""
    if isinstance(value, torch.Tensor):
        return f"{value.dtype} tensor of shape {tuple(value.shape)}"
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 40 else text[:37] + '...'}"


def is_int(value) -> bool:
    """Whether `value` is an int and not a bool (`True` is an int to Python, never a size
    or a count here): the test of `check_int`, for a check whose message says more."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_real(value) -> bool:
    """Whether `value` is a real number (int, float, NumPy scalar) and not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def check_int(value, name: str, low: int, high: int | None = None) -> None:
    """`value` must be an int (not a bool) in `low..high`."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or value < low
        or (high is not None and value > high)
    ):
        bound = f">= {low}" if high is None else f"in {low}..{high}"
        raise ValueError(f"{name} must be an int {bound}; got {describe(value)}")


def check_number(
    value, name: str, low: float, high: float | None = None, low_open: bool = False
) -> None:
    """`value` must be a finite real number (not a bool) in `[low, high]` (`(low, ...`
    with `low_open`)."""
    ok = (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
    )
    ok = (
        ok
        and (value > low if low_open else value >= low)
        and (high is None or value <= high)
    )
    if not ok:
        bound = f"{'(' if low_open else '['}{low:g}, {'inf)' if high is None else f'{high:g}]'}"
        raise ValueError(
            f"{name} must be a finite number in {bound}; got {describe(value)}"
        )


def check_callable(value, name: str) -> None:
    if not callable(value):
        raise TypeError(f"{name} must be callable; got {describe(value)}")


def check_ids(
    ids,
    name: str,
    dims: int | None = None,
    vocab_size: int | None = None,
    min_len: int = 1,
) -> None:
    """`ids` must be an integer tensor of token ids with `dims` axes, at least `min_len`
    elements, and every id in `0..vocab_size - 1`."""
    if (
        not isinstance(ids, torch.Tensor)
        or ids.is_floating_point()
        or ids.is_complex()
        or ids.dtype == torch.bool
    ):
        raise TypeError(
            f"{name} must be an integer (long) tensor of token ids; got {describe(ids)}"
        )
    if dims is not None and ids.dim() != dims:
        axes = {1: "1-D (t,)", 2: "2-D (b, t)"}.get(dims, f"{dims}-D")
        raise ValueError(
            f"{name} must be {axes} token ids; got shape {tuple(ids.shape)}"
        )
    if ids.numel() < min_len:
        raise ValueError(
            f"{name} must hold at least {min_len} token id(s); got shape "
            f"{tuple(ids.shape)}"
        )
    if not ids.numel():
        return
    bound = ">= 0" if vocab_size is None else f"in 0..{vocab_size - 1}"
    if ids.device.type != "cpu":  # checked where the ids are, without waiting for them
        ok = ids.min() >= 0
        if vocab_size is not None:
            ok = ok & (ids.max() < vocab_size)
        check_on_device(ok, f"{name} must hold token ids {bound}")
        return
    if ids.min() < 0 or (vocab_size is not None and ids.max() >= vocab_size):
        raise ValueError(
            f"{name} must hold token ids {bound}; got ids from {ids.min().item()} "
            f"to {ids.max().item()}"
        )


def check_on_device(ok: torch.Tensor, message: str, detail=None) -> None:
    """Refuse, with `message`, data whose check `ok` (a bool tensor of one element,
    computed where the data is) is false. On the CPU it raises ValueError at once, with
    `detail()` appended when given (what was found: it may read the data); on an
    accelerator the check is queued with the kernels (no read-back, so the host does not
    wait) and fails as a device-side assertion carrying `message`."""
    if ok.device.type == "cpu":
        if not bool(ok):
            raise ValueError(message + (detail() if detail is not None else ""))
    elif ok.device.type != "meta":  # a meta tensor has no values to check
        torch._assert_async(ok, message)


def check_sizes(**sizes) -> None:
    """Every keyword must be an int >= 1: `check_sizes(d_in=d_in, d_model=d_model)`."""
    for name, value in sizes.items():
        check_int(value, name, 1)


def check_tensor(value, name: str, shape: str, dims: int | None = None) -> None:
    """`value` must be a float tensor with `dims` axes; `shape` names them, e.g. "(b, d)"."""
    if not isinstance(value, torch.Tensor) or not value.is_floating_point():
        raise TypeError(f"{name} must be a float tensor {shape}; got {describe(value)}")
    if dims is not None and value.dim() != dims:
        raise ValueError(f"{name} must be {shape}; got shape {tuple(value.shape)}")


def check_bool(value, name: str) -> None:
    """`value` must be `True` or `False` (not 0, 1 or None)."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool; got {describe(value)}")


def check_choice(value, name: str, choices) -> None:
    """`value` must be one of `choices` (a tuple, list or dict of the allowed values)."""
    options = tuple(choices)
    if isinstance(value, bool) or not any(
        value == c and type(value) is type(c) for c in options
    ):
        raise ValueError(f"{name} must be one of {options}; got {describe(value)}")


def check_strings(value, name: str) -> None:
    """`value` must be a non-empty list (or tuple) of str."""
    if not (
        isinstance(value, (list, tuple))
        and value
        and all(isinstance(v, str) for v in value)
    ):
        raise TypeError(
            f"{name} must be a non-empty list of str; got {describe(value)}"
        )


def check_type(value, name: str, types, what: str | None = None) -> None:
    """`value` must be an instance of `types`; `what` describes them in the message
    (default: the class names)."""
    if not isinstance(value, types):
        classes = types if isinstance(types, tuple) else (types,)
        what = what or " or ".join(c.__name__ for c in classes)
        raise TypeError(f"{name} must be {what}; got {describe(value)}")


def is_int_tensor(x) -> bool:
    """An integer tensor (not float, complex or bool)."""
    return isinstance(x, torch.Tensor) and not (
        x.is_floating_point() or x.is_complex() or x.dtype == torch.bool
    )
