"""lecturelib.long_context.eviction: the streamed cache against recomputation, and the policies'
known answers."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from lecturelib.efficiency import kvcache
from lecturelib.long_context import eviction
from lecturelib.pretraining import gpt


def model(n_layers=2, seq_len=64):
    torch.manual_seed(0)
    return gpt.GPT(gpt.GPTConfig(vocab_size=11, seq_len=seq_len, d_model=16,
                                 n_layers=n_layers, n_heads=2)).eval()


def ids(b=2, t=20):
    return torch.randint(0, 11, (b, t), generator=torch.Generator().manual_seed(1))


def reference(m, x):
    logits = kvcache.recompute_logits(m, x)[:, :-1]
    return F.cross_entropy(logits.transpose(1, 2), x[:, 1:], reduction="none")


@pytest.mark.parametrize("policy", ["full", "window", "sinks", "h2o", "knn"])
def test_a_budget_that_holds_everything_is_the_full_cache(policy):
    m, x = model(), ids()
    losses = eviction.stream(m, x, policy, 32)
    assert losses.shape == (2, 19)
    torch.testing.assert_close(losses, reference(m, x), rtol=1e-4, atol=1e-4)


def last_losses(m, x, contexts):
    """Loss of each next token recomputed from an explicit list of context indices."""
    out = []
    for t, ctx in enumerate(contexts):
        logits = m(x[:, ctx])[:, -1]
        out.append(F.cross_entropy(logits, x[:, t + 1], reduction="none"))
    return torch.stack(out, 1)


def test_one_layer_window_equals_recomputing_each_window():
    m, x, B = model(n_layers=1), ids(), 5   # one layer: keys depend on the token alone
    contexts = [list(range(max(0, t - B + 1), t + 1)) for t in range(19)]
    torch.testing.assert_close(eviction.stream(m, x, "window", B), last_losses(m, x, contexts),
                               rtol=1e-4, atol=1e-4)


def test_one_layer_sinks_equal_recomputing_sinks_plus_window():
    m, x, B, n = model(n_layers=1), ids(), 6, 2
    contexts = [list(range(t + 1)) if t < B else
                list(range(n)) + list(range(t - (B - n) + 1, t + 1)) for t in range(19)]
    torch.testing.assert_close(eviction.stream(m, x, "sinks", B, n_sinks=n),
                               last_losses(m, x, contexts), rtol=1e-4, atol=1e-4)


def test_policies_differ_once_the_budget_binds():
    m, x = model(), ids(t=30)
    w = eviction.stream(m, x, "window", 8)
    assert not torch.allclose(w, eviction.stream(m, x, "sinks", 8, n_sinks=2))
    assert not torch.allclose(w, eviction.stream(m, x, "h2o", 8))


def test_keep_known_answers():
    acc = torch.tensor([[[5.0, 0.1, 3.0, 0.2, 0.3, 1.0]]])
    assert eviction.keep("window", acc, 3).tolist() == [[[3, 4, 5]]]
    assert eviction.keep("sinks", acc, 3, n_sinks=1).tolist() == [[[0, 4, 5]]]
    assert eviction.keep("h2o", acc, 4, n_recent=2).tolist() == [[[0, 2, 4, 5]]]
    assert eviction.keep("window", acc, 8).tolist() == [[[0, 1, 2, 3, 4, 5]]]


def test_h2o_keeps_per_head():
    acc = torch.tensor([[[0.0, 9.0, 1.0, 0.0], [9.0, 0.0, 1.0, 0.0]]])   # (1, 2, 4)
    assert eviction.keep("h2o", acc, 2, n_recent=1).tolist() == [[[1, 3], [0, 3]]]


def test_attention_of_the_last_query_sums_to_one():
    losses, att = eviction.stream(model(), ids(), "sinks", 8, n_sinks=2, attention=True)
    assert len(att) == 2 and att[0].shape == (2, 2, 8)
    torch.testing.assert_close(att[1].sum(-1), torch.ones(2, 2))


def test_retrieve_takes_the_best_older_keys_and_the_recent_ones():
    k = torch.zeros(1, 1, 6, 2)
    k[0, 0, 1] = torch.tensor([1.0, 0.0])
    q = torch.tensor([1.0, 0.0]).view(1, 1, 1, 2)
    assert eviction.retrieve(q, k, 2, 1).tolist() == [[[1, 4, 5]]]
