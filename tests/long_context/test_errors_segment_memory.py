"""Bad input to lecturelib.long_context.segment_memory and retrieval: the error and its message."""

from __future__ import annotations

import pytest
import torch

from lecturelib.long_context import segment_memory, retrieval
from lecturelib.pretraining import gpt


def model(**kw):
    torch.manual_seed(0)
    return gpt.GPT(gpt.GPTConfig(vocab_size=7, seq_len=8, d_model=16, n_layers=1,
                                 n_heads=2, **kw))


IDS = torch.zeros(1, 20, dtype=torch.long)
Q, K, V = torch.zeros(2, 4), torch.zeros(10, 4), torch.zeros(10, 3)

NAN_K = torch.randn(10, 4)
NAN_K[3, 0] = float("nan")
OTHER = retrieval.IVFIndex(torch.randn(10, 4), 2, 1)

CASES = [
    (lambda: retrieval.IVFIndex(NAN_K, 2, 1), ValueError,
     r"keys must hold finite values \(a NaN or inf key or query makes the search "
     r"return wrong neighbours\); got torch.float32 tensor of shape \(10, 4\) with 1 "
     r"non-finite values"),
    (lambda: retrieval.knn_attention(Q, NAN_K, V, 2), ValueError,
     r"q and keys must hold finite values"),
    (lambda: retrieval.knn_attention(Q, torch.randn(10, 4), V, 2, OTHER), ValueError,
     r"index must be built from these keys: it holds torch.float32 tensor of shape "
     r"\(10, 4\), other than keys torch.float32 tensor of shape \(10, 4\); its "
     r"positions would pick the wrong keys and values"),
    (lambda: retrieval.knn_attention(Q, torch.randn(5, 4), V[:5], 2, OTHER), ValueError,
     r"index must be built from these keys"),
    (lambda: retrieval.knn_attention(Q, K, V, 2, "ivf"), TypeError,
     r"index must be an IVFIndex or None; got str 'ivf'"),
    (lambda: retrieval.knn_attention(Q.long(), K, V, 2), TypeError,
     r"q must be a float tensor \(t, e\), \(s, e\) or \(s, e_v\); got torch.int64"),
    (lambda: retrieval.IVFIndex(K.long(), 2, 1), TypeError,
     r"keys must be a float tensor \(s, e\); got torch.int64"),
    (lambda: retrieval.IVFIndex(K, 2, 1, iters=-1), ValueError,
     r"iters must be an int >= 0; got int -1"),
    (lambda: OTHER.search(torch.full((2, 4), float("nan")), 2), ValueError,
     r"q must hold finite values \(a NaN or inf key or query makes the search return "
     r"wrong neighbours\); got torch.float32 tensor of shape \(2, 4\) with 8 "
     r"non-finite values"),
    (lambda: OTHER.scanned(torch.tensor([[float("inf"), 0.0, 0.0, 0.0]])), ValueError,
     r"q must hold finite values .* with 1 non-finite values"),
    (lambda: OTHER.search(torch.randn(2, 5), 2), ValueError,
     r"q must be \(t, e\) with e = 4; got \(2, 5\)"),
    (lambda: OTHER.search(torch.randn(2, 4), 11), ValueError,
     r"top must be an int in 1..10; got int 11"),
    (lambda: OTHER.scanned(torch.randn(4)), ValueError,
     r"q must be \(t, e\) with e = 4; got shape \(4,\)"),
    (lambda: segment_memory.segment_losses(model(), IDS, 5), ValueError,
     r"the window \(memory \+ segment = 10 tokens\) must fit the model's trained "
     r"context of 8"),
    (lambda: segment_memory.segment_losses(model(), IDS, 9, memory=False), ValueError,
     r"the window \(memory \+ segment = 9 tokens\) must fit"),
    (lambda: segment_memory.segment_losses(model(), IDS, 0), ValueError,
     r"segment must be an int >= 1; got int 0"),
    (lambda: segment_memory.segment_losses(model(), torch.zeros(20, dtype=torch.long), 4),
     ValueError, r"ids must be a \(b, T\) tensor of token ids with T >= 2"),
    (lambda: segment_memory.segment_losses(model(), IDS.float(), 4), TypeError,
     r"ids must be an integer \(long\) tensor of token ids; got torch.float32"),
    (lambda: retrieval.knn_attention(Q.tolist(), K, V, 2), TypeError,
     r"q, keys and values must be tensors; got list"),
    (lambda: segment_memory.segment_losses(torch.nn.Linear(2, 2), IDS, 4), TypeError,
     r"model must be a gpt.GPT; got Linear"),
    (lambda: retrieval.knn_attention(Q, K, V, 11), ValueError,
     r"top \(11\) must be at most the 10 stored keys"),
    (lambda: retrieval.knn_attention(Q, K, V, 0), ValueError,
     r"top must be an int >= 1; got int 0"),
    (lambda: retrieval.knn_attention(Q, torch.zeros(10, 5), V, 2), ValueError,
     r"q must be \(t, e\), keys \(s, e\) and values \(s, e_v\) with the same e and s"),
    (lambda: retrieval.knn_attention(Q, K, torch.zeros(9, 3), 2), ValueError,
     r"q must be \(t, e\), keys \(s, e\)"),
    (lambda: retrieval.knn_attention(Q[0], K, V, 2), ValueError, r"q must be \(t, e\)"),
    (lambda: retrieval.IVFIndex(K, n_cells=4, n_probe=5), ValueError,
     r"need n_probe <= n_cells <= s; got n_probe=5, n_cells=4, s=10"),
    (lambda: retrieval.IVFIndex(K, n_cells=11, n_probe=1), ValueError,
     r"need n_probe <= n_cells <= s; got n_probe=1, n_cells=11, s=10"),
    (lambda: retrieval.IVFIndex(K, n_cells=0, n_probe=1), ValueError,
     r"n_cells must be an int >= 1; got int 0"),
    (lambda: retrieval.IVFIndex(torch.zeros(10), n_cells=2, n_probe=1), ValueError,
     r"keys must be a \(s, e\) tensor"),
    (lambda: retrieval.unlimiformer_query(Q, torch.zeros(4, 2), torch.zeros(4, 3)),
     ValueError, r"h_d must be \(t, d\) and W_q, W_k \(d, e\)"),
    (lambda: retrieval.unlimiformer_query(Q, torch.zeros(5, 2), torch.zeros(5, 2)),
     ValueError, r"h_d must be \(t, d\) and W_q, W_k \(d, e\)"),
    (lambda: segment_memory.recall_task(0, 4, 8), ValueError,
     r"n must be an int >= 1; got int 0"),
    (lambda: segment_memory.recall_task(5, 1, 1), ValueError,
     r"need n_segments \* segment >= 2 \(a value and the query\)"),
    (lambda: segment_memory.recall_task(5, 2, 4, n_values=4, vocab_size=6), ValueError,
     r"vocab_size must be at least n_values \+ 3 = 7 \(SEP, values, filler\); got 6"),
    (lambda: segment_memory.SegmentModel("lstm", 4, 10, 16, 1, 2), ValueError,
     r"kind must be one of \('window', 'xl', 'rmt'\); got 'lstm'"),
    (lambda: segment_memory.SegmentModel("rmt", 4, 10, 16, 1, 2, n_memory=0), ValueError,
     r"n_memory must be an int >= 1; got int 0"),
    (lambda: segment_memory.SegmentModel("xl", 4, 10, 16, 1, 2)(torch.zeros(2, 10).long()),
     ValueError, r"x must be \(b, T\) token ids with T a multiple of the segment "
     r"\(4\); got \(2, 10\)"),
    (lambda: segment_memory.train_recall(model(), 10, 4, 2), TypeError,
     r"model must be a SegmentModel; got GPT"),
    (lambda: segment_memory.train_recall(segment_memory.SegmentModel("xl", 4, 10, 16, 1, 2), 0, 4, 2),
     ValueError, r"steps must be an int >= 1; got int 0"),
    (lambda: segment_memory.recall_accuracy(model(), IDS, IDS[0], IDS[0]), TypeError,
     r"model must be a SegmentModel; got GPT"),
    (lambda: retrieval.window_qkv(model(), torch.zeros(1, 12).long()), ValueError,
     r"ids must be \(b, T\) with T a multiple of seq_len = 8"),
    (lambda: retrieval.memory_logits(model(), torch.zeros(1, 12).long()), ValueError,
     r"ids must be \(b, T\) with T a multiple of seq_len = 8"),
    (lambda: retrieval.memory_logits(model(), torch.zeros(1, 16).long(), top=9),
     ValueError, r"top \(9\) must be at most the 8 stored positions"),
    (lambda: retrieval.memory_logits(model(), torch.zeros(1, 16).long(), top=-1),
     ValueError, r"top must be an int >= 0; got int -1"),
    (lambda: retrieval.memory_logits(model(), torch.zeros(1, 16).long(), 2, layers=(1,)),
     ValueError, r"layers must be a tuple of layer numbers in 0..0; got \(1,\)"),
    (lambda: retrieval.memory_logits(torch.nn.Linear(2, 2), IDS, 2), TypeError,
     r"model must be a gpt.GPT; got Linear"),
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_bad_input_is_refused_with_a_clear_message(call, error, message):
    with pytest.raises(error, match=message):
        call()
