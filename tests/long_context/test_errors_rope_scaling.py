"""Bad input to lecturelib.long_context.rope_scaling: the error and its message."""

from __future__ import annotations

import pytest
import torch

from lecturelib.long_context import rope_scaling
from lecturelib.pretraining import gpt


def model(**kw):
    torch.manual_seed(0)
    return gpt.GPT(gpt.GPTConfig(vocab_size=7, seq_len=8, d_model=16, n_layers=1,
                                 n_heads=2, **kw))


CASES = [
    (lambda: rope_scaling.scaled_frequencies("pi", 8, 0.5, 10), ValueError,
     r"scale must be a finite number >= 1 \(the new context over the trained one\); "
     r"got 0.5"),
    (lambda: rope_scaling.scaled_frequencies("pi", 8, float("inf"), 10), ValueError,
     r"scale must be a finite number >= 1 .*got inf"),
    (lambda: rope_scaling.scaled_frequencies("pi", 8, True, 10), ValueError,
     r"scale must be a finite number >= 1 .*got True"),
    (lambda: rope_scaling.scaled_frequencies("linear", 8, 2.0, 10), ValueError,
     r"method must be one of \('none', 'pi', 'ntk', 'ntk_by_parts', 'yarn'\); "
     r"got 'linear'"),
    (lambda: rope_scaling.scaled_frequencies("pi", 7, 2.0, 10), ValueError,
     r"d must be a positive even int"),
    (lambda: rope_scaling.scaled_frequencies("yarn", 8, 2.0, 0), ValueError,
     r"train_len must be an int >= 1; got int 0"),
    (lambda: rope_scaling.scaled_frequencies("yarn", 8, 2.0, 10, alpha=32, beta=1),
     ValueError, r"the ramp needs 0 < alpha < beta; got alpha=32, beta=1"),
    (lambda: rope_scaling.scaled_frequencies("yarn", 8, 2.0, 10, alpha=0, beta=32),
     ValueError, r"the ramp needs 0 < alpha < beta; got alpha=0, beta=32"),
    (lambda: rope_scaling.scaled_frequencies("yarn", 8, 2.0, 10, alpha=True),
     ValueError, r"the ramp needs 0 < alpha < beta; got alpha=True, beta=32.0"),
    (lambda: rope_scaling.correction_range(8, 10, beta=float("inf")), ValueError,
     r"the ramp needs 0 < alpha < beta; got alpha=1.0, beta=inf"),
    (lambda: rope_scaling.correction_range(8, 0), ValueError,
     r"train_len must be an int >= 1; got int 0"),
    (lambda: rope_scaling.correction_range(1, 10), ValueError,
     r"d_head must be an int >= 2; got int 1"),
    (lambda: rope_scaling.correction_range(8, 10, base=1.0), ValueError,
     r"base must be a finite number in \(1, inf\); got"),
    (lambda: rope_scaling.yarn_mscale(0.9), ValueError,
     r"scale must be a finite number >= 1 .*got 0.9"),
    (lambda: rope_scaling.extend(model(), 4, "pi"), ValueError,
     r"scale must be a finite number >= 1 .*got 0.5"),
    (lambda: rope_scaling.extend(model(), 16.0, "pi"), ValueError,
     r"seq_len must be an int >= 1; got float 16.0"),
    (lambda: rope_scaling.extend(model(), 16, "alibi"), ValueError,
     r"method must be one of .*got 'alibi'"),
    (lambda: rope_scaling.extend(torch.nn.Linear(2, 2), 16), TypeError,
     r"model must be a gpt.GPT; got Linear"),
    (lambda: rope_scaling.extend(model(positions="learned"), 16), ValueError,
     r"RoPE scaling needs a RoPE model; got positions='learned'"),
    (lambda: rope_scaling.loss_by_position(model(), torch.arange(5), 8), ValueError,
     r"the stream \(5 tokens\) is shorter than one window of seq_len=8 \+ 1"),
    (lambda: rope_scaling.loss_by_position(model(), torch.arange(20), 0), ValueError,
     r"seq_len must be an int >= 1; got int 0"),
    (lambda: rope_scaling.loss_by_position(model(), torch.zeros(20), 8), TypeError,
     r"ids must be an integer \(long\) tensor of token ids; got torch.float32"),
    (lambda: rope_scaling.loss_by_position(model(), torch.zeros(2, 20).long(), 8),
     ValueError, r"ids must be 1-D \(t,\) token ids; got shape \(2, 20\)"),
    (lambda: rope_scaling.ramp(2.5, 0, 1), ValueError,
     r"n_pairs must be an int >= 1; got float 2.5"),
    (lambda: rope_scaling.ramp(4, 3, 1), ValueError,
     r"high must be an int >= low = 3; got int 1"),
    (lambda: rope_scaling.ramp(4, float("nan"), 1), ValueError,
     r"low must be an int >= 0; got float nan"),
    (lambda: rope_scaling.scaled_frequencies("ntk", 2, 2.0, 16), ValueError,
     r"method 'ntk' needs an even d_head >= 4 \(its exponent is d/\(d-2\)\); got 2"),
    (lambda: rope_scaling.correction_range(5, 16), ValueError,
     r"d_head must be even \(RoPE rotates pairs\); got 5"),
    (lambda: rope_scaling.loss_by_position(model(), torch.zeros(40, dtype=torch.long),
                                           4, 0), ValueError,
     r"batch_size must be an int >= 1; got int 0"),
    (lambda: rope_scaling.loss_by_position("gpt", torch.zeros(40, dtype=torch.long), 4),
     TypeError, r"model must be a torch.nn.Module \(a gpt.GPT\); got str 'gpt'"),
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_bad_input_is_refused_with_a_clear_message(call, error, message):
    with pytest.raises(error, match=message):
        call()
