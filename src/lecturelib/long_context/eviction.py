"""Chapter 18: a KV cache of bounded size, and which entries to evict.

Generating past the trained context with a fixed memory means dropping cached keys and
values. `stream` runs chapter 11's `lecturelib.pretraining.gpt.GPT` one token at a time
over a long text with a cache of at most `budget` entries per layer and head, evicting
with a policy:

- `"full"`: no eviction (the cache grows, positions run past the trained context);
- `"window"`: the `budget` most recent tokens;
- `"sinks"`: StreamingLLM (Xiao et al., arXiv:2309.17453): the first `n_sinks`
  tokens, the "attention sinks", plus the most recent ones;
- `"h2o"`: Heavy-Hitter Oracle (Zhang et al., arXiv:2306.14048): the `n_recent` most
  recent tokens plus, per layer and head, the older ones with the largest attention
  accumulated so far;
- `"knn"`: a Memorizing-Transformer-style memory (Wu et al., arXiv:2203.08913):
  nothing is dropped; each query attends to the `n_recent` most recent tokens plus the
  `budget - n_recent` older ones whose keys match it best (exact top-k, per head).

As in StreamingLLM, keys are cached before rotation and RoPE positions are assigned
within the cache (`0..s-1`), so relative distances never exceed the budget; the
rotation is the model's own (its RoPE tables, scaled ones included), and the variants a
token-by-token forward cannot run exactly are refused by name (`check_stream_model`).
Simplifications: one sequence batch at a time with the same text length; the H2O scores
are summed over all queries so far (the paper's accumulated attention).

Shapes: `b` batch, `h` heads, `s` cached positions, `e` d_head, `T` tokens.
"""

from __future__ import annotations

import contextvars
import math

import torch
import torch.nn.functional as F
from einops import rearrange

from lecturelib.efficiency import kvcache
from lecturelib.long_context.segment_memory import check_stream
from lecturelib.validate import (
    check_int,
    check_sizes,
    check_tensor,
    check_type,
    describe,
)

POLICIES = ("full", "window", "sinks", "h2o", "knn")


def check_policy(policy) -> None:
    """`policy` must be one of `POLICIES`."""
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {POLICIES}; got {policy!r}")


def check_budget(policy: str, budget, n_sinks, n_recent) -> None:
    """A policy and a cache budget that holds what the policy keeps."""
    check_policy(policy)
    check_sizes(budget=budget, n_sinks=n_sinks, n_recent=n_recent)
    if policy == "sinks" and budget <= n_sinks:
        raise ValueError(
            f"the budget ({budget}) must be larger than n_sinks "
            f"({n_sinks}): the sinks and at least one recent token"
        )
    if policy in ("h2o", "knn") and n_recent >= budget:
        raise ValueError(
            f"the recent window (n_recent={n_recent}) must be smaller than "
            f"the cache budget ({budget})"
        )


# Set while :func:`stream` calls :func:`keep` on the attention it accumulated itself,
# token by token: those scores are sums of softmax weights (a NaN there would show in
# the losses it returns), and a value check per token would wait for the device at
# every step.
_OWN_SCORES: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "_OWN_SCORES", default=False
)


def check_keep(policy, scores, budget, n_sinks, n_recent) -> None:
    """The arguments of `keep`; H2O's scores, when it evicts by them, must be
    finite (`topk` ranks a NaN above every number)."""
    check_policy(policy)
    check_type(scores, "scores", torch.Tensor, "a (b, h, s) tensor")
    if scores.dim() != 3:
        raise ValueError("scores must be a (b, h, s) tensor")
    check_tensor(scores, "scores", "(b, h, s)")
    check_int(budget, "budget", 1)
    check_int(n_sinks, "n_sinks", 0)
    check_int(n_recent, "n_recent", 0)
    if policy == "sinks" and budget < n_sinks:
        raise ValueError(
            f"the budget ({budget}) must hold the n_sinks ({n_sinks}) sinks"
        )
    if policy == "h2o" and not 0 < n_recent < budget:
        raise ValueError(
            f"n_recent ({n_recent}) must be in 1..budget-1 = 1..{budget - 1}"
        )
    if (
        policy == "h2o"
        and scores.shape[2] > budget
        and not _OWN_SCORES.get()
        and not bool(torch.isfinite(scores).all())
    ):
        raise ValueError(
            f"scores must be finite for policy 'h2o' (a NaN outranks every score and "
            f"would be kept as a heavy hitter); got {describe(scores)} with "
            f"{int((~torch.isfinite(scores)).sum())} non-finite values"
        )


def keep(
    policy: str, scores: torch.Tensor, budget: int, n_sinks: int = 4, n_recent: int = 1
) -> torch.Tensor:
    """The cached positions that `policy` keeps, in order, per sequence and head.
    Shapes: scores (b, h, s), H2O's accumulated attention → (b, h, min(s, budget))."""
    check_keep(policy, scores, budget, n_sinks, n_recent)
    (b, h, s), device = scores.shape, scores.device
    if s <= budget or policy == "full":
        idx = torch.arange(s, device=device)
    elif policy == "window":
        idx = torch.arange(s - budget, s, device=device)
    elif policy == "sinks":
        sinks = torch.arange(n_sinks, device=device)
        idx = torch.cat([sinks, torch.arange(s - budget + n_sinks, s, device=device)])
    else:  # h2o: heavy hitters among the older tokens, then the recent ones
        old = scores[..., : s - n_recent]  # (b, h, s - n_recent)
        heavy = old.topk(budget - n_recent, dim=-1).indices.sort(-1).values
        recent = torch.arange(s - n_recent, s, device=device).expand(b, h, n_recent)
        return torch.cat([heavy, recent], -1)
    return idx.expand(b, h, len(idx))


def check_gather(x, idx) -> None:
    """The arguments of `gather`: `x` `(b, h, s, ...)` and positions `idx`
    `(b, h, k)` (int64 or int32) of the same `b, h` on its device. The positions
    are read (`0 <= idx < s`) only on the CPU: `stream` gathers at every token,
    and a read of a GPU tensor would wait for the device each time."""
    check_type(x, "x", torch.Tensor, "a tensor (b, h, s, ...)")
    if x.dim() < 3:
        raise ValueError(f"x must be (b, h, s, ...); got shape {tuple(x.shape)}")
    if not isinstance(idx, torch.Tensor) or idx.dtype not in (torch.long, torch.int):
        raise TypeError(
            f"idx must be an int64 (or int32) tensor (b, h, k) of cache positions; got "
            f"{describe(idx)}"
        )
    if idx.dim() != 3 or idx.shape[:2] != x.shape[:2]:
        raise ValueError(
            f"idx must be (b, h, k) = ({x.shape[0]}, {x.shape[1]}, k) to match x "
            f"{tuple(x.shape)}; got shape {tuple(idx.shape)}"
        )
    if idx.device != x.device:
        raise ValueError(
            f"idx must be on the device of x ({x.device}); got {idx.device}"
        )
    s = x.shape[2]
    if idx.device.type == "cpu" and idx.numel() and (idx.min() < 0 or idx.max() >= s):
        raise ValueError(
            f"idx must hold cache positions in 0..{s - 1}; got positions from "
            f"{int(idx.min())} to {int(idx.max())}"
        )


def gather(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """The rows `idx` of `x` along the cache axis. Shapes: x `(b, h, s, ...)`,
    idx `(b, h, k)` → `(b, h, k, ...)`."""
    check_gather(x, idx)
    extra = x.shape[3:]
    index = idx.view(*idx.shape, *([1] * len(extra))).expand(*idx.shape, *extra)
    return x.gather(2, index)


def check_retrieve(q, k, n_recent, top) -> None:
    """The arguments of `retrieve`: a query `(b, h, 1, e)` and keys `(b, h, s,
    e)`, and counts of recent and retrieved positions that keep at least one."""
    check_tensor(q, "q", "(b, h, 1, e)", dims=4)
    check_tensor(k, "k", "(b, h, s, e)", dims=4)
    if q.shape[2] != 1 or q.shape[:2] != k.shape[:2] or q.shape[3] != k.shape[3]:
        raise ValueError(
            f"q must be (b, h, 1, e) and k (b, h, s, e); got {tuple(q.shape)} and "
            f"{tuple(k.shape)}"
        )
    check_int(n_recent, "n_recent", 0)
    check_int(top, "top", 0)
    if top + n_recent < 1:
        raise ValueError("top + n_recent must be at least 1: nothing would be kept")


def retrieve(q: torch.Tensor, k: torch.Tensor, n_recent: int, top: int) -> torch.Tensor:
    """The `n_recent` last positions plus the `top` older ones whose (unrotated) keys
    score highest against the query, in order. Shapes: q `(b, h, 1, e)`, k `(b, h, s,
    e)` → `(b, h, min(s, top + n_recent))`."""
    check_retrieve(q, k, n_recent, top)
    b, h, s, _ = k.shape
    if s <= top + n_recent:
        return torch.arange(s, device=k.device).expand(b, h, s)
    scores = (q @ k[:, :, : s - n_recent].transpose(-1, -2))[:, :, 0]  # (b, h, s - r)
    found = scores.topk(top, dim=-1).indices.sort(-1).values
    recent = torch.arange(s - n_recent, s, device=k.device).expand(b, h, n_recent)
    return torch.cat([found, recent], -1)


def check_stream_model(model, ids, policy, budget, n_sinks, n_recent) -> None:
    """The arguments of `stream`: a GPT whose blocks it runs exactly, one token
    at a time without dropout, with its own RoPE tables reaching every position the
    policy rotates (the text's, or the cache's `0..budget-1`)."""
    needs = "eviction.stream"
    kvcache.check_gpt(model, needs)
    kvcache.check_token_wise(model, needs)
    check_budget(policy, budget, n_sinks, n_recent)
    check_stream(ids)
    n = ids.shape[1] - 1
    kvcache.check_positions(model, n if policy == "full" else min(n, budget), needs)
    if model.training and model.config.dropout > 0:
        raise ValueError(
            f"{needs} has no dropout; the model is training with dropout="
            f"{model.config.dropout}: call model.eval()"
        )


@torch.no_grad()
def stream(
    model,
    ids: torch.Tensor,
    policy: str,
    budget: int,
    n_sinks: int = 4,
    n_recent: int | None = None,
    attention: bool = False,
):
    """Next-token losses of `model` over `ids` read one token at a time with a cache
    of at most `budget` entries (`policy` decides which). With `attention=True`
    also returns, per layer, the attention of the last query over the cached positions.

    Shapes: ids `(b, T)` → losses `(b, T-1)`."""
    check_int(budget, "budget", 1)
    n_recent = budget // 2 if n_recent is None else n_recent
    check_stream_model(model, ids, policy, budget, n_sinks, n_recent)
    c = model.config
    b, T = ids.shape
    rope = kvcache.Rope.of_model(model, T + 1 if policy in ("full", "knn") else budget)
    K = [ids.new_zeros(b, c.n_heads, 0, c.d_head).float() for _ in model.blocks]
    V, acc = list(K), [torch.zeros(b, c.n_heads, 0, device=ids.device) for _ in K]
    losses, last = [], []
    for t in range(T - 1):
        x = model.embed(ids[:, t : t + 1])  # (b, 1, d)
        for layer, block in enumerate(model.blocks):
            q, k, v = rearrange(
                block.attn.qkv(block.norm1(x)),
                "b t (three h e) -> three b h t e",
                three=3,
                h=c.n_heads,
            )  # (b, h, 1, e) each
            K[layer] = torch.cat([K[layer], k], 2)  # unrotated keys
            V[layer] = torch.cat([V[layer], v], 2)
            acc[layer] = F.pad(acc[layer], (0, 1))
            if policy == "knn":
                idx = retrieve(q, K[layer], n_recent, budget - n_recent)
                ks, vs = gather(K[layer], idx), gather(V[layer], idx)
            else:
                ks, vs = K[layer], V[layer]
            s = ks.shape[2]
            a = (
                rope(q, s - 1) @ rope(ks, 0).transpose(-1, -2) / math.sqrt(c.d_head)
            ).softmax(-1)  # (b, h, 1, s)
            if policy != "knn":
                acc[layer] = acc[layer] + a[:, :, 0]
            if attention and t == T - 2:
                last.append(a[:, :, 0])
            y = rearrange(a @ vs, "b h t e -> b t (h e)")
            x = x + block.attn.out(y)
            x = x + block.mlp(block.norm2(x))
            if policy not in ("full", "knn"):  # room for the next one
                own = _OWN_SCORES.set(True)
                try:
                    idx = keep(
                        policy,
                        acc[layer],
                        budget - 1,
                        n_sinks,
                        min(n_recent, budget - 2) if policy == "h2o" else 1,
                    )
                finally:
                    _OWN_SCORES.reset(own)
                K[layer], V[layer] = gather(K[layer], idx), gather(V[layer], idx)
                acc[layer] = gather(acc[layer][..., None], idx)[..., 0]
        logits = model.head(model.norm(x))[:, 0]  # (b, v)
        losses.append(F.cross_entropy(logits, ids[:, t + 1], reduction="none"))
    losses = torch.stack(losses, 1)
    return (losses, last) if attention else losses
