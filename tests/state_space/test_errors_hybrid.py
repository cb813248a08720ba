"""Bad input to lecturelib.state_space.hybrid: the error and its message."""

from __future__ import annotations

import pytest
import torch

from lecturelib.state_space import hybrid, mamba


def config(**fields):
    return hybrid.HybridConfig(d_model=8, vocab_size=5, d_state=2, **fields)


X = torch.zeros(2, 4, dtype=torch.long)
Y = torch.full((2, 4), -100)

CASES = [
    (lambda: hybrid.default_init("model"), TypeError,
     r"model must be a torch.nn.Module; got str"),
    (lambda: hybrid.build("gru", 5), ValueError,
     r"kind must be one of \('rnn', 'lstm', 'transformer', 's4d', 'mamba', 'hybrid'\); "
     r"got 'gru'"),
    (lambda: hybrid.build("hybrid", 5, n_layers=1), ValueError,
     r"a hybrid needs n_layers >= 2 \(a Mamba layer and an attention layer\); got "
     r"n_layers=1, which builds no attention layer"),
    (lambda: hybrid.build("transformer", 5, d_model=30, n_heads=4), ValueError,
     r"d_model \(30\) must be divisible by n_heads \(4\) for the attention layers"),
    (lambda: hybrid.build("hybrid", 5, scan="fft"), ValueError,
     r"scan must be one of \('loop', 'parallel', 'chunked'\); got str 'fft'"),
    (lambda: hybrid.state_bytes("lstm", 8), TypeError,
     r"model must be a torch.nn.Module; got str 'lstm'"),
    (lambda: hybrid.RecurrentLM("gru", 5, 8, 1), ValueError,
     r"cell must be 'rnn' or 'lstm'; got 'gru'"),
    (lambda: hybrid.RecurrentLM("rnn", 5, 0, 1), ValueError,
     r"d_model must be an int >= 1; got int 0"),
    (lambda: hybrid.build("mamba", 5, d_model=0), ValueError,
     r"d_model must be an int >= 1; got int 0"),
    (lambda: config(pattern="MXA"), ValueError,
     r"pattern must be a non-empty string of 'M' \(Mamba\) and 'A' \(attention\); "
     r"got 'MXA'"),
    (lambda: config(pattern=""), ValueError, r"pattern must be a non-empty"),
    (lambda: config(pattern=["M", "A"]), TypeError, r"pattern must be a non-empty string"),
    (lambda: config(n_heads=0), ValueError, r"HybridConfig.n_heads must be an int >= 1; "
     r"got int 0"),
    (lambda: config(seq_len=2.5), ValueError,
     r"HybridConfig.seq_len must be an int >= 1; got float 2.5"),
    (lambda: config(n_heads=3), ValueError,
     r"HybridConfig.d_model \(8\) must be divisible by n_heads \(3\) for the attention "
     r"layers"),
    (lambda: hybrid.HybridConfig(d_model=0), ValueError,
     r"HybridConfig.d_model must be an int >= 1; got int 0"),
    (lambda: hybrid.HybridLM({"d_model": 8}), TypeError,
     r"config must be a HybridConfig; got dict"),
    (lambda: hybrid.HybridLM(mamba.MambaConfig(d_model=8, vocab_size=5, d_state=2)),
     TypeError, r"config must be a HybridConfig; got MambaConfig"),
    (lambda: hybrid.HybridLM(config(n_heads=2, seq_len=4))(
        torch.zeros(1, 5, dtype=torch.long)), ValueError,
     r"ids has 5 positions; the model takes at most seq_len = 4"),
    (lambda: hybrid.accuracy(hybrid.build("rnn", 5, d_model=4), X, Y), ValueError,
     r"y scores no position \(every target is IGNORE\)"),
    (lambda: hybrid.accuracy(hybrid.build("rnn", 5, d_model=4), X, Y[:, :3]), ValueError,
     r"y must be a tensor of x's shape \(2, 4\); got torch.int64 tensor of shape \(2, 3\)"),
    (lambda: hybrid.train_task(hybrid.build("rnn", 5, d_model=4), None, 3), TypeError,
     r"make_batch must be callable; got NoneType None"),
    (lambda: hybrid.train_task(hybrid.build("rnn", 5, d_model=4), lambda s: (X, Y), 0),
     ValueError, r"steps must be an int >= 1; got int 0"),
    (lambda: hybrid.train_task(hybrid.build("rnn", 5, d_model=4), lambda s: (X, Y), 2,
                               lr=0.0), ValueError, r"lr must be"),
    (lambda: hybrid.state_bytes(torch.nn.Linear(2, 2), 8), ValueError,
     r"no recurrent or attention layer found in Linear"),
    (lambda: hybrid.state_bytes(hybrid.build("rnn", 5, d_model=4), 0), ValueError,
     r"length must be an int >= 1; got int 0"),
    (lambda: hybrid.state_bytes(hybrid.build("rnn", 5, d_model=4), 8, 0), ValueError,
     r"bytes_per_value must be an int >= 1; got int 0"),
    (lambda: hybrid.state_bytes(hybrid.build("rnn", 5, d_model=4), 8, 2.5), ValueError,
     r"bytes_per_value must be an int >= 1; got float 2.5"),
    (lambda: hybrid.state_bytes(hybrid.build("rnn", 5, d_model=4), float("inf")),
     ValueError, r"length must be an int >= 1; got float inf"),
    (lambda: hybrid.build("rnn", 5, n_heads=0), ValueError,
     r"n_heads must be an int >= 1; got int 0"),
    (lambda: hybrid.build("mamba", 5, d_state=True), ValueError,
     r"d_state must be an int >= 1; got bool True"),
    (lambda: hybrid.accuracy(hybrid.build("rnn", 5, d_model=4), X, torch.full((2, 4), 7)),
     ValueError, r"accuracy\(\): targets must be class ids in 0..4 \(v = 5\)"),
    (lambda: hybrid.accuracy(hybrid.build("rnn", 5, d_model=4), X, torch.zeros(2, 4)),
     TypeError, r"accuracy\(\): targets must be integer class ids \(a long tensor\); "
     r"got dtype torch.float32"),
    (lambda: hybrid.accuracy(hybrid.build("rnn", 5, d_model=4), X + 5, X), ValueError,
     r"ids must hold token ids in 0..4; got ids from 5 to 5"),
    # S4DLM
    (lambda: hybrid.S4DLM(0, 8, 1), ValueError, r"vocab_size must be an int >= 1; got int 0"),
    (lambda: hybrid.S4DLM(5, 8.0, 1), ValueError,
     r"d_model must be an int >= 1; got float 8.0"),
    (lambda: hybrid.S4DLM(5, 8, 0), ValueError, r"n_layers must be an int >= 1; got int 0"),
    (lambda: hybrid.S4DLM("5", 8, 1), ValueError,
     r"vocab_size must be an int >= 1; got str '5'"),
    (lambda: hybrid.S4DLM(5, 8, 1, d_state=0), ValueError,
     r"d_state must be an int >= 2; got int 0"),
    (lambda: hybrid.S4DLM(5, 8, 1, d_state=4)(X.float()), TypeError,
     r"ids must be an integer \(long\) tensor of token ids; got torch.float32"),
    (lambda: hybrid.S4DLM(5, 8, 1, d_state=4)(X + 5), ValueError,
     r"ids must hold token ids in 0..4; got ids from 5 to 5"),
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_bad_input_is_refused_with_a_clear_message(call, error, message):
    with pytest.raises(error, match=message):
        call()
