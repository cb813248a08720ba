"""Translation data for chapters 4, 5 and 8: English–French pairs, ready for a model.

The pipeline, one small function per step::

    pairs = data.fra_eng_pairs()                    # (english, french) strings
    pairs = tokenize_pairs(pairs)                   # lower-cased words and punctuation
    pairs = filter_by_length(pairs, max_len=12)     # short sentences train on a CPU
    pairs = filter_by_vocab(pairs, n_words=1000)    # common words: a small softmax
    train, val, test = split_pairs(pairs, ...)      # seeded, disjoint by source sentence
    src_vocab = build_vocab([s for s, _ in train])  # <pad> <s> </s> <unk> = ids 0 1 2 3
    batch = make_batch(train[:32], src_vocab, tgt_vocab)

:func:`load` runs all of it and returns a :class:`TranslationData`. The data are the
Tatoeba pairs packaged by manythings.org (CC BY 2.0 FR); show
``data.attribution("fra-eng")`` where they are used.

A batch holds the source ids, right-padded with ``<pad>``, their lengths, and the target
twice, shifted by one: the decoder reads ``<s> y_1 … y_m`` and is trained to predict
``y_1 … y_m </s>`` (teacher forcing, Sutskever et al., 2014, arXiv:1409.3215).

Shapes use ``b`` batch, ``s`` source positions, ``t`` target positions.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import torch

from lecturelib import data, lm
from lecturelib.rnn import pad_sequences

PAD, BOS, EOS, UNK = "<pad>", "<s>", "</s>", "<unk>"
SPECIALS = (PAD, BOS, EOS, UNK)
PAD_ID, BOS_ID, EOS_ID, UNK_ID = range(4)

Tokens = list[str]
Pair = tuple[Tokens, Tokens]

# a token: a word cut after an apostrophe (l'|air, j'|ai), a word, or one other symbol
TOKEN_RE = re.compile(r"\w+'|\w+|[^\w\s]")


def tokenize(text: str) -> Tokens:
    """Lower-case ``text`` and split it into words and punctuation marks.

    >>> tokenize("Tu n'as pas l'air occupé !")
    ['tu', "n'", 'as', 'pas', "l'", 'air', 'occupé', '!']
    """
    if not isinstance(text, str):
        raise TypeError(f"tokenize() takes a str; got {type(text).__name__}")
    return TOKEN_RE.findall(text.lower().replace("’", "'"))


def detokenize(tokens: Sequence[str]) -> str:
    """Join tokens for display: no space after an apostrophe, around a hyphen, or before
    ``.`` and ``,``.

    >>> detokenize(["est", "-", "ce", "que", "tu", "n'", "as", "pas", "l'", "air", "."])
    "est-ce que tu n'as pas l'air."
    """
    text = " ".join(tokens).replace("' ", "'").replace(" - ", "-")
    return re.sub(r" ([.,])", r"\1", text)


def tokenize_pairs(pairs: Sequence[tuple[str, str]]) -> list[Pair]:
    """Tokenize both sides of ``(source, target)`` string pairs."""
    if pairs and not (isinstance(pairs[0], tuple) and len(pairs[0]) == 2):
        raise ValueError(f"expected (source, target) string pairs; got {pairs[0]!r}")
    return [(tokenize(src), tokenize(tgt)) for src, tgt in pairs]


def filter_by_length(pairs: Sequence[Pair], max_len: int,
                     min_len: int = 1) -> list[Pair]:
    """Keep the pairs whose source and target both have ``min_len..max_len`` tokens."""
    if not isinstance(max_len, int) or not 1 <= min_len <= max_len:
        raise ValueError(f"need integers 1 <= min_len <= max_len; got {min_len}, "
                         f"{max_len}")
    return [(s, t) for s, t in pairs
            if min_len <= len(s) <= max_len and min_len <= len(t) <= max_len]


def filter_by_vocab(pairs: Sequence[Pair], n_words: int) -> list[Pair]:
    """Keep the pairs made only of the ``n_words`` most frequent tokens of each language
    (counted over ``pairs``), so that no sentence needs ``<unk>`` and the softmax stays
    small."""
    if not isinstance(n_words, int) or n_words < 1:
        raise ValueError(f"n_words must be a positive int; got {n_words!r}")
    common = []
    for side in (0, 1):
        counts = Counter(tok for pair in pairs for tok in pair[side])
        common.append({tok for tok, _ in counts.most_common(n_words)})
    return [(s, t) for s, t in pairs
            if all(tok in common[0] for tok in s)
            and all(tok in common[1] for tok in t)]


def split_pairs(pairs: Sequence[Pair], n_val: int, n_test: int, seed: int = 0,
                n_train: int | None = None) -> tuple[list[Pair], list[Pair], list[Pair]]:
    """A seeded random split into train, validation and test sets.

    All translations of one source sentence land in the same set, so no test sentence was
    seen in training. ``n_val`` and ``n_test`` count pairs (whole groups are taken until
    the count is reached); ``n_train`` caps the training set (``None``: all the rest).
    """
    if min(n_val, n_test) < 1 or (n_train is not None and n_train < 1):
        raise ValueError(f"n_val, n_test (and n_train) must be positive; got {n_val}, "
                         f"{n_test}, {n_train}")
    groups: dict[tuple[str, ...], list[Pair]] = {}
    for src, tgt in pairs:
        groups.setdefault(tuple(src), []).append((src, tgt))
    keys = sorted(groups)
    random.Random(seed).shuffle(keys)
    sets: list[list[Pair]] = [[], [], []]
    limits = [n_val, n_test, n_train if n_train is not None else len(pairs)]
    part = 0
    for key in keys:
        while part < 3 and len(sets[part]) >= limits[part]:
            part += 1
        if part == 3:
            break
        sets[part].extend(groups[key])
    val, test, train = sets
    if len(val) < n_val or len(test) < n_test or not train:
        raise ValueError(f"{len(pairs)} pairs are too few for {n_val} validation and "
                         f"{n_test} test pairs and a training set")
    return train, val, test


def build_vocab(sentences: Sequence[Tokens], min_count: int = 1) -> lm.Vocab:
    """A :class:`lecturelib.lm.Vocab` of the tokens seen at least ``min_count`` times,
    with ``<pad> <s> </s> <unk>`` at ids ``0 1 2 3``; rarer tokens encode as ``<unk>``."""
    tokens = (tok for sent in sentences for tok in sent)
    vocab = lm.Vocab(tokens, min_count=min_count, unk=UNK)
    vocab.itos = list(SPECIALS) + [s for s in vocab.itos if s not in SPECIALS]
    vocab.stoi = {s: i for i, s in enumerate(vocab.itos)}
    return vocab


def encode(tokens: Sequence[str], vocab: lm.Vocab) -> torch.Tensor:
    """``<s> tokens </s>`` as ids. Shapes: ``m`` tokens → ``(m + 2,)`` long."""
    if isinstance(tokens, str):
        raise TypeError("encode() takes a list of tokens; call tokenize() on a string "
                        "first")
    return torch.cat([torch.tensor([BOS_ID]), vocab.encode(tokens),
                      torch.tensor([EOS_ID])])


def decode(ids: Sequence[int] | torch.Tensor, vocab: lm.Vocab) -> Tokens:
    """Tokens of ``ids`` up to the first ``</s>``, without ``<s>`` and ``<pad>``.

    Shapes: ids ``(t,)`` → at most ``t`` tokens.
    """
    out = []
    for i in (ids.tolist() if isinstance(ids, torch.Tensor) else ids):
        if i == EOS_ID:
            break
        if i not in (BOS_ID, PAD_ID):
            out.append(vocab.itos[i])
    return out


def pad(seqs: Sequence[torch.Tensor]) -> torch.Tensor:
    """Right-pad 1-D id tensors with ``<pad>`` (id 0).

    Shapes: ``b`` tensors ``(t_i,)`` → ``(b, max t_i)``.
    """
    return pad_sequences(list(seqs), pad_id=PAD_ID)[0]  # chapter 2's padding, without the mask


class Batch(NamedTuple):
    """A padded batch of translation pairs.

    Shapes: src ``(b, s)``, src_len ``(b,)``, tgt_in and tgt_out ``(b, t)``, where
    ``tgt_in = <s> y_1 … y_m`` and ``tgt_out = y_1 … y_m </s>``; all padded with 0.
    """

    src: torch.Tensor
    src_len: torch.Tensor
    tgt_in: torch.Tensor
    tgt_out: torch.Tensor

    @property
    def src_mask(self) -> torch.Tensor:
        """``(b, s)`` bool, True at real source tokens (``<s>`` and ``</s>`` included)."""
        return self.src != PAD_ID

    @property
    def tgt_mask(self) -> torch.Tensor:
        """``(b, t)`` bool, True at the target positions that count in the loss."""
        return self.tgt_out != PAD_ID


def make_batch(pairs: Sequence[Pair], src_vocab: lm.Vocab,
               tgt_vocab: lm.Vocab) -> Batch:
    """Encode and pad token pairs into a :class:`Batch` (see its shapes)."""
    if not pairs:
        raise ValueError("make_batch() needs at least one (source, target) pair")
    src = [encode(s, src_vocab) for s, _ in pairs]
    tgt = [encode(t, tgt_vocab) for _, t in pairs]
    return Batch(pad(src), torch.tensor([len(s) for s in src]),
                 pad([t[:-1] for t in tgt]), pad([t[1:] for t in tgt]))


@dataclass
class TranslationData:
    """Tokenized train/validation/test pairs and their source and target vocabularies."""

    train: list[Pair]
    val: list[Pair]
    test: list[Pair]
    src_vocab: lm.Vocab
    tgt_vocab: lm.Vocab

    def batch(self, pairs: Sequence[Pair]) -> Batch:
        """``make_batch`` with this data's vocabularies."""
        return make_batch(pairs, self.src_vocab, self.tgt_vocab)

    def sampler(self, batch_size: int, seed: int = 0, by_length: bool = False):
        """A function ``step -> (src, src_len, tgt_in, tgt_out)`` for ``train.fit`` that
        goes through the training pairs in a new random order every epoch. It returns a
        plain tuple, which ``fit`` moves to the model's device.

        ``by_length=True`` sorts each run of ``64 · batch_size`` shuffled pairs by length
        before cutting it into batches, so a batch holds sentences of about one length and
        little padding, while the batches still come in random order.
        """
        if not 1 <= batch_size <= len(self.train):
            raise ValueError(f"batch_size must be in 1..{len(self.train)}; "
                             f"got {batch_size}")
        gen = torch.Generator().manual_seed(seed)
        queue: list[list[int]] = []

        def length(i: int) -> tuple[int, int]:
            return len(self.train[i][1]), len(self.train[i][0])

        def get(step: int):
            if not queue:  # a new epoch
                order = torch.randperm(len(self.train), generator=gen).tolist()
                if by_length:
                    pool = 64 * batch_size
                    order = [i for start in range(0, len(order), pool)
                             for i in sorted(order[start:start + pool], key=length)]
                cuts = range(0, len(order) - batch_size + 1, batch_size)
                queue.extend(order[c:c + batch_size] for c in cuts)
                shuffled = torch.randperm(len(queue), generator=gen).tolist()
                queue[:] = [queue[i] for i in shuffled]
            return tuple(self.batch([self.train[i] for i in queue.pop()]))

        return get

    def batches(self, pairs: Sequence[Pair], batch_size: int) -> Iterator[Batch]:
        """Consecutive batches of ``pairs`` in order (for evaluation)."""
        for start in range(0, len(pairs), batch_size):
            yield self.batch(pairs[start:start + batch_size])


def load(max_len: int = 12, n_words: int | None = 1_000, n_train: int | None = None,
         n_val: int = 1_000, n_test: int = 2_000, min_count: int = 2,
         seed: int = 0) -> TranslationData:
    """English → French pairs with at most ``max_len`` tokens per side, made of the
    ``n_words`` most common tokens of each language (None: any), split by ``seed``, with
    vocabularies of the training tokens seen at least ``min_count`` times."""
    pairs = filter_by_length(tokenize_pairs(data.fra_eng_pairs()), max_len)
    if n_words is not None:
        pairs = filter_by_vocab(pairs, n_words)
    train, val, test = split_pairs(pairs, n_val, n_test, seed=seed, n_train=n_train)
    return TranslationData(train, val, test,
                           build_vocab([s for s, _ in train], min_count),
                           build_vocab([t for _, t in train], min_count))
