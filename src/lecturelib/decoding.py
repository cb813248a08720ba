"""Chapter 10: decoding, or how a language model's next-token distributions become text.

Every algorithm here talks to a model through one function, a *step*: ``step(prefixes)``
takes token ids ``(b, t)`` (long, on the CPU) and returns the logits ``(b, v)`` of the token
that follows each prefix. Any autoregressive model fits: a table of n-gram counts, an RNN
(:class:`RecurrentStep` keeps its state, so a call costs one time step) or a Transformer.

- :func:`temperature`, :func:`top_k` (Fan, Lewis and Dauphin, 2018, arXiv:1805.04833) and
  :func:`top_p`, nucleus sampling (Holtzman et al., 2020, arXiv:1904.09751), map logits to
  logits; :func:`pipe` applies them to a step's output, so a sampler is ancestral sampling
  (:func:`sample`) of a transformed model. :func:`top_k` keeps ties with the k-th logit.
- :func:`constrain` masks the tokens that a rule forbids after a prefix; :func:`regex_allowed`
  builds the rule from a regular expression by partial matching. Guided-generation libraries
  compile the expression into an automaton over tokens instead (Willard and Louf, 2023,
  arXiv:2307.09702), which is faster but allows the same tokens.
- :func:`greedy`, :func:`beam_search` and the oracle :func:`exhaustive_search` look for likely
  sequences; beam search keeps finished hypotheses aside and ranks them by
  ``log p / length^alpha``, a simpler length normalisation than GNMT's
  ``((5 + length) / 6)^alpha`` (Wu et al., 2016, arXiv:1609.08144).
- :func:`contrastive` scores ``log p_strong - log p_weak`` on the tokens with
  ``p_strong >= alpha * max p_strong`` (Li et al., 2023, arXiv:2210.15097), searched greedily
  here where the paper uses beam search.
- :func:`repetition` and :func:`distinct_n` measure repeated n-grams (Welleck et al., 2020,
  arXiv:1908.04319; Li et al., 2016, arXiv:1510.03055); :class:`TreeLM` is a toy model whose
  every prefix has its own random distribution.

Shapes use ``b`` batch, ``t`` time, ``v`` vocabulary.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import regex
import torch
import torch.nn.functional as F
from torch import nn

from lecturelib.seq2seq import ngrams

Step = Callable[[torch.Tensor], torch.Tensor]


def _check_logits(logits: torch.Tensor) -> None:
    if not isinstance(logits, torch.Tensor) or not logits.is_floating_point():
        raise TypeError(f"logits must be a float tensor (..., v); got {type(logits).__name__}"
                        f" {getattr(logits, 'dtype', '')}")
    if logits.dim() == 0 or logits.shape[-1] == 0:
        raise ValueError(f"logits must be (..., v) with a non-empty vocabulary v >= 1; "
                         f"got shape {tuple(logits.shape)}")


def _check_prefixes(prefixes: torch.Tensor, what: str = "prefixes") -> None:
    if not isinstance(prefixes, torch.Tensor) or prefixes.dtype != torch.long:
        raise TypeError(f"{what} must be a long tensor of token ids; "
                        f"got {getattr(prefixes, 'dtype', type(prefixes).__name__)}")
    if prefixes.dim() != 2 or prefixes.shape[0] == 0 or prefixes.shape[1] == 0:
        raise ValueError(f"{what} must be (b, t) with b, t >= 1; got {tuple(prefixes.shape)}")


def temperature(logits: torch.Tensor, T: float) -> torch.Tensor:
    """``logits / T``: sampling from their softmax sharpens (``T < 1``) or flattens (``T > 1``)
    the distribution and never changes the order of the tokens.

    >>> temperature(torch.tensor([2.0, 0.0]), 2.0)
    tensor([1., 0.])

    Shapes: ``(..., v)`` → ``(..., v)``.
    """
    _check_logits(logits)
    if not T > 0:  # also rejects nan
        raise ValueError(f"the temperature T must be > 0; got {T}")
    return logits / T


def top_k(logits: torch.Tensor, k: int) -> torch.Tensor:
    """Keep the ``k`` largest logits (and any tied with the k-th), set the rest to ``-inf``.

    >>> top_k(torch.tensor([1.0, 3.0, 2.0]), 2)
    tensor([-inf, 3., 2.])

    Shapes: ``(..., v)`` → ``(..., v)``.
    """
    _check_logits(logits)
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be an int >= 1; got {k!r}")
    if k >= logits.shape[-1]:
        return logits
    kth = logits.topk(k, dim=-1).values[..., -1:]  # (..., 1): the k-th largest logit
    return logits.masked_fill(logits < kth, -math.inf)


def top_p(logits: torch.Tensor, p: float) -> torch.Tensor:
    """Nucleus filtering: keep the smallest set of most probable tokens whose probability
    reaches ``p``, set the rest to ``-inf``. A token is kept when the tokens ranked above it
    hold less than ``p``, so the most probable token is always kept.

    >>> top_p(torch.tensor([0.5, 0.3, 0.2]).log(), 0.7).exp()
    tensor([0.5000, 0.3000, 0.0000])

    Shapes: ``(..., v)`` → ``(..., v)``.
    """
    _check_logits(logits)
    if not 0 < p <= 1:
        raise ValueError(f"p must be in (0, 1]; got {p}")
    if p == 1:
        return logits
    probs, order = logits.softmax(-1).sort(dim=-1, descending=True)
    above = probs.cumsum(-1) - probs  # (..., v): mass of the tokens ranked above each one
    drop = torch.zeros_like(above, dtype=torch.bool).scatter(-1, order, above >= p)
    return logits.masked_fill(drop, -math.inf)


def pipe(step: Step, *processors: Callable[[torch.Tensor], torch.Tensor]) -> Step:
    """A step whose logits pass through ``processors`` in order, e.g.
    ``pipe(step, lambda z: temperature(z, 0.8), lambda z: top_p(z, 0.9))``."""
    def processed(prefixes: torch.Tensor) -> torch.Tensor:
        logits = step(prefixes)
        for process in processors:
            logits = process(logits)
        return logits

    return processed


def constrain(step: Step, allowed: Callable[[torch.Tensor], torch.Tensor]) -> Step:
    """A step that sets the logits of forbidden tokens to ``-inf``; ``allowed(prefixes)``
    returns a bool mask ``(b, v)``, True where the token may follow the prefix.

    Shapes: prefixes ``(b, t)`` → logits ``(b, v)``.
    """
    def constrained(prefixes: torch.Tensor) -> torch.Tensor:
        logits, ok = step(prefixes), allowed(prefixes)
        if ok.dtype != torch.bool or ok.shape != logits.shape:
            raise ValueError(f"allowed(prefixes) must be a bool mask of shape "
                             f"{tuple(logits.shape)}; got {ok.dtype} {tuple(ok.shape)}")
        if not ok.any(-1).all():
            raise ValueError("the constraint allows no token after some prefix")
        return logits.masked_fill(~ok, -math.inf)

    return constrained


def regex_allowed(pattern: str, tokens: Sequence[str], eos: int, n_prompt: int,
                  sep: str = "") -> Callable[[torch.Tensor], torch.Tensor]:
    """The rule "the generated text must match ``pattern``" as a mask for :func:`constrain`.

    The text is ``sep.join`` of the strings of the tokens after the first ``n_prompt``. A token
    may follow when the text with it can still be completed to a full match (a partial match);
    ``eos`` may follow only a full match, and after ``eos`` only ``eos``.

    Shapes: prefixes ``(b, t)`` → mask ``(b, v)`` with ``v = len(tokens)``.
    """
    compiled = regex.compile(pattern)
    if not 0 <= eos < len(tokens):
        raise ValueError(f"eos must be a token id in 0..{len(tokens) - 1}; got {eos}")

    def allowed(prefixes: torch.Tensor) -> torch.Tensor:
        mask = torch.zeros(prefixes.shape[0], len(tokens), dtype=torch.bool)
        for i, row in enumerate(prefixes[:, n_prompt:].tolist()):
            if eos in row:
                mask[i, eos] = True
                continue
            words = [tokens[t] for t in row]
            for j, s in enumerate(tokens):
                if j == eos:
                    mask[i, j] = compiled.fullmatch(sep.join(words)) is not None
                else:
                    text = sep.join([*words, s])
                    mask[i, j] = compiled.fullmatch(text, partial=True) is not None
        return mask

    return allowed


@torch.no_grad()
def generate(step: Step, prompts: torch.Tensor, max_new: int,
             choose: Callable[[torch.Tensor], torch.Tensor], eos: int | None = None):
    """Extend every prompt by ``choose(logits)`` until ``max_new`` tokens; a row that has
    produced ``eos`` is filled with ``eos``, and generation stops when every row has.

    Shapes: prompts ``(b, t)`` → ``(b, t + n)`` with ``n <= max_new``.
    """
    _check_prefixes(prompts, "prompts")
    if isinstance(max_new, bool) or not isinstance(max_new, int) or max_new < 0:
        raise ValueError(f"max_new must be an int >= 0; got {max_new!r}")
    ids, done = prompts, torch.zeros(len(prompts), dtype=torch.bool)
    for _ in range(max_new):
        logits = step(ids)  # (b, v)
        if logits.shape[0] != len(ids):
            raise ValueError(f"step returned {tuple(logits.shape)} for {len(ids)} prefixes")
        token = choose(logits)  # (b,)
        if eos is not None:
            token = token.masked_fill(done, eos)
            done = done | (token == eos)
        ids = torch.cat([ids, token[:, None]], dim=1)
        if done.all():
            break
    return ids


def greedy(step: Step, prompts: torch.Tensor, max_new: int, eos: int | None = None):
    """Greedy decoding: append the most probable token, ``argmax_x p(x | prefix)``.

    Shapes: prompts ``(b, t)`` → ``(b, t + n)``.
    """
    return generate(step, prompts, max_new, lambda logits: logits.argmax(-1), eos)


def sample(step: Step, prompts: torch.Tensor, max_new: int, eos: int | None = None,
           generator: torch.Generator | None = None):
    """Ancestral sampling: draw each token from ``softmax(logits)``, the model's conditional
    distribution; truncate or reshape it first with :func:`pipe`.

    Shapes: prompts ``(b, t)`` → ``(b, t + n)``.
    """
    def draw(logits: torch.Tensor) -> torch.Tensor:
        _check_logits(logits)
        if not torch.isfinite(logits).any(-1).all():
            raise ValueError("every logit of some row is -inf: there is nothing to sample")
        return torch.multinomial(logits.double().softmax(-1), 1, generator=generator)[:, 0]

    return generate(step, prompts, max_new, draw, eos)


@dataclass
class Hypothesis:
    """A continuation found by search: its tokens (the prompt excluded, ``eos`` included when
    produced), the sum of their log-probabilities, and whether it ended with ``eos``."""

    tokens: list[int]
    logprob: float
    finished: bool = False

    def score(self, alpha: float = 0.0) -> float:
        """``logprob / length^alpha``: ``alpha = 0`` ranks by probability, ``alpha = 1`` by
        the mean log-probability per token."""
        return self.logprob / max(1, len(self.tokens)) ** alpha


def _extend(step: Step, prompt: torch.Tensor, live: list[Hypothesis]) -> torch.Tensor:
    """Log-probabilities ``(n, v)`` of the next token after each live hypothesis (float64)."""
    prefixes = torch.stack([torch.cat([prompt, torch.tensor(h.tokens, dtype=torch.long)])
                            for h in live])  # (n, t + len): all hypotheses have one length
    return F.log_softmax(step(prefixes).double(), dim=-1)


def _check_search(prompt: torch.Tensor, max_new: int, alpha: float) -> None:
    _check_prefixes(prompt[None] if isinstance(prompt, torch.Tensor) else prompt, "prompt")
    if isinstance(max_new, bool) or not isinstance(max_new, int) or max_new < 1:
        raise ValueError(f"max_new must be an int >= 1; got {max_new!r}")
    if not alpha >= 0:
        raise ValueError(f"the length-normalisation exponent alpha must be >= 0; got {alpha}")


@torch.no_grad()
def beam_search(step: Step, prompt: torch.Tensor, beam_size: int, max_new: int,
                eos: int | None = None, alpha: float = 0.0) -> list[Hypothesis]:
    """Beam search: keep the ``beam_size`` most probable unfinished continuations, extend each
    by every token, and keep the best ``beam_size`` of the extensions. An extension that ends
    with ``eos`` and ranks among them is finished and set aside. Returns the finished
    hypotheses (and those cut at ``max_new``), best first by ``score(alpha)``.

    With ``alpha = 0`` the search stops as soon as the best finished hypothesis is at least as
    probable as the best live one: log-probabilities only fall as a sequence grows.

    Shapes: prompt ``(t,)``.
    """
    _check_search(prompt, max_new, alpha)
    if isinstance(beam_size, bool) or not isinstance(beam_size, int) or beam_size < 1:
        raise ValueError(f"beam_size must be an int >= 1; got {beam_size!r}")
    live, done = [Hypothesis([], 0.0)], []
    for _ in range(max_new):
        logp = _extend(step, prompt, live)  # (n, v)
        v = logp.shape[1]
        total = torch.tensor([h.logprob for h in live], dtype=torch.float64)[:, None] + logp
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
            elif rank < beam_size:  # eos among the beam_size best: a finished hypothesis
                done.append(h)
        live = live_next
        if not live or (alpha == 0 and done
                        and max(h.logprob for h in done) >= live[0].logprob):
            break
    else:
        done += live  # cut at max_new
    return sorted(done, key=lambda h: h.score(alpha), reverse=True)


@torch.no_grad()
def exhaustive_search(step: Step, prompt: torch.Tensor, max_new: int, eos: int | None = None,
                      alpha: float = 0.0, limit: int = 1_000_000) -> list[Hypothesis]:
    """Every continuation of up to ``max_new`` tokens (ending at ``eos`` or at ``max_new``),
    best first by ``score(alpha)``: the oracle for search, feasible only for tiny ``v^max_new``.

    Shapes: prompt ``(t,)``.
    """
    _check_search(prompt, max_new, alpha)
    frontier, done = [Hypothesis([], 0.0)], []
    for _ in range(max_new):
        logp = _extend(step, prompt, frontier)  # (n, v)
        if logp.numel() > limit:
            raise ValueError(f"{logp.numel():,} continuations exceed the limit of {limit:,}")
        children = [Hypothesis(h.tokens + [tok], h.logprob + lp, tok == eos)
                    for h, row in zip(frontier, logp.tolist())
                    for tok, lp in enumerate(row) if lp > -math.inf]
        done += [h for h in children if h.finished]
        frontier = [h for h in children if not h.finished]
        if not frontier:
            break
    done += frontier
    return sorted(done, key=lambda h: h.score(alpha), reverse=True)


@torch.no_grad()
def sequence_logprobs(step: Step, ids: torch.Tensor, n_prompt: int) -> torch.Tensor:
    """The log-probability of every token after the first ``n_prompt``, given those before it.

    Shapes: ids ``(b, t)`` → ``(b, t - n_prompt)``.
    """
    _check_prefixes(ids, "ids")
    if not 1 <= n_prompt < ids.shape[1]:
        raise ValueError(f"n_prompt must be in 1..{ids.shape[1] - 1}; got {n_prompt}")
    out = []
    for t in range(n_prompt, ids.shape[1]):
        logp = F.log_softmax(step(ids[:, :t]).double(), dim=-1)  # (b, v)
        out.append(logp.gather(1, ids[:, t:t + 1]))
    return torch.cat(out, dim=1)


def contrastive(strong: torch.Tensor, weak: torch.Tensor, alpha: float = 0.1) -> torch.Tensor:
    """Contrastive scores ``log p_strong - log p_weak`` on the plausible tokens,
    ``p_strong >= alpha * max p_strong``, and ``-inf`` elsewhere.

    Shapes: strong, weak logits ``(..., v)`` → scores ``(..., v)``.
    """
    _check_logits(strong)
    if weak.shape != strong.shape:
        raise ValueError(f"strong and weak logits must have one shape; got "
                         f"{tuple(strong.shape)} and {tuple(weak.shape)}")
    if not 0 <= alpha <= 1:
        raise ValueError(f"alpha must be in [0, 1]; got {alpha}")
    log_s, log_w = F.log_softmax(strong.double(), -1), F.log_softmax(weak.double(), -1)
    floor = math.log(alpha) if alpha > 0 else -math.inf
    plausible = log_s >= log_s.max(-1, keepdim=True).values + floor
    return (log_s - log_w).masked_fill(~plausible, -math.inf)


def contrastive_step(strong: Step, weak: Step, alpha: float = 0.1) -> Step:
    """A step whose "logits" are the :func:`contrastive` scores, for :func:`greedy`."""
    return lambda prefixes: contrastive(strong(prefixes), weak(prefixes), alpha)


class RecurrentStep:
    """The step of a recurrent model ``model(x (b, t), state) -> (logits (b, t, v), state)``
    such as ``rnn.CharRNN`` or ``gated.CharLSTM``. It remembers the state after each prefix
    of its last call, so a prefix that extends one of them by a token costs one time step;
    any other prefix is read from the start. Put the model in eval mode first.

    Shapes: prefixes ``(b, t)`` → logits ``(b, v)`` (CPU, float32); the model's state has its
    batch axis at ``batch_dim``.
    """

    def __init__(self, model: nn.Module, batch_dim: int = -2):
        self.model, self.batch_dim, self.cache = model, batch_dim, {}

    @torch.no_grad()
    def __call__(self, prefixes: torch.Tensor) -> torch.Tensor:
        _check_prefixes(prefixes)
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


class TreeLM:
    """A toy language model in which every prefix has its own next-token distribution, with
    logits drawn once as ``scale * N(0, 1)``. The first token of a prefix is a start symbol
    and is ignored, so prefixes hold 1 to ``depth + 1`` tokens.

    Shapes: prefixes ``(b, t)`` → logits ``(b, v)`` (float64).
    """

    def __init__(self, vocab_size: int, depth: int, seed: int = 0, scale: float = 1.0):
        if vocab_size < 1 or depth < 1:
            raise ValueError(f"vocab_size and depth must be >= 1; got {vocab_size}, {depth}")
        self.vocab_size, self.depth = vocab_size, depth
        n_nodes = sum(vocab_size**d for d in range(depth + 1))
        g = torch.Generator().manual_seed(seed)
        self.logits = scale * torch.randn(n_nodes, vocab_size, generator=g, dtype=torch.float64)

    def __call__(self, prefixes: torch.Tensor) -> torch.Tensor:
        _check_prefixes(prefixes)
        path = prefixes[:, 1:]  # (b, d): the tokens after the start symbol
        d, v = path.shape[1], self.vocab_size
        if d > self.depth or (path >= v).any() or (path < 0).any():
            raise ValueError(f"prefixes must hold a start symbol and at most {self.depth} "
                             f"tokens in 0..{v - 1}; got {tuple(prefixes.shape)}")
        weights = torch.tensor([v ** (d - 1 - i) for i in range(d)], dtype=torch.long)
        node = sum(v**j for j in range(d)) + (path * weights).sum(1)  # nodes of depth d
        return self.logits[node]


def repetition(tokens: Sequence[int], n: int = 4) -> float:
    """The fraction of a sequence's n-grams that already occurred earlier in it,
    ``1 - unique / total`` (0.0 when it has no n-gram).

    >>> repetition([1, 2, 1, 2, 1, 2], n=2)
    0.6
    """
    counts = ngrams(list(tokens), n)
    total = sum(counts.values())
    return 0.0 if total == 0 else 1 - len(counts) / total


def distinct_n(sequences: Sequence[Sequence[int]], n: int = 2) -> float:
    """Distinct n-grams of a set of sequences over their total number of n-grams.

    >>> distinct_n([[1, 2, 3], [1, 2, 4]], n=2)
    0.75
    """
    counts = sum((ngrams(list(s), n) for s in sequences), start=ngrams([], n))
    total = sum(counts.values())
    if total == 0:
        raise ValueError(f"the sequences hold no {n}-gram")
    return len(counts) / total
