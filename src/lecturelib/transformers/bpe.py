"""Byte-level byte-pair encoding (chapter 9), written from scratch.

BPE began as a compression scheme (Gage 1994, "A New Algorithm for Data Compression"):
replace the most frequent pair of adjacent symbols by a new symbol, and repeat.
Sennrich, Haddow and Birch (2016, arXiv:1508.07909) used it to learn sub-word
vocabularies for translation, merging inside words only; GPT-2 (Radford et al. 2019)
made it *byte-level*, starting from the 256 byte values so that every string can be
encoded, and cut the text into chunks with a regular expression first, so that merges
never cross a chunk boundary. Here, as in GPT-2 and Hugging Face `tokenizers`, merges
are learned on the distinct chunks of a text weighted by their counts.

The worked example, with Z = aa, Y = ab and X = ZY (ids 256, 257, 258)::

    aaabdaaabac  ->  ZabdZabac  ->  ZYdZYac  ->  XdXac

>>> tok = train_bpe("aaabdaaabac", vocab_size=259)
>>> tok.merges
{(97, 97): 256, (97, 98): 257, (256, 257): 258}
>>> tok.encode("aaabdaaabac")
[258, 100, 258, 97, 99]
>>> tok.decode(tok.encode("naïve 中文 🙂"))
'naïve 中文 🙂'

Two trainers learn the same merges: `train_bpe_plain` recounts every pair after
every merge (the reference, as in Sennrich et al.'s Algorithm 1) and `train_bpe`
updates the counts of only the chunks a merge changed. Ties between equally frequent
pairs go to the smallest pair of ids, so the result does not depend on the order in
which pairs were counted. Simplifications: no special tokens, and no byte-to-character
remapping (GPT-2 maps bytes to printable characters such as `Ġ` for the space only to
store its vocabulary as text; `gpt2_byte_alphabet`).

`train_hf_bpe` trains a Hugging Face `tokenizers.Tokenizer` the way `train_bpe` trains:
byte-level, the GPT-2 regex, no prefix space and no special tokens.
"""

from __future__ import annotations

import heapq
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import regex

from lecturelib.validate import check_int, check_type, describe

# GPT-2's pre-tokenizer (Radford et al. 2019; openai/gpt-2 src/encoder.py):
# contractions, an optional space followed by letters, by digits, or by other symbols,
# then runs of whitespace.
GPT2_PATTERN = (
    r"""'s|'t|'re|'ve|'m|'ll|'d"""
    r"""| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
)

# GPT-4's pre-tokenizer, that of the cl100k_base encoding, as first published in
# tiktoken (github.com/openai/tiktoken, tiktoken_ext/openai_public.py; later releases
# write it differently). Against GPT2_PATTERN: contractions in any case; a letter run
# takes one preceding character that is not a letter, digit or newline (" the", "_id",
# "$x"); at most three digits per chunk, never with the space before them; punctuation
# keeps the newlines after it; newlines gather with the whitespace before them.
GPT4_PATTERN = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"""
    r"""| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)

Pair = tuple[int, int]


def pretokenize(text: str, pattern: str | None = GPT2_PATTERN) -> list[str]:
    """Cut `text` into the chunks merges may not cross; `"".join` restores it.
    Example: "Hello world, it's" -> ['Hello', ' world', ',', ' it', "'s"]"""
    check_type(text, "text", str, "a str")
    if pattern is None:
        return [text] if text else []
    return compile_pattern(pattern).findall(text)


def compile_pattern(pattern: str) -> regex.Pattern:
    """`pattern` compiled (and cached) by the `regex` module, which knows the
    Unicode classes `\\p{L}` and `\\p{N}` of `GPT2_PATTERN`; a bad pattern
    raises a ValueError that names it."""
    if not isinstance(pattern, str):
        raise TypeError(
            f"pattern must be a str (a regular expression) or None; got "
            f"{describe(pattern)}"
        )
    try:
        return regex.compile(pattern)  # cached by the regex module
    except regex.error as err:
        raise ValueError(
            f"pattern must be a valid regular expression; got {pattern!r} ({err})"
        ) from None


def check_id_lists(words: list[list[int]], freqs: list[int] | None) -> None:
    """The arguments of `count_pairs`: lists of ids (not text), one count each."""
    if isinstance(words, (str, bytes)) or (
        words and isinstance(words[0], (str, bytes))
    ):
        raise TypeError(
            f"words must be a list of lists of int ids "
            f"(e.g. list(s.encode())), not text; got {describe(words)}"
        )
    if freqs is not None and len(freqs) != len(words):
        raise ValueError(
            f"freqs must hold one count per word ({len(words)}); got {len(freqs)}"
        )


def count_pairs(words: list[list[int]], freqs: list[int] | None = None) -> Counter:
    """How often each adjacent pair of ids occurs, word `i` counted `freqs[i]` times."""
    check_id_lists(words, freqs)
    counts: Counter = Counter()
    for i, ids in enumerate(words):
        f = 1 if freqs is None else freqs[i]
        for pair in zip(ids, ids[1:]):
            counts[pair] += f
    return counts


def is_id(i) -> bool:
    """A token id: an int >= 0 (not a bool, not a float)."""
    return isinstance(i, int) and not isinstance(i, bool) and i >= 0


def check_merge(ids, pair) -> None:
    """The arguments of `merge`: a list of ids and a pair of two ids (ints >= 0:
    a float would never equal an int id by accident, -1 would read as byte 255)."""
    if (
        isinstance(ids, (str, bytes))
        or not isinstance(ids, (list, tuple))
        or not isinstance(pair, tuple)
        or len(pair) != 2
        or not all(is_id(i) for i in pair)
    ):
        raise TypeError(
            f"ids must be a list of int ids and pair a tuple of two ids (ints >= 0); "
            f"got {describe(ids)} and {describe(pair)}"
        )


def merge(ids: list[int], pair: Pair, new_id: int) -> list[int]:
    """A new list: `ids` with each `pair` replaced by `new_id`, from left to right.
    Example: merge([97, 97, 97, 98], (97, 97), 256) -> [256, 97, 98]"""
    check_merge(ids, pair)
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and ids[i] == pair[0] and ids[i + 1] == pair[1]:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def check_merges(merges: dict[Pair, int]) -> None:
    """The merges of a `Tokenizer`: new ids 256, 257, ... in order, each made of
    earlier tokens."""
    if not isinstance(merges, dict):
        raise TypeError(
            f"merges must be a dict {{(a, b): new_id}}; got {describe(merges)}"
        )
    for i, (pair, new_id) in enumerate(merges.items()):
        if not (
            isinstance(pair, tuple) and len(pair) == 2 and all(is_id(j) for j in pair)
        ) or not is_id(new_id):
            raise ValueError(
                f"merge {pair!r} -> {new_id!r}: a merge maps a pair of token ids "
                f"(ints >= 0) to a new int id"
            )
        a, b = pair
        if new_id != 256 + i or max(a, b) >= new_id:
            raise ValueError(
                f"merge {(a, b)} -> {new_id}: ids must be 256, 257, "
                f"... in order, each made of earlier tokens"
            )


def check_token_ids(ids: list[int], vocab_size: int) -> None:
    """Token ids to decode: ints in `0..vocab_size - 1`."""
    bad = [i for i in ids if not (isinstance(i, int) and 0 <= i < vocab_size)]
    if bad:
        raise ValueError(f"token ids must be ints in [0, {vocab_size}); got {bad[:5]}")


@dataclass
class Tokenizer:
    """Byte-level BPE; `merges`: pair of ids -> its new id (256, 257, ...), in order."""

    merges: dict[Pair, int]
    pattern: str | None = GPT2_PATTERN
    counts: list[int] = field(default_factory=list)
    _cache: dict[str, list[int]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def __post_init__(self):
        check_merges(self.merges)
        self.vocab: list[bytes] = [bytes([b]) for b in range(256)]
        for (a, b), new_id in self.merges.items():
            self.vocab.append(self.vocab[a] + self.vocab[b])

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def encode_chunk(self, chunk: str) -> list[int]:
        """Ids of `chunk`: its UTF-8 bytes, merged in the order of the merges."""
        if chunk not in self._cache:
            ids = list(chunk.encode("utf-8"))
            while len(ids) >= 2:
                # the earliest-learned pair present has the smallest new id
                pair = min(
                    zip(ids, ids[1:]), key=lambda p: self.merges.get(p, float("inf"))
                )
                if pair not in self.merges:
                    break
                ids = merge(ids, pair, self.merges[pair])
            self._cache[chunk] = ids
        return self._cache[chunk]

    def encode(self, text: str) -> list[int]:
        return [
            i
            for chunk in pretokenize(text, self.pattern)
            for i in self.encode_chunk(chunk)
        ]

    def decode_bytes(self, ids: list[int]) -> bytes:
        check_token_ids(ids, len(self.vocab))
        return b"".join(self.vocab[i] for i in ids)

    def decode(self, ids: list[int], errors: str = "replace") -> str:
        """A cut multi-byte character becomes U+FFFD; `errors="strict"` raises."""
        return self.decode_bytes(ids).decode("utf-8", errors=errors)

    def token_str(self, i: int) -> str:
        """Token `i` for display, with bytes that are not UTF-8 shown as `\\xNN`."""
        return self.decode_bytes([i]).decode("utf-8", errors="backslashreplace")

    def truncated(self, vocab_size: int) -> "Tokenizer":
        """Training to `vocab_size` instead: the first merges (training is greedy)."""
        check_int(vocab_size, "vocab_size", 256, self.vocab_size)
        n = n_merges(vocab_size)
        return Tokenizer(
            dict(list(self.merges.items())[:n]), self.pattern, self.counts[:n]
        )


def n_merges(vocab_size: int) -> int:
    check_int(vocab_size, "vocab_size", 256)  # 256 byte tokens, then merges
    return vocab_size - 256


def word_counts(
    text: str, pattern: str | None = GPT2_PATTERN
) -> tuple[list[list[int]], list[int]]:
    """The distinct chunks of `text` as lists of bytes, and how often each occurs."""
    chunks = Counter(pretokenize(text, pattern))
    return [list(c.encode("utf-8")) for c in chunks], list(chunks.values())


def train_bpe_plain(
    text: str, vocab_size: int, pattern: str | None = GPT2_PATTERN
) -> Tokenizer:
    """Learn up to `vocab_size - 256` merges, recounting all pairs before each merge."""
    last_id = 256 + n_merges(vocab_size)
    words, freqs = word_counts(text, pattern)
    merges, counts = {}, []
    for new_id in range(256, last_id):
        pair_counts = count_pairs(words, freqs)
        if not pair_counts:
            break
        best = min(pair_counts, key=lambda p: (-pair_counts[p], p))  # ties: lowest ids
        merges[best] = new_id
        counts.append(pair_counts[best])
        words = [merge(ids, best, new_id) for ids in words]
    return Tokenizer(merges, pattern, counts)


def train_bpe(
    text: str, vocab_size: int, pattern: str | None = GPT2_PATTERN
) -> Tokenizer:
    """Learn the same merges as `train_bpe_plain`, with pair counts kept up to date."""
    target = n_merges(vocab_size)
    words, freqs = word_counts(text, pattern)
    pair_counts: Counter = Counter()
    where: dict[Pair, set[int]] = defaultdict(set)  # pair -> chunks that may hold it
    for w, ids in enumerate(words):
        for pair in zip(ids, ids[1:]):
            pair_counts[pair] += freqs[w]
            where[pair].add(w)
    heap = [(-c, pair) for pair, c in pair_counts.items()]
    # smallest first: highest count, then smallest ids, as in the reference
    heapq.heapify(heap)
    merges, counts = {}, []
    while len(merges) < target and heap:
        neg_count, best = heapq.heappop(heap)
        if pair_counts.get(best, 0) != -neg_count:
            continue  # stale entry: the count changed after it was pushed
        new_id = 256 + len(merges)
        merges[best] = new_id
        counts.append(-neg_count)
        changed = set()
        for w in where.pop(best):
            old = words[w]
            new = merge(old, best, new_id)
            if len(new) == len(old):
                continue
            for pair in zip(old, old[1:]):
                pair_counts[pair] -= freqs[w]
                changed.add(pair)
            for pair in zip(new, new[1:]):
                pair_counts[pair] += freqs[w]
                where[pair].add(w)
                changed.add(pair)
            words[w] = new
        for pair in changed:
            if pair_counts[pair] > 0:
                heapq.heappush(heap, (-pair_counts[pair], pair))
            else:
                del pair_counts[pair]
    return Tokenizer(merges, pattern, counts)


def bytes_per_token(tok, text: str) -> float:
    """Compression ratio: UTF-8 bytes of `text` per token (higher is shorter
    sequences).

    `tok` is our `Tokenizer` or a Hugging Face `tokenizers.Tokenizer`.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str; got {describe(text)}")
    if isinstance(tok, (str, bytes)) or not hasattr(tok, "encode"):
        raise TypeError(
            f"tok must be a bpe.Tokenizer or a tokenizers.Tokenizer; "
            f"got {describe(tok)}"
        )
    n_bytes = len(text.encode("utf-8"))
    if isinstance(tok, Tokenizer):
        n_tokens = len(tok.encode(text))
    else:
        n_tokens = len(tok.encode(text).ids)
    return n_bytes / max(1, n_tokens)


def gpt2_byte_alphabet() -> dict[int, str]:
    """GPT-2's map from byte values to printable characters (`32 -> 'Ġ'`), used by
    `tokenizers`' `ByteLevel` to store byte tokens as text.

    >>> gpt2_byte_alphabet()[ord(" ")], gpt2_byte_alphabet()[ord("a")]
    ('Ġ', 'a')
    """
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    others = [b for b in range(256) if b not in printable]
    return {
        **{b: chr(b) for b in printable},
        **{b: chr(256 + i) for i, b in enumerate(others)},
    }


def train_hf_bpe(text: str, vocab_size: int):
    """A Hugging Face `tokenizers.Tokenizer` trained as `train_bpe` trains."""
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import decoders, models, pre_tokenizers, trainers

    check_type(text, "text", str, "a str")
    n_merges(vocab_size)  # the library's n_merges refuses vocab_size < 256
    tok = HFTokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=0,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=[],
    )
    tok.train_from_iterator([text], trainer)
    return tok


def hf_vocab_bytes(hf_tok) -> dict[bytes, int]:
    """The vocabulary of a byte-level Hugging Face tokenizer as
    `{token bytes: id}`."""
    check_hf_byte_level(hf_tok)
    to_byte = {c: b for b, c in gpt2_byte_alphabet().items()}
    return {bytes(to_byte[c] for c in s): i for s, i in hf_tok.get_vocab().items()}


def check_hf_byte_level(hf_tok) -> None:
    """`hf_tok` must be a byte-level `tokenizers.Tokenizer`: its vocabulary holds
    the 256 byte tokens of `gpt2_byte_alphabet` and is written in that alphabet
    (another tokenizer's strings would be read as the wrong bytes, or fail)."""
    if not callable(getattr(hf_tok, "get_vocab", None)):
        raise TypeError(
            f"hf_tok must be a tokenizers.Tokenizer; got {describe(hf_tok)}"
        )
    vocab = hf_tok.get_vocab()
    alphabet = set(gpt2_byte_alphabet().values())
    missing = sorted(alphabet - set(vocab))
    foreign = [s for s in vocab if not set(s) <= alphabet]
    if missing or foreign:
        raise ValueError(
            f"hf_tok must be a byte-level BPE tokenizer (ByteLevel pre-tokenizer, "
            f"its 256 byte tokens in GPT-2's alphabet); its vocabulary of {len(vocab)} "
            f"lacks {len(missing)} of the byte tokens and has {len(foreign)} tokens "
            f"outside that alphabet (e.g. {(foreign or missing)[:3]!r})"
        )
