"""Chapter 10, search: how a language model's next-token distributions become the most
probable text, and why that text is not the best.

Every algorithm of the chapter talks to a model through one function, a *step*:
`step(prefixes)` takes token ids `(b, t)` (long, on the prompts' device) and returns
the logits `(b, v)` of the token that follows each prefix (on any device). Any
autoregressive model fits: a table of n-gram counts, an RNN (`RecurrentStep` keeps
its state, so a call costs one time step) or a Transformer. `pipe` passes a step's logits through processors
(functions from logits to logits), and `TreeLM` is a toy model whose every prefix
has its own random distribution.

- `generate` is the loop shared by `greedy` decoding and sampling
  (`lecturelib.transformers.sampling`); `sequence_logprobs` scores given continuations.
- `greedy`, `beam_search` and the oracle `exhaustive_search` look for
  likely sequences; beam search keeps finished hypotheses aside and ranks them by
  `log p / length^alpha`, a simpler length normalisation than GNMT's
  `((5 + length) / 6)^alpha` (Wu et al., 2016, arXiv:1609.08144).
- `degeneration.repetition` and `degeneration.distinct_n` measure the repeated
  n-grams of what they find.

Shapes use `b` batch, `t` time, `v` vocabulary.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from lecturelib.validate import (
    check_callable,
    check_int,
    check_number,
    check_on_device,
    check_sizes,
    describe,
)

Step = Callable[[torch.Tensor], torch.Tensor]


def check_logits(logits: torch.Tensor, what: str = "logits") -> None:
    """Logits `(..., v)`: a float tensor, a non-empty vocabulary, no nan."""
    if not isinstance(logits, torch.Tensor) or not logits.is_floating_point():
        raise TypeError(
            f"{what} must be a float tensor (..., v); got {describe(logits)}"
        )
    if logits.dim() == 0 or logits.shape[-1] == 0:
        raise ValueError(
            f"{what} must be (..., v) with a non-empty vocabulary v >= 1; "
            f"got shape {tuple(logits.shape)}"
        )
    if logits.device.type != "cpu":  # checked on the device, without a read-back
        check_on_device(~torch.isnan(logits).any(), f"{what} must not hold nan")
    elif torch.isnan(logits).any():
        n_nan = int(torch.isnan(logits).sum())
        raise ValueError(
            f"{what} must not hold nan; got {n_nan} nan of {logits.numel()}"
        )


def check_prefixes(prefixes: torch.Tensor, what: str = "prefixes") -> None:
    """Prefixes `(b, t)` of token ids, as a step takes them: a long tensor, ids >= 0."""
    if not isinstance(prefixes, torch.Tensor) or prefixes.dtype != torch.long:
        raise TypeError(
            f"{what} must be a long tensor of token ids (b, t); "
            f"got {describe(prefixes)}"
        )
    if prefixes.dim() != 2 or prefixes.shape[0] == 0 or prefixes.shape[1] == 0:
        raise ValueError(
            f"{what} must be (b, t) with b, t >= 1; got {tuple(prefixes.shape)}"
        )
    if prefixes.device.type != "cpu":  # checked on the device, without a read-back
        check_on_device((prefixes >= 0).all(), f"{what} must hold token ids >= 0")
    elif (prefixes < 0).any():
        raise ValueError(
            f"{what} must hold token ids >= 0; got {prefixes.min().item()}"
        )


def check_step_output(logits: torch.Tensor, n: int, eos: int | None = None) -> None:
    """What a step returned for `n` prefixes: logits `(n, v)` in which `eos`, if
    given, is a token."""
    check_logits(logits, "step(prefixes)")
    if logits.dim() != 2 or logits.shape[0] != n:
        raise ValueError(
            f"step(prefixes) must return logits (b, v) with b = {n}, "
            f"one row per prefix; got shape {tuple(logits.shape)}"
        )
    check_eos(eos, logits.shape[1])


def check_eos(eos: int | None, v: int | None = None) -> None:
    """`eos`: None or a token id (below the vocabulary size `v` when known)."""
    if eos is not None:
        check_int(eos, "eos", 0, None if v is None else v - 1)


def check_generate(step, prompts, max_new, choose, eos) -> None:
    """The arguments of `generate`."""
    check_callable(step, "step")
    check_prefixes(prompts, "prompts")
    check_int(max_new, "max_new", 0)
    check_callable(choose, "choose")
    check_eos(eos)


@torch.no_grad()
def generate(
    step: Step,
    prompts: torch.Tensor,
    max_new: int,
    choose: Callable[[torch.Tensor], torch.Tensor],
    eos: int | None = None,
):
    """Append `choose(logits)` until `max_new` tokens or `eos` in every row; a row's
    tokens after `eos` are `eos`. Shapes: prompts `(b, t)` → `(b, t + n)`."""
    check_generate(step, prompts, max_new, choose, eos)
    done = torch.zeros(len(prompts), dtype=torch.bool, device=prompts.device)
    ids = prompts
    for _ in range(max_new):
        logits = step(ids)  # (b, v)
        check_step_output(logits, len(ids), eos)
        token = choose(logits).to(ids.device)  # (b,)
        if eos is not None:
            token = token.masked_fill(done, eos)
            done = done | (token == eos)
        ids = torch.cat([ids, token[:, None]], dim=1)
        if eos is not None and done.all():  # the one read-back: may the loop stop?
            break
    return ids


def greedy(step: Step, prompts: torch.Tensor, max_new: int, eos: int | None = None):
    """Greedy decoding: append the most probable token at each step."""
    return generate(step, prompts, max_new, lambda logits: logits.argmax(-1), eos)


def check_tree_lm(vocab_size, depth, seed, scale, max_logits: int) -> None:
    """The arguments of `TreeLM`: a tree of at most `max_logits` logits."""
    check_int(vocab_size, "vocab_size", 1)
    check_int(depth, "depth", 1)
    check_int(seed, "seed", 0)
    check_number(scale, "scale", 0.0)
    n_logits = vocab_size * sum(vocab_size**d for d in range(depth + 1))
    if n_logits > max_logits:
        raise ValueError(
            f"vocab_size {vocab_size} and depth {depth} need "
            f"{n_logits:,} logits; at most {max_logits:,}"
        )


def check_tree_prefixes(prefixes, depth: int, v: int) -> None:
    """The prefixes a `TreeLM` reads: a start symbol, then at most `depth`
    tokens in `0..v-1`."""
    check_prefixes(prefixes)
    path = prefixes[:, 1:]
    if path.shape[1] > depth or (path >= v).any():
        raise ValueError(
            f"prefixes must hold a start symbol and at most "
            f"{depth} tokens in 0..{v - 1}; "
            f"got shape {tuple(prefixes.shape)} with "
            f"largest id {prefixes.max().item()}"
        )


class TreeLM:
    """A toy LM: fixed random logits `scale * N(0, 1)` per prefix (first token ignored).
    Shapes: prefixes `(b, t)`, `t <= depth + 1` → logits `(b, v)` (float64)."""

    MAX_LOGITS = 50_000_000  # 400 MB of float64

    def __init__(self, vocab_size: int, depth: int, seed: int = 0, scale: float = 1.0):
        check_tree_lm(vocab_size, depth, seed, scale, self.MAX_LOGITS)
        n_nodes = sum(vocab_size**d for d in range(depth + 1))
        self.vocab_size, self.depth = vocab_size, depth
        g = torch.Generator().manual_seed(seed)
        self.logits = scale * torch.randn(
            n_nodes, vocab_size, generator=g, dtype=torch.float64
        )

    def __call__(self, prefixes: torch.Tensor) -> torch.Tensor:
        check_tree_prefixes(prefixes, self.depth, self.vocab_size)
        path = prefixes[:, 1:]  # (b, d): the tokens after the start symbol
        d, v = path.shape[1], self.vocab_size
        weights = [v ** (d - 1 - i) for i in range(d)]
        weights = torch.tensor(weights, dtype=torch.long, device=path.device)
        node = sum(v**j for j in range(d)) + (path * weights).sum(1)  # nodes of depth d
        return self.logits[node.cpu()].to(prefixes.device)  # the table stays on the CPU


@dataclass
class Hypothesis:
    """Continuation tokens after the prompt (`eos` if produced), summed log-prob."""

    tokens: list[int]
    logprob: float
    finished: bool = False

    def score(self, alpha: float = 0.0) -> float:
        """`logprob / length^alpha`; alpha 0: by probability, 1: by mean per token."""
        return self.logprob / max(1, len(self.tokens)) ** alpha


def extend(
    step: Step, prompt: torch.Tensor, live: list[Hypothesis], eos: int | None = None
) -> torch.Tensor:
    """Log-probabilities (float64) of the token after each of `n` live hypotheses."""
    # (n, t + len): all hypotheses have one length
    prefixes = torch.stack(
        [
            torch.cat([prompt, prompt.new_tensor(h.tokens, dtype=torch.long)])
            for h in live
        ]
    )
    logits = step(prefixes)
    check_step_output(logits, len(live), eos)
    return F.log_softmax(logits.double(), dim=-1)


def check_search(
    step: Step,
    prompt: torch.Tensor,
    max_new: int,
    eos: int | None,
    alpha: float,
    **sizes: int,
) -> None:
    """The arguments of `beam_search` and `exhaustive_search`; `sizes`
    (`beam_size`, `limit`) must be ints >= 1."""
    check_callable(step, "step")
    if not isinstance(prompt, torch.Tensor) or prompt.dtype != torch.long:
        raise TypeError(
            f"prompt must be a long tensor of token ids (t,); got {describe(prompt)}"
        )
    if prompt.dim() != 1 or len(prompt) == 0:
        raise ValueError(
            f"prompt must be one sequence of token ids (t,) with t >= 1; "
            f"got shape {tuple(prompt.shape)} "
            f"(for a batch, search each row: prompts[i])"
        )
    if (prompt < 0).any():
        raise ValueError(f"prompt must hold token ids >= 0; got {prompt.min().item()}")
    check_int(max_new, "max_new", 1)
    check_eos(eos)
    check_number(alpha, "the length-normalisation exponent alpha", 0.0)
    check_sizes(**sizes)


@torch.no_grad()
def beam_search(
    step: Step,
    prompt: torch.Tensor,
    beam_size: int,
    max_new: int,
    eos: int | None = None,
    alpha: float = 0.0,
) -> list[Hypothesis]:
    """Beam search from one `prompt` `(t,)`: finished or cut hypotheses, best first."""
    check_search(step, prompt, max_new, eos, alpha, beam_size=beam_size)
    live, done = [Hypothesis([], 0.0)], []
    for _ in range(max_new):
        logp = extend(step, prompt, live, eos)  # (n, v)
        v = logp.shape[1]
        past = logp.new_tensor([h.logprob for h in live])  # (n,)
        total = past[:, None] + logp  # (n, v)
        # each live hypothesis has one eos extension, so the 2k best hold k that go on
        scores, flat = total.flatten().topk(min(2 * beam_size, total.numel()))
        live_next = []
        for rank, (s, f) in enumerate(zip(scores.tolist(), flat.tolist())):
            if s == -math.inf or len(live_next) == beam_size:
                break
            parent, token = divmod(f, v)
            h = Hypothesis(live[parent].tokens + [token], s, token == eos)
            if not h.finished:
                live_next.append(h)
            elif rank < beam_size:  # eos among the beam_size best: finished
                done.append(h)
        live = live_next
        if not live or (
            alpha == 0 and done and max(h.logprob for h in done) >= live[0].logprob
        ):
            break
    else:
        done += live  # cut at max_new
    return sorted(done, key=lambda h: h.score(alpha), reverse=True)


@torch.no_grad()
def exhaustive_search(
    step: Step,
    prompt: torch.Tensor,
    max_new: int,
    eos: int | None = None,
    alpha: float = 0.0,
    limit: int = 1_000_000,
) -> list[Hypothesis]:
    """Every continuation of `prompt` `(t,)` to `max_new` tokens, best score first."""
    check_search(step, prompt, max_new, eos, alpha, limit=limit)
    frontier, done = [Hypothesis([], 0.0)], []
    for _ in range(max_new):
        logp = extend(step, prompt, frontier, eos)  # (n, v)
        if logp.numel() > limit:
            raise ValueError(
                f"{logp.numel():,} continuations exceed the limit of {limit:,}"
            )
        children = [
            Hypothesis(h.tokens + [tok], h.logprob + lp, tok == eos)
            for h, row in zip(frontier, logp.tolist())
            for tok, lp in enumerate(row)
            if lp > -math.inf
        ]
        done += [h for h in children if h.finished]
        frontier = [h for h in children if not h.finished]
        if not frontier:
            break
    done += frontier
    return sorted(done, key=lambda h: h.score(alpha), reverse=True)


def check_recurrent_step(model, batch_dim) -> None:
    """The arguments of `RecurrentStep`."""
    if not isinstance(model, nn.Module) or next(model.parameters(), None) is None:
        raise TypeError(
            f"model must be a torch.nn.Module with parameters; got {describe(model)}"
        )
    check_int(batch_dim, "batch_dim", -8, 7)


class RecurrentStep:
    """Step of a recurrent `model(x, state) -> (logits, state)` (eval mode), reusing its
    last states (batch axis `batch_dim`). Shapes: `(b, t)` → `(b, v)` float32, CPU."""

    def __init__(self, model: nn.Module, batch_dim: int = -2):
        check_recurrent_step(model, batch_dim)
        self.model, self.batch_dim, self.cache = model, batch_dim, {}

    @torch.no_grad()
    def __call__(self, prefixes: torch.Tensor) -> torch.Tensor:
        check_prefixes(prefixes)
        device = next(self.model.parameters()).device
        keys = [tuple(row) for row in prefixes.tolist()]
        parents = [self.cache.get(key[:-1]) for key in keys]
        if prefixes.shape[1] > 1 and all(p is not None for p in parents):
            state = torch.stack(parents, dim=self.batch_dim)
            logits, state = self.model(prefixes[:, -1:].to(device), state)  # one step
        else:
            logits, state = self.model(prefixes.to(device))  # the whole prefix
        self.cache = dict(zip(keys, state.unbind(self.batch_dim)))
        return logits[:, -1].float().cpu()


def check_pipe(step, processors) -> None:
    """The arguments of `pipe`: callables."""
    check_callable(step, "step")
    for i, process in enumerate(processors):
        check_callable(process, f"processor {i}")


def pipe(step: Step, *processors: Callable[[torch.Tensor], torch.Tensor]) -> Step:
    """A step whose logits pass through `processors` in order."""
    check_pipe(step, processors)

    def processed(prefixes: torch.Tensor) -> torch.Tensor:
        logits = step(prefixes)
        for process in processors:
            logits = process(logits)
        return logits

    return processed


@torch.no_grad()
def sequence_logprobs(step: Step, ids: torch.Tensor, n_prompt: int) -> torch.Tensor:
    """The log-probability of every token after the first `n_prompt`, given those
    before it.

    Shapes: ids `(b, t)` → `(b, t - n_prompt)`.
    """
    check_callable(step, "step")
    check_prefixes(ids, "ids")
    if ids.shape[1] < 2:
        raise ValueError(
            f"ids must hold a prompt and at least one token to score "
            f"(t >= 2); got shape {tuple(ids.shape)}"
        )
    check_int(n_prompt, "n_prompt", 1, ids.shape[1] - 1)
    out = []
    for t in range(n_prompt, ids.shape[1]):
        logits = step(ids[:, :t])
        check_step_output(logits, len(ids))
        check_int(ids[:, t].max().item(), "every id of ids", 0, logits.shape[1] - 1)
        logp = F.log_softmax(logits.double(), dim=-1)  # (b, v)
        out.append(logp.gather(1, ids[:, t : t + 1].to(logp.device)))
    return torch.cat(out, dim=1)
