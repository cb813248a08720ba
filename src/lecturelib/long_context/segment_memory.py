"""Chapter 18: reading past the context window with recurrence over segments.

- `segment_losses`: Transformer-XL's segment recurrence (Dai et al.,
  arXiv:1901.02860) with chapter 11's GPT: a long text is read in segments of `segment`
  tokens; each segment's queries also attend to the keys and values the previous segment
  left at every layer (a cache, so no gradient flows into it), with relative positions
  (RoPE). Without the memory each segment is read alone.

Trained on a task (chapter 18's long-dependency run):

- `recall_task`: a value symbol placed a controlled distance `D` before the
  query; `SegmentModel` reads it as a fixed window (the last segment), with
  Transformer-XL recurrence (earlier segments run without gradient, their keys and
  values cached) or as a Recurrent Memory Transformer (Bulatov et al.,
  arXiv:2207.06881: memory tokens read and written in every segment, trained with
  backpropagation through all segments); `train_recall` trains it with
  `lecturelib.train.fit` and `recall_accuracy` scores it by distance.

Retrieval of stored keys and values (kNN attention, the IVF index, Unlimiformer, the
passkey memory) is in `lecturelib.long_context.retrieval`.

Shapes: `b` batch, `T` tokens, `S` the segment, `d` d_model.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from lecturelib import tasks, train
from lecturelib.efficiency import kvcache
from lecturelib.pretraining import gpt
from lecturelib.validate import check_ids, check_sizes, check_type


def check_stream(ids, name: str = "ids") -> None:
    """`ids` must be `(b, T)` integer token ids with `T >= 2`."""
    check_ids(ids, name)
    if ids.dim() != 2 or ids.shape[1] < 2:
        raise ValueError(
            f"{name} must be a (b, T) tensor of token ids with T >= 2; got "
            f"{tuple(ids.shape)}"
        )


def check_segment_losses(model, ids, segment, memory) -> None:
    """The arguments of `segment_losses`: the window must fit the trained context."""
    kvcache.check_gpt(model)
    check_sizes(segment=segment)
    check_stream(ids)
    window = 2 * segment if memory else segment
    if window > model.config.seq_len:
        raise ValueError(
            f"the window (memory + segment = {window} tokens) must fit the "
            f"model's trained context of {model.config.seq_len}"
        )


@torch.no_grad()
def segment_losses(
    model: gpt.GPT, ids: torch.Tensor, segment: int, memory: bool = True
) -> torch.Tensor:
    """Next-token losses over `ids` read in segments of `segment` tokens, with the
    previous segment's keys and values as memory (Transformer-XL) or without.

    Shapes: ids `(b, T)` → losses `(b, T - 1)`."""
    check_segment_losses(model, ids, segment, memory)
    window = 2 * segment if memory else segment
    b, T = ids.shape
    logits = []
    cache = kvcache.new_cache(model, b, window)
    for start in range(0, T - 1, segment):
        x = ids[:, start : min(start + segment, T - 1)]
        if not memory or cache.length + x.shape[1] > window:
            cache = _keep_last(model, cache, segment if memory else 0, window)
        logits.append(kvcache.cached_forward(model, x, cache))
    logits = torch.cat(logits, 1)  # (b, T - 1, v)
    return F.cross_entropy(logits.transpose(1, 2), ids[:, 1:], reduction="none")


def _keep_last(model, cache, n: int, window: int):
    """A fresh cache holding the last `n` entries of `cache` (their keys re-rotated
    to positions `0..n-1`: RoPE scores depend only on the distance)."""
    new = kvcache.new_cache(model, cache.batch, window)
    if n == 0 or cache.length == 0:
        return new
    shift = cache.length - n
    for layer in range(model.config.n_layers):
        k = cache.layers[layer]["k"][:, :, shift : cache.length]  # rotated at shift..
        v = cache.layers[layer]["v"][:, :, shift : cache.length]
        k = _unrotate(cache.rope, k, shift)  # the model's own (possibly scaled) table
        new.write(layer, k=new.rope(k, 0), v=v)
    new.advance(n)
    return new


def _unrotate(rope: kvcache.Rope, k: torch.Tensor, start: int) -> torch.Tensor:
    """The inverse of `rope(·, start)`; a scaled table's rows have norm `cos² + sin²`
    (YaRN's attention factor squared), which the inverse divides out."""
    t = k.shape[-2]
    cos, sin = rope.cos[start : start + t], rope.sin[start : start + t]
    norm = cos**2 + sin**2
    k1, k2 = k[..., 0::2], k[..., 1::2]
    return torch.stack([k1 * cos + k2 * sin, k2 * cos - k1 * sin], -1).flatten(-2) / (
        norm.repeat_interleave(2, -1)
    )


def check_recall_task(n, n_segments, segment, n_values, vocab_size) -> None:
    """The arguments of `recall_task`."""
    check_sizes(
        n=n,
        n_segments=n_segments,
        segment=segment,
        n_values=n_values,
        vocab_size=vocab_size,
    )
    if n_segments * segment < 2:
        raise ValueError("need n_segments * segment >= 2 (a value and the query)")
    if vocab_size < n_values + 3:
        raise ValueError(
            f"vocab_size must be at least n_values + 3 = {n_values + 3} "
            f"(SEP, values, filler); got {vocab_size}"
        )


def recall_task(
    n: int,
    n_segments: int,
    segment: int,
    n_values: int = 4,
    vocab_size: int = 16,
    seed: int = 0,
):
    """`n` sequences of `n_segments * segment` tokens: random filler, one value
    symbol at distance `D` (uniform in `1..T-1`) before the last position, which
    holds `tasks.SEP`; the answer is the value. Values are the symbols
    `2..n_values+1` and occur nowhere else; filler is `n_values+2..vocab_size-1`.

    Shapes: → x `(n, T)`, answer `(n,)`, distance `(n,)`."""
    check_recall_task(n, n_segments, segment, n_values, vocab_size)
    T = n_segments * segment
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(n_values + 2, vocab_size, (n, T), generator=g)
    answer = torch.randint(2, n_values + 2, (n,), generator=g)
    distance = torch.randint(1, T, (n,), generator=g)
    x[torch.arange(n), T - 1 - distance] = answer
    x[:, -1] = tasks.SEP
    return x, answer, distance


KINDS = ("window", "xl", "rmt")


def check_segment_model(kind, segment, n_memory) -> None:
    """The arguments of `SegmentModel`."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}; got {kind!r}")
    check_sizes(segment=segment, n_memory=n_memory)


def check_segments(x, segment: int) -> None:
    """`x` must be `(b, T)` token ids with `T` a multiple of `segment`."""
    check_ids(x, "x")
    if x.dim() != 2 or x.shape[1] % segment:
        raise ValueError(
            f"x must be (b, T) token ids with T a multiple of the "
            f"segment ({segment}); got {tuple(x.shape)}"
        )


class SegmentModel(nn.Module):
    """A GPT that reads `(b, T)` in segments of `segment` tokens and predicts from
    the last position: `"window"` reads the last segment only; `"xl"` caches the
    previous segment's keys and values at every layer (earlier segments run without
    gradient: stop-gradient); `"rmt"` prepends `n_memory` read-memory tokens and
    appends as many write tokens, whose outputs become the next segment's read memory
    (gradient flows through all segments).

    Shapes: x `(b, T)` → logits `(b, v)`."""

    def __init__(
        self,
        kind: str,
        segment: int,
        vocab_size: int,
        d_model: int,
        n_layers: int,
        n_heads: int,
        n_memory: int = 4,
        seed: int = 0,
    ):
        super().__init__()
        check_segment_model(kind, segment, n_memory)
        torch.manual_seed(seed)
        self.kind, self.segment, self.n_memory = kind, segment, n_memory
        self.gpt = gpt.GPT(
            gpt.GPTConfig(
                vocab_size=vocab_size,
                seq_len=2 * segment + 2 * n_memory,
                d_model=d_model,
                n_layers=n_layers,
                n_heads=n_heads,
            )
        )
        self.memory = (
            nn.Parameter(0.02 * torch.randn(n_memory, d_model))
            if kind == "rmt"
            else None
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_segments(x, self.segment)
        S = self.segment
        segments = x.split(S, 1)
        if self.kind == "window":
            return self.gpt(segments[-1])[:, -1]
        if self.kind == "xl":
            cache = kvcache.new_cache(self.gpt, x.shape[0], 2 * S)
            with torch.no_grad():  # stop-gradient
                for seg in segments[:-1]:
                    if cache.length + S > 2 * S:
                        cache = _keep_last(self.gpt, cache, S, 2 * S)
                    kvcache.cached_forward(self.gpt, seg, cache)
                if cache.length + S > 2 * S:
                    cache = _keep_last(self.gpt, cache, S, 2 * S)
            return kvcache.cached_forward(self.gpt, segments[-1], cache)[:, -1]
        mem = self.memory.expand(x.shape[0], -1, -1)  # (b, m, d)
        for seg in segments:  # BPTT over segments
            h = torch.cat([mem, self.gpt.embed_ids(seg), mem], 1)  # (b, m + S + m, d)
            for block in self.gpt.blocks:
                h = block(h)
            mem = h[:, -self.n_memory :]
        return self.gpt.head(self.gpt.norm(h[:, -self.n_memory - 1]))


def train_recall(
    model: SegmentModel,
    steps: int,
    batch: int,
    n_segments: int,
    n_values: int = 4,
    lr: float = 3e-3,
    seed: int = 0,
) -> list[float]:
    """Train `model` on fresh `recall_task` batches (cross-entropy of the
    answer) with `lecturelib.train.fit` (AdamW without weight decay, gradients
    clipped at 1, full precision); returns the losses."""
    check_type(model, "model", SegmentModel, "a SegmentModel")
    check_sizes(steps=steps, batch=batch)
    vocab = model.gpt.config.vocab_size

    def batches(step: int):
        x, answer, _ = recall_task(
            batch,
            n_segments,
            model.segment,
            n_values,
            vocab,
            seed=seed * 100_003 + step,
        )
        return x, answer

    def loss_fn(net, xy):
        return F.cross_entropy(net(xy[0]), xy[1])

    cuda = train.model_device(model).type == "cuda"  # fused: fp16 reads nothing back
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0, fused=cuda)
    history = train.fit(
        model,
        batches,
        loss_fn,
        steps=steps,
        optimizer=opt,
        clip=1.0,
        progress=False,
    )
    model.eval()
    return history.train_loss


@torch.no_grad()
def recall_accuracy(
    model: SegmentModel, x: torch.Tensor, answer: torch.Tensor, distance: torch.Tensor
) -> torch.Tensor:
    """Accuracy for each band of distances `1..S`, `S+1..2S`, ... (`S` the
    segment). Shapes: → `(T / S,)`."""
    check_type(model, "model", SegmentModel, "a SegmentModel")
    device = next(model.parameters()).device
    right = (model(x.to(device)).argmax(-1).cpu() == answer).float()
    band = (distance - 1) // model.segment  # (n,)
    n_bands = x.shape[1] // model.segment
    return torch.stack([right[band == i].mean() for i in range(n_bands)])
