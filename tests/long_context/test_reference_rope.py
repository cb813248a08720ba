"""RoPE scaling against Hugging Face ``transformers``' rope initialisation functions
(what YaRN and PI models load with): the same inverse frequencies to 1e-6 relative, the
same attention factor. Random small configs only, nothing downloaded."""

from __future__ import annotations

import math

import pytest
import torch

transformers = pytest.importorskip("transformers")
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS  # noqa: E402

from lecturelib.long_context import rope_scaling  # noqa: E402


def config(d_head, train_len, scale, base, **rope):
    """A Llama config whose heads are ``d_head`` wide, trained on ``train_len``
    positions and read at ``scale`` times as many."""
    return transformers.LlamaConfig(
        hidden_size=4 * d_head,
        num_attention_heads=4,
        max_position_embeddings=int(scale * train_len),
        rope_parameters={"rope_theta": base, **rope},
    )


def close(hf: torch.Tensor, ours: torch.Tensor) -> bool:
    return bool(((hf.double() - ours) / ours).abs().max() < 1e-6)


SETTINGS = [  # d_head, train_len, scale, base
    (128, 4096, 8.0, 10000.0),  # Llama 2, the YaRN paper's setting
    (128, 4096, 16.0, 10000.0),
    (128, 2048, 4.0, 10000.0),
    (64, 1024, 2.0, 10000.0),
    (64, 8192, 32.0, 500000.0),
    (16, 64, 8.0, 10000.0),  # chapter 18's small model: the ramp starts at pair 0
    (32, 128, 4.0, 10000.0),
    (8, 20, 3.0, 100.0),
]


@pytest.mark.parametrize("d_head, train_len, scale, base", SETTINGS)
def test_yarn_matches_transformers(d_head, train_len, scale, base):
    cfg = config(
        d_head,
        train_len,
        scale,
        base,
        rope_type="yarn",
        factor=scale,
        original_max_position_embeddings=train_len,
    )
    inv_freq, attention_factor = ROPE_INIT_FUNCTIONS["yarn"](cfg, "cpu")
    ours = rope_scaling.scaled_frequencies("yarn", d_head, scale, train_len, base)
    assert close(inv_freq, ours)
    assert math.isclose(attention_factor, rope_scaling.yarn_mscale(scale))


@pytest.mark.parametrize("d_head, train_len, scale, base", SETTINGS)
def test_ntk_by_parts_is_yarn_without_the_temperature(d_head, train_len, scale, base):
    cfg = config(
        d_head,
        train_len,
        scale,
        base,
        rope_type="yarn",
        factor=scale,
        original_max_position_embeddings=train_len,
        attention_factor=1.0,
    )
    inv_freq, attention_factor = ROPE_INIT_FUNCTIONS["yarn"](cfg, "cpu")
    ours = rope_scaling.scaled_frequencies(
        "ntk_by_parts", d_head, scale, train_len, base
    )
    assert close(inv_freq, ours) and attention_factor == 1.0


@pytest.mark.parametrize("d_head, train_len, scale, base", SETTINGS)
def test_pi_matches_transformers_linear(d_head, train_len, scale, base):
    cfg = config(d_head, train_len, scale, base, rope_type="linear", factor=scale)
    inv_freq, attention_factor = ROPE_INIT_FUNCTIONS["linear"](cfg, "cpu")
    ours = rope_scaling.scaled_frequencies("pi", d_head, scale, train_len, base)
    assert close(inv_freq, ours) and attention_factor == 1.0


@pytest.mark.parametrize("d_head, train_len, scale, base", SETTINGS)
def test_ntk_matches_transformers_dynamic_at_the_full_length(
    d_head, train_len, scale, base
):
    """Dynamic NTK with ``factor = 1`` at ``seq_len = s·L`` on a model whose
    ``max_position_embeddings`` is the trained ``L`` uses the base
    ``b·(s·L/L)^{d/(d-2)}``: the static NTK-aware base."""
    cfg = config(d_head, train_len, 1.0, base, rope_type="dynamic", factor=1.0)
    seq_len = int(scale * train_len)
    inv_freq, attention_factor = ROPE_INIT_FUNCTIONS["dynamic"](cfg, "cpu", seq_len)
    ours = rope_scaling.scaled_frequencies("ntk", d_head, scale, train_len, base)
    assert close(inv_freq, ours) and attention_factor == 1.0


def test_the_papers_ramp_differs_from_the_codes():
    """The paper's γ is linear in r, the code's in the pair index: at Llama 2's
    setting some blended frequencies differ by more than a factor of 2."""
    d, L, s = 128, 4096, 8.0
    theta = rope_scaling.positions.frequencies(d)
    r = L * theta / (2 * math.pi)
    gamma = ((r - 1) / 31).clamp(0, 1)
    paper = (1 - gamma) * theta / s + gamma * theta
    ours = rope_scaling.scaled_frequencies("yarn", d, s, L)
    ratio = torch.maximum(paper / ours, ours / paper)
    assert ratio.max() > 2
    assert torch.equal(paper[r > 32], ours[r > 32])  # both keep the fast pairs
