"""lecturelib.efficiency.flash_triton: the Triton kernel, interpreted on the CPU, equals SDPA.

The kernel module reads TRITON_INTERPRET when it is imported, so these tests run it in a
fresh interpreter (another test may have imported it compiled)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("triton") is None,
    reason="Triton is not installed (pip install 'lecturelib[triton]')",
)

SCRIPT = r"""
import torch, torch.nn.functional as F
from lecturelib.efficiency import flash
ft, message = flash.triton_kernel(interpret=True)
assert ft is not None and ft.INTERPRETED, message
torch.manual_seed(0)
for b, h, t, s, d, causal, bm, bn in [(1, 2, 32, 32, 16, False, 16, 16),
                                      (2, 1, 32, 32, 32, True, 16, 8),
                                      (1, 1, 16, 48, 16, False, 16, 16),
                                      (1, 1, 16, 32, 16, True, 8, 16)]:
    q = torch.randn(b, h, t, d)
    k, v = torch.randn(b, h, s, d), torch.randn(b, h, s, d)
    out = ft.flash_attention(q, k, v, causal, block_q=bm, block_k=bn)
    expected = (F.scaled_dot_product_attention(q, k, v, is_causal=causal) if s == t
                else flash.naive_attention(q, k, v, causal))
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-4)
for call, error in [(lambda: ft.flash_attention(torch.zeros(1, 1, 16, 12),
                                                torch.zeros(1, 1, 16, 12),
                                                torch.zeros(1, 1, 16, 12)),
                     "d must be a power of two >= 16; got 12"),
                    (lambda: ft.flash_attention(torch.zeros(1, 1, 24, 16),
                                                torch.zeros(1, 1, 24, 16),
                                                torch.zeros(1, 1, 24, 16)),
                     "block_q must be a positive int that divides t = 24; got 64"),
                    (lambda: ft.flash_attention(torch.zeros(1, 16, 16),
                                                torch.zeros(1, 16, 16),
                                                torch.zeros(1, 16, 16)),
                     "q, k, v must be (b, h, t, d)"),
                    (lambda: ft.tflops(64, 16, 1, 1, False, 0.0),
                     "seconds must be > 0; got 0.0")]:
    try:
        call()
    except ValueError as e:
        assert str(e).startswith(error), e
    else:
        raise AssertionError(error)
print("ok")
"""


def test_interpreted_kernel_equals_sdpa():
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]
