"""Chapter 12: finetuning a pretrained GPT for classification, as GPT-1 did (Radford et
al., 2018, "Improving Language Understanding by Generative Pre-Training").

Every task becomes one token sequence `[START] text_a [DELIM] text_b [EXTRACT]`
(`format_input`; a one-text task leaves out `[DELIM] text_b`). The special
tokens are new rows of the embedding matrix (`extend_vocab`), and a linear head
reads the final hidden state of the `[EXTRACT]` position, which has seen the whole
input through causal attention (`GPTClassifier`). GPT-1 also kept the
language-model loss on the input as an auxiliary loss (weight 0.5);
`classifier_loss` takes its weight.

Shapes: `b` batch, `t` positions, `d` d_model, `v` vocabulary, `c` classes.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import replace

import torch
import torch.nn.functional as F
from torch import nn

from lecturelib.pretraining import gpt
from lecturelib.validate import check_int, check_number, check_type, describe

SPECIAL_TOKENS = ("[START]", "[DELIM]", "[EXTRACT]")


def check_id_list(ids, name: str) -> None:
    """`ids` must be a list (or tuple) of token ids, ints >= 0."""
    if (
        isinstance(ids, (str, torch.Tensor))
        or not isinstance(ids, Sequence)
        or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids)
    ):
        raise TypeError(
            f"{name} must be a list of token ids (ints >= 0); got {describe(ids)}"
        )
    if any(i < 0 for i in ids):
        raise ValueError(
            f"{name} must be a list of token ids (ints >= 0); got {describe(ids)}"
        )


def format_input(
    text_a: Sequence[int],
    text_b: Sequence[int] | None,
    *,
    start: int,
    delim: int,
    extract: int,
    max_len: int,
) -> list[int]:
    """`[START] a [DELIM] b [EXTRACT]` (or `[START] a [EXTRACT]` when `text_b` is
    None), cutting the end of the longer text until the whole fits `max_len`."""
    check_format_input(text_a, text_b, max_len)
    n_special = 2 if text_b is None else 3
    a, b = list(text_a), None if text_b is None else list(text_b)
    while len(a) + (0 if b is None else len(b)) + n_special > max_len:
        if b is not None and len(b) > len(a):
            b.pop()
        else:
            a.pop()
    if b is None:
        return [start, *a, extract]
    return [start, *a, delim, *b, extract]


def check_format_input(text_a, text_b, max_len: int) -> None:
    """The arguments of `format_input`: room for one token of each text."""
    check_id_list(text_a, "text_a")
    if text_b is not None:
        check_id_list(text_b, "text_b")
    check_int(max_len, "max_len", 3 if text_b is None else 5)


def copy_model(model: nn.Module) -> nn.Module:
    """`copy.deepcopy(model)`, also after a forward pass that left a tensor of its
    autograd graph on a module (a MoE layer's auxiliary loss), which `deepcopy`
    refuses: such tensors are copied detached."""
    check_type(model, "model", nn.Module, "an nn.Module")
    memo = {}
    for module in model.modules():
        for value in vars(module).values():
            for x in value if isinstance(value, (list, tuple)) else (value,):
                if isinstance(x, torch.Tensor) and not x.is_leaf:
                    memo[id(x)] = x.detach().clone()
    return copy.deepcopy(model, memo)


def extend_vocab(
    model: gpt.GPT,
    n_new: int,
    *,
    std: float = 0.02,
    generator: torch.Generator | None = None,
) -> gpt.GPT:
    """A copy of `model` with `n_new` more tokens: ids `vocab_size ..
    vocab_size + n_new - 1` get new embedding rows `N(0, std²)` (and zero rows of an
    untied head). Everything else is the model's own: its class (a LoRA-wrapped,
    MoE or RoPE-scaled GPT stays one), every weight, buffer and attribute, and which
    parameters train. It may follow a forward pass (`copy_model`)."""
    check_extend_vocab(model, n_new, std)
    v = model.config.vocab_size + n_new
    bigger = copy_model(model)
    embed, head = bigger.embed.weight, bigger.head.weight  # (v - n_new, d) each
    new_rows = torch.randn(n_new, embed.shape[1], generator=generator) * std
    rows = torch.cat([embed.detach(), new_rows.to(embed)])  # (v, d)
    bigger.embed.weight = nn.Parameter(rows, requires_grad=embed.requires_grad)
    if head is embed:  # tied: the head is the embedding
        bigger.head.weight = bigger.embed.weight
    else:
        rows = torch.cat([head.detach(), torch.zeros_like(new_rows).to(head)])
        bigger.head.weight = nn.Parameter(rows, requires_grad=head.requires_grad)
    bigger.embed.num_embeddings = bigger.head.out_features = v
    bigger.config = replace(model.config, vocab_size=v)
    return bigger


def check_extend_vocab(model, n_new, std) -> None:
    """The arguments of `extend_vocab`: a GPT whose token embedding is an
    `nn.Embedding` and whose head an `nn.Linear` without bias (the tables that
    grow), tied exactly when its config says so."""
    gpt.check_gpt(model)
    check_int(n_new, "n_new", 1)
    check_number(std, "std", 0.0)
    for name, kind in (("embed", nn.Embedding), ("head", nn.Linear)):
        if type(getattr(model, name)) is not kind:
            raise TypeError(
                f"extend_vocab grows model.{name}, which must be an nn."
                f"{kind.__name__}; got {type(getattr(model, name)).__name__}"
            )
    if model.head.bias is not None:
        raise ValueError("extend_vocab grows a head without bias; model.head has one")
    tied = model.head.weight is model.embed.weight
    if tied != model.config.tie_embeddings:
        raise ValueError(
            f"model.config.tie_embeddings={model.config.tie_embeddings}, but the head "
            f"{'is' if tied else 'is not'} the embedding"
        )


class GPTClassifier(nn.Module):
    """A linear head on a GPT's final normalised state at each row's last real token."""

    def __init__(self, model: gpt.GPT, n_classes: int):
        super().__init__()
        check_gpt_classifier(model, n_classes)
        self.gpt = model
        self.head = nn.Linear(model.config.d_model, n_classes)

    def hidden(self, ids: torch.Tensor) -> torch.Tensor:
        return self.gpt.norm(self.gpt.residual_stream(ids)[-1])

    def extract(self, h: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """The state at position `length - 1` of each row: (b, d)."""
        check_extract(h, lengths)
        return h[torch.arange(len(h), device=h.device), lengths.to(h.device) - 1]

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        return self.head(self.extract(self.hidden(ids), lengths))  # (b, c)


def check_gpt_classifier(model, n_classes: int) -> None:
    """The arguments of `GPTClassifier`."""
    gpt.check_gpt(model)
    check_int(n_classes, "n_classes", 2)


def check_extract(h: torch.Tensor, lengths) -> None:
    """`lengths` must be `(b,)` integer lengths in `1..t` for the states `h`
    `(b, t, d)`."""
    message = (
        f"lengths must be (b,) = ({h.shape[0]},) integer lengths in 1..{h.shape[1]}; "
        f"got {describe(lengths)}"
    )
    if (
        not isinstance(lengths, torch.Tensor)
        or lengths.is_floating_point()
        or lengths.is_complex()
        or lengths.dtype == torch.bool
    ):
        raise TypeError(message)
    if (
        lengths.shape != h.shape[:1]
        or (lengths < 1).any()
        or (lengths > h.shape[1]).any()
    ):
        raise ValueError(message)


def classifier_loss(
    model: GPTClassifier, batch: tuple[torch.Tensor, ...], lm_weight: float = 0.0
) -> torch.Tensor:
    """Cross-entropy of the classes, plus `lm_weight` × the next-token loss on the
    real positions of the input (GPT-1's auxiliary objective; it used 0.5)."""
    check_number(lm_weight, "lm_weight", 0.0)
    ids, lengths, labels = batch
    h = model.hidden(ids)  # (b, t, d)
    loss = F.cross_entropy(model.head(model.extract(h, lengths)), labels)
    if lm_weight == 0:
        return loss
    logits = model.gpt.head(h[:, :-1])  # (b, t-1, v)
    positions = torch.arange(1, ids.shape[1], device=ids.device)
    real = positions < lengths[:, None].to(ids.device)  # (b, t-1)
    targets = ids[:, 1:].masked_fill(~real, -100)
    return loss + lm_weight * F.cross_entropy(logits.transpose(1, 2), targets)
