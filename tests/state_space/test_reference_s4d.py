"""S4D's initialisations against the reference formulas (Gu et al. 2022,
arXiv:2206.11893, and the state-spaces code), computed here independently."""

import math

import pytest
import torch

from lecturelib.state_space import s4d


def reference_s4d_inv(N: int) -> torch.Tensor:
    """state-spaces ``init="inv"``: ``-1/2 + i·N/π·(N/(1 + 2n) - 1)``, n < N/2,
    where N is the full state size (the conjugates included)."""
    imag = [N / math.pi * (N / (1 + 2 * n) - 1) for n in range(N // 2)]
    return torch.tensor([complex(-0.5, v) for v in imag], dtype=torch.complex128)


def reference_s4d_lin(N: int) -> torch.Tensor:
    """state-spaces ``init="lin"``: ``-1/2 + iπn``, n < N/2."""
    return torch.tensor(
        [complex(-0.5, math.pi * n) for n in range(N // 2)], dtype=torch.complex128
    )


def test_s4d_inv_known_answer_d_state_8():
    imag = s4d.s4d_init(8, "inv").imag
    assert imag.tolist() == pytest.approx([17.8254, 4.2441, 1.5279, 0.3638], abs=1e-4)
    assert imag.tolist() == pytest.approx(
        [56 / math.pi, 40 / (3 * math.pi), 24 / (5 * math.pi), 8 / (7 * math.pi)]
    )


@pytest.mark.parametrize("d_state", [2, 4, 8, 32, 64, 256])
def test_s4d_inits_match_reference(d_state):
    assert torch.allclose(s4d.s4d_init(d_state, "inv"), reference_s4d_inv(d_state))
    assert torch.allclose(s4d.s4d_init(d_state, "lin"), reference_s4d_lin(d_state))


@pytest.mark.parametrize("d_state", [2, 8, 64])
def test_s4d_inv_frequencies_positive_and_decreasing(d_state):
    imag = s4d.s4d_init(d_state, "inv").imag
    assert (imag > 0).all()
    assert (imag[1:] < imag[:-1]).all()


def test_s4d_layer_uses_the_init():
    layer = s4d.S4D(s4d.S4DConfig(d_model=3, d_state=8, init="inv"))
    expected = reference_s4d_inv(8).imag.float()
    assert torch.allclose(layer.A_imag, expected.repeat(3, 1))
