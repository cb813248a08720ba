"""Chapter 17, generating without going left to right: masked diffusion language models
and Parallel WaveNet.

**Masked diffusion** (Austin et al., 2021, arXiv:2107.03006; MDLM, Sahoo et al., 2024,
arXiv:2406.07524; LLaDA, Nie et al., 2025, arXiv:2502.09992). The forward process
replaces each answer token by `[MASK]` with probability `t ~ U(0, 1)`; a
bidirectional Transformer (chapter 12's `lecturelib.pretraining.bert.BERT`)
learns to fill the masks, trained on `(1/t) ·` the cross-entropy of the masked
tokens, the continuous-time bound on the negative log-likelihood. `unmask`
generates by starting from an all-masked answer and, over `steps` steps, filling the
masked positions the model is most confident about (LLaDA's low-confidence remasking)
or random ones (MDLM's ancestral order), `length / steps` per step on a linear
schedule. Simplifications: the answer's length is known, tokens are filled greedily
(argmax), and the prompt is never masked.

**The autoregressive baseline** is a `lecturelib.pretraining.gpt.GPT` trained on
the same `prompt SEP answer` strings (`ar_loss`) and decoded greedily with
chapter 14's cache.

**Parallel WaveNet** (van den Oord et al., 2018, arXiv:1711.10433) in a continuous toy:
`teacher_log_prob` scores `x` under an autoregressive Gaussian teacher in one
parallel pass, `teacher_sample` must draw it one dimension at a time, and
`IAF`, an inverse-autoregressive flow, draws every dimension at once from noise
`z`; `reverse_kl` estimates `KL(p_student || p_teacher)` from student
samples, the loss of probability density distillation (the paper's extra power,
perceptual and contrastive losses are left out).

Shapes: `b` batch, `P` prompt positions (with `SEP`), `L` answer positions,
`v` vocabulary, `D` dimensions of a continuous sample, `n` samples.
"""

from __future__ import annotations

import math
import time

import torch
import torch.nn.functional as F
from torch import nn

from lecturelib import tasks
from lecturelib.efficiency import kvcache
from lecturelib.pretraining import bert, gpt
from lecturelib.runtime import SEEDS
from lecturelib.validate import (
    check_callable,
    check_int,
    check_sizes,
    check_tensor,
    check_type,
    describe,
)

ORDERS = ("confidence", "random")


def sorting_pairs(n: int, length: int, vocab_size: int = 10, seed: int = 0):
    """The sorting task as `(prompt, answer)`: `n` rows of `length` symbols then
    `SEP`, and the symbols sorted. Shapes: `(n, length + 1)`, `(n, length)`."""
    tasks.check_task("sorting_pairs", n, length, vocab_size, length="length")
    check_int(seed, "sorting_pairs(): seed", *SEEDS)
    x, y = tasks.sorting_task(n, length, vocab_size, seed)
    return x[:, : length + 1], y[:, length:]


def either_way_pairs(n: int, length: int, vocab_size: int = 10, seed: int = 0):
    """Sorting with answers sorted up or down by a coin the prompt does not reveal."""
    prompt, answer = sorting_pairs(n, length, vocab_size, seed)
    g = torch.Generator().manual_seed(seed)
    down = torch.rand(n, generator=g) < 0.5
    return prompt, torch.where(down[:, None], answer.flip(1), answer)


def sorted_either_way(answer: torch.Tensor, prompt: torch.Tensor) -> torch.Tensor:
    """Per row, whether `answer` is the prompt's symbols sorted up or down.
    Shapes: answer `(b, L)`, prompt `(b, L + 1)` → `(b,)` bool."""
    check_type(answer, "answer", torch.Tensor, "a tensor (b, L)")
    check_type(prompt, "prompt", torch.Tensor, "a tensor (b, L + 1)")
    if answer.dim() != 2 or prompt.shape != (answer.shape[0], answer.shape[1] + 1):
        raise ValueError(
            f"answer must be (b, L) and prompt (b, L + 1); got "
            f"{describe(answer)} and {describe(prompt)}"
        )
    up = prompt[:, :-1].sort(1).values
    return (answer == up).all(1) | (answer == up.flip(1)).all(1)


def check_batch(batch) -> None:
    """A batch of `diffusion_loss` and `ar_loss`: `(prompt, answer)`,
    two tensors of token ids `(b, P)` and `(b, L)`."""
    message = "batch must be (prompt (b, P), answer (b, L)) id tensors"
    if not isinstance(batch, (tuple, list)):
        raise TypeError(f"{message}; got {describe(batch)}")
    if len(batch) != 2:
        raise ValueError(f"{message}; got {len(batch)} items")
    if not all(isinstance(t, torch.Tensor) for t in batch):
        raise TypeError(message)
    if any(t.dim() != 2 for t in batch) or batch[0].shape[0] != batch[1].shape[0]:
        raise ValueError(
            f"{message}; got shapes {tuple(batch[0].shape)} and {tuple(batch[1].shape)}"
        )
    if batch[1].numel() < 1:
        raise ValueError(
            f"{message} with b >= 1 rows and L >= 1 answer tokens (a mean over none is "
            f"NaN); got answer of shape {tuple(batch[1].shape)}"
        )


def check_ar_loss(model, batch) -> None:
    """The arguments of `ar_loss`: a GPT and a batch whose prompt has `P >= 1`
    tokens (the first answer token is predicted from the prompt's last)."""
    gpt.check_gpt(model)
    check_batch(batch)
    if batch[0].shape[1] < 1:
        raise ValueError(
            f"batch's prompt must be (b, P) with P >= 1 (the first answer token is "
            f"predicted from the prompt's last); got shape {tuple(batch[0].shape)}"
        )


def check_unmask(model, prompt, length, steps, order) -> None:
    """The arguments of `unmask`: `1 <= steps <= length`."""
    check_type(model, "model", bert.BERT, "a bert.BERT")
    check_int(length, "length", 1)
    check_int(steps, "steps", 1, length)
    if order not in ORDERS:
        raise ValueError(f"order must be one of {ORDERS}; got {order!r}")
    check_type(prompt, "prompt", torch.Tensor, "(b, P) token ids")
    if prompt.dim() != 2:
        raise ValueError(f"prompt must be (b, P) token ids; got {describe(prompt)}")


def mask_id(model: bert.BERT) -> int:
    """`[MASK]` is the last id of the diffusion model's vocabulary."""
    check_type(model, "model", bert.BERT, "a bert.BERT")
    return model.config.vocab_size - 1


def diffusion_loss(
    model: bert.BERT, batch, generator: torch.Generator | None = None
) -> torch.Tensor:
    """MDLM's loss on `(prompt, answer)`: answer tokens masked with probability `t`
    (stratified `t ~ U(0, 1)`, one per row); masked NLL × `1/t`, per answer token."""
    check_batch(batch)
    prompt, answer = batch
    m = mask_id(model)
    b, L = answer.shape
    u = torch.rand(1, generator=generator)  # stratified: one t per slice
    t = ((u + torch.arange(b) / b) % 1).clamp(min=1e-3)[:, None]  # (b, 1)
    masked = torch.rand(b, L, generator=generator) < t  # (b, L)
    t, masked = t.to(answer.device), masked.to(answer.device)
    noisy = answer.masked_fill(masked, m)
    logits = model.mlm_logits(torch.cat([prompt, noisy], 1))[:, prompt.shape[1] :]
    nll = F.cross_entropy(logits.transpose(1, 2), answer, reduction="none")  # (b, L)
    return (nll * masked / t).sum(1).mean() / L


@torch.no_grad()
def unmask(
    model: bert.BERT,
    prompt: torch.Tensor,
    length: int,
    steps: int,
    order: str = "confidence",
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """`length` answer tokens unmasked in `steps` steps, most confident or random first.
    Shapes: prompt (b, P) -> answer (b, length), and the answer after each step."""
    check_unmask(model, prompt, length, steps, order)
    m = mask_id(model)
    b, P = prompt.shape
    x = torch.full((b, length), m, dtype=torch.long, device=prompt.device)
    history = []
    for s in range(1, steps + 1):
        logits = model.mlm_logits(torch.cat([prompt, x], 1))[:, P:]  # (b, L, v)
        logits[..., m] = float("-inf")  # never predict MASK
        conf, pred = logits.softmax(-1).max(-1)  # (b, L)
        if order == "random":
            conf = torch.rand(b, length, generator=generator).to(prompt.device)
        conf = conf.masked_fill(x != m, -1.0)  # only masked ones
        n_new = math.ceil(length * s / steps) - math.ceil(length * (s - 1) / steps)
        pick = conf.topk(n_new, dim=1).indices  # (b, n_new)
        x = x.scatter(1, pick, pred.gather(1, pick))
        history.append(x.clone())
    return x, history


def ar_loss(model: gpt.GPT, batch) -> torch.Tensor:
    """Next-token cross-entropy on the answer of `prompt answer` only."""
    check_ar_loss(model, batch)
    prompt, answer = batch
    ids = torch.cat([prompt, answer], 1)
    logits = model(ids[:, :-1])[:, prompt.shape[1] - 1 :]  # (b, L, v)
    return F.cross_entropy(logits.transpose(1, 2), answer)


def ar_generate(model: gpt.GPT, prompt: torch.Tensor, length: int) -> torch.Tensor:
    """Greedy left-to-right answer of `length` tokens (chapter 14's cached decoder).
    Shapes: `(b, P)` → `(b, L)`."""
    check_int(length, "length", 1)
    return kvcache.generate(model, prompt, length)[0][:, prompt.shape[1] :]


def exact_match(answer: torch.Tensor, truth: torch.Tensor) -> float:
    """The fraction of rows whose every token is right."""
    check_type(answer, "answer", torch.Tensor, "a tensor (b, L)")
    check_type(truth, "truth", torch.Tensor, "a tensor (b, L)")
    if answer.shape != truth.shape or answer.dim() != 2 or len(answer) < 1:
        raise ValueError(
            f"answer and truth must be tensors of one shape (b, L) with b >= 1 rows "
            f"(the fraction of no row is NaN); got {describe(answer)} and "
            f"{describe(truth)}"
        )
    return (answer == truth).all(1).float().mean().item()


def timed(fn, *args, **kwargs):
    """`fn(*args, **kwargs)` and the seconds it took."""
    check_callable(fn, "fn")
    tic = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - tic


# Parallel WaveNet in a continuous toy -----------------------------------------------


def check_samples(x) -> None:
    """Samples of the continuous toy: a float tensor `(n, D)`."""
    message = f"x must be a float tensor (n, D); got {describe(x)}"
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        raise TypeError(message)
    if x.dim() != 2:
        raise ValueError(message)


def teacher_params(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The teacher's mean and log std of each `x_i` given `x_{i-1}`; `x_1 ~ N(0, 1)`."""
    check_samples(x)
    prev = F.pad(x[:, :-1], (1, 0))  # x_{i-1}, 0 first
    mu = 1.5 * torch.sin(1.5 * prev)
    log_sigma = -1.0 + 0.5 * torch.tanh(prev)
    mu[:, 0], log_sigma[:, 0] = 0.0, 0.0
    return mu, log_sigma


def check_gaussian(x, mu, log_sigma) -> None:
    """The arguments of `gaussian_log_prob`: float tensors, `mu` and
    `log_sigma` broadcastable to the shape of `x` (the result's)."""
    for name, value in (("x", x), ("mu", mu), ("log_sigma", log_sigma)):
        check_tensor(value, name, "(...)")
    try:
        shape = torch.broadcast_shapes(x.shape, mu.shape, log_sigma.shape)
    except RuntimeError:
        shape = None
    if shape != x.shape:
        raise ValueError(
            f"mu and log_sigma must broadcast to the shape of x {tuple(x.shape)}; "
            f"got {tuple(mu.shape)} and {tuple(log_sigma.shape)}"
        )


def gaussian_log_prob(x, mu, log_sigma) -> torch.Tensor:
    """Elementwise `log N(x; mu, exp(log_sigma)^2)`."""
    check_gaussian(x, mu, log_sigma)
    return (
        -0.5 * ((x - mu) / log_sigma.exp()) ** 2
        - log_sigma
        - 0.5 * math.log(2 * math.pi)
    )


def teacher_log_prob(x: torch.Tensor) -> torch.Tensor:
    """`log p_teacher(x)`, one parallel pass. Shapes: (n, D) -> (n,)."""
    mu, log_sigma = teacher_params(x)
    return gaussian_log_prob(x, mu, log_sigma).sum(1)


def teacher_sample(
    n: int, D: int, generator: torch.Generator | None = None
) -> torch.Tensor:
    """Ancestral sampling from the teacher, `D` sequential steps. Shapes: -> (n, D)."""
    check_sizes(n=n, D=D)
    x = torch.zeros(n, D)
    for i in range(D):
        mu, log_sigma = teacher_params(x)
        x[:, i] = mu[:, i] + log_sigma[:, i].exp() * torch.randn(n, generator=generator)
    return x


def check_noise(z, D: int) -> None:
    """The input of `IAF`: noise `(n, D)`, a float tensor."""
    if not isinstance(z, torch.Tensor) or not z.is_floating_point():
        raise TypeError(f"z must be a float tensor (n, D={D}); got {describe(z)}")
    if z.dim() != 2 or z.shape[1] != D:
        raise ValueError(f"z must be (n, D={D}); got {describe(z)}")


class IAF(nn.Module):
    """Inverse-autoregressive flow `x_i = z_i · s_i(z_<i) + m_i(z_<i)`, all `i` at once.
    Shapes: z (n, D) -> x (n, D), log q(x) (n,)."""

    def __init__(self, D: int, hidden: int = 32):
        super().__init__()
        check_sizes(D=D, hidden=hidden)
        self.D = D
        self.register_buffer("mask", torch.ones(D, D).tril(-1))  # (i, j): j < i
        self.w1 = nn.Parameter(0.3 * torch.randn(D, D, hidden))
        self.b1 = nn.Parameter(torch.zeros(D, hidden))
        self.w2 = nn.Parameter(torch.zeros(D, hidden, 2))
        self.b2 = nn.Parameter(torch.zeros(D, 2))

    def forward(self, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        check_noise(z, self.D)
        seen = z[:, None, :] * self.mask  # (n, D, D): z_<i
        h = torch.tanh(torch.einsum("nij,ijh->nih", seen, self.w1) + self.b1)
        out = torch.einsum("nih,ihc->nic", h, self.w2) + self.b2  # (n, D, 2)
        m, log_s = out.unbind(-1)
        x = z * log_s.exp() + m
        log_q = (
            gaussian_log_prob(z, torch.zeros_like(z), torch.zeros_like(z)) - log_s
        ).sum(1)
        return x, log_q

    def sample(self, n: int, generator: torch.Generator | None = None):
        """`n` samples and their log-densities, every dimension in parallel."""
        check_int(n, "n", 1)
        return self(torch.randn(n, self.D, generator=generator))


def reverse_kl(
    student: IAF, n: int, generator: torch.Generator | None = None
) -> torch.Tensor:
    """Monte Carlo `KL(q || p_teacher)` from `n` `student` samples, reparameterised."""
    check_type(student, "student", IAF, "an IAF")
    x, log_q = student.sample(n, generator)
    return (log_q - teacher_log_prob(x)).mean()
