"""Chapter 2: recurrent networks and backpropagation through time.

- `ElmanCell` and `ElmanRNN` are the simple recurrent network of Elman
  (1990), `h_t = tanh(W_h h_{t-1} + W_x x_t + b)`, written as a plain loop over time
  steps; it is the reference (oracle) for `torch.nn.RNN` and keeps one bias where
  PyTorch keeps two;
- `gradients` holds the chapter's vanishing and exploding gradients: Jacobian norms,
  the initialisation of recurrent weights and gradient clipping;
- `batchify`, `chunk` and `TruncatedBPTT` lay a long text out as
  parallel streams and train on consecutive chunks, carrying the hidden state over but
  not its gradient (truncated backpropagation through time, Werbos 1990; Williams and
  Peng 1990);
- `CharRNN`, `stream_nll` and `sample` are a character-level language
  model (with its validation loss and a sampler) in the spirit of Karpathy's char-rnn
  (2015), using the fast `torch.nn.RNN`;
- `pad_sequences`, `pool` and `RNNClassifier` (sized by a `ClassifierConfig`) classify
  variable-length sequences from one vector per sequence: the last state, or the mean or
  max of the states over the real (unpadded) positions.

Shapes use `b` batch, `t` time, `d` width, `v` vocabulary, `l` layers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

from lecturelib.validate import (
    check_ids,
    check_int,
    check_on_device,
    check_number,
    check_sizes,
    check_tensor,
    check_type,
    describe,
)

POOLINGS = ("last", "mean", "max")


class ElmanCell(nn.Module):
    """One Elman RNN step: `h_t = tanh(W_h h_{t-1} + W_x x_t + b)`."""

    def __init__(self, d_in: int, d_model: int):
        super().__init__()
        check_sizes(d_in=d_in, d_model=d_model)
        bound = 1 / math.sqrt(d_model)  # the uniform initialisation of torch.nn.RNN
        self.W_x = nn.Parameter(torch.empty(d_model, d_in).uniform_(-bound, bound))
        self.W_h = nn.Parameter(torch.empty(d_model, d_model).uniform_(-bound, bound))
        self.b = nn.Parameter(torch.empty(d_model).uniform_(-bound, bound))

    def forward(self, x_t: torch.Tensor, h_prev: torch.Tensor) -> torch.Tensor:
        return torch.tanh(h_prev @ self.W_h.T + x_t @ self.W_x.T + self.b)


class ElmanRNN(nn.Module):
    """`n_layers` Elman cells, as torch.nn.RNN(batch_first=True); h0 None: zeros."""

    def __init__(self, d_in: int, d_model: int, n_layers: int = 1):
        super().__init__()
        check_sizes(d_in=d_in, d_model=d_model, n_layers=n_layers)
        self.d_in, self.d_model = d_in, d_model
        self.cells = nn.ModuleList(
            [ElmanCell(d_in if i == 0 else d_model, d_model) for i in range(n_layers)]
        )

    def forward(self, x: torch.Tensor, h0: torch.Tensor | None = None):
        check_elman_input(self, x, h0)
        b, t, _ = x.shape
        inputs, h_last = x, []
        for layer, cell in enumerate(self.cells):
            h = x.new_zeros(b, self.d_model) if h0 is None else h0[layer]
            outputs = []
            for step in range(t):  # the loop that nn.RNN runs in C++
                h = cell(inputs[:, step], h)
                outputs.append(h)
            inputs = torch.stack(outputs, dim=1)  # (b, t, d_model): next layer's input
            h_last.append(h)
        return inputs, torch.stack(h_last)


def check_elman_input(rnn: ElmanRNN, x, h0) -> None:
    """The arguments of `ElmanRNN.forward`."""
    check_tensor(x, "x", f"(b, t, d_in={rnn.d_in})")
    if h0 is not None:
        check_tensor(h0, "h0", "(l, b, d_model)")
    if x.dim() != 3 or x.shape[-1] != rnn.d_in:
        raise ValueError(
            f"x must be (b, t, d_in={rnn.d_in}); got shape {tuple(x.shape)}"
        )
    expected = (len(rnn.cells), x.shape[0], rnn.d_model)
    if h0 is not None and tuple(h0.shape) != expected:
        raise ValueError(
            f"h0 must be (l, b, d_model) = {expected}; got {tuple(h0.shape)}"
        )


def check_torch_rnn(rnn) -> None:
    """`from_torch` copies a tanh, unidirectional, batch_first `nn.RNN` with
    biases."""
    if not isinstance(rnn, nn.RNN):
        raise TypeError(f"expected a torch.nn.RNN; got {type(rnn).__name__}")
    if (
        rnn.nonlinearity != "tanh"
        or rnn.bidirectional
        or not rnn.batch_first
        or not rnn.bias
    ):
        raise ValueError(
            "only tanh, unidirectional, batch_first RNNs with biases "
            f"can be copied; got {rnn}"
        )


@torch.no_grad()
def from_torch(rnn: nn.RNN) -> ElmanRNN:
    """An `ElmanRNN` holding the weights of a torch.nn.RNN (its two biases summed)."""
    check_torch_rnn(rnn)
    ours = ElmanRNN(rnn.input_size, rnn.hidden_size, rnn.num_layers)
    for k, cell in enumerate(ours.cells):
        cell.W_x.copy_(getattr(rnn, f"weight_ih_l{k}"))
        cell.W_h.copy_(getattr(rnn, f"weight_hh_l{k}"))
        cell.b.copy_(getattr(rnn, f"bias_ih_l{k}") + getattr(rnn, f"bias_hh_l{k}"))
    return ours.to(rnn.weight_ih_l0.device)


def check_batchify(ids, batch_size) -> None:
    """The arguments of `batchify`: at least two tokens per stream."""
    check_ids(ids, "ids", dims=1)
    check_int(batch_size, "batch_size", 1)
    if len(ids) // batch_size < 2:
        raise ValueError(f"{len(ids)} tokens are too few for {batch_size} streams")


def batchify(ids: torch.Tensor, batch_size: int) -> torch.Tensor:
    """Cut a token stream into `batch_size` contiguous rows; the tail is dropped."""
    check_batchify(ids, batch_size)
    n = len(ids) // batch_size
    return rearrange(ids[: batch_size * n], "(b n) -> b n", b=batch_size)


def check_chunk(streams, k, seq_len) -> None:
    """The arguments of `chunk`: `k` in `0..n_chunks - 1`."""
    check_ids(streams, "streams", dims=2)
    check_int(seq_len, "seq_len", 1)
    n_chunks = (streams.shape[1] - 1) // seq_len
    check_int(k, "the chunk index k", 0, n_chunks - 1)


def chunk(
    streams: torch.Tensor, k: int, seq_len: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Chunk `k` of the streams and its targets, the same positions shifted by one.
    Shapes: streams (b, n) -> x, y (b, seq_len); k < (n - 1) // seq_len."""
    check_chunk(streams, k, seq_len)
    start = k * seq_len
    return (
        streams[:, start : start + seq_len],
        streams[:, start + 1 : start + seq_len + 1],
    )


def check_truncated_bptt(ids, batch_size, seq_len) -> None:
    """The arguments of `TruncatedBPTT`: streams that hold a chunk."""
    check_int(seq_len, "seq_len", 1)
    check_batchify(ids, batch_size)
    n = len(ids) // batch_size
    if (n - 1) // seq_len < 1:
        raise ValueError(f"streams of {n} tokens hold no chunk of {seq_len}")


class TruncatedBPTT:
    """Batches `(x, y, first)` and loss for `train.fit`; state carried over detached."""

    def __init__(self, ids: torch.Tensor, batch_size: int, seq_len: int):
        check_truncated_bptt(ids, batch_size, seq_len)
        self.streams, self.seq_len = batchify(ids, batch_size), seq_len
        self.n_chunks = (self.streams.shape[1] - 1) // seq_len
        self.h = None

    def batch(self, step: int):
        check_int(step, "step", 0)
        k = step % self.n_chunks
        return (*chunk(self.streams, k, self.seq_len), k == 0)

    def loss(self, model: nn.Module, batch) -> torch.Tensor:
        x, y, first = batch
        logits, h = model(x, None if first else self.h)
        self.h = h.detach()  # keep the state, cut the graph: truncated BPTT
        return F.cross_entropy(logits.flatten(0, 1), y.flatten())


def check_char_rnn_input(
    embed: nn.Embedding, rnn: nn.RNNBase, x: torch.Tensor, h
) -> None:
    """The ids and state given to a character LM of `embed` and `rnn`."""
    check_ids(x, "x", dims=2, vocab_size=embed.num_embeddings)
    if h is not None:
        expected = (rnn.num_layers, x.shape[0], rnn.hidden_size)
        if not isinstance(h, torch.Tensor) or tuple(h.shape[-3:]) != expected:
            raise ValueError(
                f"the state must be (l, b, d_model) = {expected}; got {describe(h)}"
            )


class CharRNN(nn.Module):
    """Embedding → torch.nn.RNN (tanh) → linear readout: next-token logits."""

    def __init__(self, vocab_size: int, d_emb: int, d_model: int, n_layers: int = 1):
        super().__init__()
        check_sizes(
            vocab_size=vocab_size, d_emb=d_emb, d_model=d_model, n_layers=n_layers
        )
        self.embed = nn.Embedding(vocab_size, d_emb)
        self.rnn = nn.RNN(d_emb, d_model, n_layers, batch_first=True)
        self.readout = nn.Linear(d_model, vocab_size)

    def forward(self, x: torch.Tensor, h: torch.Tensor | None = None):
        check_char_rnn_input(self.embed, self.rnn, x, h)
        states, h = self.rnn(self.embed(x), h)  # (b, t, d_model), (l, b, d_model)
        return self.readout(states), h


@torch.no_grad()
def stream_nll(
    model: nn.Module, ids: torch.Tensor, batch_size: int = 16, seq_len: int = 256
):
    """Mean next-token NLL (nats) of a stream read as `batch_size` stateful streams."""
    check_int(seq_len, "seq_len", 1)
    streams = batchify(ids, batch_size).to(next(model.parameters()).device)
    n = streams.shape[1] - 1
    total, h = 0.0, None
    for start in range(0, n, seq_len):
        end = min(start + seq_len, n)
        logits, h = model(streams[:, start:end], h)
        y = streams[:, start + 1 : end + 1]
        total += F.cross_entropy(
            logits.flatten(0, 1), y.flatten(), reduction="sum"
        ).item()
    return total / (n * batch_size)


def check_sample(prompt, n_new, temperature, stop_id) -> None:
    """The arguments of `sample`."""
    check_ids(prompt, "prompt", dims=1)
    check_int(n_new, "n_new", 0)
    check_number(temperature, "temperature", 0.0)
    if stop_id is not None:
        check_int(stop_id, "stop_id", 0)


@torch.no_grad()
def sample(
    model: nn.Module,
    prompt: torch.Tensor,
    n_new: int,
    temperature: float = 1.0,
    stop_id: int | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Up to `n_new` tokens after `prompt` at `temperature` (0: argmax) to `stop_id`."""
    check_sample(prompt, n_new, temperature, stop_id)
    out = prompt.tolist()
    logits, h = model(prompt[None].to(next(model.parameters()).device))
    where = "cpu" if generator is None else generator.device  # where draws are made
    for _ in range(n_new):
        last = logits[0, -1].float().to(where)
        if temperature == 0:
            token = int(last.argmax())
        else:
            probs = F.softmax(last / temperature, -1)
            token = int(torch.multinomial(probs, 1, generator=generator))
        out.append(token)
        if token == stop_id:
            break
        logits, h = model(torch.tensor([[token]], device=h.device), h)
    return torch.tensor(out)


def check_pad_sequences(seqs, pad_id) -> None:
    """The arguments of `pad_sequences`."""
    if not isinstance(seqs, (list, tuple)) or not seqs:
        raise TypeError(
            f"seqs must be a non-empty list of 1-D id tensors; got {describe(seqs)}"
        )
    for s in seqs:
        check_ids(s, "each of seqs", dims=1)
    check_int(pad_id, "pad_id", 0)


def pad_sequences(
    seqs: list[torch.Tensor], pad_id: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad id sequences into one batch, and a bool mask, True at real tokens."""
    check_pad_sequences(seqs, pad_id)
    x = torch.full((len(seqs), max(len(s) for s in seqs)), pad_id, dtype=torch.long)
    mask = torch.zeros(x.shape, dtype=torch.bool)
    for i, s in enumerate(seqs):
        x[i, : len(s)], mask[i, : len(s)] = s, True
    return x, mask


def check_pool(states, mask, how) -> None:
    """The arguments of `pool`: a real position in every sequence."""
    check_tensor(states, "states", "(b, t, d)", 3)
    if (
        not isinstance(mask, torch.Tensor)
        or mask.shape != states.shape[:2]
        or mask.dtype != torch.bool
    ):
        raise ValueError(
            f"mask must be bool (b, t) = {tuple(states.shape[:2])}; "
            f"got {mask.dtype} {tuple(mask.shape)}"
        )
    check_on_device(
        mask.any(1).all(), "every sequence needs at least one real (unmasked) position"
    )
    if how not in POOLINGS:
        raise ValueError(f"how must be one of {POOLINGS}; got {how!r}")


def pool(states: torch.Tensor, mask: torch.Tensor, how: str) -> torch.Tensor:
    """A vector per sequence from its real positions (mask True): last, mean or max."""
    check_pool(states, mask, how)
    if how == "last":
        positions = torch.arange(mask.shape[1], device=mask.device)  # (t,)
        last = (mask * positions).argmax(1)  # (b,)
        return states[torch.arange(len(states)), last]
    if how == "mean":
        return (states * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)
    return states.masked_fill(~mask[..., None], float("-inf")).amax(1)  # "max"


def check_classifier_config(c) -> None:
    """The sizes of a `ClassifierConfig`."""
    check_sizes(
        vocab_size=c.vocab_size, d_emb=c.d_emb, d_model=c.d_model, n_classes=c.n_classes
    )


@dataclass(kw_only=True)
class ClassifierConfig:
    """The sizes of an `RNNClassifier`."""

    vocab_size: int
    d_emb: int
    d_model: int
    n_classes: int

    def __post_init__(self):
        check_classifier_config(self)


def check_rnn_classifier(config, pooling) -> None:
    """The arguments of `RNNClassifier`."""
    check_type(config, "config", ClassifierConfig, "a ClassifierConfig")
    if pooling not in POOLINGS:
        raise ValueError(f"pooling must be one of {POOLINGS}; got {pooling!r}")


class RNNClassifier(nn.Module):
    """Embedding → RNN → `pool` → linear: class logits; `mask` True at real tokens."""

    def __init__(self, config: ClassifierConfig, *, pooling: str = "last"):
        super().__init__()
        check_rnn_classifier(config, pooling)
        self.pooling = pooling
        self.embed = nn.Embedding(config.vocab_size, config.d_emb)
        self.rnn = nn.RNN(config.d_emb, config.d_model, batch_first=True)
        self.classify = nn.Linear(config.d_model, config.n_classes)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        check_ids(x, "x", dims=2, vocab_size=self.embed.num_embeddings)
        # right padding leaves the states at the real positions unchanged
        states, _ = self.rnn(self.embed(x))  # (b, t, d_model)
        return self.classify(pool(states, mask, self.pooling))
