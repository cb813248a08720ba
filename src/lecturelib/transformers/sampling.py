"""Chapter 10, sampling and steering: drawing text from a language model, reshaping its
next-token distributions, and testing that a sampler draws from the distribution it
claims.

Steps, prefixes and logits are those of `lecturelib.transformers.decoding`.

- `sample` is ancestral sampling, and `chi_square` Pearson's test that draws
  come from a given distribution (the check of every sampler). `multinomial` draws
  on the generator's device, so a seeded CPU generator draws the same tokens on any
  device.
- `temperature`, `top_k` (Fan, Lewis and Dauphin, 2018, arXiv:1805.04833)
  and `top_p`, nucleus sampling (Holtzman et al., 2020, arXiv:1904.09751), map
  logits to logits; `decoding.pipe` applies them to a step's output, so a sampler is
  ancestral sampling of a transformed model. `top_k` keeps ties with the k-th
  logit.
- `contrastive` scores `log p_strong - log p_weak` on the tokens with
  `p_strong >= alpha * max p_strong` (Li et al., 2023, arXiv:2210.15097), searched
  greedily here where the paper uses beam search.
- `constrain` masks the tokens that a rule forbids after a prefix;
  `regex_allowed` builds the rule from a regular expression by partial matching.
  Guided-generation libraries compile the expression into an automaton over tokens
  instead (Willard and Louf, 2023, arXiv:2307.09702), which is faster but allows the
  same tokens.

Shapes use `b` batch, `t` time, `v` vocabulary, `n` draws.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import regex
import torch
import torch.nn.functional as F

from lecturelib.validate import (
    check_callable,
    check_int,
    check_number,
    check_type,
    describe,
)
from lecturelib.transformers.decoding import (
    Step,
    check_logits,
    check_prefixes,
    generate,
)


def check_generator(generator) -> None:
    """A random generator: a `torch.Generator` or None."""
    if generator is not None:
        check_type(generator, "generator", torch.Generator, "a torch.Generator or None")


def check_samplable(logits) -> None:
    """Logits to sample from: every row keeps a token."""
    check_logits(logits)
    if not torch.isfinite(logits).any(-1).all():
        raise ValueError("every logit of some row is -inf: there is nothing to sample")


def check_multinomial(probs, n, generator) -> None:
    """The arguments of `multinomial`: a float tensor `(v,)` or `(b, v)` of
    (unnormalised) probabilities, `n >= 1` draws and a generator or None."""
    if not isinstance(probs, torch.Tensor) or not probs.is_floating_point():
        raise TypeError(
            f"probs must be a float tensor (v,) or (b, v); got {describe(probs)}"
        )
    if probs.dim() not in (1, 2):
        raise ValueError(
            f"probs must be a float tensor (v,) or (b, v); got {describe(probs)}"
        )
    check_int(n, "n", 1)
    check_generator(generator)


def multinomial(
    probs: torch.Tensor, n: int = 1, generator: torch.Generator | None = None
) -> torch.Tensor:
    """`torch.multinomial` drawn on the generator's device, returned on `probs`':
    a CPU generator then draws the same tokens whether `probs` live on the CPU or a
    GPU (and CUDA refuses a generator of another device).

    Shapes: probs `(v,)` or `(b, v)` → `(n,)` or `(b, n)`.
    """
    check_multinomial(probs, n, generator)
    if generator is None or generator.device == probs.device:
        return torch.multinomial(probs, n, generator=generator)
    drawn = torch.multinomial(probs.to(generator.device), n, generator=generator)
    return drawn.to(probs.device)


def sample(
    step: Step,
    prompts: torch.Tensor,
    max_new: int,
    eos: int | None = None,
    generator: torch.Generator | None = None,
):
    """Ancestral sampling: draw each next token from `softmax(logits)`."""
    check_generator(generator)

    def draw(logits: torch.Tensor) -> torch.Tensor:
        check_samplable(logits)
        probs = logits.double().softmax(-1)  # (b, v)
        return multinomial(probs, 1, generator)[:, 0]  # (b,)

    return generate(step, prompts, max_new, draw, eos)


def check_draws(draws: torch.Tensor, probs: torch.Tensor) -> None:
    """The arguments of `chi_square`."""
    if (
        not isinstance(probs, torch.Tensor)
        or not probs.is_floating_point()
        or probs.dim() != 1
    ):
        raise TypeError(f"probs must be a 1-D float tensor (v,); got {describe(probs)}")
    if not torch.isfinite(probs).all() or (probs < 0).any() or probs.sum() <= 0:
        raise ValueError(
            f"probs must be finite, >= 0 and not all 0; got {probs.tolist()[:8]}"
        )
    if (
        not isinstance(draws, torch.Tensor)
        or draws.dim() != 1
        or len(draws) == 0
        or draws.dtype != torch.long
    ):
        raise TypeError(
            f"draws must be a non-empty 1-D long tensor of token ids (n,); "
            f"got {describe(draws)}"
        )
    if draws.min() < 0 or draws.max() >= len(probs):
        raise ValueError(
            f"draws must be ids in 0..{len(probs) - 1} (the length of "
            f"probs); got ids from {draws.min().item()} to "
            f"{draws.max().item()}"
        )


def chi_square(draws: torch.Tensor, probs: torch.Tensor) -> float:
    """Pearson's chi-square p-value that `draws` come from `probs` (normalised)."""
    check_draws(draws, probs)
    counts = torch.bincount(draws, minlength=len(probs)).double()
    if counts[probs == 0].sum() > 0:
        return 0.0
    expected = probs.double() / probs.sum() * len(draws)
    big = expected >= 5
    observed = torch.cat([counts[big], counts[~big].sum().view(1)])
    expected = torch.cat([expected[big], expected[~big].sum().view(1)])
    keep = expected > 0
    observed, expected = observed[keep], expected[keep]
    if len(expected) < 2:
        return 1.0  # one bin holds every draw, as it should: nothing to test
    statistic = ((observed - expected) ** 2 / expected).sum()
    dof = torch.tensor(len(expected) - 1, dtype=torch.float64)
    # the upper tail P(chi2_dof >= statistic)
    return float(torch.special.gammaincc(dof / 2, statistic / 2))


def check_temperature(logits, T) -> None:
    """The arguments of `temperature`."""
    check_logits(logits)
    check_number(T, "the temperature T", 0.0, low_open=True)


def temperature(logits: torch.Tensor, T: float) -> torch.Tensor:
    """`logits / T`: `T < 1` sharpens the softmax, `T > 1` flattens it; order stays."""
    check_temperature(logits, T)
    return logits / T


def check_top_k(logits, k) -> None:
    """The arguments of `top_k`."""
    check_logits(logits)
    check_int(k, "k", 1)


def top_k(logits: torch.Tensor, k: int) -> torch.Tensor:
    """Keep the `k` largest logits (and ties with the k-th), set the rest to `-inf`."""
    check_top_k(logits, k)
    if k >= logits.shape[-1]:
        return logits
    kth = logits.topk(k, dim=-1).values[..., -1:]  # (..., 1): the k-th largest logit
    return logits.masked_fill(logits < kth, -math.inf)


def check_top_p(logits, p) -> None:
    """The arguments of `top_p`."""
    check_logits(logits)
    check_number(p, "p", 0.0, 1.0, low_open=True)


def top_p(logits: torch.Tensor, p: float) -> torch.Tensor:
    """Keep tokens whose more probable tokens hold less than `p`; the rest: `-inf`."""
    check_top_p(logits, p)
    if p == 1:
        return logits
    wide = torch.promote_types(logits.dtype, torch.float32)  # float16 sums round
    probs, order = logits.to(wide).softmax(-1).sort(dim=-1, descending=True)
    above = probs.cumsum(-1) - probs  # (..., v): mass of the tokens ranked above
    drop = torch.zeros_like(above, dtype=torch.bool).scatter(-1, order, above >= p)
    return logits.masked_fill(drop, -math.inf)


def check_contrastive(strong, weak, alpha) -> None:
    """The arguments of `contrastive`."""
    check_logits(strong, "strong")
    check_logits(weak, "weak")
    if weak.shape != strong.shape:
        raise ValueError(
            f"strong and weak logits must have one shape; got "
            f"{tuple(strong.shape)} and {tuple(weak.shape)}"
        )
    check_number(alpha, "alpha", 0.0, 1.0)


def contrastive(
    strong: torch.Tensor, weak: torch.Tensor, alpha: float = 0.1
) -> torch.Tensor:
    """`log p_strong - log p_weak` if `p_strong >= alpha · max p_strong`, else `-inf`.
    Shapes: strong, weak logits `(..., v)` → scores `(..., v)` float64."""
    check_contrastive(strong, weak, alpha)
    log_s, log_w = F.log_softmax(strong.double(), -1), F.log_softmax(weak.double(), -1)
    floor = math.log(alpha) if alpha > 0 else -math.inf
    plausible = log_s >= log_s.max(-1, keepdim=True).values + floor
    return (log_s - log_w).masked_fill(~plausible, -math.inf)


def check_contrastive_step(strong, weak, alpha) -> None:
    """The arguments of `contrastive_step`."""
    check_callable(strong, "strong")
    check_callable(weak, "weak")
    check_number(alpha, "alpha", 0.0, 1.0)


def contrastive_step(strong: Step, weak: Step, alpha: float = 0.1) -> Step:
    """A step whose "logits" are the `contrastive` scores, for `decoding.greedy`."""
    check_contrastive_step(strong, weak, alpha)
    return lambda prefixes: contrastive(strong(prefixes), weak(prefixes), alpha)


def check_constrain(step, allowed) -> None:
    """The arguments of `constrain`."""
    check_callable(step, "step")
    check_callable(allowed, "allowed")


def check_allowed(ok, logits) -> None:
    """What `allowed(prefixes)` returned: a bool mask of the logits' shape that allows
    a token in every row."""
    if (
        not isinstance(ok, torch.Tensor)
        or ok.dtype != torch.bool
        or ok.shape != logits.shape
    ):
        raise ValueError(
            f"allowed(prefixes) must be a bool mask of shape "
            f"{tuple(logits.shape)}; got {describe(ok)}"
        )
    if not ok.any(-1).all():
        raise ValueError("the constraint allows no token after some prefix")


def constrain(step: Step, allowed: Callable[[torch.Tensor], torch.Tensor]) -> Step:
    """A step whose logits are `-inf` where the bool `allowed(prefixes)` is False."""
    check_constrain(step, allowed)

    def constrained(prefixes: torch.Tensor) -> torch.Tensor:
        logits, ok = step(prefixes), allowed(prefixes)
        check_allowed(ok, logits)
        return logits.masked_fill(~ok.to(logits.device), -math.inf)

    return constrained


def check_rule(
    pattern: str, tokens: Sequence[str], eos: int, n_prompt: int, sep: str
) -> None:
    """The arguments of `regex_allowed`: a valid regular expression, the text of
    each token, an `eos` among them."""
    if not isinstance(pattern, str):
        raise TypeError(f"pattern must be a str; got {describe(pattern)}")
    if (
        isinstance(tokens, str)
        or not isinstance(tokens, Sequence)
        or not all(isinstance(s, str) for s in tokens)
    ):
        raise TypeError(
            f"tokens must be a list of str, the text of each token id; got "
            f"{describe(tokens)}"
        )
    check_int(eos, "eos", 0, len(tokens) - 1)
    check_int(n_prompt, "n_prompt", 0)
    if not isinstance(sep, str):
        raise TypeError(f"sep must be a str; got {describe(sep)}")
    try:
        regex.compile(pattern)
    except regex.error as err:
        raise ValueError(
            f"pattern must be a valid regular expression; got {pattern!r} ({err})"
        ) from None


def check_rule_prefixes(prefixes, v: int) -> None:
    """The prefixes a rule of `regex_allowed` reads: ids of its `v` tokens."""
    check_prefixes(prefixes)
    check_int(prefixes.max().item(), "every id of prefixes", 0, v - 1)


def regex_allowed(
    pattern: str, tokens: Sequence[str], eos: int, n_prompt: int, sep: str = ""
) -> Callable[[torch.Tensor], torch.Tensor]:
    """`allowed` for `constrain`: the `sep`-joined text after `n_prompt` tokens must
    match `pattern`; `eos` ends a full match. Shapes: `(b, t)` → `(b, len(tokens))`."""
    check_rule(pattern, tokens, eos, n_prompt, sep)
    compiled = regex.compile(pattern)

    def allowed(prefixes: torch.Tensor) -> torch.Tensor:
        check_rule_prefixes(prefixes, len(tokens))
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
        return mask.to(prefixes.device)  # built on the CPU, moved once

    return allowed
