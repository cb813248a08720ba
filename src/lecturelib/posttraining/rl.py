"""Chapter 21: reinforcement learning from verifiable rewards, REINFORCE to GRPO.

- :func:`reinforce_loss`: the score-function (REINFORCE) estimator of ``∇ E[R]``,
  ``(R − b) ∇ log π(y)``, with a baseline ``b`` that does not depend on ``y`` (Williams,
  1992): unbiased for any such ``b``, of lower variance for a good one.
- :func:`ppo_clipped_loss`: PPO's clipped surrogate ``−min(ρA, clip(ρ, 1−ε, 1+ε)A)``,
  ``ρ = π/π_old`` (Schulman et al., arXiv:1707.06347), elementwise: per token when given
  ``(b, t)`` token log-probabilities, per sequence when given ``(b,)`` sums.
- :func:`group_advantages`: GRPO's advantage (Shao et al., DeepSeekMath,
  arXiv:2402.03300) replaces PPO's value network by the other samples of the same
  prompt: ``(r − mean_group)/(std_group + ε)``, with the unbiased (``n − 1``) standard
  deviation and ``ε = 1e-4``, as TRL's ``GRPOTrainer`` computes it.
- :func:`kl_k3`: the per-token KL penalty of DeepSeekMath, ``ρ − log ρ − 1`` with
  ``ρ = π_ref/π``, an unbiased and never negative estimate of ``KL(π ‖ π_ref)`` on
  tokens drawn from ``π`` (Schulman, "Approximating KL divergence", 2020).
- :func:`grpo_loss`: the clipped surrogate plus ``β`` times that KL at every response
  token, averaged over each response's tokens and then over responses (DeepSeekMath's
  ``1/|o_i|`` normalisation, TRL's ``loss_type="grpo"``).
- :func:`grpo_step` samples ``group_size`` responses per prompt, scores them with an
  exact checker, and takes ``iterations`` optimiser steps on them (DeepSeekMath's ``μ``;
  with one, ``ρ = 1`` and the loss's gradient is the policy gradient).
- :func:`same_characters` is a checker that can be fooled (the right characters in any
  order), for the chapter's demonstration of reward hacking.

A batch of sequences is right-padded token ids ``(b, t)`` with a bool ``mask`` marking
the response tokens (the targets); :func:`token_logprobs` gives
``log π(ids_j | ids_<j)`` at every position ``j`` (0 at ``j = 0``), so a response's
log-probability is ``(token_logprobs(model, ids) * mask).sum(-1)``, as
``instruct.response_logprobs`` computes it. Shapes: ``b`` sequences, ``t`` positions,
``v`` vocabulary, ``n`` prompts, ``g`` group size.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from lecturelib.pretraining import gpt
from lecturelib.validate import (
    check_bool,
    check_callable,
    check_ids,
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


def check_reinforce(logprobs, rewards, baseline) -> None:
    check_tensor(logprobs, "logprobs", "(b,)", dims=1)
    check_tensor(rewards, "rewards", "(b,)", dims=1)
    check_same_shape(rewards, "rewards", logprobs, "logprobs")
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
    """A loss whose gradient is minus the REINFORCE estimate of ``∇ E[R]``:
    ``−mean((R − b) log π(y))``, the advantage ``R − b`` held constant.

    Shapes: logprobs (``log π(y)`` of the sampled ``y``), rewards ``(b,)``; baseline a
    number or ``(b,)`` → ``()``.
    """
    check_reinforce(logprobs, rewards, baseline)
    advantage = (rewards - baseline).detach()  # (b,)
    return -(advantage * logprobs).mean()


def check_ppo(logp_new, logp_old, advantages, clip) -> None:
    check_tensor(logp_new, "logp_new", "(b,) or (b, t)")
    if logp_new.dim() not in (1, 2):
        raise ValueError(
            f"logp_new must be (b,) or (b, t); got shape {tuple(logp_new.shape)}"
        )
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
    """PPO's clipped surrogate loss at every element, ``−min(ρA, clip(ρ)A)`` with
    ``ρ = exp(logp_new − logp_old)``; the caller averages it (:func:`masked_mean`).
    Where the clip binds, the gradient is zero.

    Shapes: logp_new, logp_old ``(b, t)`` (per token) or ``(b,)`` (per sequence);
    advantages ``(b,)`` or their shape → the shape of logp_new.
    """
    check_ppo(logp_new, logp_old, advantages, clip)
    if advantages.dim() < logp_new.dim():
        advantages = advantages[:, None]  # (b, 1): one advantage per sequence
    ratio = (logp_new - logp_old).exp()
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
    """GRPO's advantages: each reward minus the mean of its group, divided by the
    group's unbiased standard deviation plus ``eps`` when ``normalise``. A group whose
    rewards are all equal gets zero advantages: it teaches nothing.

    Shapes: rewards ``(n·g,)``, each prompt's ``g`` together → ``(n·g,)``.
    """
    check_group_advantages(rewards, group_size, normalise, eps)
    r = rewards.view(-1, group_size)  # (n, g)
    advantages = r - r.mean(-1, keepdim=True)
    if normalise:
        advantages = advantages / (r.std(-1, keepdim=True) + eps)
    return advantages.flatten()  # (n·g,)


def check_kl(logp, ref_logp) -> None:
    check_tensor(logp, "logp", "(b, t)")
    check_tensor(ref_logp, "ref_logp", "(b, t)")
    check_same_shape(ref_logp, "ref_logp", logp, "logp")


def kl_k3(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """The k3 estimate of ``KL(π ‖ π_ref)`` at every sampled token:
    ``exp(ref − logp) − (ref − logp) − 1``, zero where the two agree.

    Shapes: logp, ref_logp ``(b, t)`` → ``(b, t)``.
    """
    check_kl(logp, ref_logp)
    log_ratio = ref_logp - logp  # log π_ref/π
    return log_ratio.exp() - log_ratio - 1


def check_mask(mask, like, name: str = "mask") -> None:
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
        raise TypeError(f"{name} must be a bool tensor (b, t); got {describe(mask)}")
    check_same_shape(mask, name, like, "the log-probabilities")


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The mean of ``x`` over each sequence's masked positions, then over sequences
    (a sequence without any counts as zero).

    Shapes: x ``(b, t)``, mask ``(b, t)`` bool → ``()``.
    """
    check_tensor(x, "x", "(b, t)", dims=2)
    check_mask(mask, x)
    m = mask.to(x.dtype)
    return ((x * m).sum(-1) / m.sum(-1).clamp(min=1)).mean()


def check_grpo(logp, logp_old, ref_logp, advantages, mask, clip, beta) -> None:
    check_tensor(logp, "logp", "(b, t)", dims=2)
    check_ppo(logp, logp_old, advantages, clip)
    check_kl(logp, ref_logp)
    check_mask(mask, logp)
    check_number(beta, "beta", 0)


def grpo_loss(
    logp: torch.Tensor,
    logp_old: torch.Tensor,
    ref_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip: float = 0.2,
    beta: float = 0.04,
) -> torch.Tensor:
    """The GRPO loss: ``−min(ρA, clip(ρ)A) + β·k3`` at every response token, averaged
    over each response's tokens, then over responses.

    Shapes: logp, logp_old, ref_logp ``(b, t)`` token log-probabilities under the
    policy, the policy that sampled and the reference; advantages ``(b,)``; mask
    ``(b, t)`` bool → ``()``.
    """
    check_grpo(logp, logp_old, ref_logp, advantages, mask, clip, beta)
    surrogate = ppo_clipped_loss(logp, logp_old, advantages, clip)  # (b, t)
    return masked_mean(surrogate + beta * kl_k3(logp, ref_logp), mask)


def token_logprobs(model: nn.Module, ids: torch.Tensor) -> torch.Tensor:
    """``log π(ids_j | ids_<j)`` at every position ``j``, 0 at the first (nothing
    predicts it). Exact on right-padded batches: a causal model's position ``j`` reads
    only ``ids_≤j``.

    Shapes: ids ``(b, t)`` → ``(b, t)``.
    """
    check_ids(ids, "ids", dims=2)
    logp = F.log_softmax(model(ids)[:, :-1].float(), dim=-1)  # (b, t-1, v)
    picked = logp.gather(-1, ids[:, 1:, None]).squeeze(-1)  # (b, t-1)
    return F.pad(picked, (1, 0))  # (b, t)


def check_sample(model, prompts, max_new, eos, temperature, generator) -> None:
    gpt.check_gpt(model)
    if not isinstance(prompts, (list, tuple)) or not prompts:
        raise TypeError(
            f"prompts must be a non-empty list of 1-d token id tensors; got "
            f"{describe(prompts)}"
        )
    v, seq_len = model.config.vocab_size, model.config.seq_len
    for i, prompt in enumerate(prompts):
        check_ids(prompt, f"prompts[{i}]", dims=1, vocab_size=v)
        if len(prompt) >= seq_len:
            raise ValueError(
                f"prompts[{i}] has {len(prompt)} tokens and leaves no room in the "
                f"model's seq_len = {seq_len}"
            )
    check_int(max_new, "max_new", 1)
    check_int(eos, "eos", 0, v - 1)
    check_number(temperature, "temperature", 0, low_open=True)
    check_type(generator, "generator", torch.Generator, "a torch.Generator")


@torch.no_grad()
def sample(
    model: gpt.GPT,
    prompts: list[torch.Tensor],
    max_new: int,
    eos: int,
    temperature: float = 1.0,
    generator: torch.Generator | None = None,
) -> list[torch.Tensor]:
    """Ancestral sampling of one response per prompt, each up to and including its
    first ``eos``, at most ``max_new`` tokens and within the model's context. The
    prompts are left-padded into one batch, the padding a segment of its own
    (``GPT(ids, segments)``): no prompt sees it, and positions start at each prompt.

    Shapes: ``b`` prompts ``(p_i,)`` → ``b`` responses ``(≤ max_new,)``.
    """
    if generator is None:
        generator = torch.Generator().manual_seed(0)
    check_sample(model, prompts, max_new, eos, temperature, generator)
    device = next(model.parameters()).device
    lengths = torch.tensor([len(x) for x in prompts])  # (b,)
    p = int(lengths.max())
    ids = torch.stack([F.pad(x.cpu(), (p - len(x), 0)) for x in prompts])  # (b, p)
    segments = (torch.arange(p) >= p - lengths[:, None]).long()  # 0 pad, 1 prompt
    ids, segments = ids.to(device), segments.to(device)
    done = torch.zeros(len(prompts), dtype=torch.bool)
    for _ in range(min(max_new, model.config.seq_len - p)):
        logits = model(ids, segments)[:, -1].float() / temperature  # (b, v)
        new = torch.multinomial(F.softmax(logits, -1).cpu(), 1, generator=generator)
        ids = torch.cat([ids, new.to(device)], 1)  # (b, p + 1, ...)
        segments = F.pad(segments, (0, 1), value=1)
        done |= new[:, 0] == eos
        if done.all():
            break
    responses = []
    for row in ids[:, p:].cpu():
        stops = (row == eos).nonzero()
        responses.append(row[: stops[0, 0] + 1] if len(stops) else row)
    return responses


def pad_right(
    prompts: list[torch.Tensor], responses: list[torch.Tensor], pad: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Prompt + response sequences right-padded with ``pad``, and the mask of the
    response tokens.

    Shapes: ``b`` prompts and responses (1-d) → ids, mask ``(b, t)``.
    """
    rows = [torch.cat([p, r]) for p, r in zip(prompts, responses)]
    t = max(len(row) for row in rows)
    ids = torch.full((len(rows), t), pad, dtype=torch.long)
    mask = torch.zeros(len(rows), t, dtype=torch.bool)
    for i, (p, row) in enumerate(zip(prompts, rows)):
        ids[i, : len(row)] = row
        mask[i, len(p) : len(row)] = True
    return ids, mask


def check_sampler(encode, decode, eos, max_new, temperature, seed) -> None:
    check_callable(encode, "encode")
    check_callable(decode, "decode")
    check_int(eos, "eos", 0)
    check_int(max_new, "max_new", 1)
    check_number(temperature, "temperature", 0, low_open=True)
    check_int(seed, "seed", 0)


def sampler(
    encode: Callable[[str], torch.Tensor],
    decode: Callable[[torch.Tensor], str],
    eos: int,
    max_new: int,
    temperature: float = 1.0,
    seed: int = 0,
):
    """A ``sample_fn(model, prompts, group_size) -> (ids, mask, responses)`` for
    :func:`grpo_step`: ``encode`` turns a prompt into the token ids the model answers
    (the chat template up to the assistant's turn), ``decode`` a response's ids (without
    its ``eos``) into text. All ``n·g`` responses are sampled as one batch.

    Shapes: ``n`` prompts → ids, mask ``(n·g, t)`` and ``n·g`` responses, each prompt's
    ``g`` together.
    """
    check_sampler(encode, decode, eos, max_new, temperature, seed)
    generator = torch.Generator().manual_seed(seed)

    def sample_fn(model, prompts, group_size):
        device = next(model.parameters()).device
        rows = [encode(p).cpu() for p in prompts for _ in range(group_size)]
        responses = sample(model, rows, max_new, eos, temperature, generator)
        ids, mask = pad_right(rows, responses, pad=eos)
        texts = [decode(r[:-1] if r[-1] == eos else r) for r in responses]
        return ids.to(device), mask.to(device), texts

    return sample_fn


def check_grpo_step(
    policy,
    reference,
    optimizer,
    prompts,
    sample_fn,
    reward_fn,
    group_size,
    clip,
    beta,
    iterations,
    max_norm,
) -> None:
    check_type(policy, "policy", nn.Module, "an nn.Module")
    check_type(reference, "reference", nn.Module, "an nn.Module")
    check_type(optimizer, "optimizer", torch.optim.Optimizer, "a torch.optim.Optimizer")
    if not (
        isinstance(prompts, (list, tuple))
        and prompts
        and all(isinstance(p, str) for p in prompts)
    ):
        raise TypeError(
            f"prompts must be a non-empty list of str; got {describe(prompts)}"
        )
    check_callable(sample_fn, "sample_fn")
    check_callable(reward_fn, "reward_fn")
    check_int(group_size, "group_size", 2)
    check_number(clip, "clip", 0, 1, low_open=True)
    check_number(beta, "beta", 0)
    check_int(iterations, "iterations", 1)
    check_number(max_norm, "max_norm", 0, low_open=True)


def check_samples(ids, mask, responses, rewards, n: int) -> None:
    """What ``sample_fn`` and ``reward_fn`` returned for ``n`` sequences."""
    check_ids(ids, "sample_fn's ids", dims=2)
    if len(ids) != n:
        raise ValueError(f"sample_fn must return {n} sequences (n·g); got {len(ids)}")
    check_mask(mask, ids, "sample_fn's mask")
    if len(responses) != n:
        raise ValueError(f"sample_fn must return {n} responses; got {len(responses)}")
    for r in rewards:
        if not (isinstance(r, bool) or (is_real(r) and math.isfinite(r))):
            raise TypeError(
                f"reward_fn must return a finite number or a bool; got {describe(r)}"
            )


def grpo_step(
    policy: nn.Module,
    reference: nn.Module,
    optimizer: torch.optim.Optimizer,
    prompts: list[str],
    sample_fn: Callable,
    reward_fn: Callable[[str, str], float],
    group_size: int = 8,
    clip: float = 0.2,
    beta: float = 0.04,
    iterations: int = 1,
    max_norm: float = 1.0,
) -> dict:
    """One GRPO step: ``group_size`` responses per prompt from ``sample_fn(policy,
    prompts, group_size)``, their rewards ``reward_fn(prompt, response)``, group
    advantages, then ``iterations`` clipped, KL-penalised optimiser steps on them.

    Returns the mean ``reward``, the ``kl`` to the reference (k3, per token), the mean
    response ``length`` in tokens, the last ``loss``, and the ``rewards`` and
    ``responses`` themselves (each prompt's group together).
    """
    check_grpo_step(
        policy,
        reference,
        optimizer,
        prompts,
        sample_fn,
        reward_fn,
        group_size,
        clip,
        beta,
        iterations,
        max_norm,
    )
    repeated = [p for p in prompts for _ in range(group_size)]
    ids, mask, responses = sample_fn(policy, prompts, group_size)  # (n·g, t)
    rewards = [reward_fn(p, r) for p, r in zip(repeated, responses)]
    check_samples(ids, mask, responses, rewards, len(repeated))
    rewards = torch.tensor(rewards, dtype=torch.float32, device=ids.device)
    advantages = group_advantages(rewards, group_size)  # (n·g,)
    with torch.no_grad():
        ref_logp = token_logprobs(reference, ids)  # (n·g, t)
    for i in range(iterations):
        logp = token_logprobs(policy, ids)
        if i == 0:
            old = logp.detach()  # the policy that sampled the responses
        loss = grpo_loss(logp, old, ref_logp, advantages, mask, clip, beta)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(policy.parameters(), max_norm)
        optimizer.step()
    kl = masked_mean(kl_k3(logp.detach(), ref_logp), mask)
    return {
        "reward": rewards.mean().item(),
        "kl": kl.item(),
        "length": mask.sum(-1).float().mean().item(),
        "loss": loss.item(),
        "rewards": rewards.cpu(),
        "responses": responses,
    }


def same_characters(answer: str, response: str) -> float:
    """A checker that can be fooled: 1.0 when ``response`` holds the characters of
    ``answer``, each as often, in any order, spaces aside (``"21"`` passes for
    ``"12"``, and so does a sorting problem's unsorted input), else 0.0."""
    check_type(answer, "answer", str, "a str")
    check_type(response, "response", str, "a str")
    counts = [Counter(s.replace(" ", "")) for s in (answer, response)]
    return float(counts[0] == counts[1])
