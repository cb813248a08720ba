"""Evaluation metrics: perplexity, bits, accuracy and BLEU.

BLEU is computed by sacrebleu (Post, 2018), the reference implementation that papers report,
never by a hand-written approximation.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F


def perplexity(mean_nll: float | torch.Tensor) -> float:
    """``exp(mean negative log-likelihood in nats)``: the effective number of equally likely
    choices per token. A uniform model over ``V`` tokens has perplexity ``V``."""
    value = float(mean_nll)
    if math.isnan(value) or value < 0:
        raise ValueError(f"mean_nll must be a non-negative number of nats; got {value}")
    return math.exp(value)


def nats_to_bits(nats: float) -> float:
    """Convert a cross-entropy from nats (natural log) to bits (log base 2)."""
    return float(nats) / math.log(2)


def accuracy(logits: torch.Tensor, targets: torch.Tensor, ignore_index: int = -100) -> float:
    """Fraction of positions whose argmax over the last axis equals the target.

    Shapes: logits ``(... v)``, targets ``(...)``; positions with ``ignore_index`` are skipped.
    """
    if logits.shape[:-1] != targets.shape:
        raise ValueError(
            f"logits (..., v) and targets (...) must agree on the leading axes; got "
            f"{tuple(logits.shape)} and {tuple(targets.shape)}"
        )
    keep = targets != ignore_index
    if not keep.any():
        raise ValueError("every target is ignore_index: there is nothing to score")
    return (logits.argmax(-1)[keep] == targets[keep]).float().mean().item()


@torch.no_grad()
def mean_nll(logits: torch.Tensor, targets: torch.Tensor, ignore_index: int = -100) -> float:
    """Mean cross-entropy in nats per scored token. Shapes: logits ``(... v)``, targets ``(...)``."""
    if logits.shape[:-1] != targets.shape:
        raise ValueError(
            f"logits (..., v) and targets (...) must agree on the leading axes; got "
            f"{tuple(logits.shape)} and {tuple(targets.shape)}"
        )
    return F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1), ignore_index=ignore_index
    ).item()


def bleu(hypotheses: Sequence[str], references: Sequence[str], *, tokenize: str = "13a") -> float:
    """Corpus BLEU (0–100) of detokenised hypotheses against one reference each, by sacrebleu."""
    import sacrebleu

    if isinstance(hypotheses, str) or isinstance(references, str):
        raise TypeError("bleu() takes a list of hypothesis strings and a list of reference strings")
    if len(hypotheses) != len(references):
        raise ValueError(
            f"{len(hypotheses)} hypotheses but {len(references)} references; they must pair up"
        )
    if not hypotheses:
        raise ValueError("bleu() needs at least one sentence pair")
    return sacrebleu.corpus_bleu(list(hypotheses), [list(references)], tokenize=tokenize).score


def sentence_bleu(hypothesis: str, reference: str) -> float:
    """Smoothed sentence-level BLEU (0–100) by sacrebleu, for per-example plots."""
    import sacrebleu

    return sacrebleu.sentence_bleu(hypothesis, [reference]).score
