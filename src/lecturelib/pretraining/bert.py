"""Chapter 12: BERT, an encoder pretrained by masked language modelling (Devlin et al.,
2019, arXiv:1810.04805), with RoBERTa's changes (Liu et al., 2019, arXiv:1907.11692).

- `mask_tokens` is BERT's corruption: each ordinary token is selected with
  probability `p` (15%); a selected token becomes `[MASK]` (80%), a random token
  (10%) or stays (10%), and only selected positions are targets (the others get
  `IGNORE`). Special and padding tokens are never selected. Called afresh for every
  batch it is RoBERTa's *dynamic* masking; `mlm_batches` does that.
- `BERT` is chapter 8's encoder blocks (`transformer.stack`; Pre-LN, where BERT
  was Post-LN, because it trains reliably in a few hundred steps) over token + learned
  position embeddings, with an MLM head tied to the token embeddings and a linear
  classification head on the `[CLS]` state or on the mean of the real states. BERT's
  next-sentence prediction and its pooler (a `tanh` layer under the classifier) are
  left out, as in RoBERTa.
- `Specials` names the ids of `[PAD] [CLS] [SEP] [MASK]`, placed after the ids
  of a tokenizer's `n_text` ordinary tokens; `encode_sentence` and `pad`
  build classification batches and `token_stream` the pretraining stream.

Shapes: `b` batch, `t` positions, `d` d_model, `v` vocabulary, `c` classes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from lecturelib.pretraining import gpt
from lecturelib.recurrence import rnn
from lecturelib.transformers import transformer
from lecturelib.validate import (
    check_choice,
    check_ids,
    check_int,
    check_number,
    check_on_device,
    check_tensor,
    check_type,
    describe,
    is_int,
    is_int_tensor,
)
from lecturelib.transformers.self_attention import padding_mask

IGNORE = -100  # the target of positions that carry no loss (F.cross_entropy's default)
POOLS = ("cls", "mean")


@dataclass(frozen=True)
class Specials:
    """The ids of the special tokens, after the `n_text` ids of ordinary tokens."""

    n_text: int

    def __post_init__(self):
        check_int(self.n_text, "Specials.n_text", 1)

    @property
    def pad(self) -> int:
        return self.n_text

    @property
    def cls(self) -> int:
        return self.n_text + 1

    @property
    def sep(self) -> int:
        return self.n_text + 2

    @property
    def mask(self) -> int:
        return self.n_text + 3

    @property
    def vocab_size(self) -> int:
        return self.n_text + 4


def mask_tokens(
    ids: torch.Tensor,
    specials: Specials,
    *,
    p: float = 0.15,
    p_mask: float = 0.8,
    p_random: float = 0.1,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's masking of ordinary tokens; targets are `IGNORE` where not selected."""
    check_mask_tokens(ids, specials, p, p_mask, p_random)
    # drawn where the generator lives (the same draws for ids on any device)
    where = ids.device if generator is None else generator.device
    u = torch.rand(ids.shape, generator=generator, device=where).to(ids.device)
    selected = (u < p) & (ids < specials.n_text)  # ordinary tokens only
    how = torch.rand(ids.shape, generator=generator, device=where).to(ids.device)
    to_mask = selected & (how < p_mask)  # how: which of the three
    to_random = selected & (how >= p_mask) & (how < p_mask + p_random)
    random_ids = torch.randint(
        0, specials.n_text, ids.shape, generator=generator, device=where
    ).to(ids.device)
    inputs = torch.where(to_mask, specials.mask, ids)
    inputs = torch.where(to_random, random_ids, inputs)
    targets = torch.where(selected, ids, IGNORE)
    return inputs, targets


def check_mask_tokens(ids, specials: Specials, p, p_mask, p_random) -> None:
    """The arguments of `mask_tokens`."""
    check_ids(ids, "ids", min_len=0)
    if ids.dim() not in (1, 2):
        raise ValueError(
            f"ids must be an integer tensor (t,) or (b, t) of token ids; got "
            f"{describe(ids)}"
        )
    check_type(specials, "specials", Specials, "a Specials")
    if ids.numel() and ids.max() >= specials.vocab_size:
        raise ValueError(
            f"ids must lie in 0..{specials.vocab_size - 1} (the ordinary "
            f"and special tokens); got ids from {int(ids.min())} to "
            f"{int(ids.max())}"
        )
    check_number(p, "p", 0.0, 1.0)
    check_number(p_mask, "p_mask", 0.0, 1.0)
    check_number(p_random, "p_random", 0.0, 1.0)
    if p_mask + p_random > 1:
        raise ValueError(f"p_mask + p_random must be <= 1; got {p_mask} + {p_random}")


def token_stream(sentences: Sequence[list[int]], specials: Specials) -> torch.Tensor:
    """The sentences' ids one after another, each followed by `[SEP]` (RoBERTa packs
    full sentences into each training window).

    Shapes: `n` lists of ids → `(sum of lengths + n,)`."""
    check_type(specials, "specials", Specials, "a Specials")
    if isinstance(sentences, (str, torch.Tensor)) or not all(
        isinstance(s, (list, tuple)) for s in sentences
    ):
        raise TypeError(
            f"sentences must be a list of lists of token ids; got {describe(sentences)}"
        )
    if not sentences or not all(
        isinstance(i, int) and 0 <= i < specials.n_text for s in sentences for i in s
    ):
        raise ValueError(
            f"sentences must hold ordinary token ids in 0..{specials.n_text - 1}"
        )
    return torch.tensor([i for s in sentences for i in (*s, specials.sep)])


def mlm_batches(
    stream: torch.Tensor,
    specials: Specials,
    batch_size: int,
    seq_len: int,
    *,
    seed: int = 0,
    dynamic: bool = True,
    **masking,
) -> Callable[[int], tuple[torch.Tensor, torch.Tensor]]:
    """A function `step -> (inputs, targets)`: windows of `seq_len - 1` tokens of
    the stream after a `[CLS]`, masked by `mask_tokens`.

    `dynamic=True` draws a fresh mask every time (RoBERTa); `dynamic=False` gives a
    window the same mask every time it is drawn (BERT masked its data once, in ten
    copies; here each window start has one mask).

    Shapes: stream `(n,)` → inputs, targets `(batch_size, seq_len)`.
    """
    check_type(specials, "specials", Specials, "a Specials")
    check_ids(stream, "stream", dims=1, vocab_size=specials.vocab_size, min_len=0)
    check_int(batch_size, "batch_size", 1)
    check_int(seq_len, "seq_len", 2)
    if len(stream) < seq_len:
        raise ValueError(
            f"the stream ({len(stream)} tokens) must be at least seq_len={seq_len} long"
        )
    offsets = torch.arange(seq_len - 1)

    def batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
        g = torch.Generator().manual_seed(seed * 1_000_003 + step)
        starts = torch.randint(0, len(stream) - seq_len + 2, (batch_size,), generator=g)
        cls = torch.full((batch_size, 1), specials.cls)
        ids = torch.cat([cls, stream[starts[:, None] + offsets]], 1)  # (b, seq_len)
        if dynamic:
            return mask_tokens(ids, specials, generator=g, **masking)
        rows = [
            mask_tokens(
                row,
                specials,
                **masking,
                generator=torch.Generator().manual_seed(seed + int(s)),
            )
            for row, s in zip(ids, starts)
        ]
        return torch.stack([r[0] for r in rows]), torch.stack([r[1] for r in rows])

    return batch


def encode_sentence(ids: Sequence[int], specials: Specials, max_len: int) -> list[int]:
    """`[CLS] ids [SEP]`, the ids cut so that the whole fits `max_len` positions."""
    check_type(specials, "specials", Specials, "a Specials")
    check_int(max_len, "max_len", 3)
    if isinstance(ids, (str, torch.Tensor)) or not all(
        isinstance(i, int) and 0 <= i < specials.n_text for i in ids
    ):
        raise ValueError(
            f"ids must be a list of ordinary token ids in 0.."
            f"{specials.n_text - 1}; got {describe(ids)}"
        )
    return [specials.cls, *ids[: max_len - 2], specials.sep]


def check_pad(rows, pad_id) -> None:
    """The arguments of `pad`: non-empty lists of token ids (ints >= 0; a float
    would be truncated into the long tensor) and a `pad_id` >= 0 (a negative id is
    no token of any embedding)."""
    if (
        not rows
        or isinstance(rows, str)
        or not all(isinstance(r, (list, tuple)) and len(r) > 0 for r in rows)
    ):
        raise ValueError(
            f"rows must be a non-empty list of non-empty lists of ids; "
            f"got {describe(rows)}"
        )
    bad = [r for r in rows if not all(is_int(i) and i >= 0 for i in r)]
    if bad:
        raise ValueError(
            f"rows must hold token ids (ints >= 0); got {describe(bad[0])}"
        )
    check_int(pad_id, "pad_id", 0)


def pad(rows: Sequence[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad lists of ids to one length with `pad_id`.

    Shapes: `b` lists → ids `(b, t)` with `t` the longest, lengths `(b,)`."""
    check_pad(rows, pad_id)
    lengths = torch.tensor([len(r) for r in rows])
    ids = torch.full((len(rows), int(lengths.max())), pad_id, dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r)
    return ids, lengths


@dataclass(kw_only=True)
class BERTConfig(transformer.TransformerConfig):
    """The sizes and options of a `BERT`; `vocab_size` counts the special tokens too."""

    n_classes: int = 2
    pool: str = "mean"

    def __post_init__(self):
        check_bert_config(self)
        super().__post_init__()


def check_bert_config(config: BERTConfig) -> None:
    """The fields `BERTConfig` adds to chapter 8's `TransformerConfig` (whose
    own checks then run): the vocabulary, positions, classes and pooling."""
    check_int(config.vocab_size, "BERTConfig.vocab_size", 1)
    check_int(config.max_len, "BERTConfig.max_len", 1)
    check_int(config.n_classes, "BERTConfig.n_classes", 2)
    check_choice(config.pool, "BERTConfig.pool", POOLS)


def check_states(h, d_model: int) -> None:
    """`h` must be float states `(..., d_model)`."""
    check_tensor(h, "h", f"(..., d={d_model})")
    if h.dim() < 1 or h.shape[-1] != d_model:
        raise ValueError(f"h must be (..., d={d_model}); got shape {tuple(h.shape)}")


def check_batch_ids(ids) -> None:
    """`ids` must be an integer tensor `(b, t)`, a batch of sentences (one sentence
    `(t,)` needs its batch axis: `ids[None]`)."""
    if not is_int_tensor(ids):
        raise TypeError(
            f"ids must be an integer tensor (b, t) of token ids; got {describe(ids)}"
        )
    if ids.dim() != 2:
        raise ValueError(
            f"ids must be (b, t) token ids, a batch (one sentence (t,): ids[None]); "
            f"got shape {tuple(ids.shape)}"
        )


class MLMHead(nn.Module):
    """`LN(GELU(W h)) Eᵀ + b`, the token embeddings `E` tied as the output matrix."""

    def __init__(self, embedding: nn.Embedding):
        super().__init__()
        check_type(embedding, "embedding", nn.Embedding, "an nn.Embedding")
        d_model = embedding.embedding_dim
        self.transform = nn.Sequential(
            nn.Linear(d_model, d_model), nn.GELU(), nn.LayerNorm(d_model)
        )
        self.embedding = embedding  # shared, not copied
        self.bias = nn.Parameter(torch.zeros(embedding.num_embeddings))

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        check_states(h, self.embedding.embedding_dim)
        return self.transform(h) @ self.embedding.weight.T + self.bias


class BERT(nn.Module):
    """Bidirectional encoder, with a padding mask from `lengths` (None: no padding).
    Shapes: ids (b, t) -> encode (b, t, d), mlm_logits (b, t, v), forward (b, c)."""

    def __init__(self, config: BERTConfig):
        super().__init__()
        check_type(config, "config", BERTConfig, "a BERTConfig")
        c = self.config = config
        self.embed = transformer.Embedding(
            c.vocab_size, c.d_model, c.max_len, c.dropout
        )
        self.blocks = transformer.stack(c)
        self.norm = nn.LayerNorm(c.d_model)
        self.mlm = MLMHead(self.embed.tok)
        self.classifier = nn.Linear(c.d_model, c.n_classes)
        self.apply(gpt.GPT.init_weights)  # N(0, 0.02²), zero biases: BERT's, GPT's

    def keys(self, ids: torch.Tensor, lengths: torch.Tensor | None) -> torch.Tensor:
        """The padding mask of the keys, True at real tokens: (b, 1, t)."""
        check_batch_ids(ids)
        if lengths is None:
            return torch.ones(
                ids.shape[0], 1, ids.shape[1], dtype=torch.bool, device=ids.device
            )
        transformer.check_lengths(lengths, ids)
        return padding_mask(lengths.to(ids.device), ids.shape[1])

    def encode(
        self, ids: torch.Tensor, lengths: torch.Tensor | None = None
    ) -> torch.Tensor:
        keys = self.keys(ids, lengths)  # (b, 1, t)
        x = self.embed(ids)  # (b, t, d)
        for block in self.blocks:
            x = block(x, keys)  # every real token
        return self.norm(x)  # (b, t, d)

    def mlm_logits(
        self, ids: torch.Tensor, lengths: torch.Tensor | None = None
    ) -> torch.Tensor:
        return self.mlm(self.encode(ids, lengths))  # (b, t, v)

    def pooled(
        self, ids: torch.Tensor, lengths: torch.Tensor | None = None
    ) -> torch.Tensor:
        """One vector per sentence: the `[CLS]` state or the mean of the real states."""
        h = self.encode(ids, lengths)  # (b, t, d)
        if self.config.pool == "cls":
            return h[:, 0]
        return rnn.pool(h, self.keys(ids, lengths)[:, 0], "mean")  # (b, d)

    def forward(
        self, ids: torch.Tensor, lengths: torch.Tensor | None = None
    ) -> torch.Tensor:
        return self.classifier(self.pooled(ids, lengths))  # (b, c)


def mlm_loss(model: BERT, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """Mean cross-entropy over the selected positions (targets not `IGNORE`). On the CPU
    the head runs at those positions only, a seventh of the work at `p = 0.15`; on an
    accelerator at every position, the others ignored, since a boolean index's size would
    be read back at every step. The same loss, up to rounding. A batch with no selected position has no
    loss to average (it would be NaN): refused."""
    check_mlm_batch(model, batch)
    inputs, targets = batch
    h = model.encode(inputs)  # (b, t, d)
    if h.device.type == "cpu":
        selected = targets != IGNORE  # (b, t)
        return F.cross_entropy(model.mlm(h[selected]), targets[selected])  # (n, v)
    logits = model.mlm(h).flatten(0, 1)  # (b t, v)
    return F.cross_entropy(logits, targets.flatten(), ignore_index=IGNORE)


def check_bert_like(model) -> None:
    """`model` must be a `BERT`, or a module with its `encode` and `mlm` (the
    chapter's own copy of the class)."""
    if not (
        isinstance(model, nn.Module)
        and callable(getattr(model, "encode", None))
        and callable(getattr(model, "mlm", None))
    ):
        raise TypeError(f"model must be a BERT; got {describe(model)}")


def check_mlm_batch(model, batch) -> None:
    """The arguments of `mlm_loss`: a `BERT` and a batch `(inputs,
    targets)` of two integer tensors of one shape (what `mask_tokens` returns),
    whose targets select at least one position, each a token id of the model."""
    check_bert_like(model)
    if not isinstance(batch, (tuple, list)) or len(batch) != 2:
        raise TypeError(
            f"batch must be a pair (inputs, targets) from mask_tokens; got "
            f"{describe(batch)}"
        )
    inputs, targets = batch
    check_ids(inputs, "inputs", dims=2)
    check_type(targets, "targets", torch.Tensor, "an integer tensor like inputs")
    if not is_int_tensor(targets):
        raise TypeError(
            f"targets must be an integer (long) tensor of token ids; got "
            f"{describe(targets)}"
        )
    if targets.shape != inputs.shape:
        raise ValueError(
            f"targets must have the shape of inputs {tuple(inputs.shape)}; got "
            f"{tuple(targets.shape)}"
        )
    selected = targets != IGNORE
    check_on_device(
        selected.any(),
        f"the batch selects no position (every target is IGNORE = {IGNORE}): the "
        f"mean loss over no token is undefined; mask more tokens (a larger batch "
        f"or p)",
    )
    v = model.config.vocab_size
    bad = selected & ((targets < 0) | (targets >= v))
    check_on_device(
        ~bad.any(),
        f"targets must be token ids in 0..{v - 1} or IGNORE = {IGNORE}",
        lambda: f"; got {int(targets[bad].max())}",
    )


def check_labels(labels, n: int, n_classes: int | None = None) -> None:
    """`labels` must be `n` integer class ids (`(n,)`), in `0..n_classes - 1`
    once the number of classes is known."""
    if (
        not isinstance(labels, torch.Tensor)
        or labels.is_floating_point()
        or (labels.dtype in (torch.bool, torch.complex64, torch.complex128))
    ):
        raise TypeError(
            f"labels must be an integer tensor of class ids; got {describe(labels)}"
        )
    if labels.dim() != 1 or len(labels) != n:
        raise ValueError(f"labels must be ({n},) class ids; got {describe(labels)}")
    high = n_classes - 1 if n_classes is not None else None
    bound = ">= 0" if high is None else f"in 0..{high}"
    if n and labels.device.type != "cpu":  # checked where the labels are
        ok = labels.min() >= 0
        if high is not None:
            ok = ok & (labels.max() <= high)
        check_on_device(ok, f"labels must be class ids {bound}")
        return
    if n and (labels.min() < 0 or (high is not None and labels.max() > high)):
        raise ValueError(
            f"labels must be class ids {bound}; got labels from "
            f"{int(labels.min())} to {int(labels.max())}"
        )


def classify_loss(model: nn.Module, batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """Cross-entropy of `model(ids, lengths)` against the labels."""
    check_classify_batch(model, batch)
    ids, lengths, labels = batch
    logits = model(ids, lengths)
    check_labels(labels, len(ids), logits.shape[-1])
    return F.cross_entropy(logits, labels)


def check_classify_batch(model, batch) -> None:
    """The arguments of `classify_loss`: a module and a batch `(ids, lengths,
    labels)` of integer labels (their number and range are checked against the
    logits, in one pass)."""
    check_type(model, "model", nn.Module, "a torch.nn.Module (a BERT)")
    if not isinstance(batch, (tuple, list)) or len(batch) != 3:
        raise TypeError(
            f"batch must be a triple (ids, lengths, labels); got {describe(batch)}"
        )
    ids, _, labels = batch
    check_type(ids, "ids", torch.Tensor, "a (b, t) tensor of token ids")
    if not is_int_tensor(labels):
        raise TypeError(
            f"labels must be an integer tensor of class ids; got {describe(labels)}"
        )


@torch.no_grad()
def accuracy(
    model: nn.Module,
    ids: torch.Tensor,
    lengths: torch.Tensor,
    labels: torch.Tensor,
    batch_size: int = 512,
) -> float:
    """The fraction of sentences whose most likely class is the label (eval mode);
    labels must be integer class ids of the model's classes."""
    check_type(model, "model", nn.Module, "a torch.nn.Module (a BERT)")
    check_batch_ids(ids)
    if len(ids) != len(labels) or len(ids) != len(lengths) or not len(ids):
        raise ValueError(
            f"ids, lengths and labels must have the same non-zero length; "
            f"got {len(ids)}, {len(lengths)} and {len(labels)}"
        )
    check_labels(labels, len(ids))
    check_int(batch_size, "batch_size", 1)
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    right = 0
    for i in range(0, len(ids), batch_size):
        rows = slice(i, i + batch_size)
        logits = model(ids[rows].to(device), lengths[rows].to(device))
        check_labels(labels, len(ids), logits.shape[-1])
        right += int((logits.argmax(-1).cpu() == labels[rows]).sum())
    model.train(was_training)
    return right / len(ids)
