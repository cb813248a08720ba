"""lecturelib.state_space.hippo: the LegS matrices, their normal plus low-rank form, online
approximation of a signal's history."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from lecturelib.state_space import hippo


def test_legs_matrices_known_values():
    A, B = hippo.legs_matrices(3)
    s = math.sqrt
    expected = torch.tensor([[1, 0, 0], [s(3), 2, 0], [s(5), s(15), 3]], dtype=torch.float64)
    assert torch.allclose(A, expected)
    assert torch.allclose(B, torch.tensor([1, s(3), s(5)], dtype=torch.float64))


def test_minus_A_is_stable():
    A, _ = hippo.legs_matrices(16)
    eig = torch.linalg.eigvals(-A)
    assert torch.allclose(eig.real.sort().values,
                          -torch.arange(16, 0, -1, dtype=torch.float64))


@pytest.mark.parametrize("N", [1, 5, 32])
def test_nplr_form(N):
    A, _ = hippo.legs_matrices(N)
    S, P = hippo.legs_nplr(N)
    assert torch.allclose(S - P[:, None] * P[None, :], -A)
    assert torch.allclose(S + S.T, -torch.eye(N, dtype=torch.float64))
    assert torch.allclose(S @ S.T, S.T @ S)  # normal
    assert torch.allclose(torch.linalg.eigvals(S).real, torch.full((N,), -0.5,
                                                                   dtype=torch.float64))


def test_legendre_matches_numpy():
    x = torch.linspace(-1, 1, 11, dtype=torch.float64)
    ours = hippo.legendre(6, x)
    for n in range(6):
        coef = np.zeros(n + 1)
        coef[n] = 1
        assert np.allclose(ours[n].numpy(), np.polynomial.legendre.legval(x.numpy(), coef))


def test_a_polynomial_history_is_recovered_up_to_the_discretisation_error():
    """LegS projects onto polynomials: a quadratic is reconstructed up to the
    discretisation error, which falls like 1/L."""
    errors = []
    for L in (200, 800):
        t = torch.linspace(0, 1, L, dtype=torch.float64)
        f = 1 - 2 * t + 3 * t**2
        c = hippo.legs_scan(f, 8)
        errors.append((hippo.legs_reconstruct(c[-1], t) - f).abs().max().item())
    assert errors[1] < errors[0] / 3 and errors[1] < 0.05  # the error falls like 1/L


def test_more_state_reconstructs_better():
    t = torch.linspace(0, 1, 1000, dtype=torch.float64)
    f = torch.sin(2 * math.pi * 3 * t) + 0.5 * torch.cos(2 * math.pi * 7 * t) * t
    rmse = []
    for N in (8, 16, 32):
        c = hippo.legs_scan(f, N)[-1]
        rmse.append(((hippo.legs_reconstruct(c, t) - f) ** 2).mean().sqrt().item())
    assert rmse[0] > rmse[1] > rmse[2] and rmse[2] < 0.02


def test_scan_shapes_and_first_coefficient_is_the_running_mean():
    f = torch.rand(300, dtype=torch.float64)
    c = hippo.legs_scan(f, 4)
    assert c.shape == (300, 4) and c.dtype == torch.float64
    # c_0 tracks the mean of the history (g_0 = 1); the discretisation is close
    assert abs(c[-1, 0].item() - f.mean().item()) < 0.01
    assert hippo.legs_scan(f.float(), 4).dtype == torch.float32
