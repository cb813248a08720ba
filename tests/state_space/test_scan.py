"""lecturelib.state_space.scan: the parallel and chunked scans (and the Triton kernel, interpreted)
equal the plain loop, outputs and gradients."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from lecturelib.state_space import scan


def _pad_takes_empty_axes() -> bool:
    """torch 2.9's F.pad refuses a tensor with an empty axis, even one it does not pad."""
    try:
        F.pad(torch.zeros(2, 0), (0, 0, 0, 1))
    except RuntimeError:
        return False
    return True


PAD_TAKES_EMPTY_AXES = _pad_takes_empty_axes()


def inputs(b, t, d, n, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    u = torch.randn(b, t, d, generator=g, dtype=dtype)
    delta = F.softplus(torch.randn(b, t, d, generator=g, dtype=dtype))
    A = -torch.rand(d, n, generator=g, dtype=dtype) * 4 - 0.1
    B, C = (torch.randn(b, t, n, generator=g, dtype=dtype) for _ in range(2))
    D = torch.randn(d, generator=g, dtype=dtype)
    z = torch.randn(b, t, d, generator=g, dtype=dtype)
    return [u, delta, A, B, C, D, z]


@settings(max_examples=25, deadline=None)
@given(b=st.integers(1, 3), t=st.integers(1, 70), d=st.integers(1, 5), n=st.integers(1, 6),
       chunk=st.integers(1, 16), seed=st.integers(0, 10**6))
def test_the_three_scans_equal_the_loop_outputs_and_gradients(b, t, d, n, chunk, seed):
    args = [a.requires_grad_() for a in inputs(b, t, d, n, seed)]
    h0 = torch.randn(b, d, n, dtype=torch.float64, requires_grad=True)
    ref, last = scan.selective_scan_ref(*args, h0=h0, return_state=True)
    w = torch.randn_like(ref)
    ref_grads = torch.autograd.grad((ref * w).sum() + last.sum(), args + [h0])
    for method in scan.METHODS:
        y, h = scan.selective_scan(*args, h0=h0, method=method, return_state=True)
        torch.testing.assert_close(y, ref)
        torch.testing.assert_close(h, last)
        grads = torch.autograd.grad((y * w).sum() + h.sum(), args + [h0])
        for g, e in zip(grads, ref_grads):
            torch.testing.assert_close(g, e)
    a = torch.rand(b, t, d, n, dtype=torch.float64)
    x = torch.randn(b, t, d, n, dtype=torch.float64)
    torch.testing.assert_close(scan.linear_scan_chunked(a, x, chunk=chunk),
                               scan.linear_scan_loop(a, x))


def test_shapes_and_a_known_answer():
    u, delta, A, B, C, _, _ = inputs(2, 7, 3, 4)
    y, h = scan.selective_scan_ref(u, delta, A, B, C, return_state=True)
    assert y.shape == (2, 7, 3) and h.shape == (2, 3, 4)
    # one step from zero: y = C · (Δ B u)
    y1 = scan.selective_scan_ref(u[:, :1], delta[:, :1], A, B[:, :1], C[:, :1])
    expected = delta[:, 0] * u[:, 0] * (B[:, 0] * C[:, 0]).sum(-1, keepdim=True)
    torch.testing.assert_close(y1[:, 0], expected)


def test_a_constant_decay_is_a_geometric_sum():
    a = torch.full((1, 10, 1, 1), 0.5, dtype=torch.float64)
    x = torch.ones(1, 10, 1, 1, dtype=torch.float64)
    expected = torch.tensor([2 - 0.5**k for k in range(10)], dtype=torch.float64)
    for fn in scan.SCANS.values():
        torch.testing.assert_close(fn(a, x).flatten(), expected)


def test_float32_at_the_benchmark_length():
    args = inputs(1, 300, 4, 16, dtype=torch.float32)
    ref = scan.selective_scan_ref(*args)
    for method in ("parallel", "chunked"):
        torch.testing.assert_close(scan.selective_scan(*args, method=method), ref,
                                   atol=1e-4, rtol=1e-4)


SCRIPT = r"""
import torch
from lecturelib.state_space import scan
f, message = scan.triton_scan(interpret=True)
assert f is not None, message
g = torch.Generator().manual_seed(0)
for b, t, d, n, block in [(1, 9, 5, 4, 4), (2, 16, 20, 8, 8), (1, 3, 16, 2, 16)]:
    u, B = torch.randn(b, t, d, generator=g), torch.randn(b, t, n, generator=g)
    C = torch.randn(b, t, n, generator=g)
    delta = torch.rand(b, t, d, generator=g) + 0.05
    A = -torch.rand(d, n, generator=g) * 3
    D = torch.randn(d, generator=g)
    torch.testing.assert_close(f(u, delta, A, B, C, D, block_d=block),
                               scan.selective_scan_ref(u, delta, A, B, C, D),
                               atol=1e-5, rtol=1e-4)
try:
    f(u, delta, -torch.rand(d, 3), torch.randn(b, t, 3), torch.randn(b, t, 3))
except ValueError as error:
    assert "d_state a power of two >= 2; got 3" in str(error), error
else:
    raise AssertionError("n = 3 accepted")
for dtype in (torch.float16, torch.bfloat16):  # the documented dtypes, computed in fp32
    args = [x.to(dtype) for x in (u, delta, A, B, C, D)]
    out = f(*args, block_d=16)
    assert out.dtype == dtype, out.dtype
    torch.testing.assert_close(out, scan.selective_scan_ref(*args), atol=2e-2, rtol=2e-2)
try:
    f(*[x.double() for x in (u, delta, A, B, C, D)])
except TypeError as error:
    assert "float32, float16 or bfloat16 tensors; u is torch.float64" in str(error), error
else:
    raise AssertionError("float64 accepted")
assert f(u[:, :0], delta[:, :0], A, B[:, :0], C[:, :0], D).shape == (b, 0, d)
nan_u = u.clone()
nan_u[:, 1] = float("nan")
assert f(nan_u, delta, A, B, C, D, block_d=16)[:, 1:].isnan().all()
other, message = scan.triton_scan(interpret=False)
assert other is None and "restart" in message, message
print("ok")
"""


@pytest.mark.skipif(importlib.util.find_spec("triton") is None,
                    reason="Triton is not installed (pip install 'lecturelib[triton]')")
def test_the_triton_kernel_interpreted_equals_the_loop():
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().endswith("ok")


@pytest.mark.parametrize("shape", [(2, 0, 3, 4), (0, 5, 3, 4), (2, 5, 0, 4), (2, 5, 3, 0)])
def test_every_scan_takes_empty_axes(shape):
    a, x = torch.rand(shape), torch.randn(shape)
    for name, fn in scan.SCANS.items():
        if name == "chunked" and 0 in shape[2:] and not PAD_TAKES_EMPTY_AXES:
            # the chunked scan pads its time axis to whole chunks: under torch 2.9 no
            # channel or no state gives F.pad's error, not a wrong answer
            with pytest.raises(RuntimeError, match="negative output size"):
                fn(a, x)
            continue
        assert fn(a, x).shape == shape
    if shape[1] == 0:  # no step: the initial state is the last one
        h0 = torch.randn(shape[0], *shape[2:])
        assert scan.linear_scan_chunked(a, x, h0, chunk=4).shape == shape


@pytest.mark.parametrize("method", scan.METHODS)
def test_an_empty_sequence_returns_the_initial_state(method):
    u, B, A = torch.randn(2, 0, 3), torch.randn(2, 0, 4), -torch.rand(3, 4)
    y, h = scan.selective_scan(u, u.abs() + 0.1, A, B, B, method=method, return_state=True)
    assert y.shape == (2, 0, 3) and h.shape == (2, 3, 4) and h.eq(0).all()
    h0 = torch.randn(2, 3, 4)
    _, h = scan.selective_scan(u, u.abs() + 0.1, A, B, B, h0=h0, method=method,
                               return_state=True)
    assert torch.equal(h, h0)


def ssd_loop(x, a, B, C):
    """h_t = a_t h_{t-1} + x_t B_tᵀ per channel, y_t = h_t C_t: the plain recurrence."""
    h = x.new_zeros(x.shape[0], x.shape[2], B.shape[2])  # (b, d, n)
    ys = []
    for t in range(x.shape[1]):
        h = a[:, t, None, None] * h + x[:, t, :, None] * B[:, t, None, :]
        ys.append((h * C[:, t, None, :]).sum(-1))  # (b, d)
    return torch.stack(ys, dim=1)


@settings(max_examples=25, deadline=None)
@given(b=st.integers(1, 3), t=st.integers(1, 40), d=st.integers(1, 5), n=st.integers(1, 6),
       seed=st.integers(0, 10**6))
def test_ssd_equals_the_recurrence_and_the_selective_scan(b, t, d, n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(b, t, d, generator=g, dtype=torch.float64)
    a = 0.05 + 0.9 * torch.rand(b, t, generator=g, dtype=torch.float64)
    B, C = (torch.randn(b, t, n, generator=g, dtype=torch.float64) for _ in range(2))
    y = scan.ssd(x, a, B, C)
    torch.testing.assert_close(y, ssd_loop(x, a, B, C))
    # selective scan with A = -1 in every (d, n), Δ_t = -log a_t shared by the channels
    delta = -torch.log(a)[..., None].expand(b, t, d)
    A = -torch.ones(d, n, dtype=torch.float64)
    torch.testing.assert_close(y, scan.selective_scan_ref(x / delta, delta, A, B, C))


def test_ssd_matrix_is_lower_triangular_and_causal_attention_at_a_1():
    g = torch.Generator().manual_seed(0)
    B, C = (torch.randn(2, 9, 4, generator=g, dtype=torch.float64) for _ in range(2))
    x = torch.randn(2, 9, 3, generator=g, dtype=torch.float64)
    ones = torch.ones(2, 9, dtype=torch.float64)
    M = scan.ssd_matrix(ones, B, C)
    torch.testing.assert_close(M, torch.tril(C @ B.transpose(1, 2)))  # linear attention
    torch.testing.assert_close(scan.ssd(x, ones, B, C), ssd_loop(x, ones, B, C))
    a = torch.full((2, 9), 0.5, dtype=torch.float64)
    M = scan.ssd_matrix(a, B, C)
    assert torch.equal(M, torch.tril(M))
    # M[i, j] = (C_i · B_j) 0.5^(i - j)
    torch.testing.assert_close(M[:, 6, 2], (C[:, 6] * B[:, 2]).sum(-1) * 0.5**4)
    assert scan.ssd(x[:, :0], a[:, :0], B[:, :0], C[:, :0]).shape == (2, 0, 3)
