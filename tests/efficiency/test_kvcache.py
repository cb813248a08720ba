"""lecturelib.efficiency.kvcache, attention_variants and paged: cache vs recomputation, fast vs reference.
"""

from __future__ import annotations

import pytest
import torch

from lecturelib.efficiency import attention_variants, kvcache, paged
from lecturelib.pretraining import gpt


def small_gpt():
    torch.manual_seed(0)
    config = gpt.GPTConfig(vocab_size=11, seq_len=16, d_model=16, n_layers=2, n_heads=2)
    return gpt.GPT(config).eval()


def test_recomputation_equals_the_models_own_forward():
    model = small_gpt()
    ids = torch.randint(0, 11, (2, 16))
    with torch.no_grad():
        torch.testing.assert_close(kvcache.recompute_logits(model, ids), model(ids))


def test_cached_generation_gives_the_logits_of_recomputation_past_the_context():
    model = small_gpt()
    prompt = torch.randint(0, 11, (2, 5))
    a, la, _ = kvcache.generate(model, prompt, 30, use_cache=True)
    b, lb, _ = kvcache.generate(model, prompt, 30, use_cache=False)
    assert torch.equal(a, b) and a.shape == (2, 35)
    torch.testing.assert_close(la, lb, atol=1e-5, rtol=1e-5)


def test_generate_runs_both_methods_through_the_forward_it_is_given():
    model = small_gpt()
    prompt = torch.randint(0, 11, (1, 4))
    calls = []

    def forward(m, ids, cache):
        calls.append(ids.shape[1])
        return kvcache.cached_forward(m, ids, cache)

    for use_cache in (True, False):
        calls.clear()
        ids, logits, _ = kvcache.generate(model, prompt, 5, use_cache=use_cache,
                                          forward=forward)
        expected = [4, 1, 1, 1, 1] if use_cache else [4, 5, 6, 7, 8]
        assert calls == expected
        ref_ids, ref_logits, _ = kvcache.generate(model, prompt, 5, use_cache=use_cache)
        assert torch.equal(ids, ref_ids) and torch.equal(logits, ref_logits)


@pytest.mark.slow
def test_compiled_cached_forward_gives_the_eager_logits():
    model = small_gpt()
    prompt = torch.randint(0, 11, (1, 4))
    compiled = torch.compile(kvcache.cached_forward, dynamic=True)
    for use_cache in (True, False):
        ids, logits, _ = kvcache.generate(model, prompt, 12, use_cache=use_cache,
                                          forward=compiled)
        ref_ids, ref_logits, _ = kvcache.generate(model, prompt, 12, use_cache=use_cache)
        assert torch.equal(ids, ref_ids)
        torch.testing.assert_close(logits, ref_logits, atol=1e-5, rtol=1e-5)


def test_prefill_in_chunks_equals_one_prefill():
    model = small_gpt()
    ids = torch.randint(0, 11, (1, 12))
    cache = kvcache.new_cache(model, 1, 12)
    with torch.no_grad():
        parts = [
            kvcache.cached_forward(model, ids[:, i:j], cache)
            for i, j in ((0, 5), (5, 6), (6, 12))
        ]
        torch.testing.assert_close(
            torch.cat(parts, 1), model(ids), atol=1e-5, rtol=1e-5
        )
    assert cache.length == 12


@pytest.mark.parametrize("start, t, g", [(0, 5, 4), (3, 2, 2), (7, 1, 1)])
def test_fused_attention_equals_the_reference(start, t, g):
    torch.manual_seed(1)
    q = torch.randn(2, 4, t, 8)
    k, v = torch.randn(2, g, start + t, 8), torch.randn(2, g, start + t, 8)
    torch.testing.assert_close(
        kvcache.attend(q, k, v, start), kvcache.attend_reference(q, k, v, start)
    )


def test_published_cache_sizes():
    assert kvcache.published_bytes_per_token("Llama-2-7B") == 512 * 1024
    assert kvcache.published_bytes_per_token("Llama-3-8B") == 128 * 1024
    assert kvcache.published_bytes_per_token("Llama-2-70B") == 320 * 1024
    assert kvcache.published_bytes_per_token("GPT-2 (124M)") == 36 * 1024
    assert kvcache.published_bytes_per_token("DeepSeek-V2") == (512 + 64) * 60 * 2
    assert all("source" in c for c in kvcache.PUBLISHED.values())


def test_cache_allocation_matches_the_formula():
    cache = kvcache.kv_cache(3, 1, 8, 2, 4, dtype=torch.float16)
    assert cache.bytes_per_token == kvcache.cache_bytes_per_token(3, 2, 4, 2)
    entries = {"c": (1, 16), "k_rope": (1, 8)}  # MLA's, from one config
    config = kvcache.KVCacheConfig(
        n_layers=3, batch=2, max_len=8, entries=entries, dtype=torch.float16
    )
    latent = kvcache.KVCache(config)
    assert latent.bytes_per_token == kvcache.mla_bytes_per_token(3, 16, 8, 2)
    assert [tuple(x.shape) for x in latent.layers[2].values()] == [
        (2, 1, 8, 16),
        (2, 1, 8, 8),
    ]


def variant(attention, **kw):
    torch.manual_seed(0)
    config = attention_variants.CacheGPTConfig(
        vocab_size=11, d_model=32, n_layers=2, n_heads=4, attention=attention, **kw
    )
    return attention_variants.CacheGPT(config).eval()


@pytest.mark.parametrize(
    "attention, kw",
    [
        ("gqa", dict(n_kv_heads=4)),
        ("gqa", dict(n_kv_heads=2)),
        ("gqa", dict(n_kv_heads=1)),
        ("mla", dict(d_latent=8, d_rope=4)),
    ],
)
def test_every_variant_decodes_with_the_logits_of_recomputation(attention, kw):
    model = variant(attention, **kw)
    ids = torch.randint(0, 11, (2, 20))
    with torch.no_grad():
        full = model(ids)
        cache = model.new_cache(2, 20)
        steps = [model(ids[:, :6], cache)] + [
            model(ids[:, i : i + 1], cache) for i in range(6, 20)
        ]
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=1e-5)


def test_mla_absorbed_equals_explicit_and_caches_the_latent():
    model = variant("mla", d_latent=8, d_rope=4)
    ids = torch.randint(0, 11, (2, 12))
    with torch.no_grad():
        torch.testing.assert_close(
            model(ids, absorbed=True), model(ids), atol=1e-5, rtol=1e-5
        )
    cache = model.new_cache(1, 4)
    assert cache.bytes_per_token == kvcache.mla_bytes_per_token(2, 8, 4, 4)


def test_the_variant_overfits_one_batch():
    model = variant("gqa", n_kv_heads=2).train()
    x = torch.randint(0, 11, (4, 16))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(60):
        opt.zero_grad()
        loss = attention_variants.loss(model, (x[:, :-1], x[:, 1:]))
        loss.backward()
        opt.step()
    assert loss.item() < 0.3


def test_paged_attention_equals_contiguous_with_forks_and_frees():
    torch.manual_seed(0)
    config = paged.PagedConfig(capacity=64, block_size=4, n_kv_heads=2, d_head=8)
    cache = paged.PagedKVCache(config)
    keys = {}
    cache.add_sequence(0)
    for _ in range(6):
        k, v = torch.randn(2, 8), torch.randn(2, 8)
        cache.append(0, k, v)
        keys.setdefault(0, []).append((k, v))
    used = cache.allocator.used
    cache.fork(0, 1)
    assert cache.allocator.used == used  # nothing copied
    for seq in (0, 1):
        k, v = torch.randn(2, 8), torch.randn(2, 8)
        cache.append(seq, k, v)
        keys[seq] = keys.get(seq, keys[0][:6]) + [(k, v)]
    assert cache.allocator.used == used + 1  # the shared last block copied
    for seq in (0, 1):
        k = torch.stack([a for a, _ in keys[seq]], 1)
        v = torch.stack([b for _, b in keys[seq]], 1)
        q = torch.randn(4, 8)
        torch.testing.assert_close(
            paged.paged_attention(q, cache, seq), paged.contiguous_attention(q, k, v)
        )
    cache.finish(0)
    cache.finish(1)
    assert cache.allocator.used == 0


def test_simulation_wastes_less_than_a_block_per_sequence():
    history = paged.simulate(
        [10, 30, 5], [0, 2, 4], block_size=4, max_len=32, capacity=64
    )
    for row in history:
        assert row["tokens"] <= row["paged"] <= row["tokens"] + 3 * 3
        assert row["paged"] <= row["contiguous"] or row["contiguous"] == 0
    assert history[-1] == {"tokens": 0, "paged": 0, "contiguous": 0}


def test_paged_attention_follows_its_reference_on_nan_keys():
    """NaN in, NaN out on both paths (the fused CPU kernel would give 0 for a query
    whose every key is NaN)."""
    torch.manual_seed(0)
    for nan_positions in ([1], [0, 1, 2]):
        config = paged.PagedConfig(capacity=8, block_size=4, n_kv_heads=1, d_head=4)
        cache = paged.PagedKVCache(config)
        cache.add_sequence(0)
        for i in range(3):
            k = torch.full((1, 4), float("nan")) if i in nan_positions else torch.randn(1, 4)
            cache.append(0, k, torch.randn(1, 4))
        q = torch.randn(2, 4)
        k, v = cache.gather(0)
        assert paged.paged_attention(q, cache, 0).isnan().all()
        assert paged.contiguous_attention(q, k, v).isnan().all()


def test_a_plain_models_cache_rotates_by_the_config_formula_past_its_tables():
    model = small_gpt()
    cache = kvcache.new_cache(model, 1, 40)  # seq_len is 16: the formula continues
    reference = kvcache.Rope(model.config.d_head, 40, model.config.rope_base)
    assert torch.equal(cache.rope.cos, reference.cos)
    assert torch.equal(cache.rope.sin, reference.sin)
    assert torch.equal(cache.rope.cos[:16], model.blocks[0].attn.cos)
    assert cache.model is model


def test_batching_known_answers_by_hand():
    # static: groups [1, 9] and [1, 9] last 9 steps each; continuous: request 2 starts
    # at step 2 in request 0's slot, request 3 at step 3 in request 2's and ends at 11
    assert kvcache.simulate_batching([1, 9, 1, 9], 2, continuous=False) == 18
    assert kvcache.simulate_batching([1, 9, 1, 9], 2, continuous=True) == 11
    assert kvcache.simulate_batching([3, 1, 1, 1], 2, continuous=False) == 4
    assert kvcache.simulate_batching([3, 1, 1, 1], 2, continuous=True) == 3
    assert kvcache.simulate_batching([5], 4, continuous=True) == 5


def test_continuous_batching_never_takes_more_steps_than_static():
    gen = torch.Generator().manual_seed(0)
    for _ in range(300):
        n = int(torch.randint(1, 20, (1,), generator=gen))
        lengths = torch.randint(1, 30, (n,), generator=gen).tolist()
        b = int(torch.randint(1, 6, (1,), generator=gen))
        static = kvcache.simulate_batching(lengths, b, continuous=False)
        continuous = kvcache.simulate_batching(lengths, b, continuous=True)
        # no schedule beats the longest request or the work spread over b slots
        assert max(lengths) <= continuous <= static
        assert continuous >= -(-sum(lengths) // b)
        same = [lengths[0]] * n
        assert kvcache.simulate_batching(same, b, continuous=True) == (
            kvcache.simulate_batching(same, b, continuous=False)
        ) == lengths[0] * -(-n // b)


def test_quantized_kv_is_within_half_a_step_and_four_times_smaller():
    torch.manual_seed(0)
    x = torch.randn(2, 4, 16, 32) * torch.rand(2, 4, 16, 1) * 10  # (b, h, t, e)
    x[0, 0, 0] = 0.0  # a zero row
    for bits in (8, 4, 2):
        q, scale = kvcache.quantize_kv(x, bits)
        assert q.dtype == torch.int8 and scale.shape == (2, 4, 16, 1)
        top = 2 ** (bits - 1) - 1
        assert q.abs().max() == top and q[0, 0, 0].abs().max() == 0
        err = (kvcache.dequantize_kv(q, scale) - x).abs()
        assert (err <= scale * (0.5 + 1e-4)).all()  # half a step, up to float rounding
        assert (err / scale).max() > 0.25  # a real rounding, not a lossless copy
    stored = q.numel() * 1 + scale.numel() * scale.element_size()
    assert stored == x.numel() + 4 * x.numel() // 32
    assert 3 < x.numel() * 4 / stored < 4
