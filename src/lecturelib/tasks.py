"""Synthetic sequence tasks, generated in code from a seed.

Token conventions shared by every task (so one model fits all of them):

- `PAD = 0` fills positions that carry no information;
- `SEP = 1` marks "now answer" (the end of the input part);
- content symbols are `2 .. vocab_size-1` (`vocab_size` counts the special tokens too).

Each token task returns `(x, y)`, both `LongTensor` of shape `(n, t)`: the model reads `x`
and is scored at the positions where `y != IGNORE` (`-100`, the default `ignore_index` of
`torch.nn.functional.cross_entropy`). `y` at position `i` is the token the model should
output after reading `x[:, : i + 1]`, so causal models (RNNs, decoders) can be trained directly.

>>> x, y = copy_task(2, 3, vocab_size=6, seed=0)
>>> x.shape, y.shape
(torch.Size([2, 6]), torch.Size([2, 6]))
"""

from __future__ import annotations

import calendar
import random

import torch

from lecturelib.runtime import SEEDS
from lecturelib.validate import check_int, is_int

PAD, SEP, IGNORE = 0, 1, -100
N_SPECIAL = 2
KEY = 2  # passkey(): the content symbol that announces the key


def _generator(func: str, seed: int) -> torch.Generator:
    check_int(seed, f"{func}(): seed", *SEEDS)
    return torch.Generator().manual_seed(seed)


def check_task(
    func: str,
    n: int,
    seq_len: int,
    vocab_size: int,
    min_symbols: int = 1,
    length: str = "seq_len",
) -> None:
    """Sizes of the token task `func`: `n` sequences, `seq_len` (named `length`) and a
    vocabulary with room for the special tokens and `min_symbols` content symbols."""
    check_int(n, f"{func}(): n", 1)
    check_int(seq_len, f"{func}(): {length}", 1)
    check_int(vocab_size, f"{func}(): vocab_size", N_SPECIAL + min_symbols)


def _symbols(n: int, t: int, vocab_size: int, g: torch.Generator) -> torch.Tensor:
    return torch.randint(N_SPECIAL, vocab_size, (n, t), generator=g)


def _answer_after_sep(
    seq: torch.Tensor, answer: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """`x = seq SEP PAD…`, `y` scores `answer` from the SEP position on."""
    n, k = answer.shape
    x = torch.cat([seq, torch.full((n, 1), SEP), torch.full((n, k - 1), PAD)], dim=1)
    y = torch.full_like(x, IGNORE)
    y[:, seq.shape[1] :] = answer
    return x, y


def copy_task(n: int, seq_len: int, vocab_size: int = 10, seed: int = 0):
    """Read `seq_len` symbols, then after `SEP` reproduce them in order.

    Shapes: x, y `(n, 2·seq_len)`.
    """
    check_task("copy_task", n, seq_len, vocab_size)
    seq = _symbols(n, seq_len, vocab_size, _generator("copy_task", seed))
    return _answer_after_sep(seq, seq)


def reverse_task(n: int, seq_len: int, vocab_size: int = 10, seed: int = 0):
    """Like `copy_task`, but the answer is the input reversed. Shapes: `(n, 2·seq_len)`."""
    check_task("reverse_task", n, seq_len, vocab_size)
    seq = _symbols(n, seq_len, vocab_size, _generator("reverse_task", seed))
    return _answer_after_sep(seq, seq.flip(1))


def sorting_task(n: int, seq_len: int, vocab_size: int = 10, seed: int = 0):
    """Like `copy_task`, but the answer is the input sorted. Shapes: `(n, 2·seq_len)`."""
    check_task("sorting_task", n, seq_len, vocab_size)
    seq = _symbols(n, seq_len, vocab_size, _generator("sorting_task", seed))
    return _answer_after_sep(seq, seq.sort(dim=1).values)


def adding_problem(n: int, seq_len: int, seed: int = 0):
    """The adding problem (Hochreiter & Schmidhuber, 1997): at each step a value in [0, 1) and a
    marker; exactly two steps are marked, one in each half; the target is the sum of the two
    marked values. Predicting 1.0 always gives a mean squared error of about 0.167.

    Shapes: x `(n, t, 2)` float (value, marker), y `(n,)` float.
    """
    check_int(n, "adding_problem(): n", 1)
    check_int(seq_len, "adding_problem(): seq_len", 1)
    if seq_len < 2:
        raise ValueError(
            f"adding_problem(): seq_len must be at least 2 to hold two markers; "
            f"got {seq_len}"
        )
    g = _generator("adding_problem", seed)
    values = torch.rand(n, seq_len, generator=g)
    half = seq_len // 2
    first = torch.randint(0, half, (n,), generator=g)
    second = torch.randint(half, seq_len, (n,), generator=g)
    markers = torch.zeros(n, seq_len)
    rows = torch.arange(n)
    markers[rows, first] = 1.0
    markers[rows, second] = 1.0
    y = values[rows, first] + values[rows, second]
    return torch.stack([values, markers], dim=-1), y


def associative_recall(n: int, n_pairs: int, vocab_size: int = 20, seed: int = 0):
    """Key–value pairs `k1 v1 k2 v2 … SEP q`: answer the value stored with key `q`.

    Keys are distinct within a sequence and drawn from the lower half of the symbols, values from
    the upper half. Shapes: x, y `(n, 2·n_pairs + 2)`; only the last position is scored.
    """
    check_task(
        "associative_recall", n, n_pairs, vocab_size, min_symbols=2, length="n_pairs"
    )
    n_keys = (vocab_size - N_SPECIAL) // 2
    if n_pairs > n_keys:
        raise ValueError(
            f"associative_recall(): n_pairs={n_pairs} distinct keys need "
            f"vocab_size >= {2 * n_pairs + N_SPECIAL}; got {vocab_size}"
        )
    g = _generator("associative_recall", seed)
    keys = torch.rand(n, n_keys, generator=g).argsort(dim=1)[:, :n_pairs] + N_SPECIAL
    values = torch.randint(N_SPECIAL + n_keys, vocab_size, (n, n_pairs), generator=g)
    pick = torch.randint(0, n_pairs, (n,), generator=g)
    rows = torch.arange(n)
    pairs = torch.stack([keys, values], dim=2).reshape(n, 2 * n_pairs)
    x = torch.cat([pairs, torch.full((n, 1), SEP), keys[rows, pick, None]], dim=1)
    y = torch.full_like(x, IGNORE)
    y[:, -1] = values[rows, pick]
    return x, y


def selective_copying(
    n: int, seq_len: int, n_tokens: int = 4, vocab_size: int = 10, seed: int = 0
):
    """`n_tokens` symbols scattered among `PAD` noise in `seq_len` steps; after `SEP`
    reproduce the symbols in order (Gu & Dao, 2023). Shapes: `(n, seq_len + n_tokens)`."""
    check_task("selective_copying", n, seq_len, vocab_size)
    check_int(n_tokens, "selective_copying(): n_tokens", 1)
    if n_tokens > seq_len:
        raise ValueError(
            f"selective_copying(): n_tokens must be in 1..seq_len={seq_len}; "
            f"got {n_tokens}"
        )
    g = _generator("selective_copying", seed)
    symbols = _symbols(n, n_tokens, vocab_size, g)
    where = (
        torch.rand(n, seq_len, generator=g)
        .argsort(dim=1)[:, :n_tokens]
        .sort(dim=1)
        .values
    )
    seq = torch.full((n, seq_len), PAD)
    seq.scatter_(1, where, symbols)
    return _answer_after_sep(seq, symbols)


def induction_heads(n: int, seq_len: int, vocab_size: int = 16, seed: int = 0):
    """Random symbols in which a trigger (`SEP`) appears once followed by a symbol `a`; the
    sequence ends with the trigger again and the answer is `a` (Olsson et al., 2022).

    Shapes: x, y `(n, seq_len)`; only the last position is scored.
    """
    check_task("induction_heads", n, seq_len, vocab_size, min_symbols=2)
    if seq_len < 4:
        raise ValueError(
            f"induction_heads(): seq_len must be at least 4 (trigger, answer, "
            f"trigger and one more symbol); got {seq_len}"
        )
    g = _generator("induction_heads", seed)
    x = _symbols(n, seq_len, vocab_size, g)
    where = torch.randint(0, seq_len - 3, (n,), generator=g)
    rows = torch.arange(n)
    x[rows, where] = SEP
    x[:, -1] = SEP
    y = torch.full_like(x, IGNORE)
    y[:, -1] = x[rows, where + 1]
    return x, y


def passkey(
    n: int, seq_len: int, key_len: int = 4, vocab_size: int = 12, seed: int = 0
):
    """A `key_len`-symbol pass key hidden at a random place in random filler, right after
    the marker symbol `KEY` (which appears nowhere else, as "the pass key is" does in the
    original); after `SEP` the model must repeat the key (Mohtashami & Jaggi, 2023). Filler
    and key are drawn from the symbols `3 .. vocab_size-1`.

    Shapes: `(n, seq_len + key_len)`: `seq_len` positions of haystack (marker and key
    included), `SEP`, then the answer positions."""
    check_task("passkey", n, seq_len, vocab_size, min_symbols=3)
    check_int(key_len, "passkey(): key_len", 1)
    if key_len + 1 >= seq_len:
        raise ValueError(
            f"passkey(): key_len must be in 1..seq_len-2 = 1..{seq_len - 2} (the "
            f"marker and the key must fit in the haystack); got {key_len}"
        )
    g = _generator("passkey", seed)
    filler = torch.randint(KEY + 1, vocab_size, (n, seq_len), generator=g)
    key = torch.randint(KEY + 1, vocab_size, (n, key_len), generator=g)
    start = torch.randint(0, seq_len - key_len, (n,), generator=g)  # the marker's place
    rows = torch.arange(n)[:, None]
    filler[rows[:, 0], start] = KEY
    filler[rows, start[:, None] + 1 + torch.arange(key_len)] = key
    return _answer_after_sep(filler, key)


_DATE_FORMATS = (
    "{d} {Month} {Y}",
    "{Month} {d}, {Y}",
    "{dd}/{mm}/{Y}",
    "{d} {Mon} {Y}",
    "{Mon} {d} {Y}",
    "{Y}.{mm}.{dd}",
    "{dd}-{Mon}-{yy}",
    "{Weekday}, {Month} {d}, {Y}",
    "{d}.{m}.{Y}",
    "{month} {d} {Y}",
)


def date_normalisation(n: int, seed: int = 0, years: tuple[int, int] = (1950, 2049)):
    """`n` pairs `(human-written date, ISO date)`, e.g. `("3 Mar 1998", "1998-03-03")`,
    in ten formats. Two-digit years are read as 1950–2049."""
    check_int(n, "date_normalisation(): n", 1)
    check_int(seed, "date_normalisation(): seed", *SEEDS)
    if (
        not isinstance(years, (tuple, list))
        or len(years) != 2
        or not all(is_int(y) for y in years)
    ):
        raise TypeError(
            f"date_normalisation(): years must be a (first, last) pair of ints; "
            f"got {years!r}"
        )
    if years[0] < 1950 or years[1] > 2049 or years[0] > years[1]:
        raise ValueError(
            f"date_normalisation(): years must lie within 1950..2049 (so two-digit "
            f"years are unambiguous), first <= last; got {tuple(years)}"
        )
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        y, m = rng.randint(*years), rng.randint(1, 12)
        d = rng.randint(1, calendar.monthrange(y, m)[1])
        fields = dict(
            d=d,
            dd=f"{d:02d}",
            m=m,
            mm=f"{m:02d}",
            Y=y,
            yy=f"{y % 100:02d}",
            Month=calendar.month_name[m],
            month=calendar.month_name[m].lower(),
            Mon=calendar.month_abbr[m],
            Weekday=calendar.day_name[calendar.weekday(y, m, d)],
        )
        pairs.append(
            (rng.choice(_DATE_FORMATS).format(**fields), f"{y:04d}-{m:02d}-{d:02d}")
        )
    return pairs
