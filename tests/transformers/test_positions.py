"""lecturelib.transformers.positions: sinusoids, learned positions, score terms, Shaw relative attention,
ALiBi, RoPE."""

from __future__ import annotations

import math

import pytest
import torch

from lecturelib.transformers import positions, self_attention, transformer


def test_sinusoidal_known_values():
    pe = positions.sinusoidal(10, 8)
    assert pe.shape == (10, 8)
    assert torch.equal(pe[0], torch.tensor([0.0, 1.0] * 4))  # sin 0, cos 0
    torch.testing.assert_close(pe[:, 0], torch.arange(10.0).sin())  # ω_0 = 1
    torch.testing.assert_close(pe[3, 5], torch.tensor(math.cos(3 / 10000 ** (4 / 8))))
    with pytest.raises(ValueError, match="even"):
        positions.sinusoidal(4, 7)


@pytest.mark.parametrize("k", [1, 5, 17])
def test_shift_matrix_moves_every_position_by_k(k):
    pe = positions.sinusoidal(40, 16)
    M = positions.shift_matrix(k, 16)
    torch.testing.assert_close(pe[k:], pe[:-k] @ M.T, atol=1e-5, rtol=0)
    torch.testing.assert_close(M @ M.T, torch.eye(16), atol=1e-6, rtol=0)  # a rotation
    off_block = M.clone()
    for i in range(0, 16, 2):
        off_block[i:i + 2, i:i + 2] = 0
    assert torch.equal(off_block, torch.zeros(16, 16))  # block-diagonal
    torch.testing.assert_close(positions.shift_matrix(k + 2, 16),
                               M @ positions.shift_matrix(2, 16), atol=1e-6, rtol=0)


def test_sinusoidal_dot_product_depends_only_on_offset():
    pe = positions.sinusoidal(30, 16)
    gram = pe @ pe.T
    for k in (0, 3, 9):  # every diagonal is constant: p_m · p_{m+k}
        diag = torch.diagonal(gram, k)
        torch.testing.assert_close(diag, diag[:1].expand_as(diag), atol=1e-5, rtol=0)


def test_learned_positions_stop_at_max_len():
    pos = positions.LearnedPositions(4, 6)
    x = torch.zeros(2, 4, 6)
    torch.testing.assert_close(pos(x)[1], pos.table.weight)
    with pytest.raises(ValueError, match="0..3"):
        pos(torch.zeros(2, 5, 6))
    pos.clamp = True
    out = pos(torch.zeros(1, 7, 6))
    assert torch.equal(out[0, 4:], pos.table.weight[3].expand(3, 6))


def test_score_terms_sum_to_the_scores():
    gen = torch.Generator().manual_seed(0)
    x, p = torch.randn(2, 5, 8, generator=gen), torch.randn(5, 8, generator=gen)
    W_q, W_k = torch.randn(4, 8, generator=gen), torch.randn(4, 8, generator=gen)
    terms = positions.score_terms(x, p, W_q, W_k)
    assert list(terms) == ["content", "content-position", "position-content", "position"]
    full = ((x + p) @ W_q.T) @ ((x + p) @ W_k.T).transpose(1, 2)
    torch.testing.assert_close(sum(terms.values()), full, atol=1e-4, rtol=1e-5)
    torch.testing.assert_close(terms["position"][0], (p @ W_q.T) @ (p @ W_k.T).T)
    with pytest.raises(ValueError, match="one t and d"):
        positions.score_terms(x, p[:4])


def test_relative_distances_known_answer():
    d = positions.relative_distances(3, max_distance=1)
    assert torch.equal(d, torch.tensor([[1, 2, 2], [0, 1, 2], [0, 0, 1]]))
    d = positions.relative_distances(2, 4, max_distance=5)  # queries at positions 2, 3
    assert torch.equal(d - 5, torch.tensor([[-2, -1, 0, 1], [-3, -2, -1, 0]]))


def make_relative(seed=0, k=2):
    torch.manual_seed(seed)
    return positions.RelativeAttention(8, 2, max_distance=k)


def test_relative_attention_with_zero_vectors_is_multi_head_attention():
    rel = make_relative()
    mha = self_attention.MultiHeadAttention(8, 2)
    mha.load_state_dict({k: v for k, v in rel.state_dict().items() if "rel_" not in k})
    with torch.no_grad():
        rel.rel_k.weight.zero_()
        rel.rel_v.weight.zero_()
    x = torch.randn(2, 5, 8)
    mask = self_attention.causal_mask(5)
    for a, b in zip(rel(x, mask=mask), mha(x, mask=mask)):
        torch.testing.assert_close(a, b)


def test_relative_attention_known_answer():
    """Shaw et al.'s equations, one query, key and head at a time."""
    rel = make_relative(k=2)
    x = torch.randn(1, 4, 8)
    out, weights = rel(x)
    q, k, v = (w(x)[0].view(4, 2, 4).transpose(0, 1)             # (h, t, e)
               for w in (rel.W_q, rel.W_k, rel.W_v))
    heads = torch.zeros(4, 2, 4)
    for h in range(2):
        for i in range(4):
            a = [max(-2, min(2, j - i)) + 2 for j in range(4)]
            e = torch.stack([q[h, i] @ (k[h, j] + rel.rel_k.weight[a[j]]) / 2.0
                             for j in range(4)])
            alpha = e.softmax(0)
            torch.testing.assert_close(weights[0, h, i], alpha)
            heads[i, h] = sum(alpha[j] * (v[h, j] + rel.rel_v.weight[a[j]])
                              for j in range(4))
    torch.testing.assert_close(out[0], rel.W_o(heads.flatten(1)))


def test_relative_attention_plugs_into_a_block():
    torch.manual_seed(0)
    block = transformer.Block(transformer.StackConfig(d_model=8, n_heads=2),
                              attn=positions.RelativeAttention(8, 2, 3))
    x = torch.randn(2, 6, 8)
    y = block(x, self_attention.causal_mask(6))
    assert y.shape == (2, 6, 8)
    x2 = x.clone()
    x2[:, 4:] = 0  # the future does not change the past
    torch.testing.assert_close(block(x2, self_attention.causal_mask(6))[:, :4], y[:, :4])
    with pytest.raises(ValueError, match=r"\(b, t, 8\)"):
        block.attn(torch.randn(2, 6, 4))


def test_alibi_slopes_known_answers():
    torch.testing.assert_close(positions.alibi_slopes(8),
                               torch.tensor([2.0 ** -i for i in range(1, 9)]))
    torch.testing.assert_close(positions.alibi_slopes(4),
                               torch.tensor([2.0 ** -i for i in (2, 4, 6, 8)]))
    torch.testing.assert_close(positions.alibi_slopes(6),  # 4 heads, then 2 of 8
                               torch.tensor([2.0 ** -i for i in (2, 4, 6, 8, 1, 3)]))
    with pytest.raises(ValueError, match="n_heads"):
        positions.alibi_slopes(0)


def test_alibi_bias_known_answer_and_weights():
    bias = positions.alibi_bias(2, 3)
    dist = torch.tensor([[0.0, 1, 2], [1, 0, 1], [2, 1, 0]])
    torch.testing.assert_close(bias, -torch.stack([dist / 16, dist / 256]))
    assert torch.equal(positions.alibi_bias(2, 1, 3)[:, 0], bias[:, 2])  # last query
    # with all scores equal, causal weights fall by e^{-m} per step back
    q = torch.zeros(1, 2, 3, 4)
    _, w = self_attention.scaled_dot_product(q, q, q, self_attention.causal_mask(3), bias)
    m = positions.alibi_slopes(2)
    torch.testing.assert_close(w[0, :, 2, 0] / w[0, :, 2, 1], torch.exp(-m))


def test_rope_known_answer_and_two_implementations_agree():
    x = torch.tensor([[1.0, 0.0], [1.0, 0.0]])  # d = 2, positions 0 and 1: θ_0 = 1
    rot = positions.rope_rotate(x, positions.rope_angles(2, 2))
    torch.testing.assert_close(rot, torch.tensor([[1.0, 0.0], [math.cos(1), math.sin(1)]]))
    x = torch.randn(2, 3, 7, 16)
    angles = positions.rope_angles(7, 16)
    a, b = positions.rope_rotate(x, angles), positions.rope_complex(x, angles)
    torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(a.norm(dim=-1), x.norm(dim=-1))  # rotations keep lengths
    with pytest.raises(ValueError, match="angles"):
        positions.rope_rotate(x, angles[:, :4])


def test_rope_scores_depend_only_on_the_offset():
    gen = torch.Generator().manual_seed(0)
    q, k = torch.randn(16, generator=gen), torch.randn(16, generator=gen)
    rot = positions.Rotary(16)
    qs, ks = rot(q.expand(50, 16)), rot(k.expand(50, 16))        # q and k at 0..49

    def score(m, n):
        return qs[m] @ ks[n]

    for offset in (0, 3, -7):
        pairs = [(m, m + offset) for m in (10, 20, 33, 40)]
        scores = torch.stack([score(m, n) for m, n in pairs])
        torch.testing.assert_close(scores, scores[:1].expand(4), atol=1e-4, rtol=1e-5)
    assert not torch.isclose(score(10, 13), score(10, 14))
    shifted = positions.Rotary(16)(q.expand(50, 16), offset=9)
    torch.testing.assert_close(shifted[:41], qs[9:])


def test_rotary_in_multi_head_attention():
    torch.manual_seed(0)
    plain = self_attention.MultiHeadAttention(8, 2)
    rope = self_attention.MultiHeadAttention(8, 2, rotary=positions.Rotary(4))
    rope.load_state_dict(plain.state_dict())
    x = torch.randn(2, 5, 8)
    out, w = rope(x, mask=self_attention.causal_mask(5))
    assert out.shape == (2, 5, 8) and w.shape == (2, 2, 5, 5)
    torch.testing.assert_close(rope(x[:, :1])[0], plain(x[:, :1])[0])  # position 0: no turn
    assert not torch.allclose(out, plain(x, mask=self_attention.causal_mask(5))[0])
    with pytest.raises(ValueError, match="even"):
        positions.Rotary(5)
