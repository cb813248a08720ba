"""WordPiece (chapter 9): the sub-word tokenizer of BERT.

WordPiece (Schuster and Nakajima 2012, "Japanese and Korean Voice Search"; Wu et al. 2016,
arXiv:1609.08144) writes `##` before a piece that continues a word and encodes a word
greedily, longest piece first; a word that its vocabulary cannot cover becomes `[UNK]`.
Training merges pairs as BPE does, but picks the merge that raises the likelihood of the
training words most under a unigram model of the pieces; the usual approximation, used
here, scores a pair by count(ab) / (count(a) count(b)). (The `WordPieceTrainer` of
Hugging Face `tokenizers` runs its BPE trainer, which merges by count; our trainers offer
both scores, and we check our encoder against the `WordPiece` model of `tokenizers`.)

>>> wordpiece_encode("unaffable", {"un", "##aff", "##able"})
['un', '##aff', '##able']
"""

from __future__ import annotations

import heapq
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import regex

from lecturelib.validate import (
    check_choice,
    check_int,
    check_type,
    describe,
    is_int,
)

CONTINUATION = "##"  # WordPiece's mark of a piece inside a word
UNK = "[UNK]"
# BERT's pre-tokenization: runs of non-space characters, with each punctuation mark or
# symbol a word of its own; whitespace is dropped.
BERT_WORD = regex.compile(r"[^\s\p{P}\p{S}]+|[\p{P}\p{S}]")


def split_words(text: str) -> list[str]:
    """BERT's pre-tokenization: words and punctuation marks, without the whitespace (so
    the text cannot be restored exactly).

    >>> split_words("Hello, world!")
    ['Hello', ',', 'world', '!']
    """
    check_type(text, "text", str, "a str")
    return BERT_WORD.findall(text)


def check_wordpiece(word, vocab, max_chars) -> None:
    """The arguments of `wordpiece_encode`: a str, a set of pieces, an int."""
    check_type(word, "word", str, "a str")
    check_type(vocab, "vocab", (set, frozenset, dict), "a set of str pieces")
    check_int(max_chars, "max_chars", 1)


def wordpiece_encode(word: str, vocab: set[str], max_chars: int = 100) -> list[str]:
    """The pieces of `word`, longest first, `##` inside; `[UNK]` if uncovered or long.
    Example: "unaffable", {"un", "##aff", "##able"} -> ['un', '##aff', '##able']"""
    check_wordpiece(word, vocab, max_chars)
    if len(word) > max_chars:
        return [UNK]
    pieces, start = [], 0
    while start < len(word):
        end = len(word)
        while end > start:  # the longest piece that starts here
            piece = word[start:end] if start == 0 else CONTINUATION + word[start:end]
            if piece in vocab:
                break
            end -= 1
        if end == start:  # not even one character is a piece: the word is unknown
            return [UNK]
        pieces.append(piece)
        start = end
    return pieces


def check_vocab(vocab) -> None:
    """A WordPiece vocabulary: a list of distinct str pieces that holds `[UNK]`."""
    if not isinstance(vocab, (list, tuple)) or not all(
        isinstance(p, str) for p in vocab
    ):
        raise TypeError(f"vocab must be a list of str pieces; got {describe(vocab)}")
    if UNK not in vocab or len(set(vocab)) != len(vocab):
        raise ValueError(
            f"vocab must hold {UNK!r} and no piece twice; got {len(vocab)} pieces, "
            f"{len(set(vocab))} distinct, {UNK!r} {'in' if UNK in vocab else 'missing'}"
        )


@dataclass
class WordPiece:
    """A WordPiece tokenizer: its pieces (token `i` is `vocab[i]`), BERT's
    pre-tokenization and `wordpiece_encode` on each word.

    Types: `tokens(str) -> list[str]`, `encode(str) -> list[int]`,
    `decode(list[int]) -> str` (words joined by single spaces).
    """

    vocab: list[str]
    max_chars: int = 100
    _cache: dict[str, list[str]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def __post_init__(self):
        check_vocab(self.vocab)
        check_int(self.max_chars, "max_chars", 1)
        self.ids = {piece: i for i, piece in enumerate(self.vocab)}

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def tokens(self, text: str) -> list[str]:
        """The pieces of `text`: each word of `split_words`, encoded."""
        out = []
        for word in split_words(text):
            if word not in self._cache:
                self._cache[word] = wordpiece_encode(word, self.ids, self.max_chars)
            out += self._cache[word]
        return out

    def encode(self, text: str) -> list[int]:
        return [self.ids[piece] for piece in self.tokens(text)]

    def decode(self, ids: list[int]) -> str:
        """The words of `ids`: a `##` piece joins the word before it."""
        if not all(is_int(i) and 0 <= i < len(self.vocab) for i in ids):
            last = len(self.vocab) - 1
            raise ValueError(f"ids must be token ids in 0..{last}; got {describe(ids)}")
        text = " ".join(self.vocab[i] for i in ids)
        return text.replace(" " + CONTINUATION, "")


def check_training(text, vocab_size, low: int) -> None:
    check_type(text, "text", str, "a str")
    check_int(vocab_size, "vocab_size", low)


def merge_pieces(pieces: list[str], pair: tuple[str, str], new: str) -> list[str]:
    """Replace each occurrence of `pair` in `pieces` by `new`, left to right."""
    out, i = [], 0
    while i < len(pieces):
        if i + 1 < len(pieces) and (pieces[i], pieces[i + 1]) == pair:
            out.append(new)
            i += 2
        else:
            out.append(pieces[i])
            i += 1
    return out


def wordpiece_start(text: str) -> tuple[list[list[str]], list[int], list[str]]:
    """The distinct words of `text` spelled in characters (`##c` inside a word),
    their counts, and the first vocabulary: `[UNK]` and those characters."""
    counts = Counter(split_words(text))
    words = [[w[0]] + [CONTINUATION + c for c in w[1:]] for w in counts]
    return words, list(counts.values()), [UNK, *sorted({p for w in words for p in w})]


def check_wordpiece_training(text, vocab_size, score) -> None:
    check_training(text, vocab_size, 1)
    check_choice(score, "score", ("ratio", "count"))


def pair_score(pair: tuple[str, str], pairs: Counter, units: Counter, score: str):
    """What merging `pair` is worth: `"ratio"`, count(ab) / (count(a) count(b));
    `"count"`, count(ab)."""
    a, b = pair
    return pairs[pair] / (units[a] * units[b]) if score == "ratio" else pairs[pair]


def train_wordpiece_plain(text: str, vocab_size: int, score: str = "ratio"):
    """A `WordPiece` vocabulary: `[UNK]`, the characters, then best-`pair_score` merges,
    recounted before each, until `vocab_size` pieces or no pair is left."""
    check_wordpiece_training(text, vocab_size, score)
    words, freqs, vocab = wordpiece_start(text)
    while len(vocab) < vocab_size:
        units, pairs = Counter(), Counter()
        for w, f in zip(words, freqs):
            for piece in w:
                units[piece] += f
            for pair in zip(w, w[1:]):
                pairs[pair] += f
        if not pairs:
            break
        # the best pair; ties: the smallest
        a, b = min(pairs, key=lambda p: (-pair_score(p, pairs, units, score), p))
        new = a + b.removeprefix(CONTINUATION)
        if new not in vocab:
            vocab.append(new)
        words = [merge_pieces(w, (a, b), new) for w in words]
    return WordPiece(vocab)


def train_wordpiece(text: str, vocab_size: int, score: str = "ratio") -> WordPiece:
    """Learn the vocabulary of `train_wordpiece_plain`, with counts kept up to
    date.

    A merge changes the words that hold its pair and the counts of its pieces, so only
    the pairs of those words and the pairs that contain a changed piece get a new score;
    a heap holds the scores, and an entry that no longer matches its pair's score is
    skipped when it surfaces.
    """
    check_wordpiece_training(text, vocab_size, score)
    words, freqs, vocab = wordpiece_start(text)
    known = set(vocab)
    units, pairs = Counter(), Counter()
    where = defaultdict(set)  # pair -> the words that may hold it
    pairs_of = defaultdict(set)  # piece -> the pairs it has been part of
    for i, (w, f) in enumerate(zip(words, freqs)):
        for piece in w:
            units[piece] += f
        for pair in zip(w, w[1:]):
            pairs[pair] += f
            where[pair].add(i)
            pairs_of[pair[0]].add(pair)
            pairs_of[pair[1]].add(pair)
    heap = [(-pair_score(p, pairs, units, score), p) for p in pairs]
    heapq.heapify(heap)
    while len(vocab) < vocab_size and heap:
        neg_score, (a, b) = heapq.heappop(heap)
        if pairs[a, b] <= 0 or -neg_score != pair_score((a, b), pairs, units, score):
            continue  # stale: the pair is gone or its score changed since the push
        new = a + b.removeprefix(CONTINUATION)
        if new not in known:
            vocab.append(new)
            known.add(new)
        changed = set()
        for i in where.pop((a, b)):
            old, f = words[i], freqs[i]
            words[i] = merge_pieces(old, (a, b), new)
            for piece in old:
                units[piece] -= f
            for pair in zip(old, old[1:]):
                pairs[pair] -= f
                changed.add(pair)
            for piece in words[i]:
                units[piece] += f
            for pair in zip(words[i], words[i][1:]):
                pairs[pair] += f
                where[pair].add(i)
                pairs_of[pair[0]].add(pair)
                pairs_of[pair[1]].add(pair)
                changed.add(pair)
        if score == "ratio":  # the counts of a, b and new changed, so did their scores
            changed |= pairs_of[a] | pairs_of[b] | pairs_of[new]
        for pair in changed:
            if pairs[pair] > 0:
                heapq.heappush(heap, (-pair_score(pair, pairs, units, score), pair))
    return WordPiece(vocab)
