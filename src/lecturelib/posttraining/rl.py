"""Chapter 21: the losses of reinforcement learning from verifiable rewards, from
REINFORCE to GRPO.

- `reinforce_loss`: the score-function (REINFORCE) estimator of `∇ E[R]`,
  `(R − b) ∇ log π(y)`, with a baseline `b` that does not depend on `y` (Williams,
  1992): unbiased for any such `b`, of lower variance for a good one.
- `ppo_clipped_loss`: PPO's clipped surrogate `−min(ρA, clip(ρ, 1−ε, 1+ε)A)`,
  `ρ = π/π_old` (Schulman et al., arXiv:1707.06347), elementwise: per token when given
  `(b, t)` token log-probabilities, per sequence when given `(b,)` sums.
- `group_advantages`: GRPO's advantage (Shao et al., DeepSeekMath,
  arXiv:2402.03300) replaces PPO's value network by the other samples of the same
  prompt: `(r − mean_group)/(std_group + ε)`, with the unbiased (`n − 1`) standard
  deviation and `ε = 1e-4`, as TRL's `GRPOTrainer` computes it.
- `kl_k3`: the per-token KL penalty of DeepSeekMath, `ρ − log ρ − 1` with
  `ρ = π_ref/π`, an unbiased and never negative estimate of `KL(π ‖ π_ref)` on
  tokens drawn from `π` (Schulman, "Approximating KL divergence", 2020).
- `grpo_loss`: the clipped surrogate plus `β` times that KL at every response
  token, averaged over each response's tokens and then over responses (DeepSeekMath's
  `1/|o_i|` normalisation, TRL's `loss_type="grpo"`).
- `same_characters` is a checker that can be fooled (the right characters in any
  order), for the chapter's demonstration of reward hacking.

The step that samples responses and minimises these losses is
`lecturelib.posttraining.rollout.grpo_step`. Shapes: `b` sequences, `t`
positions, `n` prompts, `g` group size.
"""

from __future__ import annotations

import math
from collections import Counter

import torch

from lecturelib.validate import (
    check_bool,
    check_int,
    check_number,
    check_tensor,
    check_type,
    describe,
    is_real,
)

ADVANTAGE_EPS = 1e-4  # TRL GRPOTrainer: advantages / (std + 1e-4)


def check_same_shape(x, name: str, like, like_name: str) -> None:
    if x.shape != like.shape:
        raise ValueError(
            f"{name} must have the shape of {like_name} {tuple(like.shape)}; "
            f"got {tuple(x.shape)}"
        )


def check_nonempty(x, name: str) -> None:
    """`x` holds at least one value (the mean of none is NaN)."""
    if not x.numel():
        raise ValueError(f"{name} must not be empty; got shape {tuple(x.shape)}")


def check_logprobs(*named) -> None:
    """Each `(x, name)` holds log-probabilities: values <= 0, none NaN (a probability
    given for a log-probability is above 0). One look at the values of all of them.
    Empty tensors pass (the callers refuse them by name)."""
    named = [(x, name) for x, name in named if x.numel()]
    if not named:
        return
    tops = torch.stack([x.detach().amax().float() for x, _ in named]).tolist()
    for (_, name), top in zip(named, tops):
        if not top <= 0:
            raise ValueError(
                f"{name} must hold log-probabilities (<= 0, not NaN); got a largest "
                f"value of {top:g} (probabilities instead of their logarithms?)"
            )


def check_reinforce(logprobs, rewards, baseline) -> None:
    check_tensor(logprobs, "logprobs", "(b,)", dims=1)
    check_tensor(rewards, "rewards", "(b,)", dims=1)
    check_same_shape(rewards, "rewards", logprobs, "logprobs")
    check_nonempty(logprobs, "logprobs")
    check_logprobs((logprobs, "logprobs"))
    if isinstance(baseline, torch.Tensor):
        check_tensor(baseline, "baseline", "(b,) or ()")
        if baseline.dim() and baseline.shape != logprobs.shape:
            raise ValueError(
                f"baseline must be a number, a () tensor or (b,) = "
                f"{tuple(logprobs.shape)}; got shape {tuple(baseline.shape)}"
            )
    elif not (is_real(baseline) and math.isfinite(baseline)):
        raise TypeError(
            f"baseline must be a number or a tensor; got {describe(baseline)}"
        )


def reinforce_loss(
    logprobs: torch.Tensor, rewards: torch.Tensor, baseline=0.0
) -> torch.Tensor:
    """A loss whose gradient is minus the REINFORCE estimate of `∇ E[R]`:
    `−mean((R − b) log π(y))`, the advantage `R − b` held constant.

    Shapes: logprobs (`log π(y)` of the sampled `y`), rewards `(b,)`; baseline a
    number or `(b,)` → `()`.
    """
    check_reinforce(logprobs, rewards, baseline)
    advantage = (rewards - baseline).detach()  # (b,)
    return -(advantage * logprobs).mean()


def check_ppo(logp_new, logp_old, advantages, clip, values: bool = True) -> None:
    """The arguments of `ppo_clipped_loss` (only `logp_new − logp_old` matters
    to it, so their values are not checked: a log-ratio and 0 are valid)."""
    check_tensor(logp_new, "logp_new", "(b,) or (b, t)")
    if logp_new.dim() not in (1, 2):
        raise ValueError(
            f"logp_new must be (b,) or (b, t); got shape {tuple(logp_new.shape)}"
        )
    check_nonempty(logp_new, "logp_new")
    check_tensor(logp_old, "logp_old", "(b,) or (b, t)")
    check_same_shape(logp_old, "logp_old", logp_new, "logp_new")
    check_tensor(advantages, "advantages", "(b,) or the shape of logp_new")
    if advantages.shape not in (logp_new.shape, logp_new.shape[:1]):
        raise ValueError(
            f"advantages must be (b,) = {tuple(logp_new.shape[:1])} or the shape of "
            f"logp_new {tuple(logp_new.shape)}; got {tuple(advantages.shape)}"
        )
    check_number(clip, "clip", 0, 1, low_open=True)


def ppo_clipped_loss(
    logp_new: torch.Tensor,
    logp_old: torch.Tensor,
    advantages: torch.Tensor,
    clip: float = 0.2,
) -> torch.Tensor:
    """PPO's per-element `−min(ρA, clip(ρ)A)` with `ρ = exp(logp_new − logp_old)`.
    Shapes: logp_new, logp_old (b, t) or (b,); advantages (b,) or same → same."""
    check_ppo(logp_new, logp_old, advantages, clip)
    if advantages.dim() < logp_new.dim():
        advantages = advantages[:, None]  # (b, 1): one advantage per sequence
    advantages = advantages.detach()
    ratio = (logp_new - logp_old.detach()).exp()  # π/π_old, π_old a constant
    clipped = ratio.clamp(1 - clip, 1 + clip)
    return -torch.minimum(ratio * advantages, clipped * advantages)


def check_group_advantages(rewards, group_size, normalise, eps) -> None:
    check_tensor(rewards, "rewards", "(n·g,)", dims=1)
    check_int(group_size, "group_size", 2)
    if len(rewards) % group_size or not len(rewards):
        raise ValueError(
            f"rewards must hold whole groups of group_size={group_size} (n·g values, "
            f"each prompt's g together); got {len(rewards)}"
        )
    check_bool(normalise, "normalise")
    check_number(eps, "eps", 0)


def group_advantages(
    rewards: torch.Tensor,
    group_size: int,
    normalise: bool = True,
    eps: float = ADVANTAGE_EPS,
) -> torch.Tensor:
    """GRPO: reward − group mean, divided by unbiased group std + `eps` if `normalise`.
    Shapes: rewards (n·g,), each prompt's g together → (n·g,)."""
    check_group_advantages(rewards, group_size, normalise, eps)
    r = rewards.view(-1, group_size)  # (n, g)
    advantages = r - r.mean(-1, keepdim=True)
    if normalise:
        advantages = advantages / (r.std(-1, keepdim=True) + eps)
    same = (r == r[:, :1]).all(-1, keepdim=True)  # (n, 1): equal rewards, no signal
    return advantages.masked_fill(same, 0.0).flatten()  # (n·g,)


def check_kl(logp, ref_logp, values: bool = True) -> None:
    check_tensor(logp, "logp", "(b, t)", dims=2)
    check_tensor(ref_logp, "ref_logp", "(b, t)")
    check_same_shape(ref_logp, "ref_logp", logp, "logp")
    check_nonempty(logp, "logp")
    if values:
        check_logprobs((logp, "logp"), (ref_logp, "ref_logp"))


def kl_k3(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """The k3 estimate of `KL(π ‖ π_ref)` at every sampled token:
    `exp(ref − logp) − (ref − logp) − 1`, zero where the two agree; the reference
    is fixed (no gradient flows into `ref_logp`).

    Shapes: logp, ref_logp `(b, t)` → `(b, t)`.
    """
    check_kl(logp, ref_logp)
    log_ratio = ref_logp.detach() - logp  # log π_ref/π
    return log_ratio.exp() - log_ratio - 1


def check_mask(mask, like, name: str = "mask") -> None:
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
        raise TypeError(f"{name} must be a bool tensor (b, t); got {describe(mask)}")
    check_same_shape(mask, name, like, "the log-probabilities")


def check_marks(mask, name: str = "mask") -> None:
    """`mask` marks one token at least (a mean over none is no loss at all)."""
    if not mask.any():
        raise ValueError(
            f"{name} marks no token (shape {tuple(mask.shape)}): there is nothing to "
            "average"
        )


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The mean of `x` over each sequence's masked positions, then over sequences
    (a sequence without any counts as zero; a batch without any is refused).

    Shapes: x `(b, t)`, mask `(b, t)` bool → `()`.
    """
    check_tensor(x, "x", "(b, t)", dims=2)
    check_mask(mask, x)
    check_marks(mask)
    m = mask.to(x.dtype)
    return ((x * m).sum(-1) / m.sum(-1).clamp(min=1)).mean()


def check_grpo(logp, logp_old, ref_logp, advantages, mask, clip, beta) -> None:
    check_tensor(logp, "logp", "(b, t)", dims=2)
    check_nonempty(logp, "logp")
    check_ppo(logp, logp_old, advantages, clip, values=False)
    check_kl(logp, ref_logp, values=False)
    check_mask(mask, logp)
    check_number(beta, "beta", 0)
    check_logprobs((logp, "logp"), (logp_old, "logp_old"), (ref_logp, "ref_logp"))


def grpo_loss(
    logp: torch.Tensor,
    logp_old: torch.Tensor,
    ref_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip: float = 0.2,
    beta: float = 0.04,
) -> torch.Tensor:
    """GRPO's `−min(ρA, clip(ρ)A) + β·k3` per token, mean over each response, then all.
    Shapes: logp, logp_old, ref_logp (b, t); advantages (b,); mask (b, t) bool → ()."""
    check_grpo(logp, logp_old, ref_logp, advantages, mask, clip, beta)
    surrogate = ppo_clipped_loss(logp, logp_old, advantages, clip)  # (b, t)
    return masked_mean(surrogate + beta * kl_k3(logp, ref_logp), mask)


def same_characters(answer: str, response: str) -> float:
    """A checker that can be fooled: 1.0 when `response` holds the characters of
    `answer`, each as often, in any order, spaces aside (`"21"` passes for
    `"12"`, and so does a sorting problem's unsorted input), else 0.0."""
    check_type(answer, "answer", str, "a str")
    check_type(response, "response", str, "a str")
    counts = [Counter(s.replace(" ", "")) for s in (answer, response)]
    return float(counts[0] == counts[1])
