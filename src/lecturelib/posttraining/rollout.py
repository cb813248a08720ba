"""Chapter 21: GRPO's rollouts, sampling groups of responses and stepping on them.

- `grpo_step` samples `group_size` responses per prompt, scores them with an
  exact checker, and takes `iterations` optimiser steps on the GRPO loss of
  `lecturelib.posttraining.rl` (DeepSeekMath's `μ`; with one, `ρ = 1` and the
  loss's gradient is the policy gradient).
- `sample` draws one response per prompt by ancestral sampling, as one batch;
  `sampler` turns it into the `sample_fn` that `grpo_step` calls.

A batch of sequences is right-padded token ids `(b, t)` with a bool `mask` marking
the response tokens (the targets); `token_logprobs` gives
`log π(ids_j | ids_<j)` at every position `j` (0 at `j = 0`), so a response's
log-probability is `(token_logprobs(model, ids) * mask).sum(-1)`, as
`chat.response_logprobs` computes it. Shapes: `b` sequences, `t` positions,
`v` vocabulary, `n` prompts, `g` group size.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from lecturelib.posttraining.rl import (
    check_mask,
    group_advantages,
    grpo_loss,
    kl_k3,
    masked_mean,
)
from lecturelib.pretraining import gpt
from lecturelib.validate import (
    check_callable,
    check_ids,
    check_int,
    check_number,
    check_strings,
    check_type,
    describe,
    is_real,
)


def token_logprobs(model: nn.Module, ids: torch.Tensor) -> torch.Tensor:
    """`log π(ids_j | ids_<j)` at every position `j`, 0 at the first (nothing
    predicts it). Exact on right-padded batches: a causal model's position `j` reads
    only `ids_≤j`.

    Shapes: ids `(b, t)` → `(b, t)`.
    """
    check_token_logprobs(model, ids)
    logp = F.log_softmax(model(ids)[:, :-1].float(), dim=-1)  # (b, t-1, v)
    picked = logp.gather(-1, ids[:, 1:, None]).squeeze(-1)  # (b, t-1)
    return F.pad(picked, (1, 0))  # (b, t)


def check_token_logprobs(model, ids) -> None:
    """A model (a callable module) and ids `(b, t)` with `t >= 2`."""
    check_type(model, "model", nn.Module, "an nn.Module (a causal language model)")
    check_ids(ids, "ids", dims=2)
    if ids.shape[1] < 2:
        raise ValueError(
            f"ids must have t >= 2 positions; got shape {tuple(ids.shape)}"
        )


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
    first `eos`, at most `max_new` tokens and within the model's context. The
    prompts are left-padded into one batch, the padding a segment of its own
    (`GPT(ids, segments)`): no prompt sees it, and positions start at each prompt.

    Shapes: `b` prompts `(p_i,)` → `b` responses `(≤ max_new,)`.
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
    """Prompt + response sequences right-padded with `pad`, and the mask of the
    response tokens.

    Shapes: `b` prompts and responses (1-d) → ids, mask `(b, t)`.
    """
    check_pad_right(prompts, responses, pad)
    rows = [torch.cat([p, r]) for p, r in zip(prompts, responses)]
    t = max(len(row) for row in rows)
    ids = torch.full((len(rows), t), pad, dtype=torch.long)
    mask = torch.zeros(len(rows), t, dtype=torch.bool)
    for i, (p, row) in enumerate(zip(prompts, rows)):
        ids[i, : len(row)] = row
        mask[i, len(p) : len(row)] = True
    return ids, mask


def check_pad_right(prompts, responses, pad) -> None:
    """As many responses as prompts (one or more), each a 1-d tensor of token ids, and
    a pad id."""
    for name, seqs in (("prompts", prompts), ("responses", responses)):
        if not isinstance(seqs, (list, tuple)) or not seqs:
            raise TypeError(
                f"{name} must be a non-empty list of 1-d token id tensors; got "
                f"{describe(seqs)}"
            )
        for i, x in enumerate(seqs):
            check_ids(x, f"{name}[{i}]", dims=1, min_len=0)
    if len(responses) != len(prompts):
        raise ValueError(
            f"responses must hold one response per prompt ({len(prompts)}); got "
            f"{len(responses)}"
        )
    check_int(pad, "pad", 0)


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
    """A `sample_fn(model, prompts, group_size) -> (ids, mask, responses)` for
    `grpo_step`: `encode` turns a prompt into the token ids the model answers
    (the chat template up to the assistant's turn), `decode` a response's ids (without
    its `eos`) into text. All `n·g` responses are sampled as one batch.

    Shapes: `n` prompts → ids, mask `(n·g, t)` and `n·g` responses, each prompt's
    `g` together.
    """
    check_sampler(encode, decode, eos, max_new, temperature, seed)
    generator = torch.Generator().manual_seed(seed)

    def sample_fn(model, prompts, group_size):
        gpt.check_gpt(model)
        check_strings(prompts, "prompts")
        check_int(group_size, "group_size", 1)
        device = next(model.parameters()).device
        encoded = [encode(p) for p in prompts]
        for p, x in zip(prompts, encoded):
            check_ids(x, f"encode({p!r:.30})", dims=1)
        rows = [x.cpu() for x in encoded for _ in range(group_size)]
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
    check_strings(prompts, "prompts")
    check_callable(sample_fn, "sample_fn")
    check_callable(reward_fn, "reward_fn")
    check_int(group_size, "group_size", 2)
    check_number(clip, "clip", 0, 1, low_open=True)
    check_number(beta, "beta", 0)
    check_int(iterations, "iterations", 1)
    check_number(max_norm, "max_norm", 0, low_open=True)


def check_samples(ids, mask, responses, rewards, n: int) -> None:
    """What `sample_fn` and `reward_fn` returned for `n` sequences."""
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
    """One GRPO step: `group_size` responses per prompt from `sample_fn(policy,
    prompts, group_size)`, their rewards `reward_fn(prompt, response)`, group
    advantages, then `iterations` clipped, KL-penalised optimiser steps on them.

    Returns the mean `reward`, the `kl` to the reference (k3, per token), the mean
    response `length` in tokens, the last `loss`, and the `rewards` and
    `responses` themselves (each prompt's group together).
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
