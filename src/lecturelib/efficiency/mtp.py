"""Chapter 17, multi-token prediction: `K` heads on one trunk predict the tokens
`x_{t+1}, ..., x_{t+K}` from the state at `t` (Gloeckle et al., 2024,
arXiv:2404.19737), and the extra heads' guesses are verified by the model itself, a
*self-speculative* decoder (blockwise parallel decoding, Stern, Shazeer and Uszkoreit,
2018, arXiv:1811.03115; Medusa, Cai et al., 2024, arXiv:2401.10774).

- `MTPHeads` adds heads `2..K` to a trained
  `lecturelib.pretraining.gpt.GPT`, whose own output head is head 1. Head `k`
  is Medusa's: a residual SiLU layer on the trunk's final state, then the trunk's
  (tied) output matrix. Gloeckle et al. train trunk and heads together from scratch;
  here the trunk is frozen (Medusa-1), so head 1 stays the chapter 11 model and
  self-speculation reproduces its greedy output.
- `mtp_loss` is the heads' joint loss, the mean over `k` of the cross-entropy of
  `x_{t+k}`; `self_speculative_generate` decodes greedily with the guesses.

Simplification: every round recomputes the whole prefix (no KV cache), for the
baseline too, so the prompt and the new tokens must fit in the trunk's `seq_len`.

Shapes: `b` batch, `t` positions, `k` heads, `v` vocabulary.
"""

from __future__ import annotations

import time

import torch
import torch.nn.functional as F
from torch import nn

from lecturelib.pretraining import gpt, peft
from lecturelib.validate import check_ids, check_int, check_type, describe


def check_mtp_heads(model, n_future) -> None:
    """The arguments of `MTPHeads`: a GPT trunk and `n_future` >= 2 heads."""
    check_type(model, "model", gpt.GPT, "a gpt.GPT")
    check_int(n_future, "n_future", 2)


class MTPHeads(nn.Module):
    """Heads `2..n_future` on frozen `model`: `W_out (h + SiLU(A_k h))`, `A_k` from 0.
    Shapes: ids (b, t) -> logits (b, t, n_future, v), head 1 first."""

    def __init__(self, model: gpt.GPT, n_future: int):
        super().__init__()
        check_mtp_heads(model, n_future)
        self.trunk = peft.freeze(model)
        d = model.config.d_model
        self.extra = nn.ModuleList(nn.Linear(d, d) for _ in range(n_future - 1))
        for layer in self.extra:
            nn.init.zeros_(layer.weight)
            nn.init.zeros_(layer.bias)

    @property
    def n_future(self) -> int:
        return len(self.extra) + 1

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            h = self.trunk.norm(self.trunk.residual_stream(ids)[-1])  # (b, t, d)
        states = [h] + [h + F.silu(a(h)) for a in self.extra]  # k × (b, t, d)
        return self.trunk.head(torch.stack(states, 2))  # (b, t, k, v)


def check_mtp_loss(heads, batch) -> None:
    """The arguments of `mtp_loss`: heads on a GPT trunk and a pair `(x, y)` of
    token ids `(b, t)` of one shape, `y` in the trunk's vocabulary (read once per
    call: an id out of range would stop a GPU with a device-side assert), and `t` at
    least the number of heads, so that every head is scored on one position or more (a
    mean over none is NaN)."""
    check_heads(heads)
    if not isinstance(batch, (tuple, list)) or len(batch) != 2:
        raise TypeError(
            f"batch must be a pair (x, y) of (b, t) ids; got {describe(batch)}"
        )
    x, y = batch
    check_ids(y, "y", dims=2, vocab_size=heads.trunk.config.vocab_size)
    check_type(x, "x", torch.Tensor, "a (b, t) tensor of token ids")
    if y.shape != x.shape:
        raise ValueError(
            f"y must have the shape of x {tuple(x.shape)}; got {tuple(y.shape)}"
        )
    if x.shape[1] < heads.n_future:
        raise ValueError(
            f"x must hold at least n_future = {heads.n_future} positions (head k is "
            f"scored on t - k + 1 of them); got t = {x.shape[1]}"
        )


def mtp_loss(heads: MTPHeads, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """Mean over heads of the cross-entropy; head `k` is scored on `y[:, k-1:]`."""
    check_mtp_loss(heads, batch)
    x, y = batch
    logits = heads(x)  # (b, t, k, v)
    losses = []
    for k in range(heads.n_future):
        pred = logits[:, : x.shape[1] - k, k]  # (b, t-k, v)
        losses.append(F.cross_entropy(pred.transpose(1, 2), y[:, k:]))
    return torch.stack(losses).mean()


def check_heads(heads) -> None:
    """`heads` must be heads on a GPT trunk: an `MTPHeads`, or the chapter's
    copy of it."""
    if not isinstance(getattr(heads, "trunk", None), gpt.GPT):
        raise TypeError(f"heads must be an MTPHeads; got {type(heads).__name__}")


def check_head_accuracy(heads, ids, seq_len) -> None:
    """The arguments of `head_accuracy`: heads on a GPT trunk, a 1-D stream of
    the trunk's token ids and windows of `seq_len` positions, at least one per head
    (head `k` is scored on the `seq_len - k + 1` positions that have an
    `x_{t+k}` in the window) and at most the trunk's `seq_len`."""
    check_heads(heads)
    c = heads.trunk.config
    check_int(seq_len, "seq_len", heads.n_future, c.seq_len)
    check_ids(ids, "ids", dims=1, vocab_size=c.vocab_size)
    if len(ids) <= seq_len:
        raise ValueError(
            f"ids must hold more than seq_len = {seq_len} tokens; got {len(ids)}"
        )


@torch.no_grad()
def head_accuracy(heads: MTPHeads, ids: torch.Tensor, seq_len: int) -> list[float]:
    """Per head, how often its most likely token is the true `x_{t+k}`, over
    consecutive windows of the stream `ids`."""
    check_head_accuracy(heads, ids, seq_len)
    n = (len(ids) - 1) // seq_len
    x = ids[: n * seq_len].view(n, seq_len)
    y = ids[1 : n * seq_len + 1].view(n, seq_len)
    guess = heads(x).argmax(-1)  # (n, t, k)
    return [
        (guess[:, : seq_len - k, k] == y[:, k:]).float().mean().item()
        for k in range(heads.n_future)
    ]


def check_fits(prompt, n_new: int, seq_len: int) -> None:
    """One prompt `(1, t)` of token ids and `n_new` >= 1 new tokens that fit in
    `seq_len` positions together."""
    message = f"prompt must be a (1, t) tensor of token ids; got {describe(prompt)}"
    if not isinstance(prompt, torch.Tensor) or prompt.is_floating_point():
        raise TypeError(message)
    if prompt.dim() != 2 or prompt.shape[0] != 1:
        raise ValueError(message)
    check_int(n_new, "n_new", 1)
    if prompt.shape[1] + n_new > seq_len:
        raise ValueError(
            f"prompt ({prompt.shape[1]}) + n_new ({n_new}) must fit in "
            f"the trunk's seq_len = {seq_len}"
        )


def check_self_speculative_generate(heads, prompt, n_new) -> None:
    """The arguments of `self_speculative_generate`: heads on a GPT trunk (an
    `MTPHeads`, or the chapter's copy of it) and a prompt that fits."""
    check_heads(heads)
    check_fits(prompt, n_new, heads.trunk.config.seq_len)


@torch.no_grad()
def self_speculative_generate(
    heads: MTPHeads, prompt: torch.Tensor, n_new: int
) -> tuple[torch.Tensor, dict]:
    """Greedy decoding: heads `2..n_future` guess ahead and the next call checks them.
    Returns the ids (1, t + n_new) and `{"calls", "accepted", "seconds"}`."""
    check_self_speculative_generate(heads, prompt, n_new)
    tic = time.perf_counter()
    end = prompt.shape[1] + n_new
    seq = prompt[0].tolist()
    best = heads(prompt)[0, -1].argmax(-1).tolist()  # (k,)
    stats = dict(calls=1, accepted=0)
    while len(seq) < end:
        seq.append(best[0])
        guesses = best[1:][: end - len(seq)]
        if not guesses:
            break
        guessed = torch.tensor([seq + guesses], device=prompt.device)
        out = heads(guessed)[0].argmax(-1)  # (t, k)
        stats["calls"] += 1
        n, at = 0, len(seq) - 1  # out[at, 0] follows seq's last token
        while n < len(guesses) and out[at + n, 0].item() == guesses[n]:
            n += 1
        seq += guesses[:n]
        stats["accepted"] += n
        best = out[at + n].tolist()
    stats["seconds"] = time.perf_counter() - tic
    return torch.tensor([seq[:end]], device=prompt.device), stats


@torch.no_grad()
def greedy_generate(
    model: gpt.GPT, prompt: torch.Tensor, n_new: int
) -> tuple[torch.Tensor, dict]:
    """The baseline: one call of `model` on the whole prefix per new token.
    Returns the ids `(1, t + n_new)` and `{"calls", "seconds"}`."""
    check_type(model, "model", gpt.GPT, "a gpt.GPT")
    check_fits(prompt, n_new, model.config.seq_len)
    tic = time.perf_counter()
    ids = prompt
    for _ in range(n_new):
        ids = torch.cat([ids, model(ids)[:, -1:].argmax(-1)], 1)
    return ids, {"calls": n_new, "seconds": time.perf_counter() - tic}
