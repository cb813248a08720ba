"""Bad input to lecturelib.long_context.eviction: the error and its message."""

from __future__ import annotations

import pytest
import torch

from lecturelib.efficiency import moe
from lecturelib.long_context import eviction, rope_scaling
from lecturelib.pretraining import gpt, peft


def model(**kw):
    torch.manual_seed(0)
    return gpt.GPT(gpt.GPTConfig(vocab_size=7, seq_len=8, d_model=16, n_layers=1,
                                 n_heads=2, **kw))


IDS = torch.zeros(1, 6, dtype=torch.long)
ACC = torch.zeros(1, 2, 6)

NAN_SCORES = torch.tensor([[[0.5, 0.1, float("nan"), 0.2, 0.3, 0.4, 0.1, 0.2]]])

X = torch.randn(2, 2, 5, 3)  # (b, h, s, e)


CASES = [
    (lambda: eviction.stream(model().eval(), IDS, "window", "4"), ValueError,
     r"budget must be an int >= 1; got str '4'"),
    (lambda: eviction.keep("h2o", NAN_SCORES, 4), ValueError,
     r"scores must be finite for policy 'h2o' \(a NaN outranks every score and would "
     r"be kept as a heavy hitter\); got torch.float32 tensor of shape \(1, 1, 8\) "
     r"with 1 non-finite values"),
    (lambda: eviction.keep("h2o", torch.ones(1, 1, 8, dtype=torch.long), 4), TypeError,
     r"scores must be a float tensor \(b, h, s\); got torch.int64"),
    (lambda: eviction.keep("sinks", torch.rand(1, 1, 8), 4, n_sinks=-1), ValueError,
     r"n_sinks must be an int >= 0; got int -1"),
    (lambda: eviction.keep("sinks", torch.rand(1, 1, 8), 4, n_sinks=2.5), ValueError,
     r"n_sinks must be an int >= 0; got float 2.5"),
    (lambda: eviction.keep("window", torch.rand(1, 1, 8), float("inf")), ValueError,
     r"budget must be an int >= 1; got float inf"),
    (lambda: eviction.keep("h2o", torch.rand(1, 1, 8), 2.5), ValueError,
     r"budget must be an int >= 1; got float 2.5"),
    (lambda: eviction.retrieve(torch.rand(1, 1, 1, 4), torch.rand(1, 1, 6, 4), 1, -1),
     ValueError, r"top must be an int >= 0; got int -1"),
    (lambda: eviction.retrieve(torch.rand(1, 1, 1, 4), torch.rand(1, 1, 6, 4), True, 2),
     ValueError, r"n_recent must be an int >= 0; got bool True"),
    (lambda: eviction.retrieve(torch.rand(1, 1, 1, 4), torch.rand(1, 1, 6, 4), 0, 0),
     ValueError, r"top \+ n_recent must be at least 1"),
    (lambda: eviction.retrieve(torch.rand(1, 1, 1, 4), torch.rand(1, 1, 6, 3), 1, 2),
     ValueError, r"q must be \(b, h, 1, e\) and k \(b, h, s, e\)"),
    (lambda: eviction.stream(model(), IDS, "sinks", 4, n_sinks=4), ValueError,
     r"the budget \(4\) must be larger than n_sinks \(4\): the sinks and at least one "
     r"recent token"),
    (lambda: eviction.stream(model(), IDS, "sinks", 2, n_sinks=4), ValueError,
     r"the budget \(2\) must be larger than n_sinks \(4\)"),
    (lambda: eviction.stream(model(), IDS, "h2o", 4, n_recent=4), ValueError,
     r"the recent window \(n_recent=4\) must be smaller than the cache budget \(4\)"),
    (lambda: eviction.stream(model(), IDS, "knn", 4, n_recent=6), ValueError,
     r"the recent window \(n_recent=6\) must be smaller than the cache budget \(4\)"),
    (lambda: eviction.stream(model(), IDS, "lru", 4), ValueError,
     r"policy must be one of \('full', 'window', 'sinks', 'h2o', 'knn'\); got 'lru'"),
    (lambda: eviction.stream(model(), IDS, "window", 0), ValueError,
     r"budget must be an int >= 1; got int 0"),
    (lambda: eviction.stream(model(), IDS, "window", 4, n_sinks=1.5), ValueError,
     r"n_sinks must be an int >= 1; got float 1.5"),
    (lambda: eviction.stream(model(), torch.zeros(6, dtype=torch.long), "window", 4),
     ValueError, r"ids must be a \(b, T\) tensor of token ids with T >= 2; got \(6,\)"),
    (lambda: eviction.stream(model(), torch.zeros(1, 1, dtype=torch.long), "window", 4),
     ValueError, r"ids must be a \(b, T\) tensor .*got \(1, 1\)"),
    (lambda: eviction.stream(model(), torch.zeros(1, 6), "window", 4), TypeError,
     r"ids must be an integer \(long\) tensor of token ids"),
    (lambda: eviction.stream(torch.nn.Linear(2, 2), IDS, "window", 4), TypeError,
     r"model must be a gpt.GPT; got Linear"),
    (lambda: eviction.stream(model(positions="learned"), IDS, "window", 4), ValueError,
     r"eviction.stream needs a RoPE model; got positions='learned'"),
    # The variants stream cannot run exactly are refused by name (issue 26).
    (lambda: eviction.stream(rope_scaling.extend(model(), 16, "yarn"),
                             torch.zeros(1, 20, dtype=torch.long), "full", 4),
     ValueError, r"eviction.stream reads 19 positions, past the model's RoPE tables "
     r"\(16 positions\)"),
    (lambda: eviction.stream(peft.add_adapters(model()), IDS, "window", 4), TypeError,
     r"eviction.stream runs each block as a gpt.Block with a gpt.CausalSelfAttention; "
     r"block 0 is Block with attention Adapter"),
    (lambda: eviction.stream(moe.MoEGPT(model().config, moe.MoEConfig(
        16, 32, 4, 2, capacity_factor=1.0)), IDS, "window", 4), ValueError,
     r"eviction.stream reads a few tokens at a time, but block 0's MoE has "
     r"capacity_factor=1.0"),
    (lambda: eviction.stream(model(dropout=0.1).train(), IDS, "window", 4), ValueError,
     r"eviction.stream has no dropout; the model is training with dropout=0.1"),
    (lambda: eviction.keep("sinks", ACC, 3, n_sinks=4), ValueError,
     r"the budget \(3\) must hold the n_sinks \(4\) sinks"),
    (lambda: eviction.keep("h2o", ACC, 3, n_recent=3), ValueError,
     r"n_recent \(3\) must be in 1..budget-1 = 1..2"),
    (lambda: eviction.keep("h2o", torch.zeros(6), 3), ValueError,
     r"scores must be a \(b, h, s\) tensor"),
    (lambda: eviction.keep("fifo", ACC, 3), ValueError, r"policy must be one of"),
    (lambda: eviction.gather(X, torch.zeros(1, 2, 3, dtype=torch.long)), ValueError,
     r"idx must be \(b, h, k\) = \(2, 2, k\) to match x \(2, 2, 5, 3\); got shape "
     r"\(1, 2, 3\)"),
    (lambda: eviction.gather(X, torch.zeros(2, 2, 3)), TypeError,
     r"idx must be an int64 \(or int32\) tensor \(b, h, k\) of cache positions; got "
     r"torch.float32"),
    (lambda: eviction.gather(X, torch.full((2, 2, 3), 5)), ValueError,
     r"idx must hold cache positions in 0..4; got positions from 5 to 5"),
    (lambda: eviction.gather(X, torch.full((2, 2, 3), -1)), ValueError,
     r"idx must hold cache positions in 0..4; got positions from -1 to -1"),
    (lambda: eviction.gather(X[0, 0], torch.zeros(2, 2, 3, dtype=torch.long)),
     ValueError, r"x must be \(b, h, s, \.\.\.\); got shape \(5, 3\)"),
    (lambda: eviction.gather(X, torch.zeros(2, 2, 3, dtype=torch.long, device="meta")),
     ValueError, r"idx must be on the device of x \(cpu\); got meta"),
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_bad_input_is_refused_with_a_clear_message(call, error, message):
    with pytest.raises(error, match=message):
        call()
