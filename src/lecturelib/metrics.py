"""Evaluation metrics: perplexity, bits, accuracy and BLEU.

BLEU is computed by sacrebleu (Post, 2018, arXiv:1804.08771), the reference implementation that
papers report, never by a hand-written approximation.

Every metric refuses input that would give a plausible but meaningless number: NaN logits,
targets that are not integer class ids in `0..v-1`, a batch in which every target is
`ignore_index`, token lists where BLEU expects detokenised strings.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F

from lecturelib.validate import is_int, is_real


def _number(value, name: str, func: str) -> float:
    """`value` (a real number or a one-element tensor) as a float that is not NaN and >= 0."""
    if isinstance(value, torch.Tensor):
        if value.numel() != 1 or value.is_complex():
            raise ValueError(
                f"{func}(): {name} must be one real number; got a tensor of shape "
                f"{tuple(value.shape)} and dtype {value.dtype}"
            )
    elif not is_real(value):
        raise TypeError(
            f"{func}(): {name} must be a real number; got {type(value).__name__}"
        )
    number = float(value)
    if math.isnan(number) or number < 0:
        raise ValueError(
            f"{func}(): {name} must be a non-negative number of nats; got {number}"
        )
    return number


def perplexity(mean_nll: float | torch.Tensor) -> float:
    """`exp(mean negative log-likelihood in nats)`: the effective number of equally likely
    choices per token. A uniform model over `V` tokens has perplexity `V`."""
    nll = _number(mean_nll, "mean_nll", "perplexity")
    try:
        return math.exp(nll)
    except OverflowError:  # beyond exp(709.78), the largest float
        return math.inf


def nats_to_bits(nats: float | torch.Tensor) -> float:
    """Convert a cross-entropy from nats (natural log) to bits (log base 2)."""
    return _number(nats, "nats", "nats_to_bits") / math.log(2)


def _scored(
    logits: torch.Tensor, targets: torch.Tensor, ignore_index: int, func: str
) -> torch.Tensor:
    """Check `logits (... v)` and `targets (...)`; return the mask of scored positions."""
    for name, t in (("logits", logits), ("targets", targets)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(
                f"{func}(): {name} must be a torch.Tensor; got {type(t).__name__}"
            )
    if not logits.is_floating_point():
        raise TypeError(
            f"{func}(): logits must be a floating-point tensor (..., v); got dtype "
            f"{logits.dtype}"
        )
    if (
        targets.is_floating_point()
        or targets.is_complex()
        or targets.dtype == torch.bool
    ):
        raise TypeError(
            f"{func}(): targets must be integer class ids (a long tensor); got dtype "
            f"{targets.dtype}"
        )
    if not is_int(ignore_index):
        raise TypeError(f"{func}(): ignore_index must be an int; got {ignore_index!r}")
    if logits.dim() == 0 or logits.shape[:-1] != targets.shape:
        raise ValueError(
            f"{func}(): logits (..., v) and targets (...) must agree on the leading axes; got "
            f"{tuple(logits.shape)} and {tuple(targets.shape)}"
        )
    if targets.numel() == 0:
        raise ValueError(
            f"{func}(): targets is empty (shape {tuple(targets.shape)}): there is "
            f"nothing to score"
        )
    keep = targets != ignore_index
    if not keep.any():
        raise ValueError(
            f"{func}(): every target is ignore_index={ignore_index} (an all-padding "
            f"batch): there is nothing to score"
        )
    v, scored = logits.shape[-1], targets[keep]
    low, high = scored.min().item(), scored.max().item()
    if low < 0 or high >= v:
        raise ValueError(
            f"{func}(): targets must be class ids in 0..{v - 1} (v = {v}) or "
            f"ignore_index={ignore_index}; got values from {low} to {high}"
        )
    nan = torch.isnan(logits).any(-1)[keep]
    if nan.any():
        raise ValueError(
            f"{func}(): logits must be numbers; got NaN at {int(nan.sum())} of "
            f"{nan.numel()} scored positions"
        )
    return keep


def accuracy(
    logits: torch.Tensor, targets: torch.Tensor, ignore_index: int = -100
) -> float:
    """Fraction of positions whose argmax over the last axis equals the target.

    Shapes: logits `(... v)`, targets `(...)`; positions with `ignore_index` are skipped.
    """
    keep = _scored(logits, targets, ignore_index, "accuracy")
    return (logits.argmax(-1)[keep] == targets[keep]).float().mean().item()


@torch.no_grad()
def mean_nll(
    logits: torch.Tensor, targets: torch.Tensor, ignore_index: int = -100
) -> float:
    """Mean cross-entropy in nats per scored token.

    Shapes: logits `(... v)`, targets `(...)`; positions with `ignore_index` are skipped.
    """
    _scored(logits, targets, ignore_index, "mean_nll")
    return F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]).float(),
        targets.reshape(-1).long(),
        ignore_index=ignore_index,
    ).item()


def _sentences(texts, name: str, func: str) -> list[str]:
    if isinstance(texts, str) or not isinstance(texts, Sequence):
        raise TypeError(
            f"{func}(): {name} must be a list of strings (one sentence each); got "
            f"{type(texts).__name__}"
        )
    for i, text in enumerate(texts):
        _sentence(text, f"{name}[{i}]", func)
    return list(texts)


def _sentence(text, name: str, func: str) -> str:
    if not isinstance(text, str):
        raise TypeError(
            f"{func}(): {name} must be a detokenised str; got {type(text).__name__} "
            f"(join a list of tokens with translation.detokenize first)"
        )
    return text


def bleu(
    hypotheses: Sequence[str], references: Sequence[str], *, tokenize: str = "13a"
) -> float:
    """Corpus BLEU (0–100) of detokenised hypotheses against one reference each, by sacrebleu."""
    import sacrebleu
    from sacrebleu.metrics import BLEU

    hypotheses = _sentences(hypotheses, "hypotheses", "bleu")
    references = _sentences(references, "references", "bleu")
    if len(hypotheses) != len(references):
        raise ValueError(
            f"bleu(): {len(hypotheses)} hypotheses but {len(references)} references; they must "
            f"pair up"
        )
    if not hypotheses:
        raise ValueError(
            "bleu(): hypotheses and references must hold at least one sentence "
            "pair; got none"
        )
    if tokenize not in BLEU.TOKENIZERS:
        raise ValueError(
            f"bleu(): tokenize must be one of {', '.join(BLEU.TOKENIZERS)}; "
            f"got {tokenize!r}"
        )
    return sacrebleu.corpus_bleu(hypotheses, [references], tokenize=tokenize).score


def sentence_bleu(hypothesis: str, reference: str) -> float:
    """Smoothed sentence-level BLEU (0–100) by sacrebleu, for per-example plots: its
    `sentence_bleu` (exponential smoothing, effective order), one scorer reused."""
    _sentence(hypothesis, "hypothesis", "sentence_bleu")
    _sentence(reference, "reference", "sentence_bleu")
    return _sentence_scorer().sentence_score(hypothesis, [reference]).score


@functools.cache
def _sentence_scorer():
    from sacrebleu.metrics import BLEU

    return BLEU(effective_order=True)  # the settings of sacrebleu.sentence_bleu
