"""Chapter 21: learning from preferences, a reward model and DPO.

- `bradley_terry_loss`: the Bradley–Terry model (1952) says a response with reward
  `r_c` is preferred to one with `r_r` with probability `σ(r_c − r_r)`; a reward
  model is fitted by maximum likelihood on human (here: checker) comparisons, the loss
  of InstructGPT's reward model (Ouyang et al., arXiv:2203.02155).
- `RewardModel`: the book's GPT with its output head replaced by a scalar read
  from the last hidden state of each sequence's final token.
- `dpo_loss`: the KL-regularised objective `max E[r] − β KL(π ‖ π_ref)` has the
  optimal policy `π*(y|x) ∝ π_ref(y|x) exp(r(x, y)/β)`, so `r = β log π*/π_ref` up
  to a term of `x` alone, which cancels in Bradley–Terry; Direct Preference
  Optimisation (Rafailov et al., arXiv:2305.18290) fits that implicit reward directly:
  `−log σ(β[(log π_c − log π_ref,c) − (log π_r − log π_ref,r)])`. The formula and the
  detached rewards are TRL's `DPOTrainer.dpo_loss` (`loss_type="sigmoid"`, no label
  smoothing); a test checks it.
- `sequence_kl`: a Monte Carlo estimate of `KL(π ‖ π_ref)` from sequences drawn
  from `π` (Schulman, "Approximating KL divergence", 2020): `k1` the mean of
  `log π − log π_ref` (unbiased, can be negative for one sample), `k3` the mean of
  `(ρ − 1) − log ρ` with `ρ = π_ref/π` (unbiased and never negative; the estimator
  GRPO uses per token).

Log-probabilities are of whole responses: the sum of `log π(token)` over the response
tokens (`chat.response_logprobs`). Shapes: `b` pairs or sequences, `t`
positions, `d` d_model.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from lecturelib.posttraining.rl import check_logprobs, check_nonempty
from lecturelib.pretraining import gpt
from lecturelib.validate import check_choice, check_number, check_tensor, describe

KL_ESTIMATORS = ("k1", "k3")


def check_paired(name: str, *tensors_and_names) -> None:
    """Float tensors `(b,)` of one length, `b >= 1`: `check_paired(func, (x, "x"),
    ...)`."""
    for x, label in tensors_and_names:
        check_tensor(x, label, "(b,)", dims=1)
    first, label = tensors_and_names[0]
    for x, other in tensors_and_names[1:]:
        if x.shape != first.shape:
            raise ValueError(
                f"{name}: {other} must have the shape of {label} "
                f"{tuple(first.shape)}; got {tuple(x.shape)}"
            )
    check_nonempty(first, label)


def check_bradley_terry(r_chosen, r_rejected) -> None:
    check_paired(
        "bradley_terry_loss", (r_chosen, "r_chosen"), (r_rejected, "r_rejected")
    )


def bradley_terry_loss(
    r_chosen: torch.Tensor, r_rejected: torch.Tensor
) -> torch.Tensor:
    """The negative log-likelihood of the preferences, `−log σ(r_c − r_r)`, averaged.

    Shapes: r_chosen, r_rejected `(b,)` → `()`.
    """
    check_bradley_terry(r_chosen, r_rejected)
    return -F.logsigmoid(r_chosen - r_rejected).mean()


def check_reward_ids(ids, last, config: gpt.GPTConfig) -> None:
    gpt.check_gpt_ids(ids, config)
    if not len(ids):
        raise ValueError(
            f"ids must hold one sequence at least; got shape {tuple(ids.shape)}"
        )
    if last is None:
        return
    if not isinstance(last, torch.Tensor) or last.dtype != torch.long:
        raise TypeError(
            f"last must be a long tensor (b,) or None; got {describe(last)}"
        )
    if last.shape != ids.shape[:1] or (
        len(last) and (last.min() < 0 or last.max() >= ids.shape[1])
    ):
        raise ValueError(
            f"last must hold one position in 0..{ids.shape[1] - 1} per sequence, shape "
            f"({ids.shape[0]},); got {describe(last)}"
        )


class RewardModel(nn.Module):
    """A GPT body read out by a linear head: the reward of a sequence is `w·h + c` for
    the final norm's output `h` at its last token (`last`, default the last
    position; right-padded batches pass each sequence's last real position).

    Shapes: ids `(b, t)`, last `(b,)` → rewards `(b,)`.
    """

    def __init__(self, body: gpt.GPT):
        super().__init__()
        gpt.check_gpt(body, "body")
        self.body = body
        self.score = nn.Linear(body.config.d_model, 1)
        nn.init.zeros_(self.score.weight)  # every reward starts at zero
        nn.init.zeros_(self.score.bias)

    def forward(self, ids: torch.Tensor, last: torch.Tensor | None = None):
        check_reward_ids(ids, last, self.body.config)
        x = self.body.embed_ids(ids)  # (b, t, d)
        for block in self.body.blocks:
            x = block(x)
        h = self.body.norm(x)  # (b, t, d)
        if last is None:
            last = torch.full((len(ids),), ids.shape[1] - 1, device=ids.device)
        h_last = h[torch.arange(len(ids), device=ids.device), last]  # (b, d)
        return self.score(h_last).squeeze(-1)  # (b,)


def check_dpo(pi_chosen, pi_rejected, ref_chosen, ref_rejected, beta) -> None:
    check_paired(
        "dpo_loss",
        (pi_chosen, "pi_chosen"),
        (pi_rejected, "pi_rejected"),
        (ref_chosen, "ref_chosen"),
        (ref_rejected, "ref_rejected"),
    )
    check_number(beta, "beta", 0, low_open=True)
    check_logprobs(
        (pi_chosen, "pi_chosen"),
        (pi_rejected, "pi_rejected"),
        (ref_chosen, "ref_chosen"),
        (ref_rejected, "ref_rejected"),
    )


def dpo_loss(
    pi_chosen: torch.Tensor,
    pi_rejected: torch.Tensor,
    ref_chosen: torch.Tensor,
    ref_rejected: torch.Tensor,
    beta: float = 0.1,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The DPO loss and the detached implicit rewards `β(log π − log π_ref)`.
    Shapes: the four log-probabilities (b,) → loss (), rewards chosen, rejected (b,)."""
    check_dpo(pi_chosen, pi_rejected, ref_chosen, ref_rejected, beta)
    chosen = beta * (pi_chosen - ref_chosen)  # (b,) implicit rewards
    rejected = beta * (pi_rejected - ref_rejected)
    loss = -F.logsigmoid(chosen - rejected).mean()
    return loss, chosen.detach(), rejected.detach()


def check_sequence_kl(logp, ref_logp, estimator) -> None:
    check_paired("sequence_kl", (logp, "logp"), (ref_logp, "ref_logp"))
    check_choice(estimator, "estimator", KL_ESTIMATORS)
    check_logprobs((logp, "logp"), (ref_logp, "ref_logp"))


def sequence_kl(
    logp: torch.Tensor, ref_logp: torch.Tensor, estimator: str = "k1"
) -> torch.Tensor:
    """A Monte Carlo estimate of `KL(π ‖ π_ref)` from sequences `y ~ π`, given
    `log π(y)` and `log π_ref(y)`: `k1` averages `log π(y) − log π_ref(y)`,
    `k3` averages `ρ − 1 − log ρ` with `ρ = π_ref(y)/π(y)`.

    Shapes: logp, ref_logp `(b,)` → `()`.
    """
    check_sequence_kl(logp, ref_logp, estimator)
    log_ratio = ref_logp - logp  # (b,) log ρ
    if estimator == "k1":
        return (-log_ratio).mean()
    return (log_ratio.exp() - 1 - log_ratio).mean()
