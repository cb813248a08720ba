"""lecturelib.efficiency.flash_triton: the Triton kernel, interpreted on the CPU, equals SDPA.

The kernel is defined on the first call of ``flash_triton.triton_kernel``, in one mode per
process, so these tests run it in a fresh interpreter (another test may have defined it
compiled). The module itself imports without Triton."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from lecturelib.efficiency import flash_triton

needs_triton = pytest.mark.skipif(
    importlib.util.find_spec("triton") is None,
    reason="Triton is not installed (pip install 'lecturelib[triton]')",
)

SCRIPT = r"""
import torch, torch.nn.functional as F
from lecturelib.efficiency import flash, flash_triton
kernel, message = flash_triton.triton_kernel(interpret=True)
assert kernel is not None and "interpreted" in message, message
torch.manual_seed(0)
for b, h, t, s, d, causal, bm, bn in [(1, 2, 32, 32, 16, False, 16, 16),
                                      (2, 1, 32, 32, 32, True, 16, 8),
                                      (1, 1, 16, 48, 16, False, 16, 16),
                                      (1, 1, 16, 32, 16, True, 8, 16)]:
    q = torch.randn(b, h, t, d)
    k, v = torch.randn(b, h, s, d), torch.randn(b, h, s, d)
    out = kernel(q, k, v, causal, block_q=bm, block_k=bn)
    expected = (F.scaled_dot_product_attention(q, k, v, is_causal=causal) if s == t
                else flash.naive_attention(q, k, v, causal))
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-4)
for call, error in [(lambda: kernel(torch.zeros(1, 1, 16, 12),
                                    torch.zeros(1, 1, 16, 12),
                                    torch.zeros(1, 1, 16, 12)),
                     "d must be a power of two >= 16; got 12"),
                    (lambda: kernel(torch.zeros(1, 1, 24, 16),
                                    torch.zeros(1, 1, 24, 16),
                                    torch.zeros(1, 1, 24, 16)),
                     "block_q must be a positive int that divides t = 24; got 64"),
                    (lambda: kernel(torch.zeros(1, 16, 16),
                                    torch.zeros(1, 16, 16),
                                    torch.zeros(1, 16, 16)),
                     "q, k, v must be (b, h, t, d)"),
                    (lambda: flash_triton.tflops(64, 16, 1, 1, False, 0.0),
                     "seconds must be a finite number in (0, inf); got float 0.0"),
                    (lambda: flash_triton.tflops(64, 16, 1, 1, False, float("inf")),
                     "seconds must be a finite number in (0, inf); got float inf"),
                    (lambda: flash_triton.tflops(0, 16, 1, 1, False, 1.0),
                     "t must be an int >= 1; got int 0")]:
    try:
        call()
    except ValueError as e:
        assert str(e).startswith(error), e
    else:
        raise AssertionError(error)
# the reference's semantics: NaN in, NaN out; no key gives 0; no query an empty output
q, k, v = torch.randn(1, 1, 16, 16), torch.randn(1, 1, 32, 16), torch.randn(1, 1, 32, 16)
k[..., 5, :] = float("nan")
assert kernel(q, k, v, block_q=16, block_k=16).isnan().all()
assert flash.naive_attention(q, k, v).isnan().all()
k[:] = float("nan")
assert kernel(q, k, v, block_q=16, block_k=16).isnan().all()
assert flash.naive_attention(q, k, v).isnan().all()
for t, s in ((0, 32), (16, 0)):
    args = torch.randn(1, 1, t, 16), torch.randn(1, 1, s, 16), torch.randn(1, 1, s, 16)
    torch.testing.assert_close(kernel(*args, block_q=16, block_k=16),
                               flash.naive_attention(*args), atol=0, rtol=0)
out = kernel(q.half(), q.half(), q.half(), block_q=16, block_k=16)
torch.testing.assert_close(out.float(), flash.naive_attention(q, q, q), atol=2e-3, rtol=1e-2)
for dtype, name in ((torch.bfloat16, "torch.bfloat16 (Triton's interpreter"),
                    (torch.float64, "torch.float64")):
    try:
        kernel(q.to(dtype), q.to(dtype), q.to(dtype), block_q=16, block_k=16)
    except TypeError as e:
        assert "takes q, k, v in torch.float32, torch.float16; got " + name in str(e), e
    else:
        raise AssertionError(f"{dtype} accepted")
other, message = flash_triton.triton_kernel(interpret=False)
assert other is None and "restart" in message, message
print("ok")
"""


@needs_triton
def test_interpreted_kernel_equals_sdpa():
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]


def test_the_loader_refuses_a_bad_mode():
    with pytest.raises(TypeError, match=r"interpret must be a bool or None; got 'yes'"):
        flash_triton.triton_kernel(interpret="yes")
