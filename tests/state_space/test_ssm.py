"""lecturelib.state_space.ssm: discretisation, the recurrent and convolutional modes, S4D."""

from __future__ import annotations

import pytest
import torch

from lecturelib.state_space import s4d, ssm


def dense(n, seed=0):
    g = torch.Generator().manual_seed(seed)
    A = -torch.eye(n, dtype=torch.float64) + 0.3 * torch.randn(n, n, generator=g,
                                                               dtype=torch.float64)
    B = torch.randn(n, generator=g, dtype=torch.float64)
    C = torch.randn(n, generator=g, dtype=torch.float64)
    return A, B, C


def complex_diagonal(h, n, seed=0):
    g = torch.Generator().manual_seed(seed)
    A = torch.complex(-torch.rand(h, n, generator=g, dtype=torch.float64) - 0.1,
                      3 * torch.randn(h, n, generator=g, dtype=torch.float64))
    B = torch.randn(h, n, generator=g, dtype=torch.cdouble)
    C = torch.randn(h, n, generator=g, dtype=torch.cdouble)
    return A, B, C


def test_zoh_matches_the_closed_formula():
    A, B, _ = dense(6)
    dt = 0.07
    Abar, Bbar = ssm.discretize_zoh(A, B, dt)
    eye = torch.eye(6, dtype=torch.float64)
    assert torch.allclose(Abar, torch.linalg.matrix_exp(dt * A))
    formula = torch.linalg.solve(dt * A, (torch.linalg.matrix_exp(dt * A) - eye) @ (dt * B))
    assert torch.allclose(Bbar, formula, atol=1e-12)


def test_zoh_diagonal_equals_dense_on_a_diagonal_matrix():
    a = -torch.rand(5, dtype=torch.float64) - 0.1
    b = torch.randn(5, dtype=torch.float64)
    Ad, Bd = ssm.discretize_zoh(torch.diag(a), b, 0.3)
    ad, bd = ssm.discretize_zoh(a, b, 0.3)
    assert torch.allclose(torch.diagonal(Ad), ad) and torch.allclose(Bd, bd)


def test_zoh_with_a_zero_eigenvalue_is_the_limit():
    Abar, Bbar = ssm.discretize_zoh(torch.zeros(3), torch.ones(3), 0.5)
    assert torch.allclose(Abar, torch.ones(3)) and torch.allclose(Bbar, torch.full((3,), 0.5))


def test_bilinear_and_zoh_agree_to_second_order_in_dt():
    A, B, _ = dense(4)
    for dt, tol in ((1e-2, 1e-5), (1e-3, 1e-8)):
        z, b = ssm.discretize_zoh(A, B, dt), ssm.discretize_bilinear(A, B, dt)
        assert (z[0] - b[0]).abs().max() < tol and (z[1] - b[1]).abs().max() < tol


@pytest.mark.parametrize("dt", [0.01, 0.1, 1.0])
@pytest.mark.parametrize("n", [1, 4, 16])
@pytest.mark.parametrize("L", [1, 7, 64])
def test_recurrent_equals_convolutional_dense(dt, n, L):
    A, B, C = dense(n)
    Abar, Bbar = ssm.discretize_zoh(A, B, dt)
    x = torch.randn(3, L, dtype=torch.float64)
    y_rec = ssm.ssm_recurrent(Abar, Bbar, C, x, D=0.5)
    K = ssm.ssm_kernel(Abar, Bbar, C, L)
    assert torch.allclose(y_rec, ssm.ssm_convolve(x, K, D=0.5), atol=1e-10)
    assert torch.allclose(y_rec, ssm.ssm_convolve(x, K, D=0.5, method="direct"), atol=1e-10)


@pytest.mark.parametrize("dt", [0.01, 0.1, 1.0])
@pytest.mark.parametrize("n", [1, 8])
@pytest.mark.parametrize("L", [5, 100])
def test_recurrent_equals_convolutional_complex_diagonal(dt, n, L):
    A, B, C = complex_diagonal(4, n)
    Abar, Bbar = ssm.discretize_zoh(A, B, dt)
    x = torch.randn(2, 4, L, dtype=torch.float64)
    D = torch.randn(4, dtype=torch.float64)
    y_rec = ssm.ssm_recurrent(Abar, Bbar, C, x, D=D)
    y_conv = ssm.ssm_convolve(x, ssm.ssm_kernel(Abar, Bbar, C, L), D=D)
    assert y_rec.dtype == torch.float64 and y_rec.shape == (2, 4, L)
    assert torch.allclose(y_rec, y_conv, atol=1e-10)


def test_recurrent_returns_and_continues_from_its_state():
    A, B, C = complex_diagonal(2, 3)
    Abar, Bbar = ssm.discretize_zoh(A, B, 0.1)
    x = torch.randn(2, 30, dtype=torch.float64)
    whole = ssm.ssm_recurrent(Abar, Bbar, C, x)
    first, h = ssm.ssm_recurrent(Abar, Bbar, C, x[:, :10], return_state=True)
    rest = ssm.ssm_recurrent(Abar, Bbar, C, x[:, 10:], h0=h)
    assert torch.allclose(whole, torch.cat([first, rest], -1))


def test_dense_and_diagonal_kernels_agree_after_diagonalising():
    A, B, C = dense(5, seed=3)
    lam, V = torch.linalg.eig(A)
    Bd = torch.linalg.solve(V, B.to(V.dtype))
    Cd = C.to(V.dtype) @ V
    K1 = ssm.ssm_kernel(*ssm.discretize_zoh(A, B, 0.2), C, 40)
    K2 = ssm.ssm_kernel(*ssm.discretize_zoh(lam, Bd, 0.2), Cd, 40)
    assert torch.allclose(K1, K2, atol=1e-9)


def test_s4d_init_values():
    lin = s4d.s4d_init(8, "lin")
    assert torch.allclose(lin.real, torch.full((4,), -0.5, dtype=torch.float64))
    assert torch.allclose(lin.imag, torch.pi * torch.arange(4, dtype=torch.float64))
    inv = s4d.s4d_init(8, "inv")
    n = torch.arange(4, dtype=torch.float64)  # N = d_state = 8, n over the 4 pairs
    assert torch.allclose(inv.imag, 8 / torch.pi * (8 / (2 * n + 1) - 1))
    assert (inv.imag > 0).all()


@pytest.mark.parametrize("init", ["lin", "inv"])
def test_s4d_modes_agree_and_shapes(init):
    torch.manual_seed(0)
    layer = s4d.S4D(s4d.S4DConfig(d_model=6, d_state=16, init=init))
    u = torch.randn(2, 50, 6)
    y = layer(u)
    assert y.shape == (2, 50, 6) and layer.kernel(50).shape == (6, 50)
    assert layer.kernel(50).dtype == torch.float32
    assert torch.allclose(y, layer.recurrent(u), atol=1e-5)
    h, steps = None, []
    for t in range(50):
        y_t, h = layer.step(u[:, t], h)
        steps.append(y_t)
    assert torch.allclose(y, torch.stack(steps, 1), atol=1e-5)


def test_s4d_is_causal_and_learns_its_parameters():
    torch.manual_seed(0)
    layer = s4d.S4D(s4d.S4DConfig(d_model=3, d_state=8))
    u = torch.randn(1, 20, 3, requires_grad=True)
    layer(u)[0, 9].sum().backward()
    # the FFT leaves round-off (~1e-8) where the exact gradient is zero
    assert u.grad[0, 10:].abs().max() < 1e-6 < u.grad[0, :10].abs().max()
    for p in layer.parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all()


def test_s4d_steps_lie_in_range():
    torch.manual_seed(0)
    layer = s4d.S4D(s4d.S4DConfig(d_model=200, d_state=4, dt_min=1e-3, dt_max=1e-1))
    dt = layer.log_dt.exp()
    assert dt.min() >= 1e-3 and dt.max() <= 1e-1


def test_s4dnet_tokens_and_features():
    torch.manual_seed(0)
    sizes = dict(d_model=16, d_state=8)
    tok = s4d.S4DNet(s4d.S4DNetConfig(d_out=5, n_layers=2, vocab_size=7, **sizes))
    assert tok(torch.randint(0, 7, (2, 12))).shape == (2, 12, 5)
    feat = s4d.S4DNet(s4d.S4DNetConfig(d_out=1, n_layers=1, d_in=2, **sizes))
    assert feat(torch.randn(2, 12, 2)).shape == (2, 12, 1)


def test_real_diagonal_kernel_with_negative_entries_matches_powers():
    Abar = torch.tensor([0.9, -0.5, 0.0], dtype=torch.float64)
    Bbar = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    C = torch.tensor([0.5, 1.0, -1.0], dtype=torch.float64)
    K = ssm.ssm_kernel(Abar[:2], Bbar[:2], C[:2], 6)
    expected = torch.stack([(C[:2] * Bbar[:2] * Abar[:2] ** k).sum() for k in range(6)])
    assert torch.allclose(K, expected, atol=1e-12)
    x = torch.randn(3, 6, dtype=torch.float64)
    assert torch.allclose(ssm.ssm_recurrent(Abar[:2], Bbar[:2], C[:2], x),
                          ssm.ssm_convolve(x, K), atol=1e-12)


def test_s4d_kernel_is_the_closed_formula():
    torch.manual_seed(0)
    layer = s4d.S4D(s4d.S4DConfig(d_model=3, d_state=8, init="lin"))
    with torch.no_grad():
        dt = layer.log_dt.exp()[:, None].double()
        A = torch.complex(-layer.log_A_real.exp(), layer.A_imag).to(torch.cdouble)
        C = torch.view_as_complex(layer.C).to(torch.cdouble)
        ell = torch.arange(20, dtype=torch.float64)
        Bbar = (torch.exp(dt * A) - 1) / A
        K = 2 * torch.einsum("hn,hnl->hl", C * Bbar,
                             torch.exp(dt[..., None] * A[..., None] * ell)).real
        assert torch.allclose(layer.kernel(20).double(), K, atol=1e-5)


def test_fft_convolution_does_not_wrap_around():
    x = torch.zeros(1, 8, dtype=torch.float64)
    x[0, -1] = 1.0                         # an impulse at the last step
    K = torch.ones(8, dtype=torch.float64)
    y = ssm.ssm_convolve(x, K)
    assert torch.allclose(y[0, :-1], torch.zeros(7, dtype=torch.float64), atol=1e-12)
    assert abs(y[0, -1].item() - 1.0) < 1e-12
