"""Chapter 17, speculative decoding (Leviathan, Kalman and Matias, 2023,
arXiv:2211.17192; Chen et al., 2023, arXiv:2302.01318): a small draft model `q`
proposes `K` tokens, the target `p` scores all of them in one forward pass, and a
rejection rule keeps a prefix of them so that the output is distributed exactly as
sampling from `p`.

- `residual` is `normalize(max(0, p - q))`, the distribution a rejected
  position is resampled from (`fallback`), and `verify` the rule itself:
  accept draft `x` with probability `min(1, p(x)/q(x))`, resample at the first
  rejection, and draw one more token from `p` when every draft is accepted.
  `rule="resample_from_p"` is a deliberately wrong variant (resample from `p`
  itself) that the chapter's tests reject. `verify_greedy` is the same rule at
  temperature 0.
- `first_token_distribution` and `sequence_distribution` compute, by exact
  enumeration, the distribution of what the rule emits; the target's own is
  `sequence_probs`.
- `speculative_generate` runs the rule with a
  `lecturelib.pretraining.gpt.GPT` target, a GPT or an
  `lecturelib.efficiency.ngram_draft.NGramDraft` (counts, no network) as draft
  and chapter 14's KV caches (rolled back after a rejection);
  `autoregressive_generate` is the baseline; both sample at a temperature with
  `probs_at` and `draw`.
- `expected_tokens` and `speedup` are the paper's formulas for the tokens
  emitted per target call and the speed-up, for an acceptance rate `alpha`.

Simplifications: one sequence at a time (a batch would accept different numbers of
tokens per row), a fixed `K`, and the draft's acceptance rate assumed the same at
every position in the formulas.

Shapes: `v` vocabulary, `K` drafted tokens, `t` positions.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable

import torch

from lecturelib.efficiency import kvcache
from lecturelib.efficiency.ngram_draft import NGramDraft
from lecturelib.pretraining import gpt
from lecturelib.transformers.sampling import check_generator, multinomial
from lecturelib.validate import (
    check_callable,
    check_int,
    check_number,
    check_tensor,
    check_type,
    describe,
    is_int,
    is_int_tensor,
)

RULES = ("exact", "resample_from_p")
Dist = Callable[[tuple[int, ...]], torch.Tensor]  # prefix -> next-token probabilities


def check_probs(p, name: str, dims: int = 1) -> None:
    """`p` must be a float tensor of `dims` axes, each row a distribution."""
    axes = "(v,)" if dims == 1 else "(n, v)"
    message = (
        f"{name} must be a float tensor {axes} of probabilities; got {describe(p)}"
    )
    if not isinstance(p, torch.Tensor) or not p.is_floating_point():
        raise TypeError(message)
    if p.dim() != dims:
        raise ValueError(message)
    if p.numel() == 0:
        raise ValueError(
            f"{name} must hold at least one row of v >= 1 probabilities; got "
            f"{describe(p)}"
        )
    sums = p.double().sum(-1)
    if (p < 0).any() or not torch.isfinite(p).all() or (sums - 1).abs().max() > 1e-4:
        raise ValueError(
            f"{name} must be probabilities (>= 0, each row summing to 1); "
            f"got row sums from {sums.min().item():.4g} to "
            f"{sums.max().item():.4g}, entries from {p.min().item():.4g}"
        )


def check_rule(rule: str) -> None:
    """`rule` must be one of `RULES`."""
    if not isinstance(rule, str) or rule not in RULES:
        raise ValueError(f"rule must be one of {RULES}; got {rule!r}")


def check_residual(p, q) -> None:
    """The arguments of `residual`: two distributions over one vocabulary."""
    check_probs(p, "p")
    check_probs(q, "q")
    if p.shape != q.shape:
        raise ValueError(
            f"p and q must have the same vocabulary; got {len(p)} and {len(q)} tokens"
        )


def residual(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """`normalize(max(0, p - q))`: what `p` holds beyond `q`; `p` itself if `p == q`."""
    check_residual(p, q)
    extra = (p.double() - q.double()).clamp(min=0)
    if extra.sum() <= 1e-12:
        return p.double()
    return extra / extra.sum()


def check_pair_of_rows(p, q) -> None:
    """`p` and `q`: float tensors `(v,)` over one vocabulary, on one device (their
    shapes only: a value check here would wait for the device at every token)."""
    for name, x in (("p", p), ("q", q)):
        check_tensor(x, name, "(v,) of probabilities", dims=1)
    if p.shape != q.shape:
        raise ValueError(
            f"p and q must have the same vocabulary; got {len(p)} and {len(q)} tokens"
        )
    if p.device != q.device:
        raise ValueError(f"p and q must be on one device; got {p.device}, {q.device}")


def check_fallback(p, q, rule) -> None:
    """The arguments of `fallback`: two rows `(v,)` and a rule of
    `RULES`; on the CPU, `p` must be probabilities (the exact rule's
    `residual` checks both)."""
    check_rule(rule)
    check_pair_of_rows(p, q)
    if rule != "exact" and p.device.type == "cpu":
        check_probs(p, "p")


def fallback(p: torch.Tensor, q: torch.Tensor, rule: str) -> torch.Tensor:
    """What a rejection resamples from: the residual (exact) or `p` (wrong)."""
    check_fallback(p, q, rule)
    return residual(p, q) if rule == "exact" else p.double()


def check_verify(p, q, drafts, rule) -> None:
    """The arguments of `verify`: `K` drafts, `q` `(K, v)`, `p`
    `(K + 1, v)` and a rule of `RULES`."""
    check_probs(p, "p", 2)
    check_probs(q, "q", 2)
    message = f"drafts must be a 1-D tensor of K >= 1 token ids; got {describe(drafts)}"
    if not isinstance(drafts, torch.Tensor) or drafts.is_floating_point():
        raise TypeError(message)
    if drafts.dim() != 1 or len(drafts) < 1:
        raise ValueError(message)
    K = len(drafts)
    if q.shape[0] != K or p.shape[0] != K + 1 or p.shape[1] != q.shape[1]:
        raise ValueError(
            f"K = {K} drafts need q of shape (K, v) and p of shape "
            f"(K + 1, v) with the same v; got q {tuple(q.shape)}, "
            f"p {tuple(p.shape)}"
        )
    if drafts.min() < 0 or drafts.max() >= q.shape[1]:
        raise ValueError(f"drafts must be ids in 0..{q.shape[1] - 1}")
    check_rule(rule)


def verify(
    p: torch.Tensor,
    q: torch.Tensor,
    drafts: torch.Tensor,
    generator: torch.Generator | None = None,
    rule: str = "exact",
) -> tuple[int, int]:
    """Speculative sampling: the number `n` of drafts accepted and the token after them.
    Shapes: p (K + 1, v) target probabilities, q (K, v) the draft's, drafts (K,)."""
    check_verify(p, q, drafts, rule)
    return accept(p, q, drafts.tolist(), generator, rule)


def check_accept(p, q, drafts, generator, rule) -> None:
    """The arguments of `accept`: `K >= 1` drafts (a list of ints), `q`
    `(K, v)` and `p` `(K + 1, v)` float tensors on one device, a generator or
    None and a rule of `RULES`. On the CPU every row of `p` and `q` must be a
    distribution (a row summing to 1.2 would be accepted from as if it were one); on
    an accelerator their shapes and types only: reading the values there would wait
    for the device at every round."""
    check_tensor(p, "p", "(K + 1, v) of probabilities", dims=2)
    check_tensor(q, "q", "(K, v) of probabilities", dims=2)
    if not (isinstance(drafts, list) and drafts and all(map(is_int, drafts))):
        raise TypeError(
            f"drafts must be a non-empty list of int token ids; got {describe(drafts)}"
        )
    K, v = len(drafts), q.shape[1]
    if q.shape[0] != K or p.shape[0] != K + 1 or p.shape[1] != v or v < 1:
        raise ValueError(
            f"K = {K} drafts need q of shape (K, v) and p of shape "
            f"(K + 1, v) with the same v >= 1; got q {tuple(q.shape)}, "
            f"p {tuple(p.shape)}"
        )
    if p.device != q.device:
        raise ValueError(f"p and q must be on one device; got {p.device}, {q.device}")
    if not all(0 <= x < v for x in drafts):
        raise ValueError(
            f"drafts must be ids in 0..{v - 1}; got ids from {min(drafts)} to "
            f"{max(drafts)}"
        )
    check_generator(generator)
    check_rule(rule)
    if p.device.type == "cpu":
        check_probs(p, "p", 2)
        check_probs(q, "q", 2)


def accept(
    p: torch.Tensor,
    q: torch.Tensor,
    drafts: list[int],
    generator: torch.Generator | None,
    rule: str,
) -> tuple[int, int]:
    """`verify` for softmax outputs `p`, `q` and drafts as a list of ints; values
    checked on the CPU only (no read-back per round)."""
    check_accept(p, q, drafts, generator, rule)
    where = None if generator is None else generator.device  # draws are made there
    for i, x in enumerate(drafts):
        u = torch.rand((), generator=generator, dtype=torch.float64, device=where)
        if u * q[i, x] < p[i, x]:  # u < min(1, p/q), without dividing
            continue
        r = fallback(p[i], q[i], rule)
        return i, multinomial(r, 1, generator).item()
    return len(drafts), multinomial(p[-1].double(), 1, generator).item()


def check_verify_greedy(p, drafts) -> None:
    """The arguments of `verify_greedy`: `K` drafts (token ids) and `p`
    `(K + 1, v)` float scores."""
    check_tensor(p, "p", "(K + 1, v) of scores", dims=2)
    if not is_int_tensor(drafts):
        raise TypeError(
            f"drafts must be an integer tensor (K,) of token ids; got "
            f"{describe(drafts)}"
        )
    if drafts.dim() != 1 or p.shape[0] != len(drafts) + 1:
        raise ValueError(
            f"p must be (K + 1, v) for K drafts; got p {describe(p)}, "
            f"drafts {describe(drafts)}"
        )


def verify_greedy(p: torch.Tensor, drafts: torch.Tensor) -> tuple[int, int]:
    """The rule at T = 0: `n` drafts that match the target's argmax, and its next token.
    Shapes: p (K + 1, v) scores or probabilities, drafts (K,)."""
    check_verify_greedy(p, drafts)
    best = p.argmax(-1)  # (K + 1,)
    n = 0
    while n < len(drafts) and drafts[n] == best[n]:
        n += 1
    return n, best[n].item()


def first_token_distribution(
    p: torch.Tensor, q: torch.Tensor, rule: str = "exact"
) -> torch.Tensor:
    """The first-token distribution: `min(p, q) + (1 - Σ min(p, q)) · fallback`."""
    check_rule(rule)
    r = fallback(p, q, rule)  # residual checks p and q
    kept = torch.minimum(p.double(), q.double())
    return kept + (1 - kept.sum()) * r


def _block(p_fn: Dist, q_fn: Dist, prefix: tuple, K: int, rule: str) -> dict:
    """{emitted tokens: probability} of one round after `prefix`, enumerated."""
    out: dict = defaultdict(float)

    def walk(drafted: tuple, prob: float) -> None:
        p = p_fn(prefix + drafted).double()
        if len(drafted) == K:
            for y, py in enumerate(p.tolist()):
                out[drafted + (y,)] += prob * py
            return
        q = q_fn(prefix + drafted).double()
        reject = 0.0
        for x, qx in enumerate(q.tolist()):
            if qx > 0:
                keep = min(1.0, p[x].item() / qx)
                walk(drafted + (x,), prob * qx * keep)
                reject += prob * qx * (1 - keep)
        if reject > 0:
            for y, fy in enumerate(fallback(p, q, rule).tolist()):
                out[drafted + (y,)] += reject * fy

    walk((), 1.0)
    return out


def check_prefix(prompt) -> None:
    """`prompt` must be a tuple of token ids (ints >= 0)."""
    if not (isinstance(prompt, tuple) and all(is_int(i) and i >= 0 for i in prompt)):
        raise TypeError(
            f"prompt must be a tuple of token ids (ints >= 0); got {describe(prompt)}"
        )


def checked_dist(fn, name: str) -> Dist:
    """`fn` (a prefix → next-token distribution), checking each distribution it
    returns: a row that is not one (negative, or not summing to 1) would make the
    enumerated probabilities wrong without a sign."""
    check_type(name, "name", str, "a str (the name of fn in messages)")
    check_callable(fn, name)

    def dist(prefix: tuple[int, ...]) -> torch.Tensor:
        p = fn(prefix)
        check_probs(p, f"{name}({prefix})")
        return p

    return dist


def sequence_distribution(
    p_fn: Dist, q_fn: Dist, prompt: tuple, K: int, n: int, rule: str = "exact"
) -> dict:
    """The exact distribution of the first `n` tokens that speculative decoding with
    `K` drafts emits after `prompt`, by enumerating every draft, acceptance and
    resampling: `{(x_1, ..., x_n): probability}`."""
    check_int(K, "K", 1)
    check_int(n, "n", 1)
    check_rule(rule)
    check_prefix(prompt)
    p_fn, q_fn = checked_dist(p_fn, "p_fn"), checked_dist(q_fn, "q_fn")
    done: dict = defaultdict(float)
    frontier = [(tuple(prompt), 1.0)]
    while frontier:
        prefix, prob = frontier.pop()
        for emitted, pe in _block(p_fn, q_fn, prefix, K, rule).items():
            new = prefix + emitted
            if len(new) - len(prompt) >= n:
                done[new[len(prompt) : len(prompt) + n]] += prob * pe
            else:
                frontier.append((new, prob * pe))
    return dict(done)


def sequence_probs(p_fn: Dist, prompt: tuple, n: int) -> dict:
    """The target's own distribution of its next `n` tokens, by the chain rule:
    `{(x_1, ..., x_n): p(x_1 | prompt) · ... · p(x_n | prompt, x_<n)}`."""
    check_int(n, "n", 1)
    check_prefix(prompt)
    p_fn = checked_dist(p_fn, "p_fn")
    probs = {(): 1.0}
    for _ in range(n):
        probs = {
            seq + (y,): pr * py
            for seq, pr in probs.items()
            for y, py in enumerate(p_fn(tuple(prompt) + seq).double().tolist())
        }
    return probs


def check_pair(target, draft) -> None:
    """A GPT target, a GPT or `NGramDraft` draft, over one vocabulary."""
    check_type(target, "target", gpt.GPT, "a gpt.GPT")
    check_type(draft, "draft", (gpt.GPT, NGramDraft), "a gpt.GPT or an NGramDraft")
    draft_vocab = (
        draft.config.vocab_size if isinstance(draft, gpt.GPT) else draft.vocab_size
    )
    if target.config.vocab_size != draft_vocab:
        raise ValueError(
            f"draft and target must share one vocabulary; got "
            f"vocab_size {draft_vocab} (draft) and "
            f"{target.config.vocab_size} (target)"
        )


def check_prompt(prompt, n_new) -> None:
    """One prompt `(1, t)` of token ids and `n_new` >= 1 tokens to generate."""
    message = f"prompt must be a (1, t) tensor of token ids; got {describe(prompt)}"
    if not isinstance(prompt, torch.Tensor) or prompt.is_floating_point():
        raise TypeError(message)
    if prompt.dim() != 2 or prompt.shape[0] != 1 or prompt.shape[1] < 1:
        raise ValueError(message)
    check_int(n_new, "n_new", 1)


def check_speculative_generate(target, draft, prompt, n_new, K, temperature, rule):
    """The arguments of `speculative_generate`."""
    check_pair(target, draft)
    check_int(K, "K", 1)
    check_prompt(prompt, n_new)
    check_rule(rule)
    check_number(temperature, "temperature", 0.0)
    n = prompt.shape[1] + n_new + K - 1  # the most positions the target's cache holds
    check_cached_model(target, n, "speculative decoding")
    if isinstance(draft, gpt.GPT):
        check_cached_model(draft, n - 1, "speculative decoding")


def check_cached_model(model, n: int, needs: str) -> None:
    """`model` must run on chapter 14's cache exactly, over `n` positions."""
    kvcache.check_new_cache(model, 1, 1)
    kvcache.check_positions(model, n, needs)


def check_logits_row(logits, name: str) -> None:
    """`logits` must be a float tensor `(v,)` or `(n, v)` with `v >= 1`."""
    check_tensor(logits, name, "(v,) or (n, v)")
    if logits.dim() not in (1, 2) or logits.shape[-1] < 1:
        raise ValueError(
            f"{name} must be (v,) or (n, v) with v >= 1; got shape "
            f"{tuple(logits.shape)}"
        )


def check_probs_at(logits, temperature) -> None:
    """The arguments of `probs_at`: logits `(v,)` or `(n, v)` and a
    temperature >= 0."""
    check_logits_row(logits, "logits")
    check_number(temperature, "temperature", 0.0)


def probs_at(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """`softmax(logits / T)` in float64; the logits themselves at `T = 0`."""
    check_probs_at(logits, temperature)
    return logits if temperature == 0 else (logits.double() / temperature).softmax(-1)


def check_draw(probs, temperature, generator) -> None:
    """The arguments of `draw`: one row `(v,)` (probabilities, or the logits
    `probs_at` returns at `T = 0`), a temperature >= 0 and a generator or None.
    The probabilities are read on the CPU only: a read of a GPU tensor would wait for
    the device at every token."""
    check_logits_row(probs, "probs")
    if probs.dim() != 1:
        raise ValueError(f"probs must be one row (v,); got shape {tuple(probs.shape)}")
    check_number(temperature, "temperature", 0.0)
    check_generator(generator)
    if temperature > 0 and probs.device.type == "cpu":
        check_probs(probs, "probs")


def draw(probs: torch.Tensor, temperature: float, generator) -> int:
    """A token drawn from `probs`; at `T = 0` the most likely one."""
    check_draw(probs, temperature, generator)
    if temperature == 0:
        return probs.argmax().item()
    return multinomial(probs, 1, generator).item()


def check_draft_logits(draft, ids, cache) -> None:
    """The arguments of `draft_logits`: a GPT or an `NGramDraft`, the ids
    so far (a list of ints) and, for a GPT, a cache holding fewer than `len(ids)`
    positions (`kvcache.cached_forward` checks that the GPT built it); the ids it
    has not read yet must be of its vocabulary."""
    check_type(draft, "draft", (gpt.GPT, NGramDraft), "a gpt.GPT or an NGramDraft")
    if not (isinstance(ids, list) and all(map(is_int, ids))):
        raise TypeError(f"ids must be a list of int token ids; got {describe(ids)}")
    if isinstance(draft, NGramDraft):
        return
    check_type(cache, "cache", kvcache.KVCache, "the draft's kvcache.KVCache")
    new, v = ids[cache.length :], draft.config.vocab_size
    if not new:
        raise ValueError(
            f"ids must hold more than the {cache.length} positions the cache holds; "
            f"got {len(ids)} ids"
        )
    if not all(0 <= i < v for i in new):
        raise ValueError(
            f"ids must be token ids in 0..{v - 1}; got ids from {min(new)} to "
            f"{max(new)} after the cached ones"
        )


def draft_logits(
    draft: gpt.GPT | NGramDraft, ids: list[int], cache: kvcache.KVCache | None
) -> torch.Tensor:
    """The draft's logits for the token after `ids` (GPT: the ids its cache lacks)."""
    check_draft_logits(draft, ids, cache)
    if isinstance(draft, NGramDraft):
        return draft.logits(ids)
    new = torch.tensor([ids[cache.length :]], device=cache.model.embed.weight.device)
    return kvcache.cached_forward(draft, new, cache)[0, -1]


@torch.inference_mode()
def speculative_generate(
    target: gpt.GPT,
    draft: gpt.GPT | NGramDraft,
    prompt: torch.Tensor,
    n_new: int,
    K: int,
    *,
    temperature: float = 1.0,
    generator: torch.Generator | None = None,
    rule: str = "exact",
) -> tuple[torch.Tensor, dict]:
    """`n_new` tokens sampled at `temperature` (0: greedy), `K` drafts per round.
    Returns ids (1, t + n_new) and counts: calls, drafted, tested, accepted, seconds."""
    check_speculative_generate(target, draft, prompt, n_new, K, temperature, rule)
    tic = time.perf_counter()
    total = prompt.shape[1] + n_new + K + 1
    t_cache, device = kvcache.new_cache(target, 1, total), prompt.device
    d_cache = kvcache.new_cache(draft, 1, total) if isinstance(draft, gpt.GPT) else None
    seq = prompt[0].tolist()
    stats = dict(target_calls=0, draft_calls=0, drafted=0, tested=0, accepted=0)
    while len(seq) < prompt.shape[1] + n_new:
        drafts, q = [], []
        for _ in range(K):
            logits = draft_logits(draft, seq + drafts, d_cache)
            q.append(probs_at(logits, temperature))
            drafts.append(draw(q[-1], temperature, generator))
        new = torch.tensor([(seq + drafts)[t_cache.length :]], device=device)
        logits = kvcache.cached_forward(target, new, t_cache)[0, -(K + 1) :]  # (K+1, v)
        if temperature == 0:
            n, nxt = verify_greedy(logits, torch.tensor(drafts, device=device))
        else:
            p = probs_at(logits, temperature)  # the draft's q may live elsewhere:
            n, nxt = accept(p, torch.stack(q).to(device), drafts, generator, rule)
        seq += drafts[:n] + [nxt]
        for cache in (t_cache, d_cache):  # roll back
            if cache is not None:
                cache.length = min(cache.length, len(seq) - 1)
        stats["target_calls"] += 1
        stats["draft_calls"] += K
        stats["drafted"] += K
        stats["tested"] += min(n + 1, K)
        stats["accepted"] += n
    stats["seconds"] = time.perf_counter() - tic
    return torch.tensor([seq[: prompt.shape[1] + n_new]], device=device), stats


@torch.inference_mode()
def autoregressive_generate(
    model: gpt.GPT,
    prompt: torch.Tensor,
    n_new: int,
    *,
    temperature: float = 1.0,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, dict]:
    """Plain decoding with the KV cache at `temperature` (0: greedy), one model call
    per token: the baseline. Returns the ids `(1, t + n_new)` and
    `{"target_calls", "seconds"}`."""
    check_type(model, "model", gpt.GPT, "a gpt.GPT")
    check_prompt(prompt, n_new)
    check_number(temperature, "temperature", 0.0)
    check_cached_model(model, prompt.shape[1] + n_new - 1, "autoregressive_generate")
    tic = time.perf_counter()
    cache = kvcache.new_cache(model, 1, prompt.shape[1] + n_new)
    seq, new = prompt[0].tolist(), prompt
    for _ in range(n_new):
        logits = kvcache.cached_forward(model, new, cache)[0, -1]
        x = draw(probs_at(logits, temperature), temperature, generator)
        seq.append(x)
        new = torch.tensor([[x]], device=prompt.device)
    return torch.tensor([seq], device=prompt.device), {
        "target_calls": n_new,
        "seconds": time.perf_counter() - tic,
    }


def expected_tokens(alpha: float, K: int) -> float:
    """Tokens emitted per target call when each draft is accepted with probability
    `alpha`: `1 + alpha + ... + alpha^K = (1 - alpha^(K+1)) / (1 - alpha)`."""
    check_number(alpha, "alpha", 0.0, 1.0)
    check_int(K, "K", 1)
    return float(sum(alpha**i for i in range(K + 1)))


def speedup(alpha: float, K: int, cost: float) -> float:
    """Leviathan et al.'s expected speed-up over plain decoding when a draft call costs
    `cost` target calls: `expected_tokens / (K · cost + 1)`."""
    check_number(cost, "cost", 0.0)
    return expected_tokens(alpha, K) / (K * cost + 1)
