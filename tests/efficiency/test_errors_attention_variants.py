"""Bad input to lecturelib.efficiency.attention_variants: the error and its message."""

from __future__ import annotations

import pytest
import torch

from lecturelib.efficiency import attention_variants
from lecturelib.pretraining import gpt


def config(**kw):
    return attention_variants.CacheGPTConfig(
        vocab_size=7, d_model=16, n_layers=1, n_heads=2, **kw
    )


def other_cache():
    a, b = (attention_variants.CacheGPT(config(n_kv_heads=1)) for _ in range(2))
    b(torch.zeros(1, 2, dtype=torch.long), a.new_cache(1, 4))


def batch_mismatch():
    m = attention_variants.CacheGPT(config(n_kv_heads=1))
    m(torch.zeros(2, 2, dtype=torch.long), m.new_cache(1, 4))


def changed(**fields):
    """A config whose fields are changed after construction."""
    c = config(n_kv_heads=1)
    for name, value in fields.items():
        setattr(c, name, value)
    return c


def cache_gpt():
    torch.manual_seed(0)
    return attention_variants.CacheGPT(config(n_kv_heads=1))


X = torch.randint(0, 7, (2, 5), generator=torch.Generator().manual_seed(0))
Y = torch.randint(0, 7, (2, 5), generator=torch.Generator().manual_seed(1))


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
        lambda: attention_variants.CacheGPTConfig(
            vocab_size=7, d_model=10, n_heads=2, n_kv_heads=1
        ),
        ValueError,
        r"d_model \(10\) must split into n_heads \(2\) heads of even width",
    ),
    (
        lambda: attention_variants.CacheGPT({"vocab_size": 7}),
        TypeError,
        r"config must be a CacheGPTConfig; got dict",
    ),
    (
        lambda: attention_variants.CacheGPT(config(n_kv_heads=1))(torch.zeros(1, 3)),
        TypeError,
        r"ids must be an integer \(long\) tensor of token ids; got torch.float32",
    ),
    (
        lambda: (m := attention_variants.CacheGPT(config(n_kv_heads=1)))(
            torch.zeros(1, 3, dtype=torch.long), m.new_cache(1, 2)
        ),
        ValueError,
        r"the cache is full: 0 of max_len = 2 positions used, 3 more asked",
    ),
    (
        lambda: attention_variants.GroupedQueryAttention(
            config(attention="mla", n_kv_heads=1)
        ),
        ValueError,
        r"config.attention must be 'gqa' for this layer; got 'mla'",
    ),
    (
        lambda: attention_variants.LatentAttention(config(n_kv_heads=1)),
        ValueError,
        r"config.attention must be 'mla' for this layer; got 'gqa'",
    ),
    (
        lambda: attention_variants.LatentAttention("config"),
        TypeError,
        r"config must be a CacheGPTConfig; got str 'config'",
    ),
    (
        lambda: attention_variants.CacheBlock(gpt.GPTConfig(vocab_size=7)),
        TypeError,
        r"config must be a CacheGPTConfig; got GPTConfig",
    ),
    (
        lambda: attention_variants.GroupedQueryAttention(changed(n_kv_heads=3)),
        ValueError,
        r"n_kv_heads \(3\) must divide n_heads \(2\)",
    ),
    (
        lambda: attention_variants.CacheGPT(changed(n_kv_heads=3)),
        ValueError,
        r"n_kv_heads \(3\) must divide n_heads \(2\)",
    ),
    (
        lambda: attention_variants.causal_softmax(torch.zeros(1, 1, 2, 3), -2),
        ValueError,
        r"start must be an int >= 0; got int -2",
    ),
    (
        lambda: attention_variants.causal_softmax(torch.zeros(1, 1, 2, 3), 5),
        ValueError,
        r"scores must have s = start \+ t keys; got s = 3 for start = 5, t = 2",
    ),
    (
        lambda: attention_variants.causal_softmax(torch.zeros(2, 3), 1),
        ValueError,
        r"scores must be \(b, h, t, s\); got shape \(2, 3\)",
    ),
    (
        lambda: attention_variants.causal_softmax(torch.zeros(1, 1, 2, 3).long(), 1),
        TypeError,
        r"scores must be a float tensor \(b, h, t, s\); got torch.int64",
    ),
    (
        lambda: attention_variants.loss(cache_gpt(), (X, Y.reshape(5, 2))),
        ValueError,
        r"y must have the shape of x \(2, 5\); got \(5, 2\)",
    ),
    (
        lambda: attention_variants.loss(cache_gpt(), (X, torch.full((2, 5), -100))),
        ValueError,
        r"y must hold token ids in 0..6; got ids from -100 to -100",
    ),
    (
        lambda: attention_variants.loss(cache_gpt(), (X, torch.full((2, 5), 9))),
        ValueError,
        r"y must hold token ids in 0..6; got ids from 9 to 9",
    ),
    (
        lambda: attention_variants.loss(cache_gpt(), X),
        TypeError,
        r"batch must be a pair \(x, y\) of \(b, t\) ids; got torch.int64 tensor",
    ),
    (
        lambda: attention_variants.loss(gpt.GPT(gpt.GPTConfig(vocab_size=7)), (X, Y)),
        TypeError,
        r"model must be a CacheGPT; got GPT",
    ),
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_bad_input_is_refused_with_a_clear_message(call, error, message):
    with pytest.raises(error, match=message):
        call()
