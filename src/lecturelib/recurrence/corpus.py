"""Translation data, chapter 4: from sentence pairs to tokenized, filtered and split pairs.

- `tokenize` splits a sentence into lower-cased words and punctuation marks
  (`detokenize` joins them back for display), `tokenize_pairs` does both
  sides of `(source, target)` pairs;
- `filter_by_length` and `filter_by_vocab` keep short sentences made of
  common words, so that a model trains on a CPU with a small softmax;
- `split_pairs` makes a seeded train/validation/test split, disjoint by source
  sentence.

`translation` turns the pairs into ids and padded batches; `translation.load` runs
the whole pipeline.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Sequence

from lecturelib.validate import check_int

Tokens = list[str]
Pair = tuple[Tokens, Tokens]

# a token: a word cut after an apostrophe (l'|air, j'|ai), a word, or one other symbol
TOKEN_RE = re.compile(r"\w+'|\w+|[^\w\s]")


def check_tokens(tokens, name: str, func: str) -> None:
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


def check_token_pairs(pairs, func: str) -> None:
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
        check_tokens(pair[0], f"pairs[{i}][0]", func)
        check_tokens(pair[1], f"pairs[{i}][1]", func)


def check_str_tokens(tokens: Sequence, name: str, func: str) -> None:
    if not all(isinstance(tok, str) for tok in tokens):
        i, tok = next(
            (i, tok) for i, tok in enumerate(tokens) if not isinstance(tok, str)
        )
        raise TypeError(
            f"{func}(): {name}[{i}] must be a str; got {tok!r} ({type(tok).__name__})"
        )


def check_token_lists(sentences, name: str) -> None:
    """Raise a TypeError naming `name` unless `sentences` is a sequence of token
    lists (a string would be read as a list of characters)."""
    if isinstance(sentences, str) or not isinstance(sentences, Sequence):
        raise TypeError(
            f"{name} must be a list of token lists; got {type(sentences).__name__}"
        )
    for i, sent in enumerate(sentences):
        if (
            isinstance(sent, str)
            or not isinstance(sent, Sequence)
            or not all(isinstance(tok, str) for tok in sent)
        ):
            raise TypeError(
                f"{name}[{i}] must be a list of str tokens (split the text "
                f"first); got {sent!r:.60}"
            )


def check_text(text) -> None:
    """`tokenize` reads a str."""
    if not isinstance(text, str):
        raise TypeError(
            f"tokenize(): text must be a str; got {type(text).__name__} "
            f"(a list of tokens is already tokenized)"
        )


def tokenize(text: str) -> Tokens:
    """Lower-case `text` (’ read as ') and split it into words and punctuation marks.
    tokenize("Tu n'as pas l'air !") == ['tu', "n'", 'as', 'pas', "l'", 'air', '!']"""
    check_text(text)
    return TOKEN_RE.findall(text.lower().replace("’", "'"))


def detokenize(tokens: Sequence[str]) -> str:
    """Join tokens for display: no space after an apostrophe, around a hyphen, or before
    `.` and `,`.

    >>> detokenize(["est", "-", "ce", "que", "tu", "n'", "as", "pas", "l'", "air", "."])
    "est-ce que tu n'as pas l'air."
    """
    check_tokens(tokens, "tokens", "detokenize")
    check_str_tokens(tokens, "tokens", "detokenize")
    text = " ".join(tokens).replace("' ", "'").replace(" - ", "-")
    return re.sub(r" ([.,])", r"\1", text)


def tokenize_pairs(pairs: Sequence[tuple[str, str]]) -> list[Pair]:
    """Tokenize both sides of `(source, target)` string pairs."""
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
    """Keep the pairs whose source and target both have `min_len..max_len` tokens."""
    check_int(min_len, "min_len", 1)
    check_int(max_len, "max_len", 1)
    if min_len > max_len:
        raise ValueError(
            f"filter_by_length(): need 1 <= min_len <= max_len; "
            f"got min_len={min_len}, max_len={max_len}"
        )
    check_token_pairs(pairs, "filter_by_length")
    return _by_length(pairs, max_len, min_len)


def _by_length(pairs: Sequence[Pair], max_len: int, min_len: int = 1) -> list[Pair]:
    return [
        (s, t)
        for s, t in pairs
        if min_len <= len(s) <= max_len and min_len <= len(t) <= max_len
    ]


def filter_by_vocab(pairs: Sequence[Pair], n_words: int) -> list[Pair]:
    """Keep the pairs made only of the `n_words` most frequent tokens of each language
    (counted over `pairs`), so that no sentence needs `<unk>` and the softmax stays
    small."""
    check_int(n_words, "n_words", 1)
    check_token_pairs(pairs, "filter_by_vocab")
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
    was seen in training. `n_val` and `n_test` count pairs (whole groups are taken
    until the count is reached); `n_train` caps the training set (`None`: all the
    rest).
    """
    check_split_sizes(n_val, n_test, n_train, seed, "split_pairs")
    check_token_pairs(pairs, "split_pairs")
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


def check_split_sizes(n_val, n_test, n_train, seed, func: str) -> None:
    check_int(n_val, "n_val", 1)
    check_int(n_test, "n_test", 1)
    if n_train is not None:
        check_int(n_train, "n_train", 1)
    check_int(seed, "seed", -(2**63))
