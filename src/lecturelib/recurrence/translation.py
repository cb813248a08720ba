"""Translation data for chapters 4, 5 and 8: English–French pairs, ready for a model.

The pipeline, one small function per step::

    pairs = data.fra_eng_pairs()                    # (english, french) strings
    pairs = tokenize_pairs(pairs)                   # lower-cased words and punctuation
    pairs = filter_by_length(pairs, max_len=12)     # short sentences train on a CPU
    pairs = filter_by_vocab(pairs, n_words=1000)    # common words: a small softmax
    train, val, test = split_pairs(pairs, ...)      # seeded, disjoint by source text
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

from lecturelib import data
from lecturelib.recurrence import lm
from lecturelib.recurrence.rnn import pad_sequences

PAD, BOS, EOS, UNK = "<pad>", "<s>", "</s>", "<unk>"
SPECIALS = (PAD, BOS, EOS, UNK)
PAD_ID, BOS_ID, EOS_ID, UNK_ID = range(4)

Tokens = list[str]
Pair = tuple[Tokens, Tokens]

# a token: a word cut after an apostrophe (l'|air, j'|ai), a word, or one other symbol
TOKEN_RE = re.compile(r"\w+'|\w+|[^\w\s]")


def _int(value, name: str, func: str, low: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(
            f"{func}(): {name} must be an int; got {value!r} ({type(value).__name__})"
        )
    if value < low:
        raise ValueError(f"{func}(): {name} must be >= {low}; got {value}")
    return value


def _tokens(tokens, name: str, func: str) -> None:
    """Refuse a string (it would be read as characters) or anything but a list of
    str."""
    if isinstance(tokens, str):
        raise TypeError(
            f"{func}(): {name} must be a list of tokens; "
            f"got the str {tokens[:40]!r} "
            f"(call tokenize() on a string first)"
        )
    if not isinstance(tokens, (list, tuple)):
        raise TypeError(
            f"{func}(): {name} must be a list of tokens; got {type(tokens).__name__}"
        )


def _token_pairs(pairs, func: str) -> None:
    """Refuse anything but a sequence of (source tokens, target tokens) pairs."""
    if isinstance(pairs, str) or not isinstance(pairs, Sequence):
        raise TypeError(
            f"{func}(): pairs must be a list of "
            f"(source tokens, target tokens) pairs; "
            f"got {type(pairs).__name__}"
        )
    seq = (list, tuple)
    for i, pair in enumerate(pairs):
        if (
            isinstance(pair, seq)
            and len(pair) == 2
            and isinstance(pair[0], seq)
            and isinstance(pair[1], seq)
        ):
            continue
        if not isinstance(pair, seq) or len(pair) != 2:
            raise ValueError(
                f"{func}(): pairs[{i}] must be a "
                f"(source tokens, target tokens) pair; got {pair!r:.60}"
            )
        _tokens(pair[0], f"pairs[{i}][0]", func)
        _tokens(pair[1], f"pairs[{i}][1]", func)


def _vocab(vocab, name: str, func: str) -> None:
    if not isinstance(vocab, lm.Vocab):
        raise TypeError(
            f"{func}(): {name} must be a lecturelib.recurrence.lm.Vocab "
            f"(see build_vocab); got {type(vocab).__name__}"
        )


def tokenize(text: str) -> Tokens:
    """Lower-case ``text`` and split it into words and punctuation marks.

    >>> tokenize("Tu n'as pas l'air occupé !")
    ['tu', "n'", 'as', 'pas', "l'", 'air', 'occupé', '!']
    """
    if not isinstance(text, str):
        raise TypeError(
            f"tokenize(): text must be a str; got {type(text).__name__} "
            f"(a list of tokens is already tokenized)"
        )
    return TOKEN_RE.findall(text.lower().replace("’", "'"))


def detokenize(tokens: Sequence[str]) -> str:
    """Join tokens for display: no space after an apostrophe, around a hyphen, or before
    ``.`` and ``,``.

    >>> detokenize(["est", "-", "ce", "que", "tu", "n'", "as", "pas", "l'", "air", "."])
    "est-ce que tu n'as pas l'air."
    """
    _tokens(tokens, "tokens", "detokenize")
    _str_tokens(tokens, "tokens", "detokenize")
    text = " ".join(tokens).replace("' ", "'").replace(" - ", "-")
    return re.sub(r" ([.,])", r"\1", text)


def tokenize_pairs(pairs: Sequence[tuple[str, str]]) -> list[Pair]:
    """Tokenize both sides of ``(source, target)`` string pairs."""
    if isinstance(pairs, str) or not isinstance(pairs, Sequence):
        raise TypeError(
            f"tokenize_pairs(): pairs must be a list of (source, target) "
            f"string pairs; got {type(pairs).__name__}"
        )
    for i, pair in enumerate(pairs):
        if not (
            isinstance(pair, (tuple, list))
            and len(pair) == 2
            and isinstance(pair[0], str)
            and isinstance(pair[1], str)
        ):
            raise ValueError(
                f"tokenize_pairs(): pairs[{i}] must be a (source, target) "
                f"pair of str; got {pair!r:.60}"
            )
    return [(tokenize(src), tokenize(tgt)) for src, tgt in pairs]


def filter_by_length(
    pairs: Sequence[Pair], max_len: int, min_len: int = 1
) -> list[Pair]:
    """Keep the pairs whose source and target both have ``min_len..max_len`` tokens."""
    _int(min_len, "min_len", "filter_by_length")
    _int(max_len, "max_len", "filter_by_length")
    if min_len > max_len:
        raise ValueError(
            f"filter_by_length(): need 1 <= min_len <= max_len; "
            f"got min_len={min_len}, max_len={max_len}"
        )
    _token_pairs(pairs, "filter_by_length")
    return _by_length(pairs, max_len, min_len)


def _by_length(pairs: Sequence[Pair], max_len: int, min_len: int = 1) -> list[Pair]:
    return [
        (s, t)
        for s, t in pairs
        if min_len <= len(s) <= max_len and min_len <= len(t) <= max_len
    ]


def filter_by_vocab(pairs: Sequence[Pair], n_words: int) -> list[Pair]:
    """Keep the pairs made only of the ``n_words`` most frequent tokens of each language
    (counted over ``pairs``), so that no sentence needs ``<unk>`` and the softmax stays
    small."""
    _int(n_words, "n_words", "filter_by_vocab")
    _token_pairs(pairs, "filter_by_vocab")
    return _by_vocab(pairs, n_words)


def _by_vocab(pairs: Sequence[Pair], n_words: int) -> list[Pair]:
    common = []
    for side in (0, 1):
        counts = Counter(tok for pair in pairs for tok in pair[side])
        common.append({tok for tok, _ in counts.most_common(n_words)})
    return [
        (s, t)
        for s, t in pairs
        if all(tok in common[0] for tok in s) and all(tok in common[1] for tok in t)
    ]


def split_pairs(
    pairs: Sequence[Pair],
    n_val: int,
    n_test: int,
    seed: int = 0,
    n_train: int | None = None,
) -> tuple[list[Pair], list[Pair], list[Pair]]:
    """A seeded random split into train, validation and test sets.

    All translations of one source sentence land in the same set, so no test sentence
    was seen in training. ``n_val`` and ``n_test`` count pairs (whole groups are taken
    until the count is reached); ``n_train`` caps the training set (``None``: all the
    rest).
    """
    _split_sizes(n_val, n_test, n_train, seed, "split_pairs")
    _token_pairs(pairs, "split_pairs")
    return _split(pairs, n_val, n_test, seed, n_train)


def _split(
    pairs: Sequence[Pair], n_val: int, n_test: int, seed: int, n_train: int | None
) -> tuple[list[Pair], list[Pair], list[Pair]]:
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
        raise ValueError(
            f"pairs: {len(pairs)} pairs are too few for n_val={n_val} "
            f"validation and n_test={n_test} test pairs and a training "
            f"set"
        )
    return train, val, test


def _split_sizes(n_val, n_test, n_train, seed, func: str) -> None:
    _int(n_val, "n_val", func)
    _int(n_test, "n_test", func)
    if n_train is not None:
        _int(n_train, "n_train", func)
    _int(seed, "seed", func, low=-(2**63))


def build_vocab(sentences: Sequence[Tokens], min_count: int = 1) -> lm.Vocab:
    """A :class:`lecturelib.recurrence.lm.Vocab` of the tokens seen at least ``min_count`` times,
    with ``<pad> <s> </s> <unk>`` at ids ``0 1 2 3``; rarer tokens encode as
    ``<unk>``."""
    if isinstance(sentences, str) or not isinstance(sentences, Sequence):
        raise TypeError(
            f"build_vocab(): sentences must be a list of token lists; got "
            f"{type(sentences).__name__}"
        )
    for i, sent in enumerate(sentences):
        _tokens(sent, f"sentences[{i}]", "build_vocab")
        _str_tokens(sent, f"sentences[{i}]", "build_vocab")
    _int(min_count, "min_count", "build_vocab")
    return _build_vocab(sentences, min_count)


def _build_vocab(sentences: Sequence[Tokens], min_count: int) -> lm.Vocab:
    tokens = (tok for sent in sentences for tok in sent)
    vocab = lm.Vocab(tokens, min_count=min_count, unk=UNK)
    vocab.itos = list(SPECIALS) + [s for s in vocab.itos if s not in SPECIALS]
    vocab.stoi = {s: i for i, s in enumerate(vocab.itos)}
    return vocab


def encode(tokens: Sequence[str], vocab: lm.Vocab) -> torch.Tensor:
    """``<s> tokens </s>`` as ids. Shapes: ``m`` tokens → ``(m + 2,)`` long."""
    _tokens(tokens, "tokens", "encode")
    _vocab(vocab, "vocab", "encode")
    _str_tokens(tokens, "tokens", "encode")
    return _encode(tokens, vocab)


def _str_tokens(tokens: Sequence, name: str, func: str) -> None:
    if not all(isinstance(tok, str) for tok in tokens):
        i, tok = next(
            (i, tok) for i, tok in enumerate(tokens) if not isinstance(tok, str)
        )
        raise TypeError(
            f"{func}(): {name}[{i}] must be a str; got {tok!r} ({type(tok).__name__})"
        )


def _encode(tokens: Sequence[str], vocab: lm.Vocab) -> torch.Tensor:
    return torch.cat(
        [torch.tensor([BOS_ID]), vocab.encode(tokens), torch.tensor([EOS_ID])]
    )


def _ids(ids, vocab_size: int, func: str) -> list[int]:
    """``ids`` as a list of ints in ``0..vocab_size-1``; floats, bools, other shapes and
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
    """Tokens of ``ids`` up to the first ``</s>``, without ``<s>`` and ``<pad>``.

    Shapes: ids ``(t,)`` → at most ``t`` tokens.
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
    """Right-pad 1-D id tensors with ``<pad>`` (id 0).

    Shapes: ``b`` tensors ``(t_i,)`` → ``(b, max t_i)``.
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

    Shapes: src ``(b, s)``, src_len ``(b,)``, tgt_in and tgt_out ``(b, t)``, where
    ``tgt_in = <s> y_1 … y_m`` and ``tgt_out = y_1 … y_m </s>``; all padded with 0.
    """

    src: torch.Tensor
    src_len: torch.Tensor
    tgt_in: torch.Tensor
    tgt_out: torch.Tensor

    @property
    def src_mask(self) -> torch.Tensor:
        """``(b, s)`` bool, True at real source tokens (``<s>`` and ``</s>``
        included)."""
        return self.src != PAD_ID

    @property
    def tgt_mask(self) -> torch.Tensor:
        """``(b, t)`` bool, True at the target positions that count in the loss."""
        return self.tgt_out != PAD_ID


def check_pairs(
    pairs: Sequence[Pair],
    src_vocab: lm.Vocab,
    tgt_vocab: lm.Vocab,
    func: str = "make_batch",
) -> None:
    """Refuse anything but a non-empty list of (source tokens, target tokens) pairs of
    str tokens with two :class:`lecturelib.recurrence.lm.Vocab` s, naming what was expected."""
    _token_pairs(pairs, func)
    if not pairs:
        raise ValueError(
            f"{func}(): pairs must hold at least one (source, target) pair; got none"
        )
    _vocab(src_vocab, "src_vocab", func)
    _vocab(tgt_vocab, "tgt_vocab", func)
    for i, (s, t) in enumerate(pairs):
        _str_tokens(s, f"pairs[{i}][0]", func)
        _str_tokens(t, f"pairs[{i}][1]", func)


def make_batch(
    pairs: Sequence[Pair], src_vocab: lm.Vocab, tgt_vocab: lm.Vocab
) -> Batch:
    """Encode and pad token pairs into a :class:`Batch` (see its shapes)."""
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
        """``make_batch`` with this data's vocabularies."""
        return make_batch(pairs, self.src_vocab, self.tgt_vocab)

    def sampler(self, batch_size: int, seed: int = 0, by_length: bool = False):
        """A function ``step -> (src, src_len, tgt_in, tgt_out)`` for ``train.fit`` that
        goes through the training pairs in a new random order every epoch. It returns a
        plain tuple, which ``fit`` moves to the model's device.

        ``by_length=True`` sorts each run of ``64 · batch_size`` shuffled pairs by
        length before cutting it into batches, so a batch holds sentences of about one
        length and little padding, while the batches still come in random order.
        """
        _int(batch_size, "batch_size", "sampler")
        _int(seed, "seed", "sampler", low=-(2**63))
        if batch_size > len(self.train):
            raise ValueError(
                f"sampler(): batch_size must be in 1..{len(self.train)} "
                f"(the training pairs); got {batch_size}"
            )
        if not isinstance(by_length, bool):
            raise TypeError(f"sampler(): by_length must be a bool; got {by_length!r}")
        _token_pairs(self.train, "sampler")
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
            return tuple(make_batch(pairs, self.src_vocab, self.tgt_vocab))

        return get

    def batches(self, pairs: Sequence[Pair], batch_size: int) -> Iterator[Batch]:
        """Consecutive batches of ``pairs`` in order (for evaluation)."""
        _int(batch_size, "batch_size", "batches")
        _token_pairs(pairs, "batches")
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
    """English → French pairs with at most ``max_len`` tokens per side, made of the
    ``n_words`` most common tokens of each language (None: any), split by ``seed``, with
    vocabularies of the training tokens seen at least ``min_count`` times."""
    _int(max_len, "max_len", "load")
    if n_words is not None:
        _int(n_words, "n_words", "load")
    _int(min_count, "min_count", "load")
    _split_sizes(n_val, n_test, n_train, seed, "load")
    pairs = [(tokenize(src), tokenize(tgt)) for src, tgt in data.fra_eng_pairs()]
    pairs = _by_length(pairs, max_len)
    if n_words is not None:
        pairs = _by_vocab(pairs, n_words)
    train, val, test = _split(pairs, n_val, n_test, seed, n_train)
    return TranslationData(
        train,
        val,
        test,
        _build_vocab([s for s, _ in train], min_count),
        _build_vocab([t for _, t in train], min_count),
    )
