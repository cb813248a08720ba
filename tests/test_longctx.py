"""lecturelib.longctx: segment recurrence against recomputation, kNN attention against
full attention, the IVF index against exact search, Unlimiformer's identity."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from lecturelib import gpt, longctx


def model(n_layers=2):
    torch.manual_seed(0)
    return gpt.GPT(gpt.GPTConfig(vocab_size=11, seq_len=16, d_model=16,
                                 n_layers=n_layers, n_heads=2)).eval()


def ids(b=2, t=33):
    return torch.randint(0, 11, (b, t), generator=torch.Generator().manual_seed(1))


def ce(logits, target):
    return F.cross_entropy(logits.transpose(1, 2), target, reduction="none")


def test_segments_alone_equal_the_model_on_each_segment():
    m, x = model(), ids()
    losses = longctx.segment_losses(m, x, 8, memory=False)
    assert losses.shape == (2, 32)
    for s in range(0, 32, 8):
        torch.testing.assert_close(losses[:, s:s + 8],
                                   ce(m(x[:, s:s + 8]), x[:, s + 1:s + 9]),
                                   rtol=1e-4, atol=1e-4)


def test_one_layer_memory_equals_reading_previous_and_current_segment_together():
    m, x = model(n_layers=1), ids()   # one layer: the cached keys depend on tokens only
    losses = longctx.segment_losses(m, x, 8, memory=True)
    torch.testing.assert_close(losses[:, :8], ce(m(x[:, :8]), x[:, 1:9]))
    for s in range(8, 32, 8):
        both = m(x[:, s - 8:s + 8])[:, 8:]
        torch.testing.assert_close(losses[:, s:s + 8], ce(both, x[:, s + 1:s + 9]),
                                   rtol=1e-4, atol=1e-4)


def test_memory_changes_deeper_layers_and_leaves_the_first_segment():
    m, x = model(), ids()
    alone = longctx.segment_losses(m, x, 8, memory=False)
    xl = longctx.segment_losses(m, x, 8, memory=True)
    torch.testing.assert_close(alone[:, :8], xl[:, :8])
    assert not torch.allclose(alone[:, 8:], xl[:, 8:])


def test_knn_attention_over_all_keys_is_full_attention():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(n, 8, generator=g) for n in (5, 40, 40))
    full = (q @ k.T / math.sqrt(8)).softmax(-1) @ v
    torch.testing.assert_close(longctx.knn_attention(q, k, v, 40), full)
    assert longctx.knn_attention(q, k, v, 4).shape == (5, 8)


def test_knn_attention_with_one_key_returns_the_best_keys_value():
    k = torch.eye(4)
    v = torch.arange(8.0).view(4, 2)
    out = longctx.knn_attention(torch.tensor([[0.0, 0.0, 3.0, 0.0]]), k, v, 1)
    torch.testing.assert_close(out, v[2:3])


def test_ivf_probing_every_cell_is_exact_search():
    g = torch.Generator().manual_seed(0)
    k, q = torch.randn(200, 8, generator=g), torch.randn(6, 8, generator=g)
    index = longctx.IVFIndex(k, n_cells=8, n_probe=8)
    exact = (q @ k.T).topk(5, -1).indices
    assert torch.equal(index.search(q, 5), exact)
    assert torch.equal(index.scanned(q), torch.full((6,), 200))


def test_ivf_probing_few_cells_scans_fewer_keys():
    g = torch.Generator().manual_seed(0)
    k, q = torch.randn(400, 8, generator=g), torch.randn(10, 8, generator=g)
    index = longctx.IVFIndex(k, n_cells=16, n_probe=2)
    assert index.scanned(q).max() < 400
    assert index.search(q, 3).shape == (10, 3)


def test_unlimiformer_query_scores_raw_states_like_projected_keys():
    g = torch.Generator().manual_seed(0)
    h_d, h_e = torch.randn(3, 12, generator=g), torch.randn(30, 12, generator=g)
    W_q, W_k = torch.randn(12, 4, generator=g), torch.randn(12, 4, generator=g)
    torch.testing.assert_close(longctx.unlimiformer_query(h_d, W_q, W_k) @ h_e.T,
                               (h_d @ W_q) @ (h_e @ W_k).T, rtol=1e-4, atol=1e-4)
