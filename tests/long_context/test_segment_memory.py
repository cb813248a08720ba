"""lecturelib.long_context.segment_memory and retrieval: segment recurrence against recomputation,
kNN attention against full attention, the IVF index against exact search, Unlimiformer's identity."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from lecturelib import tasks
from lecturelib.long_context import segment_memory, retrieval
from lecturelib.pretraining import gpt


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
    losses = segment_memory.segment_losses(m, x, 8, memory=False)
    assert losses.shape == (2, 32)
    for s in range(0, 32, 8):
        torch.testing.assert_close(losses[:, s:s + 8],
                                   ce(m(x[:, s:s + 8]), x[:, s + 1:s + 9]),
                                   rtol=1e-4, atol=1e-4)


def test_one_layer_memory_equals_reading_previous_and_current_segment_together():
    m, x = model(n_layers=1), ids()   # one layer: the cached keys depend on tokens only
    losses = segment_memory.segment_losses(m, x, 8, memory=True)
    torch.testing.assert_close(losses[:, :8], ce(m(x[:, :8]), x[:, 1:9]))
    for s in range(8, 32, 8):
        both = m(x[:, s - 8:s + 8])[:, 8:]
        torch.testing.assert_close(losses[:, s:s + 8], ce(both, x[:, s + 1:s + 9]),
                                   rtol=1e-4, atol=1e-4)


def test_memory_changes_deeper_layers_and_leaves_the_first_segment():
    m, x = model(), ids()
    alone = segment_memory.segment_losses(m, x, 8, memory=False)
    xl = segment_memory.segment_losses(m, x, 8, memory=True)
    torch.testing.assert_close(alone[:, :8], xl[:, :8])
    assert not torch.allclose(alone[:, 8:], xl[:, 8:])


def test_knn_attention_over_all_keys_is_full_attention():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(n, 8, generator=g) for n in (5, 40, 40))
    full = (q @ k.T / math.sqrt(8)).softmax(-1) @ v
    torch.testing.assert_close(retrieval.knn_attention(q, k, v, 40), full)
    assert retrieval.knn_attention(q, k, v, 4).shape == (5, 8)


def test_knn_attention_with_one_key_returns_the_best_keys_value():
    k = torch.eye(4)
    v = torch.arange(8.0).view(4, 2)
    out = retrieval.knn_attention(torch.tensor([[0.0, 0.0, 3.0, 0.0]]), k, v, 1)
    torch.testing.assert_close(out, v[2:3])


def test_ivf_probing_every_cell_is_exact_search():
    g = torch.Generator().manual_seed(0)
    k, q = torch.randn(200, 8, generator=g), torch.randn(6, 8, generator=g)
    index = retrieval.IVFIndex(k, n_cells=8, n_probe=8)
    exact = (q @ k.T).topk(5, -1).indices
    assert torch.equal(index.search(q, 5), exact)
    assert torch.equal(index.scanned(q), torch.full((6,), 200))


def test_ivf_probing_few_cells_scans_fewer_keys():
    g = torch.Generator().manual_seed(0)
    k, q = torch.randn(400, 8, generator=g), torch.randn(10, 8, generator=g)
    index = retrieval.IVFIndex(k, n_cells=16, n_probe=2)
    assert index.scanned(q).max() < 400
    assert index.search(q, 3).shape == (10, 3)


def test_unlimiformer_query_scores_raw_states_like_projected_keys():
    g = torch.Generator().manual_seed(0)
    h_d, h_e = torch.randn(3, 12, generator=g), torch.randn(30, 12, generator=g)
    W_q, W_k = torch.randn(12, 4, generator=g), torch.randn(12, 4, generator=g)
    torch.testing.assert_close(retrieval.unlimiformer_query(h_d, W_q, W_k) @ h_e.T,
                               (h_d @ W_q) @ (h_e @ W_k).T, rtol=1e-4, atol=1e-4)


def test_recall_task_places_the_value_d_back_and_nowhere_else():
    x, answer, distance = segment_memory.recall_task(50, 4, 8, n_values=4, vocab_size=16,
                                              seed=3)
    assert x.shape == (50, 32) and answer.shape == distance.shape == (50,)
    assert (x[:, -1] == tasks.SEP).all()
    assert (x[torch.arange(50), 31 - distance] == answer).all()
    is_value = (x >= 2) & (x < 6)
    assert (is_value.sum(1) == 1).all()
    assert distance.min() >= 1 and distance.max() <= 31
    again = segment_memory.recall_task(50, 4, 8, n_values=4, vocab_size=16,
                                              seed=3)
    assert torch.equal(again[0], x)


def segment_model(kind, n_layers=2):
    return segment_memory.SegmentModel(kind, 4, vocab_size=10, d_model=16, n_layers=n_layers,
                                n_heads=2, n_memory=2).eval()


def test_window_model_reads_the_last_segment_only():
    m = segment_model("window")
    x = torch.randint(0, 10, (3, 12), generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(m(x), m.gpt(x[:, -4:])[:, -1])
    y = x.clone()
    y[:, :8] = (y[:, :8] + 1) % 10
    torch.testing.assert_close(m(y), m(x))


def test_one_layer_xl_reads_the_last_two_segments():
    m = segment_model("xl", n_layers=1)
    x = torch.randint(0, 10, (3, 12), generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(m(x), m.gpt(x[:, -8:])[:, -1], rtol=1e-4, atol=1e-4)


def first_segment_gradient(kind):
    """The gradient reaching the first segment's embeddings (0 where none flows)."""
    m = segment_model(kind)
    seen = []

    def keep(module, args, out):
        if out.requires_grad:
            out.retain_grad()
        seen.append((args[0], out))

    m.gpt.embed.register_forward_hook(keep)
    x = torch.cat([torch.full((2, 4), 3), torch.full((2, 4), 4)], 1)
    F.cross_entropy(m(x), torch.tensor([5, 6])).backward()
    first = [out for ids_in, out in seen if (ids_in == 3).all()]
    if not first or first[0].grad is None:
        return 0.0
    return first[0].grad.norm().item()


def test_xl_stops_the_gradient_and_rmt_backpropagates_through_segments():
    assert first_segment_gradient("window") == 0
    assert first_segment_gradient("xl") == 0
    assert first_segment_gradient("rmt") > 0


def test_rmt_memory_carries_the_first_segment():
    m = segment_model("rmt")
    x = torch.randint(0, 10, (3, 12), generator=torch.Generator().manual_seed(0))
    y = x.clone()
    y[:, :4] = (y[:, :4] + 1) % 10
    assert not torch.allclose(m(x), m(y))


def test_train_recall_lowers_the_loss_and_accuracy_is_per_band():
    m = segment_memory.SegmentModel("window", 4, vocab_size=10, d_model=16, n_layers=1,
                             n_heads=2)
    losses = segment_memory.train_recall(m, 60, 32, 2, n_values=2, lr=1e-2)
    assert len(losses) == 60 and all(math.isfinite(v) for v in losses)
    x, answer, distance = segment_memory.recall_task(300, 2, 4, n_values=2, vocab_size=10)
    acc = segment_memory.recall_accuracy(m, x, answer, distance)
    assert acc.shape == (2,) and ((acc >= 0) & (acc <= 1)).all()


def pk_model():
    torch.manual_seed(0)
    return gpt.GPT(gpt.GPTConfig(vocab_size=11, seq_len=8, d_model=16, n_layers=2,
                                 n_heads=2)).eval()


def test_window_qkv_reads_each_window_alone():
    m, x = pk_model(), ids(2, 24)
    qkv = retrieval.window_qkv(m, x)
    assert len(qkv) == 2 and qkv[0].shape == (3, 2, 2, 24, 8)
    alone = retrieval.window_qkv(m, x[:, 8:16])
    torch.testing.assert_close(qkv[1][:, :, :, 8:16], alone[1])


def test_memory_logits_without_memory_is_the_model_on_the_last_window():
    m, x = pk_model(), ids(2, 24)
    torch.testing.assert_close(retrieval.memory_logits(m, x), m(x[:, -8:]),
                               rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(retrieval.memory_logits(m, x, 4, layers=()), m(x[:, -8:]),
                               rtol=1e-4, atol=1e-4)
    assert not torch.allclose(retrieval.memory_logits(m, x, 4), m(x[:, -8:]))


def test_memory_logits_with_an_index_probing_every_cell_is_exact():
    m, x = pk_model(), ids(2, 32)
    exact = retrieval.memory_logits(m, x, 3)
    torch.testing.assert_close(retrieval.memory_logits(m, x, 3, n_cells=4, n_probe=4),
                               exact)
    assert exact.shape == (2, 8, 11)


def test_unrotate_inverts_a_scaled_rope_table():
    """Re-positioning cached keys inverts the cache's own table, YaRN's attention factor
    (rows of norm cos² + sin² != 1) included."""
    from lecturelib.efficiency import kvcache

    rope = kvcache.Rope(8, 16)
    rope.cos, rope.sin = rope.cos * 1.3, rope.sin * 1.3  # a YaRN-like factor
    k = torch.randn(1, 2, 5, 8)
    assert torch.allclose(segment_memory._unrotate(rope, rope(k, 3), 3), k, atol=1e-6)
