"""Unigram and SentencePiece (chapter 9): a language model over pieces, and raw text
with the space as a symbol.

- **Unigram** (Kudo 2018, arXiv:1804.10959) is a language model over pieces: a word's
  probability is the sum, over its segmentations, of the product of their pieces'
  probabilities, and a word is encoded by its most probable segmentation (Viterbi).
  Training starts from many frequent substrings and alternates EM steps, whose E-step
  takes expected counts by forward-backward over all segmentations, with pruning the
  pieces whose loss would cost the likelihood least.
- **SentencePiece** (Kudo and Richardson 2018, arXiv:1808.06226) trains on raw text:
  the space is a symbol of its own, `▁`, so pieces carry their spaces and decoding
  is joining them; BPE or Unigram then needs no language-specific pre-tokenizer.

>>> viterbi("abab", {"a": -1.0, "b": -1.0, "ab": -1.5}, unk_log_prob=-20.0)
['ab', 'ab']
>>> sentencepiece_words("It was  the best")
['It', '▁was', '▁', '▁the', '▁best']

Simplifications: no Unicode normalisation (SentencePiece applies NFKC and turns
newlines into spaces; we keep a newline as a word of its own), no dummy `▁` before
the first word, no byte fallback, a maximum-likelihood M-step in which a character
keeps a tiny count (SentencePiece's trainer uses a Bayesian update with the digamma
function and adds missing characters back at the end), and a pruning loss from the
probabilities alone: each piece is replaced by its best segmentation into the other
pieces, as in SentencePiece, and weighted by its probability, not its Viterbi count.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

import regex

from lecturelib.validate import (
    check_int,
    check_number,
    check_type,
    describe,
    is_real,
)

SPACE = "\u2581"  # ▁, SentencePiece's symbol for the space
SP_WORD = regex.compile(f"{SPACE}?[^{SPACE}\\s]+|{SPACE}|\\s")


def sentencepiece_words(text: str) -> list[str]:
    """Words: a space becomes `▁` and starts a word; other whitespace is a word alone.
    Example: "It was  the best" -> ['It', '▁was', '▁', '▁the', '▁best']"""
    check_type(text, "text", str, "a str")
    return SP_WORD.findall(text.replace(" ", SPACE))


def check_log_probs(log_probs) -> None:
    """Pieces and their log-probabilities: a non-empty dict of str -> float <= 0."""
    if not isinstance(log_probs, dict) or not log_probs:
        raise TypeError(
            f"log_probs must be a non-empty dict {{piece: log-probability}}; got "
            f"{describe(log_probs)}"
        )
    for piece, lp in log_probs.items():
        if not isinstance(piece, str) or not piece:
            raise TypeError(f"log_probs' pieces must be non-empty str; got {piece!r}")
        check_number(lp, f"log_probs[{piece!r}]", -math.inf, 0.0)


def check_lattice(word, log_probs) -> None:
    """A word and the pieces to cut it into (each piece is checked where the pieces are
    made: checking them all here would cost more than the search)."""
    check_type(word, "word", str, "a str")
    check_type(log_probs, "log_probs", dict, "a dict {piece: log-probability}")


def check_viterbi(word, log_probs, unk_log_prob) -> None:
    check_lattice(word, log_probs)
    check_number(unk_log_prob, "unk_log_prob", -math.inf)


def viterbi(word: str, log_probs: dict[str, float], unk_log_prob: float) -> list[str]:
    """The most probable segmentation of `word`; a non-piece character: unk_log_prob."""
    check_viterbi(word, log_probs, unk_log_prob)
    n = len(word)
    best = [0.0] + [-math.inf] * n  # best[end]: log-prob of the best cut of word[:end]
    start_of = [0] * (n + 1)  # where the last piece of that cut starts
    for end in range(1, n + 1):
        for start in range(end):
            piece = word[start:end]
            if piece in log_probs:
                score = best[start] + log_probs[piece]
            elif end - start == 1:  # a character that no piece covers
                score = best[start] + unk_log_prob
            else:
                continue
            if score > best[end]:
                best[end], start_of[end] = score, start
    pieces, end = [], n
    while end > 0:
        pieces.append(word[start_of[end] : end])
        end = start_of[end]
    return pieces[::-1]


def logaddexp(a: float, b: float) -> float:
    """log(exp(a) + exp(b)) without overflow; -inf stands for probability 0."""
    if a < b:
        a, b = b, a
    return a if b == -math.inf else a + math.log1p(math.exp(b - a))


def forward_backward(
    word: str, log_probs: dict[str, float]
) -> tuple[float, dict[str, float]]:
    """log p(word) over all segmentations, and each piece's expected count in one."""
    check_lattice(word, log_probs)
    n = len(word)
    edges = [  # (start, end, piece), ordered by end
        (s, e, piece)
        for e in range(1, n + 1)
        for s in range(e)
        if (piece := word[s:e]) in log_probs
    ]
    alpha = [0.0] + [-math.inf] * n  # alpha[i]: log-prob of all cuts of word[:i]
    for s, e, piece in edges:
        alpha[e] = logaddexp(alpha[e], alpha[s] + log_probs[piece])
    beta = [-math.inf] * n + [0.0]  # beta[i]: log-prob of all cuts of word[i:]
    for s, e, piece in reversed(edges):
        beta[s] = logaddexp(beta[s], log_probs[piece] + beta[e])
    counts: dict[str, float] = Counter()
    for s, e, piece in edges:  # posterior of using this piece at this place
        counts[piece] += math.exp(alpha[s] + log_probs[piece] + beta[e] - alpha[n])
    return alpha[n], counts


def check_word_counts(words, freqs) -> None:
    """Distinct words (a list of str) and one count (a number > 0) per word."""
    if not isinstance(words, (list, tuple)) or not all(
        isinstance(w, str) for w in words
    ):
        raise TypeError(f"words must be a list of str; got {describe(words)}")
    if not isinstance(freqs, (list, tuple)) or len(freqs) != len(words):
        raise ValueError(
            f"freqs must hold one count per word ({len(words)}); got {describe(freqs)}"
        )
    bad = [f for f in freqs if not (is_real(f) and f > 0)]
    if bad:
        raise ValueError(f"freqs must be counts > 0; got {bad[:5]}")


def check_em(words, freqs, log_probs) -> None:
    """The arguments of `em_step`: words whose characters are all pieces, and one
    count per word."""
    check_log_probs(log_probs)
    check_word_counts(words, freqs)
    missing = sorted({c for w in words for c in w} - set(log_probs))
    if missing:
        raise ValueError(
            f"every character of the words must be a piece; missing {missing[:5]}"
        )


def em_step(
    words: list[str], freqs: list[int], log_probs: dict[str, float]
) -> tuple[dict[str, float], float]:
    """One EM step: new log-probabilities from the pieces' expected counts, and the
    log-likelihood of the words under the old ones."""
    check_em(words, freqs, log_probs)
    # a character keeps a tiny count, so that no word becomes impossible to spell
    counts = Counter({piece: 1e-9 for piece in log_probs if len(piece) == 1})
    log_likelihood = 0.0
    for word, f in zip(words, freqs):
        log_z, expected = forward_backward(word, log_probs)
        log_likelihood += f * log_z
        for piece, c in expected.items():
            counts[piece] += f * c
    total = sum(counts.values())
    new = {piece: math.log(c / total) for piece, c in counts.items() if c > 0}
    return new, log_likelihood


def check_prune(log_probs, size) -> None:
    check_log_probs(log_probs)
    n_chars = sum(len(p) == 1 for p in log_probs)
    check_int(size, "size", max(n_chars, 1))


def prune(log_probs: dict[str, float], size: int) -> dict[str, float]:
    """A new dict of `size` pieces, renormalised: every character, then the pieces whose
    removal would cost the most likelihood."""
    check_prune(log_probs, size)
    log_probs = dict(log_probs)
    losses = {}
    for piece in [p for p in log_probs if len(p) > 1]:
        lp = log_probs.pop(piece)  # the piece's best cut without itself
        alternative = viterbi(piece, log_probs, -1e9)  # (all characters are pieces)
        log_probs[piece] = lp
        losses[piece] = math.exp(lp) * (lp - sum(log_probs[a] for a in alternative))
    chars = [p for p in log_probs if len(p) == 1]
    kept = chars + sorted(losses, key=lambda p: (-losses[p], p))[: size - len(chars)]
    log_total = math.log(sum(math.exp(log_probs[p]) for p in kept))
    return {p: log_probs[p] - log_total for p in kept}


def seed_pieces(
    words: list[str], freqs: list[int], size: int, max_len: int = 16
) -> dict[str, float]:
    """The initial vocabulary: every character and the most frequent longer substrings
    of the words (up to `max_len` characters, ranked by count times length as in
    SentencePiece), `size` pieces in all, with probabilities proportional to
    counts."""
    check_word_counts(words, freqs)
    check_int(size, "size", 1)
    check_int(max_len, "max_len", 1)
    counts = Counter()
    for word, f in zip(words, freqs):
        for s in range(len(word)):
            for e in range(s + 1, min(len(word), s + max_len) + 1):
                counts[word[s:e]] += f
    chars = [p for p in counts if len(p) == 1]
    longer = sorted(
        (p for p in counts if len(p) > 1), key=lambda p: (-counts[p] * len(p), p)
    )
    kept = chars + longer[: max(0, size - len(chars))]
    total = sum(counts[p] for p in kept)
    return {p: math.log(counts[p] / total) for p in kept}


@dataclass
class Unigram:
    """A Unigram tokenizer: a log-probability per piece; each word of
    `sentencepiece_words` is cut by `viterbi`. A character that is not a
    piece costs `min(log_probs) - 10`, as in `tokenizers`' `Unigram`.

    `history` holds `(pieces, log-likelihood)` before each EM step of training.
    Types: `tokens(str) -> list[str]`, `decode(list[str]) -> str`.
    """

    log_probs: dict[str, float]
    history: list[tuple[int, float]] = field(default_factory=list)
    _cache: dict[str, list[str]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def __post_init__(self):
        check_log_probs(self.log_probs)
        self.unk_log_prob = min(self.log_probs.values()) - 10.0

    @property
    def vocab_size(self) -> int:
        return len(self.log_probs)

    def tokens(self, text: str) -> list[str]:
        """The pieces of `text`; an unknown character is a piece of its own."""
        out = []
        for word in sentencepiece_words(text):
            if word not in self._cache:
                self._cache[word] = viterbi(word, self.log_probs, self.unk_log_prob)
            out += self._cache[word]
        return out

    def decode(self, pieces: list[str]) -> str:
        """The text of `pieces`: joined, with `▁` back to a space."""
        if not isinstance(pieces, (list, tuple)) or not all(
            isinstance(p, str) for p in pieces
        ):
            raise TypeError(f"pieces must be a list of str; got {describe(pieces)}")
        return "".join(pieces).replace(SPACE, " ")


def check_unigram_training(text, vocab_size, seed_size, shrink, n_em) -> None:
    check_type(text, "text", str, "a str")
    check_int(vocab_size, "vocab_size", 1)
    n_chars = len(set(text.replace(" ", SPACE)))
    if vocab_size < n_chars:
        raise ValueError(
            f"vocab_size must be at least the {n_chars} distinct characters of text "
            f"(every character stays a piece); got {vocab_size}"
        )
    if seed_size is not None:
        check_int(seed_size, "seed_size", vocab_size)
    check_number(shrink, "shrink", 0.0, 1.0, low_open=True)
    if shrink == 1.0:
        raise ValueError(
            "shrink must be below 1 (each round must drop pieces); got 1.0"
        )
    check_int(n_em, "n_em", 1)


def train_unigram(
    text: str,
    vocab_size: int,
    seed_size: int | None = None,
    shrink: float = 0.75,
    n_em: int = 2,
) -> Unigram:
    """Unigram training: `seed_size` pieces, then rounds of `n_em` EM steps and pruning
    by `shrink` down to `vocab_size` pieces; a last round of EM."""
    check_unigram_training(text, vocab_size, seed_size, shrink, n_em)
    counts = Counter(sentencepiece_words(text))
    words, freqs = list(counts), list(counts.values())
    log_probs = seed_pieces(words, freqs, seed_size or 4 * vocab_size)
    history = []
    while True:
        for _ in range(n_em):
            new, log_likelihood = em_step(words, freqs, log_probs)
            history.append((len(log_probs), log_likelihood))
            log_probs = new
        if len(log_probs) <= vocab_size:
            return Unigram(log_probs, history)
        log_probs = prune(log_probs, max(vocab_size, int(shrink * len(log_probs))))
