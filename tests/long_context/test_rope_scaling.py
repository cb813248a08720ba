"""lecturelib.long_context.rope_scaling: each method's frequencies against its formula, and the
stretched model against the original."""

from __future__ import annotations

import math

import pytest
import torch

from lecturelib.long_context import rope_scaling
from lecturelib.pretraining import gpt
from lecturelib.transformers import positions


def model(seq_len=8):
    torch.manual_seed(0)
    return gpt.GPT(gpt.GPTConfig(vocab_size=11, seq_len=seq_len, d_model=16, n_layers=2,
                                 n_heads=2)).eval()


def test_frequencies_follow_each_papers_formula():
    d, b, L, s = 64, 10000.0, 2048, 4.0
    i = torch.arange(d // 2, dtype=torch.float64)
    theta = b ** (-2 * i / d)
    f = {m: rope_scaling.scaled_frequencies(m, d, s, L) for m in rope_scaling.METHODS}
    assert f["pi"].shape == (d // 2,)
    assert torch.allclose(f["none"], theta)
    assert torch.allclose(f["pi"], theta / s)
    assert torch.allclose(f["ntk"], (b * s ** (d / (d - 2))) ** (-2 * i / d))
    # the released YaRN code's ramp: linear in the pair index between the pairs
    # that turn beta = 32 and alpha = 1 times over L, rounded outwards
    low = math.floor(d * math.log(L / (2 * math.pi * 32)) / (2 * math.log(b)))
    high = math.ceil(d * math.log(L / (2 * math.pi * 1)) / (2 * math.log(b)))
    assert (low, high) == rope_scaling.correction_range(d, L) == (8, 21)
    gamma = 1 - ((i - low) / (high - low)).clamp(0, 1)
    assert torch.allclose(f["ntk_by_parts"], (1 - gamma) * theta / s + gamma * theta)
    assert torch.equal(f["yarn"], f["ntk_by_parts"])


def test_ntk_keeps_the_fastest_pair_and_slows_the_slowest_by_s():
    f = rope_scaling.scaled_frequencies("ntk", 32, 8.0, 100)
    theta = positions.frequencies(32)
    assert math.isclose(f[0], theta[0]) and math.isclose(f[-1], theta[-1] / 8)


def test_by_parts_keeps_fast_pairs_and_interpolates_slow_ones():
    theta = positions.frequencies(128)
    f = rope_scaling.scaled_frequencies("ntk_by_parts", 128, 16.0, 4096)
    r = 4096 * theta / (2 * math.pi)
    assert torch.equal(f[r > 32], theta[r > 32])
    assert torch.allclose(f[r < 1], theta[r < 1] / 16)


def test_yarn_temperature_is_the_published_one():
    assert rope_scaling.yarn_mscale(1.0) == 1.0
    assert math.isclose(rope_scaling.yarn_mscale(16.0), 0.1 * math.log(16) + 1)


def test_ramp_known_answers():
    assert torch.allclose(
        rope_scaling.ramp(6, 1, 3),
        torch.tensor([1.0, 1.0, 0.5, 0.0, 0.0, 0.0], dtype=torch.float64),
    )
    same = rope_scaling.ramp(4, 2, 2)  # low == high: a step, as in the code
    assert same.tolist() == [1.0, 1.0, 1.0, 0.0]


def test_correction_range_known_answers():
    assert rope_scaling.correction_range(128, 4096) == (20, 46)  # Llama 2
    assert rope_scaling.correction_range(16, 64) == (0, 3)  # low clamped at 0
    assert rope_scaling.correction_range(128, 10**9) == (107, 127)  # high at d - 1


@pytest.mark.parametrize("method", rope_scaling.METHODS)
def test_scale_one_changes_nothing(method):
    m = model()
    same = rope_scaling.extend(m, 8, method)
    x = torch.randint(0, 11, (2, 8))
    torch.testing.assert_close(same(x), m(x))


def test_none_extends_the_table_and_agrees_on_the_trained_positions():
    m = model()
    long = rope_scaling.extend(m, 32, "none")
    assert long.config.seq_len == 32 and m.config.seq_len == 8
    x = torch.randint(0, 11, (2, 32))
    assert long(x).shape == (2, 32, 11)
    torch.testing.assert_close(long(x)[:, :8], m(x[:, :8]))


def test_pi_at_position_2m_is_the_original_at_m_and_yarn_scales_by_the_temperature():
    m = model()
    pi = rope_scaling.extend(m, 16, "pi")
    torch.testing.assert_close(pi.blocks[0].attn.cos[::2], m.blocks[0].attn.cos)
    yarn, parts = rope_scaling.extend(m, 16, "yarn"), rope_scaling.extend(m, 16,
                                                                         "ntk_by_parts")
    k = rope_scaling.yarn_mscale(2.0)
    torch.testing.assert_close(yarn.blocks[1].attn.sin, k * parts.blocks[1].attn.sin)


def test_a_stretched_model_remembers_its_trained_length_and_can_be_stretched_again():
    m = rope_scaling.extend(model(), 16, "pi")
    again = rope_scaling.extend(m, 32, "pi")
    assert again.train_len == 8
    torch.testing.assert_close(again.blocks[0].attn.cos[::4], model().blocks[0].attn.cos)


def test_loss_by_position_averages_to_evaluate_loss():
    m = model()
    ids = torch.randint(0, 11, (8 * 5 + 1,))
    per = rope_scaling.loss_by_position(m, ids, 8)
    assert per.shape == (8,)
    assert math.isclose(per.mean().item(), gpt.evaluate_loss(m, ids, 8), rel_tol=1e-5)
