"""Chapter 4: sequence-to-sequence models with recurrent networks.

- `Encoder` reads the source with a (bidirectional, stacked) GRU and summarises
  it in one *context vector* `c`: the final states of the top layer, or the mean of
  its states over the real positions; `run_packed` runs the GRU over the real tokens
  only, sorting the lengths on the CPU so that nothing is read back from the device;
- `Decoder` is a conditional language model `p(y_t | y_<t, c)`: a GRU that
  starts from `tanh(W c)` and reads `[embed(y_{t-1}); c]` at every step, as in Cho
  et al. (2014, arXiv:1406.1078); Sutskever et al. (2014, arXiv:1409.3215) passed `c`
  only as the initial state, used deep LSTMs and reversed the source;
- `Seq2Seq` joins them, and `make_model` builds the chapter's model from a
  `Seq2SeqConfig` passed by keyword, the sizes that the encoder and the decoder read;
  `masked_cross_entropy` and `loss` train it by teacher forcing with the padded
  positions left out;
- `val_loss` and `train_translator` are the training recipe of chapters 4, 5
  and 8 (AdamW, warm-up and cosine decay, clipping, batches of similar length);
- `greedy_decode` translates a batch token by token until `</s>`;
- `evaluate` scores translations with corpus BLEU (Papineni et al., 2002) through
  `lecturelib.metrics.bleu` (sacreBLEU, Post 2018, arXiv:1804.08771) into a
  `bleu.BleuReport`, which keeps per-sentence scores (`bleu` also holds BLEU by
  source length and BLEU written out from its definition).

Both decoders of the book (this one and `attention.AttentionDecoder`) share one
interface, `decoder(tgt_in, enc, h) -> (logits, h, weights)`, so that training and
decoding code serve both.

Shapes use `b` batch, `s` source positions, `t` target positions, `d` width,
`v` vocabulary, `l` layers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F
from einops import rearrange, repeat
from torch import nn

from lecturelib import metrics, train, validate
from lecturelib.recurrence import rnn, translation
from lecturelib.recurrence.bleu import BleuReport, ngrams  # noqa: F401 (ngrams: ch. 9)
from lecturelib.recurrence.corpus import check_token_lists
from lecturelib.recurrence.translation import BOS_ID, EOS_ID, PAD_ID, Batch
from lecturelib.validate import (
    check_bool,
    check_choice,
    check_number,
    check_on_device,
    check_tensor,
    check_type,
    describe,
    is_int_tensor,
)

CONTEXTS = ("last", "mean")


def check_lengths(src_len, src: torch.Tensor, name: str = "src_len") -> None:
    """`src_len` must hold the `(b,)` integer lengths, in `1 .. s`, of the sentences
    of `src` `(b, s)`; `name` names it in the message."""
    if not is_int_tensor(src_len):
        raise TypeError(
            f"{name} must be an integer tensor of (b,) lengths; got {describe(src_len)}"
        )
    b, s = src.shape[:2]
    message = f"{name} must be (b,) = ({b},) integer lengths in 1..{s}"
    if src_len.shape != (b,):
        raise ValueError(f"{message}; got {src_len.dtype} {src_len.tolist()}")
    check_on_device(  # on an accelerator, checked there without a read-back
        ((src_len >= 1) & (src_len <= s)).all(),
        message,
        lambda: f"; got {src_len.dtype} {src_len.tolist()}",
    )


class Encoded(NamedTuple):
    """What the encoder hands to the decoder; `mask` is True at real source tokens.
    Shapes: states (b, s, d_enc), mask (b, s), context (b, d_enc)."""

    states: torch.Tensor
    mask: torch.Tensor
    context: torch.Tensor


@dataclass(kw_only=True)
class Seq2SeqConfig:
    """The sizes of a recurrent encoder–decoder (chapters 4 and 5)."""

    src_vocab_size: int
    tgt_vocab_size: int
    d_emb: int = 128
    d_model: int = 256
    n_layers: int = 1
    bidirectional: bool = True
    context: str = "last"

    def __post_init__(self):
        check_seq2seq_config(self)

    @property
    def d_enc(self) -> int:
        """The width of the encoder's states: `2·d_model` when bidirectional."""
        return (2 if self.bidirectional else 1) * self.d_model


def check_seq2seq_config(c: Seq2SeqConfig) -> None:
    """The sizes of a `Seq2SeqConfig` (and of its subclasses)."""
    validate.check_sizes(
        src_vocab_size=c.src_vocab_size,
        tgt_vocab_size=c.tgt_vocab_size,
        d_emb=c.d_emb,
        d_model=c.d_model,
        n_layers=c.n_layers,
    )
    check_bool(c.bidirectional, "bidirectional")
    check_choice(c.context, "context", CONTEXTS)


def check_config(config, kind: type) -> None:
    """Raise a TypeError unless `config` is a `kind` (a config dataclass)."""
    check_type(config, "config", kind, f"a {kind.__name__}")


def check_run_packed(rnn, x, lengths) -> None:
    """The arguments of `run_packed`."""
    check_type(rnn, "rnn", (nn.RNN, nn.GRU), "a torch.nn.RNN or GRU")
    if not rnn.batch_first:
        raise ValueError(f"rnn must be batch_first; got {rnn}")
    check_tensor(x, "x", "(b, t, d_in)", 3)
    check_lengths(lengths, x, "lengths")


def run_packed(rnn: nn.RNN | nn.GRU, x: torch.Tensor, lengths: torch.Tensor):
    """`rnn` over each row's first `lengths` steps only, reading nothing back."""
    check_run_packed(rnn, x, lengths)
    lengths, order = torch.sort(lengths.cpu(), descending=True)  # longest first
    back = order.argsort().to(x.device)  # the batch's order, sent to the device
    packed = nn.utils.rnn.pack_padded_sequence(
        x[order.to(x.device)], lengths, batch_first=True
    )
    out, h_n = rnn(packed)  # h_n: (l·dirs, b, d), longest first
    states, _ = nn.utils.rnn.pad_packed_sequence(
        out, batch_first=True, total_length=x.shape[1]
    )  # (b, t, dirs·d), zero past each length
    return states[back], h_n[:, back]


def check_encoder_input(encoder, src, src_len) -> None:
    """The arguments of `Encoder.forward`."""
    validate.check_ids(src, "src", dims=2, vocab_size=encoder.embed.num_embeddings)
    check_lengths(src_len, src)


class Encoder(nn.Module):
    """Embedding → GRU over the source; `d_enc = 2·d_model` when bidirectional."""

    def __init__(self, config: Seq2SeqConfig):
        super().__init__()
        check_config(config, Seq2SeqConfig)
        d_emb, d_model, n_layers = config.d_emb, config.d_model, config.n_layers
        self.context, self.n_dirs = config.context, 2 if config.bidirectional else 1
        self.d_enc = config.d_enc
        self.embed = nn.Embedding(config.src_vocab_size, d_emb, padding_idx=PAD_ID)
        self.rnn = nn.GRU(
            d_emb, d_model, n_layers, batch_first=True, bidirectional=self.n_dirs == 2
        )

    def forward(self, src: torch.Tensor, src_len: torch.Tensor) -> Encoded:
        check_encoder_input(self, src, src_len)
        # packing runs each sequence over its real tokens only: padding changes nothing
        states, h_n = run_packed(self.rnn, self.embed(src), src_len)
        mask = src != PAD_ID
        if self.context == "last":  # the top layer's final state in each direction
            context = rearrange(h_n, "(l k) b d -> l b (k d)", k=self.n_dirs)[-1]
        else:
            context = rnn.pool(states, mask, "mean")
        return Encoded(states, mask, context)  # (b, s, d_enc), (b, s), (b, d_enc)


def check_decoder_input(decoder, tgt_in, enc) -> None:
    """The arguments of `Decoder.forward`."""
    validate.check_ids(
        tgt_in, "tgt_in", dims=2, vocab_size=decoder.embed.num_embeddings
    )
    if not isinstance(enc, Encoded):
        raise TypeError(
            f"enc must be the Encoded output of an encoder; got {type(enc).__name__}"
        )


class Decoder(nn.Module):
    """GRU decoder on one context `c`: starts at `tanh(W c)`, reads `[E y_{t-1}; c]`."""

    def __init__(self, config: Seq2SeqConfig):
        super().__init__()
        check_config(config, Seq2SeqConfig)
        d_emb, d_model, d_enc = config.d_emb, config.d_model, config.d_enc
        self.n_layers = config.n_layers
        self.embed = nn.Embedding(config.tgt_vocab_size, d_emb, padding_idx=PAD_ID)
        self.bridge = nn.Linear(d_enc, d_model)
        self.rnn = nn.GRU(d_emb + d_enc, d_model, self.n_layers, batch_first=True)
        self.combine = nn.Linear(d_model + d_enc, d_emb)
        self.readout = nn.Linear(d_emb, config.tgt_vocab_size)

    def init_state(self, enc: Encoded) -> torch.Tensor:
        h0 = torch.tanh(self.bridge(enc.context))  # (b, d_model)
        return repeat(h0, "b d -> l b d", l=self.n_layers)  # (l, b, d_model)

    def forward(
        self, tgt_in: torch.Tensor, enc: Encoded, h: torch.Tensor | None = None
    ):
        check_decoder_input(self, tgt_in, enc)
        h = self.init_state(enc) if h is None else h
        c = repeat(enc.context, "b d -> b t d", t=tgt_in.shape[1])  # same c at every t
        s, h = self.rnn(torch.cat([self.embed(tgt_in), c], -1), h)  # (b, t, d_model)
        out = torch.tanh(self.combine(torch.cat([s, c], -1)))  # (b, t, d_emb)
        return self.readout(out), h, None  # (b, t, v)


def check_seq2seq(encoder, decoder) -> None:
    """The parts of a `Seq2Seq`."""
    check_type(encoder, "encoder", nn.Module, "an nn.Module")
    check_type(decoder, "decoder", nn.Module, "an nn.Module")


class Seq2Seq(nn.Module):
    """An encoder and a decoder; teacher forcing: the decoder reads the gold prefix."""

    def __init__(self, encoder: nn.Module, decoder: nn.Module):
        super().__init__()
        check_seq2seq(encoder, decoder)
        self.encoder, self.decoder = encoder, decoder

    def forward(self, src, src_len, tgt_in) -> torch.Tensor:
        logits, _, _ = self.decoder(tgt_in, self.encoder(src, src_len))
        return logits


def make_model(config: Seq2SeqConfig) -> Seq2Seq:
    """The chapter's encoder–decoder without attention."""
    check_config(config, Seq2SeqConfig)
    return Seq2Seq(Encoder(config), Decoder(config))


def check_logits_targets(logits, targets) -> None:
    """The arguments of `masked_cross_entropy`."""
    check_tensor(logits, "logits", "(b, t, v)", 3)
    validate.check_ids(targets, "targets", dims=2, vocab_size=logits.shape[-1])
    if logits.shape[:2] != targets.shape:
        raise ValueError(
            f"logits (b, t, v) and targets (b, t) disagree: "
            f"{tuple(logits.shape)} vs {tuple(targets.shape)}"
        )
    if targets.numel():  # on an accelerator, checked there without a read-back
        check_on_device(
            (targets != PAD_ID).any(),
            f"targets hold no real token: every position is <pad> (id {PAD_ID}), and a "
            f"mean over no tokens is undefined",
        )


def masked_cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean negative log-likelihood over the real (non-`<pad>`) target tokens."""
    check_logits_targets(logits, targets)
    nll = F.cross_entropy(
        rearrange(logits, "b t v -> (b t) v"),
        rearrange(targets, "b t -> (b t)"),
        reduction="none",
    )  # (b·t,)
    mask = rearrange(targets != PAD_ID, "b t -> (b t)")  # the real tokens
    return (nll * mask).sum() / mask.sum()


def check_batch(batch) -> None:
    """A batch must be `(src, src_len, tgt_in, tgt_out)`."""
    if not isinstance(batch, Sequence) or len(batch) != 4:
        got = (
            f"{type(batch).__name__} of length {len(batch)}"
            if isinstance(batch, Sequence)
            else type(batch).__name__
        )
        raise TypeError(f"batch must be (src, src_len, tgt_in, tgt_out); got {got}")


def loss(model: Seq2Seq, batch: Sequence[torch.Tensor]) -> torch.Tensor:
    """Teacher-forcing loss of a batch `src, src_len, tgt_in, tgt_out` for train.fit."""
    check_batch(batch)
    b = Batch(*batch)
    return masked_cross_entropy(model(b.src, b.src_len, b.tgt_in), b.tgt_out)


def check_val_loss(corpus, batch_size) -> None:
    """The arguments of `val_loss`."""
    if not isinstance(corpus, translation.TranslationData) or not corpus.val:
        raise TypeError(
            f"corpus must be a TranslationData with validation pairs; got "
            f"{type(corpus).__name__}"
        )
    validate.check_sizes(batch_size=batch_size)


@torch.no_grad()
def val_loss(
    model: nn.Module,
    corpus: translation.TranslationData,
    device: torch.device | str,
    batch_size: int = 500,
) -> dict[str, float]:
    """Mean loss per real target token over `corpus.val`, as `{"loss": x}`."""
    check_val_loss(corpus, batch_size)
    total, count = 0.0, 0
    for b in corpus.batches(corpus.val, batch_size):
        n = int(b.tgt_mask.sum())
        total += loss(model, tuple(t.to(device) for t in b)).item() * n
        count += n
    return {"loss": total / count}


def check_train_translator(corpus, steps, lr, batch_size) -> None:
    """The arguments of `train_translator`."""
    validate.check_sizes(steps=steps, batch_size=batch_size)
    check_number(lr, "lr", 0.0, low_open=True)
    check_type(corpus, "corpus", translation.TranslationData, "a TranslationData")


def train_translator(
    model: nn.Module,
    corpus: translation.TranslationData,
    *,
    steps: int,
    lr: float,
    batch_size: int,
    seed: int,
    desc: str,
) -> train.History:
    """Train with AdamW, warm-up for steps // 10 then cosine decay, clipping at 1, and
    batches of similar length; the validation loss is measured 5 times."""
    check_train_translator(corpus, steps, lr, batch_size)
    try:
        # fused: a few kernels for all tensors
        opt = torch.optim.AdamW(model.parameters(), lr=lr, fused=True)
    except RuntimeError:
        opt = torch.optim.AdamW(model.parameters(), lr=lr)
    schedule = train.warmup_cosine(opt, steps, warmup=steps // 10)
    batches = corpus.sampler(batch_size, seed=seed, by_length=True)
    device = next(model.parameters()).device
    return train.fit(
        model,
        batches,
        loss,
        steps=steps,
        optimizer=opt,
        scheduler=schedule,
        clip=1.0,
        evaluation=train.Evaluation(
            lambda m: val_loss(m, corpus, device), every=max(1, steps // 5)
        ),
        desc=desc,
    )


@torch.no_grad()
def greedy_decode(
    model: Seq2Seq, src: torch.Tensor, src_len: torch.Tensor, max_len: int
):
    """Greedy decoding to </s> or `max_len` (then <pad>): ids, attention or None."""
    validate.check_sizes(max_len=max_len)
    enc = model.encoder(src, src_len)
    token = torch.full((src.shape[0], 1), BOS_ID, device=src.device)  # (b, 1)
    done = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
    h, out, weights = None, [], []
    for _ in range(max_len):
        logits, h, w = model.decoder(token, enc, h)  # (b, 1, v)
        token = logits.argmax(-1).masked_fill(done[:, None], PAD_ID)  # (b, 1)
        out.append(token)
        weights.append(w)
        done |= token[:, 0] == EOS_ID
        if done.all():
            break
    attn = None if weights[0] is None else torch.cat(weights, 1)
    return torch.cat(out, 1), attn


def translate(
    model: Seq2Seq,
    data: translation.TranslationData,
    sources: Sequence[list[str]],
    max_len: int = 20,
    batch_size: int = 256,
):
    """Greedy translations (token lists) of tokenized source sentences."""
    check_token_lists(sources, "sources")
    validate.check_sizes(max_len=max_len, batch_size=batch_size)
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    outputs = []
    for start in range(0, len(sources), batch_size):
        chunk = [(s, []) for s in sources[start : start + batch_size]]
        b = data.batch(chunk)
        ids, _ = greedy_decode(
            model, b.src.to(device), b.src_len, max_len
        )  # lengths: CPU
        outputs += [translation.decode(row, data.tgt_vocab) for row in ids.cpu()]
    model.train(was_training)
    return outputs


def evaluate(
    model: Seq2Seq,
    data: translation.TranslationData,
    pairs,
    max_len: int = 20,
    batch_size: int = 256,
) -> BleuReport:
    """Translate `pairs` greedily and score them against their references with
    BLEU."""
    if not pairs or any(not isinstance(p, Sequence) or len(p) != 2 for p in pairs):
        raise ValueError(
            "pairs must be a non-empty list of (source tokens, target "
            f"tokens); got {pairs!r:.60}"
        )
    check_token_lists([t for _, t in pairs], "pairs' targets")
    sources = [s for s, _ in pairs]
    hyps = translate(model, data, sources, max_len, batch_size)
    refs = [t for _, t in pairs]
    hyp_text = [translation.detokenize(h) for h in hyps]
    ref_text = [translation.detokenize(r) for r in refs]
    return BleuReport(
        metrics.bleu(hyp_text, ref_text),
        [metrics.sentence_bleu(h, r) for h, r in zip(hyp_text, ref_text)],
        [len(s) for s in sources],
        sources,
        hyps,
        refs,
    )
