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
                     "seconds must be > 0; got 0.0")]:
    try:
        call()
    except ValueError as e:
        assert str(e).startswith(error), e
    else:
        raise AssertionError(error)
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
