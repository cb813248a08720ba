"""Pieces that compose (issue 26): every efficient path of Parts IV-V, run on every model
variant the chapters build, either gives what the variant's own plain forward gives
(logits to 1e-5, the same greedy tokens) or refuses the variant with a named error.

Paths: the KV cache (``kvcache.cached_forward``, ``recompute_logits``, ``generate``;
``attention_variants.CacheGPT``'s own cache for its attentions), speculative decoding (greedy ==
greedy decoding), KV eviction (a budget that keeps everything == full attention) and
``finetune.extend_vocab``. The paged cache (``paged``) takes keys, values and queries,
never a model, so no variant reaches it. Variants: the plain GPT, LoRA, adapters, prompt
tuning, MoE (with and without a capacity), learned positions, RoPE scaled by PI and YaRN,
and the CacheGPT attentions (MHA, GQA, MQA, MLA).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from lecturelib.efficiency import attention_variants, kvcache, moe, speculative
from lecturelib.long_context import eviction, rope_scaling
from lecturelib.pretraining import finetune, gpt, peft

V, L = 13, 24  # vocabulary, trained context
TOL = dict(atol=1e-5, rtol=1e-5)


def sharp(model, seed: int = 0):
    """``model`` with weights N(0, 0.3²): sharp attention and logits of a few units, so
    that a wrong rotation or scale shows (GPT-2's N(0, 0.02²) hides it in noise)."""
    torch.manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.3)
    return model.eval()


def plain(seed: int = 0, **kw) -> gpt.GPT:
    config = gpt.GPTConfig(vocab_size=V, seq_len=L, d_model=16, n_layers=2, n_heads=2,
                           **kw)
    return sharp(gpt.GPT(config), seed)


def lora() -> gpt.GPT:
    model = peft.add_lora(plain(), r=2)
    torch.manual_seed(1)
    with torch.no_grad():  # B starts at zero: make the update count
        for p in model.parameters():
            if p.requires_grad:
                p.copy_(0.3 * torch.randn_like(p))
    return model


def adapters() -> gpt.GPT:
    model = peft.add_adapters(plain(), d_bottleneck=4)
    torch.manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            if p.requires_grad:
                p.copy_(0.3 * torch.randn_like(p))
    return model


def mixture(capacity_factor=None) -> gpt.GPT:
    torch.manual_seed(0)
    config = gpt.GPTConfig(vocab_size=V, seq_len=L, d_model=16, n_layers=2, n_heads=2)
    layer = moe.MoEConfig(16, 32, n_experts=4, top_k=2, capacity_factor=capacity_factor)
    return sharp(moe.MoEGPT(config, layer))


def cache_gpt(attention: str, n_kv_heads: int = 4):
    torch.manual_seed(0)
    config = attention_variants.CacheGPTConfig(V, seq_len=L, d_model=16, n_layers=2, n_heads=4,
                                        attention=attention, n_kv_heads=n_kv_heads)
    return sharp(attention_variants.CacheGPT(config))


VARIANTS = {
    "plain": plain,
    "lora": lora,
    "moe": mixture,
    "pi": lambda: rope_scaling.extend(plain(), 2 * L, "pi"),
    "yarn": lambda: rope_scaling.extend(plain(), 2 * L, "yarn"),
    "yarn+lora": lambda: rope_scaling.extend(lora(), 2 * L, "yarn"),
    "moe-capacity": lambda: mixture(capacity_factor=1.0),
    "adapters": adapters,
    "learned": lambda: plain(positions="learned"),
    "prompt-tuned": lambda: peft.PromptTuned(plain(), torch.tensor([1, 2])),
    "mha": lambda: cache_gpt("gqa", 4),
    "gqa": lambda: cache_gpt("gqa", 2),
    "mqa": lambda: cache_gpt("gqa", 1),
    "mla": lambda: cache_gpt("mla"),
}
CACHE_GPTS = ("mha", "gqa", "mqa", "mla")

# What the cached paths (kvcache, speculative, eviction) refuse, by name.
NOT_A_GPT = {
    name: (TypeError, rf"model must be a gpt.GPT; got {cls}")
    for name, cls in [("prompt-tuned", "PromptTuned")]
    + [(n, "CacheGPT") for n in CACHE_GPTS]
}
CACHED_REFUSES = {
    **NOT_A_GPT,
    "moe-capacity": (ValueError, r"reads a few tokens at a time, but block 0's MoE has "
                     r"capacity_factor=1.0"),
    "adapters": (TypeError, r"runs each block as a gpt.Block with a "
                 r"gpt.CausalSelfAttention; block 0 is Block with attention Adapter"),
    "learned": (ValueError, r"needs a RoPE model; got positions='learned'"),
}


def tokens(t: int, b: int = 2, seed: int = 3) -> torch.Tensor:
    return torch.randint(0, V, (b, t), generator=torch.Generator().manual_seed(seed))


def greedy(model, prompt: torch.Tensor, n_new: int) -> torch.Tensor:
    """Greedy decoding by the model's own full forward, the reference."""
    ids = prompt
    for _ in range(n_new):
        ids = torch.cat([ids, model(ids)[:, -1:].argmax(-1)], 1)
    return ids


# The KV cache -------------------------------------------------------------------------


@pytest.mark.parametrize("name", VARIANTS)
def test_the_kv_cache_gives_the_models_own_logits_or_refuses(name):
    model, ids = VARIANTS[name](), tokens(20)
    if name in CACHED_REFUSES:
        error, message = CACHED_REFUSES[name]
        for call in (lambda: kvcache.new_cache(model, 2, 20),
                     lambda: kvcache.recompute_logits(model, ids),
                     lambda: kvcache.generate(model, ids[:, :4], 3)):
            with pytest.raises(error, match=message):
                call()
        return
    with torch.no_grad():
        full = model(ids)
        torch.testing.assert_close(kvcache.recompute_logits(model, ids), full, **TOL)
        cache = kvcache.new_cache(model, 2, 20)
        steps = [kvcache.cached_forward(model, ids[:, :8], cache)]
        steps += [kvcache.cached_forward(model, ids[:, i : i + 1], cache)
                  for i in range(8, 20)]
    torch.testing.assert_close(torch.cat(steps, 1), full, **TOL)
    with torch.no_grad():
        reference = greedy(model, ids[:, :5], 12)
    for use_cache in (True, False):
        out, logits, _ = kvcache.generate(model, ids[:, :5], 12, use_cache=use_cache)
        assert torch.equal(out, reference)
        with torch.inference_mode():
            torch.testing.assert_close(logits, model(out)[:, 4:-1], **TOL)


@pytest.mark.parametrize("name", CACHE_GPTS)
@pytest.mark.parametrize("absorbed", [False, True])
def test_cache_gpts_own_cache_gives_its_full_forward(name, absorbed):
    model, ids = VARIANTS[name](), tokens(20)
    if absorbed and name != "mla":
        pytest.skip("absorbed is MLA's inference form")
    options = {"absorbed": True} if absorbed else {}
    with torch.no_grad():
        full = model(ids, **options)
        cache = model.new_cache(2, 20)
        steps = [model(ids[:, :8], cache, **options)]
        steps += [model(ids[:, i : i + 1], cache, **options) for i in range(8, 20)]
    torch.testing.assert_close(torch.cat(steps, 1), full, **TOL)


def test_a_cache_refuses_every_model_but_its_own():
    models = {n: VARIANTS[n]() for n in ("plain", "lora", "moe", "pi", "yarn")}
    models["other base"] = plain(rope_base=500.0)
    models["other weights"] = plain(seed=1)
    ids = tokens(4)
    for built_for, a in models.items():
        for name, b in models.items():
            cache = kvcache.new_cache(a, 2, 8)
            if name == built_for:
                kvcache.cached_forward(b, ids, cache)
                continue
            with pytest.raises(ValueError, match=r"the cache was built by new_cache "
                               r"for another model \(.+\); make one for this model"):
                kvcache.cached_forward(b, ids, cache)


def test_the_cache_uses_the_scaled_tables_and_yarns_factor():
    base, yarn = plain(), VARIANTS["yarn"]()
    assert not torch.equal(yarn.blocks[0].attn.cos[:L], base.blocks[0].attn.cos)
    cache = kvcache.new_cache(yarn, 1, 2 * L + 4)
    assert torch.equal(cache.rope.cos, yarn.blocks[0].attn.cos)  # the model's own
    ids = tokens(2 * L, b=1)
    with torch.no_grad():
        torch.testing.assert_close(kvcache.cached_forward(yarn, ids, cache), yarn(ids),
                                   **TOL)
    with pytest.raises(ValueError, match=r"positions 48..48 are past the model's RoPE "
                       r"tables \(48 positions\)"):
        kvcache.cached_forward(yarn, ids[:, :1], cache)


def test_plain_rope_still_runs_past_the_trained_context():
    model, ids = plain(), tokens(L + 10, b=1)
    cache = kvcache.new_cache(model, 1, L + 10)
    with torch.no_grad():
        logits = kvcache.cached_forward(model, ids, cache)
        torch.testing.assert_close(logits[:, :L], model(ids[:, :L]), **TOL)
    assert logits.shape == (1, L + 10, V)


# Speculative decoding -----------------------------------------------------------------


@pytest.mark.parametrize("name", VARIANTS)
def test_greedy_speculation_is_greedy_decoding_or_refuses(name):
    target, prompt = VARIANTS[name](), tokens(4, b=1)
    if name in CACHED_REFUSES:
        error, message = CACHED_REFUSES[name]
        message = message.replace("model must", "target must")
        with pytest.raises(error, match=message):
            speculative.speculative_generate(target, plain(seed=2), prompt, 6, 2,
                                             temperature=0)
        if name not in NOT_A_GPT:  # as a draft too
            with pytest.raises(error, match=message):
                speculative.speculative_generate(plain(seed=2), target, prompt, 6, 2,
                                                 temperature=0)
        return
    with torch.no_grad():
        reference = greedy(target, prompt, 14)
    for draft in (plain(seed=2), target, VARIANTS["yarn"]()):
        for K in (1, 3):
            ids, _ = speculative.speculative_generate(target, draft, prompt, 14, K,
                                                      temperature=0)
            assert torch.equal(ids, reference), (name, K)
    ids, _ = speculative.autoregressive_generate(target, prompt, 14, temperature=0)
    assert torch.equal(ids, reference)


# KV eviction --------------------------------------------------------------------------


@pytest.mark.parametrize("name", VARIANTS)
@pytest.mark.parametrize("policy", eviction.POLICIES)
def test_eviction_with_room_for_everything_is_full_attention_or_refuses(name, policy):
    model, ids = VARIANTS[name](), tokens(20)
    if name in CACHED_REFUSES:
        error, message = CACHED_REFUSES[name]
        with pytest.raises(error, match=message):
            eviction.stream(model, ids, policy, 24)
        return
    with torch.no_grad():
        logits = model(ids)[:, :-1]
    full = F.cross_entropy(logits.transpose(1, 2), ids[:, 1:], reduction="none")
    torch.testing.assert_close(eviction.stream(model, ids, policy, 24), full, **TOL)


# extend_vocab -------------------------------------------------------------------------

EXTEND_REFUSES = NOT_A_GPT


@pytest.mark.parametrize("name", VARIANTS)
def test_extend_vocab_keeps_every_variant_whole_or_refuses(name):
    model = VARIANTS[name]()
    if name in EXTEND_REFUSES:
        error, message = EXTEND_REFUSES[name]
        with pytest.raises(error, match=message):
            finetune.extend_vocab(model, 3)
        return
    bigger = finetune.extend_vocab(model, 3, generator=torch.Generator().manual_seed(0))
    assert type(bigger) is type(model) and bigger.config.vocab_size == V + 3
    assert bigger.embed.weight.shape == (V + 3, 16)
    assert (bigger.head.weight is bigger.embed.weight) == model.config.tie_embeddings
    old, new = model.state_dict(), bigger.state_dict()
    assert old.keys() == new.keys()
    for key, value in old.items():
        grown = new[key][:V] if key in ("embed.weight", "head.weight") else new[key]
        assert torch.equal(grown, value), key
    for a, b in zip(model.modules(), bigger.modules(), strict=True):
        assert type(a) is type(b)
        for (n, x), (m, y) in zip(a.named_buffers(recurse=False),
                                  b.named_buffers(recurse=False), strict=True):
            assert n == m and torch.equal(x, y), n  # RoPE tables, scaled ones too
    trains = [p.requires_grad for p in model.parameters()]
    assert [p.requires_grad for p in bigger.parameters()] == trains
    assert getattr(bigger, "method", None) == getattr(model, "method", None)
    ids = tokens(20)
    with torch.no_grad():
        torch.testing.assert_close(bigger(ids)[..., :V], model(ids), **TOL)
        new_ids = torch.cat([ids, torch.full((2, 1), V + 2)], 1)
        out = bigger(new_ids)
        assert out.shape == (2, 21, V + 3)
        if name not in CACHED_REFUSES:  # and the grown model still caches exactly
            torch.testing.assert_close(kvcache.recompute_logits(bigger, new_ids), out,
                                       **TOL)
