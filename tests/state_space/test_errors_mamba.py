"""Bad input to lecturelib.state_space.mamba: the error and its message."""

from __future__ import annotations

import pytest
import torch

from lecturelib.state_space import mamba


def model():
    torch.manual_seed(0)
    return mamba.MambaLM(mamba.MambaConfig(d_model=8, n_layers=1, vocab_size=5, d_state=2))


def block():
    torch.manual_seed(0)
    return mamba.MambaBlock(mamba.MambaConfig(d_model=8, d_state=2))


CASES = [
    (lambda: model().step(torch.tensor([1, 2]), model().init_state(1)), ValueError,
     r"state must be \(conv, ssm\) of shapes \(2, 16, 3\) and \(2, 16, 2\) for a batch "
     r"of 2 \(from init_state\(2\)\); got \(1, 16, 3\) and \(1, 16, 2\)"),
    (lambda: model().step(torch.tensor([1]), model().init_state(3)), ValueError,
     r"state must be \(conv, ssm\) of shapes \(1, 16, 3\) and \(1, 16, 2\) for a batch "
     r"of 1"),
    (lambda: block().step(torch.zeros(2, 8), block().init_state(2)[0]), TypeError,
     r"state must be a pair of tensors \(conv, ssm\) from init_state"),
    (lambda: block().step(torch.zeros(2, 7), block().init_state(2)), ValueError,
     r"x_t must be a floating \(b, d_model=8\) tensor; got torch.float32 tensor of "
     r"shape \(2, 7\)"),
    (lambda: block().step(torch.zeros(2, 8, dtype=torch.long), block().init_state(2)),
     TypeError, r"x_t must be a floating \(b, d_model=8\) tensor"),
    (lambda: model().step(torch.tensor([5]), model().init_state(1)), ValueError,
     r"ids_t must hold token ids in 0..4; got ids from 5 to 5"),
    (lambda: mamba.MambaConfig(d_model=0), ValueError,
     r"MambaConfig.d_model must be an int >= 1; got int 0"),
    (lambda: mamba.MambaConfig(d_state=2.5), ValueError,
     r"MambaConfig.d_state must be an int >= 1; got float 2.5"),
    (lambda: mamba.MambaConfig(d_conv=0), ValueError,
     r"MambaConfig.d_conv must be an int >= 1; got int 0"),
    (lambda: mamba.MambaConfig(dt_min=0.0), ValueError, r"MambaConfig.dt_min must be"),
    (lambda: mamba.MambaConfig(dt_min=0.1, dt_max=0.01), ValueError,
     r"MambaConfig.dt_max must be > dt_min = 0.1; got 0.01"),
    (lambda: mamba.MambaConfig(scan="fft"), ValueError,
     r"MambaConfig.scan must be one of \('loop', 'parallel', 'chunked'\); got 'fft'"),
    (lambda: mamba.CausalConv1d(4, 3, padding=1), ValueError,
     r"a causal conv1d pads kernel_size - 1 = 2 steps on the left only; got padding=1"),
    (lambda: mamba.CausalConv1d(4, 3, padding=4), ValueError,
     r"pads kernel_size - 1 = 2 steps .*got padding=4"),
    (lambda: mamba.CausalConv1d(4, 0), ValueError, r"kernel_size must be an int >= 1"),
    (lambda: mamba.MambaBlock({"d_model": 8}), TypeError,
     r"config must be a MambaConfig; got dict"),
    (lambda: mamba.MambaLM(None), TypeError, r"config must be a MambaConfig; got NoneType"),
    (lambda: mamba.MambaBlock(mamba.MambaConfig(d_model=8))(torch.zeros(2, 3, 7)),
     ValueError, r"x must be a floating \(b, t, d_model=8\) tensor; got torch.float32 "
     r"tensor of shape \(2, 3, 7\)"),
    (lambda: model()(torch.zeros(2, 3)), TypeError,
     r"ids must be an integer \(long\) tensor of token ids"),
    (lambda: model()(torch.tensor([[1, 5]])), ValueError,
     r"ids must hold token ids in 0..4; got ids from 1 to 5"),
    (lambda: model()(torch.zeros(3, dtype=torch.long)), ValueError,
     r"ids must be 2-D \(b, t\) token ids; got shape \(3,\)"),
    (lambda: model().step(torch.zeros(2, dtype=torch.long), []), ValueError,
     r"states must be a list of 1 layer states \(from init_state\)"),
    (lambda: model().init_state(0), ValueError, r"batch must be an int >= 1; got int 0"),
    (lambda: mamba.generate(torch.nn.Linear(2, 2), torch.zeros(1, 2, dtype=torch.long), 3),
     TypeError, r"model must be a MambaLM; got Linear"),
    (lambda: mamba.generate(model(), torch.zeros(1, 0, dtype=torch.long), 3), ValueError,
     r"prompt must hold at least 1 token id\(s\); got shape \(1, 0\)"),
    (lambda: mamba.generate(model(), torch.zeros(1, 2, dtype=torch.long), -1), ValueError,
     r"n_new must be an int >= 0; got int -1"),
    (lambda: mamba.state_bytes(["a"]), TypeError, r"states must hold tensors; got str 'a'"),
    # Residual
    (lambda: mamba.Residual(0, torch.nn.Linear(4, 4)), ValueError,
     r"d_model must be an int >= 1; got int 0"),
    (lambda: mamba.Residual("4", torch.nn.Linear(4, 4)), ValueError,
     r"d_model must be an int >= 1; got str '4'"),
    (lambda: mamba.Residual(4, lambda x: x), TypeError,
     r"layer must be an nn.Module; got function"),
    (lambda: mamba.Residual(4, torch.nn.Linear(4, 4))(torch.zeros(2, 3, 5)), ValueError,
     r"x must be \(\.\.\., d_model\) with d_model = 4; got shape \(2, 3, 5\)"),
    (lambda: mamba.Residual(4, torch.nn.Linear(4, 4))(torch.zeros(2, 3, 4).long()),
     TypeError, r"x must be a float tensor \(\.\.\., d_model\); got torch.int64"),
    (lambda: mamba.Residual(4, torch.nn.Linear(4, 4))(torch.tensor(1.0)), ValueError,
     r"x must be \(\.\.\., d_model\) with d_model = 4; got shape \(\)"),
    (lambda: mamba.Residual(4, torch.nn.Linear(4, 4)).step(torch.zeros(2, 4), None),
     TypeError, r"Residual.step needs a layer with a step method \(a MambaBlock\); got "
     r"Linear"),
    (lambda: mamba.Residual(8, block()).step(torch.zeros(2, 7), block().init_state(2)),
     ValueError, r"x_t must be \(b, d_model\) with d_model = 8; got shape \(2, 7\)"),
    (lambda: mamba.Residual(8, block()).step(torch.zeros(2, 3, 8), block().init_state(2)),
     ValueError, r"x_t must be \(b, d_model\); got shape \(2, 3, 8\)"),
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_bad_input_is_refused_with_a_clear_message(call, error, message):
    with pytest.raises(error, match=message):
        call()
