"""Bad input to lecturelib.state_space.ssm: the error and its message."""

from __future__ import annotations

import pytest
import torch

from lecturelib.state_space import s4d, ssm

A2, B2, C2 = -torch.eye(2), torch.ones(2), torch.ones(2)
x = torch.randn(1, 5)
CONFIG = s4d.S4DConfig(d_model=4, d_state=8)


def layer():
    torch.manual_seed(0)
    return s4d.S4D(CONFIG)


def net(**sizes):
    return s4d.S4DNet(s4d.S4DNetConfig(d_out=3, d_model=8, d_state=4, **sizes))


def token_net():
    torch.manual_seed(0)
    return net(vocab_size=5)


CASES = [
    (lambda: layer().step(torch.randn(2, 4), torch.zeros(1, 4, 4, dtype=torch.cfloat)),
     ValueError, r"h must be a complex state \(2, 4, 4\); got shape \(1, 4, 4\)"),
    (lambda: layer().step(torch.randn(2, 4), torch.zeros(2, 4, 4)), TypeError,
     r"h must be a complex state \(2, 4, 4\); got torch.float32 tensor"),
    (lambda: ssm.ssm_recurrent(A2, B2, C2, torch.randn(3, 5), h0=torch.zeros(2, 2)),
     ValueError, r"h0 must be a state of shape \(3, 2\); got torch.float32 tensor of "
     r"shape \(2, 2\)"),
    (lambda: ssm.discretize_zoh(A2, B2, 0.0), ValueError,
     r"dt \(the step Δ\) must be > 0 and finite; got 0.0"),
    (lambda: ssm.discretize_zoh(A2, B2, -0.1), ValueError,
     r"dt \(the step Δ\) must be > 0 and finite; got -0.1"),
    (lambda: ssm.discretize_zoh(-torch.ones(3), torch.ones(3), torch.tensor([0.1, 0.0, 0.2])),
     ValueError, r"dt \(the step Δ\) must be > 0 and finite; got values from 0 to 0.2"),
    (lambda: ssm.discretize_bilinear(A2, B2, float("nan")), ValueError,
     r"dt \(the step Δ\) must be > 0 and finite; got nan"),
    (lambda: ssm.discretize_bilinear(torch.tensor([2.0, -1.0]), torch.ones(2), 1.0),
     ValueError, r"the bilinear rule divides by I - Δ/2·A, which is singular here \(an "
     r"eigenvalue of A equals 2/Δ\): choose another step dt or use discretize_zoh"),
    (lambda: ssm.discretize_bilinear(torch.tensor([[2.0, 1.0], [0.0, -1.0]]), B2, 1.0),
     ValueError, r"the bilinear rule divides by I - Δ/2·A, which is singular here"),
    (lambda: ssm.discretize_bilinear(torch.tensor([4.0 + 0j]), torch.ones(1) + 0j,
                                     torch.tensor([0.5])),
     ValueError, r"the bilinear rule divides by I - Δ/2·A, which is singular here"),
    (lambda: ssm.discretize_zoh(A2, B2, "0.1"), TypeError,
     r"dt must be a positive float or a float tensor; got str '0.1'"),
    (lambda: ssm.discretize_zoh(A2, torch.ones(3), 0.1), ValueError,
     r"state sizes do not match: A must be \(N, N\) with B \(N,\), or a diagonal \(\.\.\., N\) "
     r"with B of the same shape; got A \(2, 2\) and B \(3,\)"),
    (lambda: ssm.discretize_zoh(torch.ones(2, 3), torch.ones(2), 0.1), ValueError,
     r"state sizes do not match: .*got A \(2, 3\) and B \(2,\)"),
    (lambda: ssm.discretize_zoh([[1.0]], B2, 0.1), TypeError,
     r"A must be a float or complex tensor \(N, N\) or a diagonal \(\.\.\., N\); got list"),
    (lambda: ssm.discretize_zoh(A2, B2, torch.tensor([0.1, 0.2])), ValueError,
     r"dense A takes one step dt; got dt of shape \(2,\)"),
    (lambda: ssm.ssm_recurrent(A2, B2, torch.ones(3), x), ValueError,
     r"state sizes do not match: C must have shape \(2,\) like B; got C \(3,\)"),
    (lambda: ssm.ssm_kernel(-torch.ones(4), torch.ones(4), torch.ones(2), 8), ValueError,
     r"state sizes do not match: C must have shape \(4,\) like A; got C \(2,\)"),
    (lambda: ssm.ssm_recurrent(A2, B2, C2, torch.arange(5)), TypeError,
     r"x must be a real float tensor \(\.\.\., L\); got torch.int64 tensor of shape \(5,\)"),
    (lambda: ssm.ssm_kernel(A2, B2, C2, 0), ValueError, r"L must be an int >= 1; got int 0"),
    (lambda: ssm.ssm_convolve(x, torch.ones(4)), ValueError,
     r"K must be \(\.\.\., L\) with the L = 5 of x; got shape \(4,\)"),
    (lambda: ssm.ssm_convolve(x, torch.ones(5), method="fast"), ValueError,
     r"method must be 'fft' or 'direct'; got 'fast'"),
    (lambda: s4d.s4d_init(8, "legs"), ValueError,
     r"init must be one of \('lin', 'inv'\); got 'legs'"),
    (lambda: s4d.S4DConfig(d_model=4, d_state=8, init="linear"), ValueError,
     r"init must be one of \('lin', 'inv'\); got 'linear'"),
    (lambda: s4d.S4DConfig(d_model=4, d_state=7), ValueError,
     r"d_state must be even \(d_state/2 complex conjugate pairs\); got 7"),
    (lambda: s4d.S4DConfig(d_model=0, d_state=8), ValueError,
     r"d_model must be an int >= 1; got int 0"),
    (lambda: s4d.S4DConfig(d_model=4, d_state=8, dt_min=0.0), ValueError,
     r"dt_min must be a finite number in \(0, inf\); got float 0.0"),
    (lambda: s4d.S4DConfig(d_model=4, d_state=8, dt_min=0.1, dt_max=0.01), ValueError,
     r"dt_max must be a finite number in \[0.1, inf\); got float 0.01"),
    (lambda: s4d.S4D({"d_model": 4, "d_state": 8}), TypeError,
     r"config must be an S4DConfig; got dict"),
    (lambda: s4d.S4DConfig(4, 8), TypeError, r"takes 1 positional argument"),
    (lambda: layer()(torch.randn(2, 10, 3)), ValueError,
     r"S4D input must be \(b, t, d_model=4\); got shape \(2, 10, 3\)"),
    (lambda: layer()(torch.randn(10, 4)), ValueError,
     r"S4D input must be a float tensor \(b, t, d_model=4\); got torch.float32 tensor of "
     r"shape \(10, 4\)"),
    (lambda: layer().kernel(0), ValueError, r"L must be an int >= 1; got int 0"),
    (lambda: layer().step(torch.randn(2, 3)), ValueError,
     r"u_t must be \(b, d_model=4\); got shape \(2, 3\)"),
    (lambda: layer().step(torch.randn(2, 3, 4)), ValueError,
     r"u_t must be a float tensor \(b, d_model=4\); got torch.float32 tensor of shape "
     r"\(2, 3, 4\)"),
    (lambda: layer()(torch.zeros(2, 10, 4, dtype=torch.long)), TypeError,
     r"S4D input must be a float tensor \(b, t, d_model=4\); got torch.int64"),
    (lambda: s4d.S4DNetConfig(d_out=3, vocab_size=5, d_in=2), ValueError,
     r"give exactly one of vocab_size \(token input\) and d_in \(feature input\)"),
    (lambda: s4d.S4DNetConfig(d_out=3), ValueError,
     r"give exactly one of vocab_size \(token input\) and d_in \(feature input\); got "
     r"vocab_size=None, d_in=None"),
    (lambda: s4d.S4DNetConfig(d_out=0, vocab_size=5), ValueError,
     r"d_out must be an int >= 1; got int 0"),
    (lambda: s4d.S4DNetConfig(d_out=3, vocab_size=5, n_layers=0), ValueError,
     r"n_layers must be an int >= 1; got int 0"),
    (lambda: s4d.S4DNetConfig(d_out=3, d_in=2.0), ValueError,
     r"d_in must be an int >= 1; got float 2.0"),
    (lambda: s4d.S4DNetConfig(vocab_size=5), TypeError, r"missing 1 required "
     r"keyword-only argument: 'd_out'"),
    (lambda: s4d.S4DNet(CONFIG), TypeError,
     r"config must be an S4DNetConfig; got S4DConfig"),
    (lambda: s4d.S4DBlock(s4d.S4DNetConfig), TypeError,
     r"config must be an S4DConfig; got type"),
    (lambda: net(vocab_size=5)(torch.randn(2, 4)), TypeError,
     r"S4DNet with vocab_size takes \(b, t\) token ids; got torch.float32"),
    (lambda: net(d_in=2)(torch.randn(2, 4, 3)), ValueError,
     r"S4DNet with d_in=2 takes \(b, t, 2\) features; got torch.float32 tensor of shape "
     r"\(2, 4, 3\)"),
    (lambda: s4d.S4DConfig(d_model=4, d_state=8, dropout=1.0), ValueError,
     r"dropout must be a number in \[0, 1\); got float 1.0"),
    (lambda: s4d.S4DConfig(d_model=4, d_state=8, dropout="0.1"), ValueError,
     r"dropout must be a number in \[0, 1\); got str '0.1'"),
    (lambda: s4d.S4DBlock(s4d.S4DConfig(d_model=4, d_state=7)), ValueError,
     r"d_state must be even \(d_state/2 complex conjugate pairs\); got 7"),
    (lambda: s4d.S4DBlock(CONFIG)(torch.zeros(2, 3, 5)), ValueError,
     r"S4DBlock input must be \(b, t, d_model=4\); got shape \(2, 3, 5\)"),
    (lambda: net(vocab_size=5, dropout=None),
     ValueError, r"dropout must be a number in \[0, 1\); got NoneType None"),
    (lambda: token_net()(torch.full((2, 4), 7)), ValueError,
     r"S4DNet's input must hold token ids in 0..4; got ids from 7 to 7"),
    (lambda: token_net()(torch.full((2, 4), -1)), ValueError,
     r"S4DNet's input must hold token ids in 0..4; got ids from -1 to -1"),
    (lambda: token_net()(torch.ones(2, 4, dtype=torch.bool)), TypeError,
     r"S4DNet with vocab_size takes \(b, t\) token ids; got torch.bool"),
    (lambda: token_net()(torch.zeros(2, 0, dtype=torch.long)), ValueError,
     r"S4DNet's input must hold t >= 1 steps; got shape \(2, 0\)"),
    (lambda: layer()(torch.zeros(2, 0, 4)), ValueError,
     r"S4D input must hold t >= 1 steps; got shape \(2, 0, 4\)"),
    # is_diagonal, skip
    (lambda: ssm.is_diagonal([1.0], torch.ones(2)), TypeError,
     r"A must be a float or complex tensor \(N, N\) or a diagonal \(\.\.\., N\); got list"),
    (lambda: ssm.is_diagonal(torch.ones(2).long(), torch.ones(2)), TypeError,
     r"A must be a float or complex tensor .*got torch.int64"),
    (lambda: ssm.is_diagonal(torch.ones(3), torch.ones(2)), ValueError,
     r"state sizes do not match: A must be \(N, N\) with B \(N,\), or a diagonal "
     r"\(\.\.\., N\) with B of the same shape; got A \(3,\) and B \(2,\)"),
    (lambda: ssm.is_diagonal(torch.eye(2), torch.ones(3)), ValueError,
     r"state sizes do not match: .*got A \(2, 2\) and B \(3,\)"),
    (lambda: ssm.is_diagonal(torch.tensor(1.0), torch.tensor(1.0)), ValueError,
     r"state sizes do not match: .*got A \(\) and B \(\)"),
    (lambda: ssm.skip("2", x), ValueError, r"D must be a finite number in .*got str '2'"),
    (lambda: ssm.skip(float("nan"), x), ValueError,
     r"D must be a finite number in .*got float nan"),
    (lambda: ssm.skip(torch.ones(5), torch.randn(5)), ValueError,
     r"D must be a number or one value per sequence of x, a tensor broadcasting to x's "
     r"\(\); got shape \(5,\)"),
    (lambda: ssm.skip(torch.ones(4), torch.randn(3, 5)), ValueError,
     r"D must be a number or one value per sequence of x, .*x's \(3,\); got shape \(4,\)"),
    (lambda: ssm.skip(torch.ones(2, 3), torch.randn(3, 5)), ValueError,
     r"D must be a number or one value per sequence of x, .*x's \(3,\); got shape \(2, 3\)"),
    (lambda: ssm.skip(torch.ones(3).long(), torch.randn(3, 5)), TypeError,
     r"D must be a float or complex tensor \(\.\.\.\) of one value per sequence of x; got "
     r"torch.int64"),
    (lambda: ssm.skip(2.0, [1.0]), TypeError, r"x must be a real float tensor \(\.\.\., L\); "
     r"got list"),
    (lambda: ssm.skip(2.0, torch.ones(3).long()), TypeError,
     r"x must be a real float tensor \(\.\.\., L\); got torch.int64"),
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_bad_input_is_refused_with_a_clear_message(call, error, message):
    with pytest.raises(error, match=message):
        call()
