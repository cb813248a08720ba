"""Bad input to lecturelib.efficiency.flash: the error and its message."""

from __future__ import annotations

import pytest
import torch

from lecturelib.efficiency import flash

Q = torch.zeros(1, 2, 8, 4)
K = torch.zeros(1, 2, 6, 4)
V = torch.zeros(1, 2, 6, 3)
FORWARD = flash.tiled_forward(Q, K, V, block_q=4, block_k=2)  # out, lse

CASES = [
    (
        lambda: flash.safe_softmax([1.0, 2.0]),
        TypeError,
        r"x must be a float tensor \(\.\.\., n\); got list",
    ),
    (
        lambda: flash.online_softmax(torch.arange(4)),
        TypeError,
        r"x must be a float tensor \(\.\.\., n\); got torch.int64 tensor of shape \(4,\)",
    ),
    (
        lambda: flash.online_softmax(torch.zeros(6), 4),
        ValueError,
        r"block must be a positive int that divides n = 6; got 4",
    ),
    (
        lambda: flash.online_softmax(torch.zeros(6), 0),
        ValueError,
        r"block must be a positive int that divides n = 6; got 0",
    ),
    (
        lambda: flash.naive_attention(Q, K, V.double()),
        TypeError,
        r"q, k, v must share one dtype; got torch.float32, torch.float32, torch.float64",
    ),
    (
        lambda: flash.naive_attention(Q, K[..., :3], V),
        ValueError,
        r"q, k, v must be \(\.\.\., t, d\), \(\.\.\., s, d\), \(\.\.\., s, d_v\) with the same "
        r"leading axes; got \(1, 2, 8, 4\), \(1, 2, 6, 3\), \(1, 2, 6, 3\)",
    ),
    (
        lambda: flash.naive_attention(Q, K, V[:, :1]),
        ValueError,
        r"q, k, v must be .*got \(1, 2, 8, 4\), \(1, 2, 6, 4\), \(1, 1, 6, 3\)",
    ),
    (
        lambda: flash.naive_attention(Q.long(), K, V),
        TypeError,
        r"q must be a float tensor \(\.\.\., t, d\); got torch.int64 tensor",
    ),
    (
        lambda: flash.naive_attention(Q, K, V, mask=torch.ones(8, 6)),
        TypeError,
        r"mask must be a bool tensor \(\.\.\., t, s\); got torch.float32 tensor of shape \(8, 6\)",
    ),
    (
        lambda: flash.naive_attention(Q, K, V, mask=torch.ones(6, 8, dtype=torch.bool)),
        ValueError,
        r"mask must end in \(t, s\) = \(8, 6\); got \(6, 8\)",
    ),
    (
        lambda: flash.naive_attention(Q, K, V, scale=0.0),
        ValueError,
        r"scale must be a positive finite number or None; got 0.0",
    ),
    (
        lambda: flash.tiled_forward(Q, K, V, block_q=3, block_k=2),
        ValueError,
        r"block_q must be a positive int that divides t = 8; got 3",
    ),
    (
        lambda: flash.tiled_forward(Q, K, V, block_q=4, block_k=4),
        ValueError,
        r"block_k must be a positive int that divides s = 6; got 4",
    ),
    (
        lambda: flash.tiled_attention(Q, K, V, block_q=True),
        ValueError,
        r"block_q must be a positive int that divides t = 8; got True",
    ),
    (
        lambda: flash.tiled_attention(Q, K, V, scale=-1.0, block_q=4, block_k=2),
        ValueError,
        r"scale must be a positive finite number or None; got -1.0",
    ),
    (
        lambda: flash.attention_flops(0, 4),
        ValueError,
        r"t must be an int >= 1; got int 0",
    ),
    (
        lambda: flash.io_bytes(64, 16, 1024, 0),
        ValueError,
        r"bytes_per_float must be an int >= 1; got int 0",
    ),
    (
        lambda: flash.io_bytes(64, 16, 1024, 2.5),
        ValueError,
        r"bytes_per_float must be an int >= 1; got float 2.5",
    ),
    (
        lambda: flash.io_bytes(64, 16, float("inf")),
        ValueError,
        r"sram_floats must be an int >= 1; got float inf",
    ),
    (
        lambda: flash.attention_flops(64, True),
        ValueError,
        r"d must be an int >= 1; got bool True",
    ),
    (
        lambda: flash.attention_flops(-1, 4),
        ValueError,
        r"t must be an int >= 1; got int -1",
    ),
    (
        lambda: flash.io_bytes(64, 16, 32),
        ValueError,
        r"sram_floats must hold at least one row of q, k, v and o \(4·d = 64\); got 32",
    ),
    (
        lambda: flash.attention_flops_total(64, 16, block=0),
        ValueError,
        r"block must be an int >= 1; got int 0",
    ),
    (
        lambda: flash.attention_flops_total(64, 16.0),
        ValueError,
        r"d must be an int >= 1; got float 16.0",
    ),
    (
        lambda: flash.attention_flops_total(64, 16, 8, backward=1),
        TypeError,
        r"backward must be a bool; got int 1",
    ),
    (
        lambda: flash.safe_softmax(torch.zeros(3, 0)),
        ValueError,
        r"x must be \(\.\.\., n\) with n >= 1 \(a softmax over no entry is no "
        r"distribution\); got shape \(3, 0\)",
    ),
    (
        lambda: flash.online_softmax(torch.zeros(3, 0)),
        ValueError,
        r"x must be \(\.\.\., n\) with n >= 1",
    ),
    (
        lambda: flash.visible(2.5, 4, True, None, "cpu"),
        ValueError,
        r"t must be an int >= 0; got float 2.5",
    ),
    (
        lambda: flash.visible(2, -4, True, None, "cpu"),
        ValueError,
        r"s must be an int >= 0; got int -4",
    ),
    (
        lambda: flash.visible(2, 4, "no", None, "cpu"),
        TypeError,
        r"causal must be a bool; got str 'no'",
    ),
    (
        lambda: flash.visible(2, 4, True, torch.ones(1, 4, dtype=torch.bool), "cpu"),
        ValueError,
        r"mask must end in \(t, s\) = \(2, 4\); got \(1, 4\)",
    ),
    (
        lambda: flash.visible(2, 4, False, torch.ones(2, 4), "cpu"),
        TypeError,
        r"mask must be a bool tensor \(\.\.\., t, s\); got torch.float32",
    ),
    (
        lambda: flash.visible(2, 4, True, None, "gpu0"),
        ValueError,
        r"device must name a device; got 'gpu0'",
    ),
    (
        lambda: flash.visible(2, 4, True, None, 0.5),
        TypeError,
        r"device must be a torch.device or str; got float 0.5",
    ),
    # tile_mask, tiled_backward, TiledAttention
    (
        lambda: flash.tile_mask(0, 0, 4, 4, 2, 2, True, None, "cpu"),
        ValueError,
        r"bq must be a positive int that divides t = 2; got 4",
    ),
    (
        lambda: flash.tile_mask(8, 0, 4, 4, 8, 8, True, None, "cpu"),
        ValueError,
        r"i must be an int multiple of 4 in 0..7 \(where a tile starts\); got int 8",
    ),
    (
        lambda: flash.tile_mask(0, -4, 4, 4, 8, 8, True, None, "cpu"),
        ValueError,
        r"j must be an int multiple of 4 in 0..7 \(where a tile starts\); got int -4",
    ),
    (
        lambda: flash.tile_mask(0, 2, 4, 4, 8, 8, True, None, "cpu"),
        ValueError,
        r"j must be an int multiple of 4 in 0..7 \(where a tile starts\); got int 2",
    ),
    (
        lambda: flash.tile_mask(0, 4, 4, 4, 8, 8, "no", None, "cpu"),
        TypeError,
        r"causal must be a bool; got str 'no'",
    ),
    (
        lambda: flash.tile_mask(0, 0, 4, 4, 8, 8, False, torch.ones(3, 3).bool(), "cpu"),
        ValueError,
        r"mask must end in \(t, s\) = \(8, 8\); got \(3, 3\)",
    ),
    (
        lambda: flash.tile_mask(0, 0, 4, 4, 8, 8, False, None, "gpu0"),
        ValueError,
        r"device must name a device; got 'gpu0'",
    ),
    (
        lambda: flash.tiled_backward([1.0], K, V, *FORWARD, FORWARD[0]),
        TypeError,
        r"q must be a float tensor \(\.\.\., t, d\); got list",
    ),
    (
        lambda: flash.tiled_backward(Q, K, V, *FORWARD, FORWARD[0][..., :2],
                                     block_q=4, block_k=2),
        ValueError,
        r"dout must be \(\.\.\., t, d_v\) = \(1, 2, 8, 3\) of q's dtype torch.float32, "
        r"as tiled_forward gives it; got torch.float32 tensor of shape \(1, 2, 8, 2\)",
    ),
    (
        lambda: flash.tiled_backward(Q, K, V, FORWARD[0], FORWARD[1][..., :3],
                                     FORWARD[0], block_q=4, block_k=2),
        ValueError,
        r"lse must be \(\.\.\., t\) = \(1, 2, 8\) of q's dtype",
    ),
    (
        lambda: flash.tiled_backward(Q, K, V, *FORWARD, FORWARD[0].long(),
                                     block_q=4, block_k=2),
        TypeError,
        r"dout must be a float tensor \(\.\.\., t, d_v\); got torch.int64",
    ),
    (
        lambda: flash.tiled_backward(Q, K, V, *FORWARD, FORWARD[0], block_q=3, block_k=2),
        ValueError,
        r"block_q must be a positive int that divides t = 8; got 3",
    ),
    (
        lambda: flash.tiled_backward(Q, K, V, *FORWARD, FORWARD[0], "yes",
                                     block_q=4, block_k=2),
        TypeError,
        r"causal must be a bool; got str 'yes'",
    ),
    (
        lambda: flash.TiledAttention.apply(Q, K, V, "no", None, None, 4, 2),
        TypeError,
        r"causal must be a bool; got str 'no'",
    ),
    (
        lambda: flash.TiledAttention.apply(Q, K, V, False, None, None, 3, 2),
        ValueError,
        r"block_q must be a positive int that divides t = 8; got 3",
    ),
    (
        lambda: flash.TiledAttention.apply(Q, [1.0], V, False, None, None, 4, 2),
        TypeError,
        r"k must be a float tensor \(\.\.\., t, d\); got list",
    ),
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_bad_input_is_refused_with_a_clear_message(call, error, message):
    with pytest.raises(error, match=message):
        call()
