"""Chapter 2: vanishing and exploding gradients in a recurrent network.

- `jacobian_norms` measures `‖∂h_T/∂h_t‖` of an `rnn.ElmanCell` by automatic
  differentiation, the quantity whose exponential decay or growth is the
  vanishing/exploding gradient problem of Bengio, Simard and Frasconi (1994) and
  Pascanu, Mikolov and Bengio (2013, arXiv:1211.5063);
- `init_recurrent_` sets recurrent weights to a chosen spectral radius, an
  orthogonal matrix, or the identity (the IRNN of Le, Jaitly and Hinton, 2015,
  arXiv:1504.00941, uses ReLU; here the identity is used with tanh);
- `clip_grad_norm` is gradient clipping by the global norm (Pascanu et al., 2013).

Shapes use `t` time, `d` width.
"""

from __future__ import annotations

import torch

from lecturelib.recurrence.rnn import ElmanCell
from lecturelib.validate import check_number, check_tensor, describe


def check_jacobian_input(cell, x) -> None:
    """The arguments of `jacobian_norms`: one sequence `(t, d_in)`."""
    if not isinstance(cell, ElmanCell):
        raise TypeError(f"cell must be an rnn.ElmanCell; got {describe(cell)}")
    check_tensor(x, "x", "(t, d_in)")
    if x.dim() != 2 or x.shape[1] != cell.W_x.shape[1]:
        raise ValueError(
            f"x must be (t, d_in={cell.W_x.shape[1]}); got {tuple(x.shape)}"
        )


def jacobian_norms(cell: ElmanCell, x: torch.Tensor, h0: torch.Tensor | None = None):
    """Spectral norms of `∂h_T/∂h_{T-k}` for `k = 0..T`, by autograd; entry 0 is 1.
    Shapes: x (t, d_in) one sequence, h0 (d_model,) -> (t + 1,), indexed by k."""
    check_jacobian_input(cell, x)
    d = cell.W_h.shape[0]
    h = x.new_zeros(d) if h0 is None else h0
    states = [h.detach().requires_grad_()]
    for x_t in x:
        states.append(cell(x_t[None], states[-1][None])[0])
    eye = torch.eye(d, dtype=x.dtype, device=x.device)
    # row i of the output: the gradient of component i of h_T, i.e. row i of each
    # Jacobian
    jac = torch.autograd.grad(
        states[-1], states, grad_outputs=eye, is_grads_batched=True, allow_unused=True
    )
    # h_T does not depend on itself through autograd
    jac = [eye if j is None else j for j in jac]
    norms = [torch.linalg.matrix_norm(j, ord=2) for j in reversed(jac)]
    return torch.stack(norms).detach()


SCHEMES = ("orthogonal", "identity", "radius")


def check_init_recurrent(weight, scheme, scale) -> None:
    """The arguments of `init_recurrent_`: a square matrix, a known scheme."""
    check_tensor(weight, "weight", "(d, d)")
    check_number(scale, "scale", 0.0)
    if weight.dim() != 2 or weight.shape[0] != weight.shape[1]:
        raise ValueError(
            f"a recurrent weight must be square (d, d); got {tuple(weight.shape)}"
        )
    if scheme not in SCHEMES:
        raise ValueError(
            f"scheme must be 'orthogonal', 'identity' or 'radius'; got {scheme!r}"
        )


@torch.no_grad()
def init_recurrent_(
    weight: torch.Tensor,
    scheme: str = "orthogonal",
    scale: float = 1.0,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Overwrite `weight` in place: orthogonal, identity or Gaussian, radius `scale`."""
    check_init_recurrent(weight, scheme, scale)
    d = weight.shape[0]
    if scheme == "identity":
        new = torch.eye(d)
    else:  # "orthogonal" or "radius"
        a = torch.randn(d, d, generator=generator, dtype=torch.float64)
        new = torch.linalg.qr(a).Q if scheme == "orthogonal" else a
        new = new / torch.linalg.eigvals(new).abs().max()
    return weight.copy_(scale * new)


def check_clip_grad_norm(grads, max_norm) -> None:
    """The arguments of `clip_grad_norm`."""
    check_number(max_norm, "max_norm", 0.0, low_open=True)
    if not isinstance(grads, (list, tuple)) or not all(
        isinstance(g, torch.Tensor) for g in grads
    ):
        raise TypeError(f"grads must be a list of tensors; got {describe(grads)}")


def clip_grad_norm(grads: list[torch.Tensor], max_norm: float) -> float:
    """Scale grads in place by `min(1, max_norm / ‖g‖)`; returns joint L2 norm ‖g‖."""
    check_clip_grad_norm(grads, max_norm)
    norm = torch.sqrt(sum((g.double() ** 2).sum() for g in grads)).item()
    factor = min(1.0, max_norm / (norm + 1e-6))
    for g in grads:
        g.mul_(factor)
    return norm
