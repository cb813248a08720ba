"""Bad input to lecturelib.efficiency.kvcache: the error and its message."""

from __future__ import annotations

import pytest
import torch

from lecturelib.efficiency import kvcache, served_model, moe
from lecturelib.long_context import rope_scaling
from lecturelib.pretraining import gpt, peft


def model(**kw):
    torch.manual_seed(0)
    return gpt.GPT(
        gpt.GPTConfig(vocab_size=7, seq_len=8, d_model=16, n_layers=1, n_heads=2, **kw)
    )


def ids(b: int, t: int) -> torch.Tensor:
    return torch.zeros(b, t, dtype=torch.long)


def past_a_full_cache():
    m = model()
    cache = kvcache.new_cache(m, 1, 3)
    kvcache.cached_forward(m, ids(1, 3), cache)
    return kvcache.cached_forward(m, ids(1, 1), cache)


def batch_unlike_the_cache():
    m = model()
    return kvcache.cached_forward(m, ids(2, 2), kvcache.new_cache(m, 1, 4))


def on_the_cache_of(other, m=None):
    m = model() if m is None else m
    return kvcache.cached_forward(m, ids(1, 2), kvcache.new_cache(other, 1, 4))


def past_the_scaled_tables():
    long = rope_scaling.extend(model(), 16, "yarn")
    cache = kvcache.new_cache(long, 1, 20)
    kvcache.cached_forward(long, ids(1, 16), cache)
    return kvcache.cached_forward(long, ids(1, 1), cache)


def with_blocks_of_two_tables():
    torch.manual_seed(0)
    m = gpt.GPT(gpt.GPTConfig(vocab_size=7, seq_len=8, d_model=16, n_layers=2,
                              n_heads=2))
    m.blocks[1].attn.cos = m.blocks[1].attn.cos * 2
    return kvcache.new_cache(m, 1, 4)


def moe_with_capacity():
    config = gpt.GPTConfig(vocab_size=7, seq_len=8, d_model=16, n_layers=1, n_heads=2)
    return moe.MoEGPT(config, moe.MoEConfig(16, 32, 4, 2, capacity_factor=1.25))


class OwnForward(gpt.GPT):
    def forward(self, ids):
        return super().forward(ids) * 2


def training_with_dropout():
    m = model(dropout=0.1).train()
    return kvcache.cached_forward(m, ids(1, 2), kvcache.new_cache(m, 1, 4))


def rope_at(start, t: int = 1, e: int = 4):
    return lambda: served_model.Rope(4, 8)(torch.randn(1, t, e), start)


CASES = [
    (rope_at(-3), ValueError,
     r"start \(the position of x's first row\) must be an int >= 0; got int -3"),
    (rope_at(-1, t=2), ValueError,
     r"start \(the position of x's first row\) must be an int >= 0; got int -1"),
    (rope_at(1.0), ValueError,
     r"start \(the position of x's first row\) must be an int >= 0; got float 1.0"),
    (rope_at(7, t=2), ValueError,
     r"positions 7..8 exceed the RoPE table's max_len = 8"),
    (rope_at(0, e=6), ValueError,
     r"x must be \(..., t, d_head\) with d_head = 4; got shape \(1, 1, 6\)"),
    (lambda: served_model.Rope(4, 8)(torch.zeros(1, 2, 4, dtype=torch.long), 0), TypeError,
     r"x must be a float tensor \(..., t, d_head = 4\); got torch.int64"),
    (
        lambda: kvcache.cache_bytes_per_token(0, 8, 128),
        ValueError,
        r"n_layers must be an int >= 1; got int 0",
    ),
    (
        lambda: kvcache.cache_bytes_per_token(32, 8, 128, 1.5),
        ValueError,
        r"bytes_per_value must be an int >= 1; got float 1.5",
    ),
    (
        lambda: kvcache.mla_bytes_per_token(60, 512, -1),
        ValueError,
        r"d_rope must be an int >= 1; got int -1",
    ),
    (
        lambda: kvcache.published_bytes_per_token("GPT-5"),
        ValueError,
        r"name must be one of \[.*'Llama-2-7B'.*\]; got 'GPT-5'",
    ),
    (
        lambda: kvcache.KVCacheConfig(n_layers=2, batch=1, max_len=8, entries={"k": 4}),
        ValueError,
        r"entries must map names to \(heads, width\); got \{'k': 4\}",
    ),
    (
        lambda: kvcache.KVCacheConfig(
            n_layers=2, batch=1, max_len=8, entries={"k": (0, 4)}
        ),
        ValueError,
        r"entries\['k'\] heads must be an int >= 1; got int 0",
    ),
    (
        lambda: kvcache.KVCacheConfig(
            n_layers=2, batch=0, max_len=8, entries={"k": (2, 4)}
        ),
        ValueError,
        r"batch must be an int >= 1; got int 0",
    ),
    (
        lambda: kvcache.KVCache({"n_layers": 2, "batch": 1, "max_len": 8}),
        TypeError,
        r"config must be a KVCacheConfig; got dict",
    ),
    (
        lambda: kvcache.kv_cache(2, 1, 0, 2, 4),
        ValueError,
        r"max_len must be an int >= 1; got int 0",
    ),
    (
        lambda: kvcache.kv_cache(2, 1, 8, 2, 4).write(
            2, k=torch.zeros(1, 2, 1, 4), v=torch.zeros(1, 2, 1, 4)
        ),
        ValueError,
        r"layer must be an int in 0..1; got int 2",
    ),
    (
        lambda: kvcache.kv_cache(2, 1, 8, 2, 4).write(0, k=torch.zeros(1, 2, 1, 4)),
        ValueError,
        r"write needs the entries \['k', 'v'\]; got \['k'\]",
    ),
    (
        lambda: kvcache.kv_cache(2, 1, 8, 2, 4).write(
            0, k=torch.zeros(1, 2, 1, 4), v=torch.zeros(1, 3, 1, 4)
        ),
        ValueError,
        r"v must be \(b=1, 2, t, 4\); got \(1, 3, 1, 4\)",
    ),
    (
        lambda: kvcache.kv_cache(1, 1, 2, 1, 4).write(
            0, k=torch.zeros(1, 1, 3, 4), v=torch.zeros(1, 1, 3, 4)
        ),
        ValueError,
        r"the cache is full: 0 of max_len = 2 positions used, 3 more asked",
    ),
    (
        past_a_full_cache,
        ValueError,
        r"the cache is full: 3 of max_len = 3 positions used, 1 more asked",
    ),
    (
        lambda: kvcache.kv_cache(1, 1, 2, 1, 4).advance(3),
        ValueError,
        r"the cache is full: cannot advance 3 past max_len = 2",
    ),
    (
        lambda: kvcache.Rope(8, 4)(torch.zeros(1, 3, 8), 2),
        ValueError,
        r"positions 2..4 exceed the RoPE table's max_len = 4",
    ),
    (
        lambda: kvcache.attend(
            torch.zeros(1, 3, 2, 4), torch.zeros(1, 2, 2, 4), torch.zeros(1, 2, 2, 4), 0
        ),
        ValueError,
        r"q must be \(b, h, t, e\) and k, v \(b, g, s, e\) with g dividing h; got "
        r"\(1, 3, 2, 4\), \(1, 2, 2, 4\), \(1, 2, 2, 4\)",
    ),
    (
        lambda: kvcache.attend_reference(
            torch.zeros(1, 2, 2, 4), torch.zeros(1, 2, 5, 4), torch.zeros(1, 2, 5, 4), 1
        ),
        ValueError,
        r"start \+ t must equal s = 5; got start=1, t=2",
    ),
    (
        lambda: kvcache.attend(
            torch.zeros(2, 4), torch.zeros(2, 4), torch.zeros(2, 4), 0
        ),
        ValueError,
        r"q, k, v must be 4-d tensors",
    ),
    (
        lambda: kvcache.new_cache(torch.nn.Linear(2, 2), 1, 4),
        TypeError,
        r"model must be a gpt.GPT; got Linear",
    ),
    (
        lambda: kvcache.new_cache(model(positions="learned"), 1, 4),
        ValueError,
        r"the cached path needs a RoPE model; got positions='learned'",
    ),
    (
        lambda: kvcache.cached_forward(
            model(), torch.zeros(1, 2, dtype=torch.long), None
        ),
        TypeError,
        r"cache must come from kvcache.new_cache \(a KVCache with a rope table and a "
        r"model\); got NoneType",
    ),
    (
        lambda: kvcache.cached_forward(
            model(), torch.zeros(1, 2, dtype=torch.long), kvcache.kv_cache(2, 1, 8, 2, 8)
        ),
        TypeError,
        r"cache must come from kvcache.new_cache .*; got KVCache",
    ),
    (
        batch_unlike_the_cache,
        ValueError,
        r"ids must be \(b=1, t\) token ids; got \(2, 2\)",
    ),
    (
        lambda: kvcache.recompute_logits(model(), [[1, 2]]),
        TypeError,
        r"ids must be an integer \(long\) tensor of token ids; got list",
    ),
    (
        lambda: kvcache.generate(model(), torch.zeros(1, 2, dtype=torch.long), 0),
        ValueError,
        r"n_new must be an int >= 1; got int 0",
    ),
    (
        lambda: kvcache.generate(model(), torch.zeros(1, 2, dtype=torch.long), 2,
                                 forward="cached"),
        TypeError,
        r"forward must be a function like cached_forward; got str",
    ),
    # A cache serves the one model it was built for (issue 26).
    (
        lambda: on_the_cache_of(model(rope_base=500.0)),
        ValueError,
        r"the cache was built by new_cache for another model \(rope_base=500.0, not "
        r"10000.0\); make one for this model",
    ),
    (
        lambda: on_the_cache_of(model()),
        ValueError,
        r"another model \(another GPT of the same config\)",
    ),
    (
        lambda: on_the_cache_of(rope_scaling.extend(model(), 16, "pi")),
        ValueError,
        r"another model \(seq_len=16, not 8\)",
    ),
    # The variants the cached path cannot run exactly are refused by name.
    (
        past_the_scaled_tables,
        ValueError,
        r"positions 16..16 are past the model's RoPE tables \(16 positions\): they "
        r"were changed \(e.g. by rope_scaling.extend\)",
    ),
    (
        lambda: kvcache.generate(rope_scaling.extend(model(), 16, "pi"), ids(1, 10), 8),
        ValueError,
        r"generate reads 17 positions, past the model's RoPE tables \(16 positions\)",
    ),
    (
        lambda: kvcache.new_cache(peft.add_adapters(model()), 1, 4),
        TypeError,
        r"the cached path runs each block as a gpt.Block with a "
        r"gpt.CausalSelfAttention; block 0 is Block with attention Adapter",
    ),
    (
        lambda: kvcache.recompute_logits(OwnForward(model().config), ids(1, 2)),
        TypeError,
        r"the cached path runs gpt.GPT's forward; OwnForward has its own",
    ),
    (
        with_blocks_of_two_tables,
        ValueError,
        r"the cached path needs one RoPE table; block 1's differs",
    ),
    (
        lambda: kvcache.new_cache(moe_with_capacity(), 1, 4),
        ValueError,
        r"the cached path reads a few tokens at a time, but block 0's MoE has "
        r"capacity_factor=1.25",
    ),
    (
        training_with_dropout,
        ValueError,
        r"the cached path has no dropout; the model is training with dropout=0.1: "
        r"call model.eval\(\)",
    ),
    (
        lambda: kvcache.simulate_batching([3, 0, 2], 2, continuous=True),
        ValueError,
        r"lengths\[1\] must be an int >= 1; got int 0",
    ),
    (
        lambda: kvcache.simulate_batching([3, 2], 2, continuous=1),
        TypeError,
        r"continuous must be a bool; got int 1",
    ),
    (
        lambda: kvcache.quantize_kv(torch.randn(2, 3), bits=16),
        ValueError,
        r"bits must be an int in 2..8; got int 16",
    ),
    (
        lambda: kvcache.dequantize_kv(torch.zeros(2, 3, dtype=torch.int8),
                                      torch.ones(2, 3)),
        ValueError,
        r"scale must be \(..., 1\) for q \(..., e\), one scale per row; got q "
        r"\(2, 3\) and scale \(2, 3\)",
    ),
    # published, served_model.other_model
    (lambda: kvcache.published(3, n_layers=12), TypeError,
     r"repo must be a str 'owner/name'; got int 3"),
    (lambda: kvcache.published("gpt2", n_layers=12), ValueError,
     r"repo must be a Hub repository 'owner/name'; got str 'gpt2'"),
    (lambda: kvcache.published("openai-community/gpt2"), ValueError,
     r"published needs at least one size \(n_layers=\.\.\., \.\.\.\); got none"),
    (lambda: kvcache.published("openai-community/gpt2", n_layers=0), ValueError,
     r"n_layers must be an int >= 1; got int 0"),
    (lambda: kvcache.published("openai-community/gpt2", d_head="64"), ValueError,
     r"d_head must be an int >= 1; got str '64'"),
    (lambda: served_model.other_model(model(), "model"), TypeError,
     r"model must be a gpt.GPT; got str"),
    (lambda: served_model.other_model(model(), None), TypeError,
     r"model must be a gpt.GPT; got NoneType"),
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_bad_input_is_refused_with_a_clear_message(call, error, message):
    with pytest.raises(error, match=message):
        call()
