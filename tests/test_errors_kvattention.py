"""Bad input to lecturelib.efficiency.kvattention: the error and its message."""

from __future__ import annotations

import pytest
import torch

from lecturelib.efficiency import kvattention


def config(**kw):
    return kvattention.CacheGPTConfig(
        vocab_size=7, d_model=16, n_layers=1, n_heads=2, **kw
    )


def other_cache():
    a, b = (kvattention.CacheGPT(config(n_kv_heads=1)) for _ in range(2))
    b(torch.zeros(1, 2, dtype=torch.long), a.new_cache(1, 4))


def batch_mismatch():
    m = kvattention.CacheGPT(config(n_kv_heads=1))
    m(torch.zeros(2, 2, dtype=torch.long), m.new_cache(1, 4))


CASES = [
    (other_cache, ValueError, r"cache was built by another model"),
    (batch_mismatch, ValueError, r"ids has batch 2 but the cache was built for 1"),
    (
        lambda: config(n_kv_heads=0),
        ValueError,
        r"CacheGPTConfig.n_kv_heads must be an int >= 1; got int 0",
    ),
    (
        lambda: config(n_kv_heads=3),
        ValueError,
        r"n_kv_heads \(3\) must divide n_heads \(2\)",
    ),
    (
        lambda: config(attention="mqa"),
        ValueError,
        r"CacheGPTConfig.attention must be one of \('gqa', 'mla'\); got str 'mqa'",
    ),
    (lambda: config(d_rope=3, n_kv_heads=1), ValueError, r"d_rope \(3\) must be even"),
    (
        lambda: kvattention.CacheGPTConfig(
            vocab_size=7, d_model=10, n_heads=2, n_kv_heads=1
        ),
        ValueError,
        r"d_model \(10\) must split into n_heads \(2\) heads of even width",
    ),
    (
        lambda: kvattention.CacheGPT({"vocab_size": 7}),
        TypeError,
        r"config must be a CacheGPTConfig; got dict",
    ),
    (
        lambda: kvattention.CacheGPT(config(n_kv_heads=1))(torch.zeros(1, 3)),
        TypeError,
        r"ids must be an integer \(long\) tensor of token ids; got torch.float32",
    ),
    (
        lambda: (m := kvattention.CacheGPT(config(n_kv_heads=1)))(
            torch.zeros(1, 3, dtype=torch.long), m.new_cache(1, 2)
        ),
        ValueError,
        r"the cache is full: 0 of max_len = 2 positions used, 3 more asked",
    ),
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_bad_input_is_refused_with_a_clear_message(call, error, message):
    with pytest.raises(error, match=message):
        call()
