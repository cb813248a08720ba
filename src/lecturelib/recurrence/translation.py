"""Translation data for chapters 4, 5 and 8: English–French pairs, ready for a model.

The pipeline, one small function per step (the first five are in `corpus`)::

    pairs = data.fra_eng_pairs()                    # (english, french) strings
    pairs = tokenize_pairs(pairs)                   # lower-cased words and punctuation
    pairs = filter_by_length(pairs, max_len=12)     # short sentences train on a CPU
    pairs = filter_by_vocab(pairs, n_words=1000)    # common words: a small softmax
    train, val, test = split_pairs(pairs, ...)      # seeded, disjoint by source text
    src_vocab = build_vocab([s for s, _ in train])  # <pad> <s> </s> <unk> = ids 0 1 2 3
    batch = make_batch(train[:32], src_vocab, tgt_vocab)

`load` runs all of it and returns a `TranslationData`. The data are the
Tatoeba pairs packaged by manythings.org (CC BY 2.0 FR); show
`data.attribution("fra-eng")` where they are used.

A batch holds the source ids, right-padded with `<pad>`, their lengths, and the target
twice, shifted by one: the decoder reads `<s> y_1 … y_m` and is trained to predict
`y_1 … y_m </s>` (teacher forcing, Sutskever et al., 2014, arXiv:1409.3215).

Shapes use `b` batch, `s` source positions, `t` target positions.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import torch

from lecturelib import data, runtime
from lecturelib.recurrence import lm
from lecturelib.recurrence.corpus import (  # noqa: F401 (detokenize: chapter 8)
    TOKEN_RE,
    Pair,
    Tokens,
    check_split_sizes,
    check_str_tokens,
    check_token_pairs,
    check_tokens,
    detokenize,
    filter_by_length,
    filter_by_vocab,
    split_pairs,
    tokenize,
    tokenize_pairs,
)
from lecturelib.validate import check_int
from lecturelib.recurrence.rnn import pad_sequences

PAD, BOS, EOS, UNK = "<pad>", "<s>", "</s>", "<unk>"
SPECIALS = (PAD, BOS, EOS, UNK)
PAD_ID, BOS_ID, EOS_ID, UNK_ID = range(4)


def _vocab(vocab, name: str, func: str) -> None:
    if not isinstance(vocab, lm.Vocab):
        raise TypeError(
            f"{func}(): {name} must be a lecturelib.recurrence.lm.Vocab "
            f"(see build_vocab); got {type(vocab).__name__}"
        )


def build_vocab(sentences: Sequence[Tokens], min_count: int = 1) -> lm.Vocab:
    """A `lecturelib.recurrence.lm.Vocab` of the tokens seen at least `min_count` times,
    with `<pad> <s> </s> <unk>` at ids `0 1 2 3`; rarer tokens encode as
    `<unk>`."""
    if isinstance(sentences, str) or not isinstance(sentences, Sequence):
        raise TypeError(
            f"build_vocab(): sentences must be a list of token lists; got "
            f"{type(sentences).__name__}"
        )
    for i, sent in enumerate(sentences):
        check_tokens(sent, f"sentences[{i}]", "build_vocab")
        check_str_tokens(sent, f"sentences[{i}]", "build_vocab")
    check_int(min_count, "min_count", 1)
    return _build_vocab(sentences, min_count)


def _build_vocab(sentences: Sequence[Tokens], min_count: int) -> lm.Vocab:
    tokens = (tok for sent in sentences for tok in sent)
    vocab = lm.Vocab(tokens, min_count=min_count, unk=UNK)
    vocab.itos = list(SPECIALS) + [s for s in vocab.itos if s not in SPECIALS]
    vocab.stoi = {s: i for i, s in enumerate(vocab.itos)}
    return vocab


def encode(tokens: Sequence[str], vocab: lm.Vocab) -> torch.Tensor:
    """`<s> tokens </s>` as ids. Shapes: `m` tokens → `(m + 2,)` long."""
    check_tokens(tokens, "tokens", "encode")
    _vocab(vocab, "vocab", "encode")
    check_str_tokens(tokens, "tokens", "encode")
    return _encode(tokens, vocab)


def _encode(tokens: Sequence[str], vocab: lm.Vocab) -> torch.Tensor:
    return torch.cat(
        [torch.tensor([BOS_ID]), vocab.encode(tokens), torch.tensor([EOS_ID])]
    )


def _ids(ids, vocab_size: int, func: str) -> list[int]:
    """`ids` as a list of ints in `0..vocab_size-1`; floats, bools, other shapes and
    negative ids (which would index from the end) are refused."""
    if isinstance(ids, torch.Tensor):
        if ids.dim() != 1:
            raise ValueError(
                f"{func}(): ids must be one sequence (t,); got shape {tuple(ids.shape)}"
            )
        if ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
            raise TypeError(
                f"{func}(): ids must be integer token ids; got dtype {ids.dtype}"
            )
        ids = ids.tolist()
    elif isinstance(ids, str) or not isinstance(ids, Sequence):
        raise TypeError(
            f"{func}(): ids must be a 1-D tensor or a list of ints; got "
            f"{type(ids).__name__}"
        )
    for pos, i in enumerate(ids):
        if isinstance(i, bool) or not isinstance(i, int):
            raise TypeError(
                f"{func}(): ids must be ints; "
                f"got {i!r} ({type(i).__name__}) at position {pos}"
            )
        if not 0 <= i < vocab_size:
            raise ValueError(
                f"{func}(): ids must be in 0..{vocab_size - 1} "
                f"(the vocabulary size is {vocab_size}); "
                f"got {i} at position {pos}"
            )
    return list(ids)


def decode(ids: Sequence[int] | torch.Tensor, vocab: lm.Vocab) -> Tokens:
    """Tokens of `ids` up to the first `</s>`, without `<s>` and `<pad>`.

    Shapes: ids `(t,)` → at most `t` tokens.
    """
    _vocab(vocab, "vocab", "decode")
    out = []
    for i in _ids(ids, len(vocab), "decode"):
        if i == EOS_ID:
            break
        if i not in (BOS_ID, PAD_ID):
            out.append(vocab.itos[i])
    return out


def pad(seqs: Sequence[torch.Tensor]) -> torch.Tensor:
    """Right-pad 1-D id tensors with `<pad>` (id 0).

    Shapes: `b` tensors `(t_i,)` → `(b, max t_i)`.
    """
    if isinstance(seqs, (torch.Tensor, str)) or not isinstance(seqs, Sequence):
        raise TypeError(
            f"pad(): seqs must be a list of 1-D id tensors; got {type(seqs).__name__}"
        )
    if not seqs:
        raise ValueError("pad(): seqs must hold at least one tensor; got an empty list")
    for i, seq in enumerate(seqs):
        if not isinstance(seq, torch.Tensor):
            raise TypeError(
                f"pad(): seqs[{i}] must be a 1-D id tensor; got {type(seq).__name__}"
            )
        if seq.dim() != 1 or seq.is_floating_point() or seq.dtype == torch.bool:
            raise ValueError(
                f"pad(): seqs[{i}] must be a 1-D integer tensor (t,); "
                f"got shape {tuple(seq.shape)} and dtype {seq.dtype}"
            )
    return _pad(seqs)


def _pad(seqs: Sequence[torch.Tensor]) -> torch.Tensor:
    return pad_sequences(list(seqs), pad_id=PAD_ID)[0]  # chapter 2's padding, no mask


class Batch(NamedTuple):
    """A padded batch of translation pairs.

    Shapes: src `(b, s)`, src_len `(b,)`, tgt_in and tgt_out `(b, t)`, where
    `tgt_in = <s> y_1 … y_m` and `tgt_out = y_1 … y_m </s>`; all padded with 0.
    """

    src: torch.Tensor
    src_len: torch.Tensor
    tgt_in: torch.Tensor
    tgt_out: torch.Tensor
    # train.to_device leaves the lengths on the CPU, where packing reads them (chapter 4):
    # on a GPU, reading them back would make every forward pass wait
    host_fields = ("src_len",)

    @property
    def src_mask(self) -> torch.Tensor:
        """`(b, s)` bool, True at real source tokens (`<s>` and `</s>`
        included)."""
        return self.src != PAD_ID

    @property
    def tgt_mask(self) -> torch.Tensor:
        """`(b, t)` bool, True at the target positions that count in the loss."""
        return self.tgt_out != PAD_ID


def check_pairs(
    pairs: Sequence[Pair],
    src_vocab: lm.Vocab,
    tgt_vocab: lm.Vocab,
    func: str = "make_batch",
) -> None:
    """Refuse anything but a non-empty list of (source tokens, target tokens) pairs of
    str tokens with two `lecturelib.recurrence.lm.Vocab` s, naming what was expected."""
    check_token_pairs(pairs, func)
    if not pairs:
        raise ValueError(
            f"{func}(): pairs must hold at least one (source, target) pair; got none"
        )
    _vocab(src_vocab, "src_vocab", func)
    _vocab(tgt_vocab, "tgt_vocab", func)
    for i, (s, t) in enumerate(pairs):
        check_str_tokens(s, f"pairs[{i}][0]", func)
        check_str_tokens(t, f"pairs[{i}][1]", func)


def make_batch(
    pairs: Sequence[Pair], src_vocab: lm.Vocab, tgt_vocab: lm.Vocab
) -> Batch:
    """Encode and pad token pairs into a `Batch` (see its shapes)."""
    check_pairs(pairs, src_vocab, tgt_vocab)
    src = [encode(s, src_vocab) for s, _ in pairs]
    tgt = [encode(t, tgt_vocab) for _, t in pairs]
    return Batch(
        pad(src),
        torch.tensor([len(s) for s in src]),
        pad([t[:-1] for t in tgt]),
        pad([t[1:] for t in tgt]),
    )


@dataclass
class TranslationData:
    """Tokenized train/validation/test pairs and their source and target
    vocabularies."""

    train: list[Pair]
    val: list[Pair]
    test: list[Pair]
    src_vocab: lm.Vocab
    tgt_vocab: lm.Vocab

    def batch(self, pairs: Sequence[Pair]) -> Batch:
        """`make_batch` with this data's vocabularies."""
        return make_batch(pairs, self.src_vocab, self.tgt_vocab)

    def sampler(self, batch_size: int, seed: int = 0, by_length: bool = False):
        """A function `step -> Batch(src, src_len, tgt_in, tgt_out)` for `train.fit` that
        goes through the training pairs in a new random order every epoch; `fit` moves
        the batch to the model's device, all but the lengths (`Batch.host_fields`).

        `by_length=True` sorts each run of `64 · batch_size` shuffled pairs by
        length before cutting it into batches, so a batch holds sentences of about one
        length and little padding, while the batches still come in random order.
        """
        check_int(batch_size, "batch_size", 1)
        check_int(seed, "seed", -(2**63))
        if batch_size > len(self.train):
            raise ValueError(
                f"sampler(): batch_size must be in 1..{len(self.train)} "
                f"(the training pairs); got {batch_size}"
            )
        if not isinstance(by_length, bool):
            raise TypeError(f"sampler(): by_length must be a bool; got {by_length!r}")
        check_token_pairs(self.train, "sampler")
        gen = torch.Generator().manual_seed(seed)
        queue: list[list[int]] = []

        def length(i: int) -> tuple[int, int]:
            return len(self.train[i][1]), len(self.train[i][0])

        def get(step: int):
            if not queue:  # a new epoch
                order = torch.randperm(len(self.train), generator=gen).tolist()
                if by_length:
                    pool = 64 * batch_size
                    order = [
                        i
                        for start in range(0, len(order), pool)
                        for i in sorted(order[start : start + pool], key=length)
                    ]
                cuts = range(0, len(order) - batch_size + 1, batch_size)
                queue.extend(order[c : c + batch_size] for c in cuts)
                shuffled = torch.randperm(len(queue), generator=gen).tolist()
                queue[:] = [queue[i] for i in shuffled]
            pairs = [self.train[i] for i in queue.pop()]
            return make_batch(pairs, self.src_vocab, self.tgt_vocab)

        return get

    def batches(self, pairs: Sequence[Pair], batch_size: int) -> Iterator[Batch]:
        """Consecutive batches of `pairs` in order (for evaluation)."""
        check_int(batch_size, "batch_size", 1)
        check_token_pairs(pairs, "batches")
        return (
            make_batch(
                pairs[start : start + batch_size], self.src_vocab, self.tgt_vocab
            )
            for start in range(0, len(pairs), batch_size)
        )


def load(
    max_len: int = 12,
    n_words: int | None = 1_000,
    n_train: int | None = None,
    n_val: int = 1_000,
    n_test: int = 2_000,
    min_count: int = 2,
    seed: int = 0,
) -> TranslationData:
    """English → French pairs with at most `max_len` tokens per side, made of the
    `n_words` most common tokens of each language (None: any), split by `seed`, with
    vocabularies of the training tokens seen at least `min_count` times."""
    check_int(max_len, "max_len", 1)
    if n_words is not None:
        check_int(n_words, "n_words", 1)
    check_int(min_count, "min_count", 1)
    check_split_sizes(n_val, n_test, n_train, seed, "load")
    with runtime.collector_paused():  # no cycles among token lists: see its docstring
        pairs = filter_by_length(tokenize_pairs(data.fra_eng_pairs()), max_len)
        if n_words is not None:
            pairs = filter_by_vocab(pairs, n_words)
        train, val, test = split_pairs(pairs, n_val, n_test, seed, n_train)
        return TranslationData(
            train,
            val,
            test,
            _build_vocab([s for s, _ in train], min_count),
            _build_vocab([t for _, t in train], min_count),
        )
