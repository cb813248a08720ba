"""Synthetic sequence tasks, generated in code from a seed.

Token conventions shared by every task (so one model fits all of them):

- ``PAD = 0`` fills positions that carry no information;
- ``SEP = 1`` marks "now answer" (the end of the input part);
- content symbols are ``2 .. vocab_size-1`` (``vocab_size`` counts the special tokens too).

Each token task returns ``(x, y)``, both ``LongTensor`` of shape ``(n, t)``: the model reads ``x``
and is scored at the positions where ``y != IGNORE`` (``-100``, the default ``ignore_index`` of
``torch.nn.functional.cross_entropy``). ``y`` at position ``i`` is the token the model should
output after reading ``x[:, : i + 1]``, so causal models (RNNs, decoders) can be trained directly.

>>> x, y = copy_task(2, 3, vocab_size=6, seed=0)
>>> x.shape, y.shape
(torch.Size([2, 6]), torch.Size([2, 6]))
"""

from __future__ import annotations

import calendar
import random

import torch

PAD, SEP, IGNORE = 0, 1, -100
N_SPECIAL = 2


def _generator(seed: int) -> torch.Generator:
    if not isinstance(seed, int):
        raise TypeError(f"seed must be an int; got {type(seed).__name__}")
    return torch.Generator().manual_seed(seed)


def _check(n: int, seq_len: int, vocab_size: int, min_symbols: int = 1) -> None:
    for name, v, low in (("n", n, 1), ("seq_len", seq_len, 1),
                         ("vocab_size", vocab_size, N_SPECIAL + min_symbols)):
        if not isinstance(v, int) or v < low:
            raise ValueError(f"{name} must be an int >= {low}; got {v!r}")


def _symbols(n: int, t: int, vocab_size: int, g: torch.Generator) -> torch.Tensor:
    return torch.randint(N_SPECIAL, vocab_size, (n, t), generator=g)


def _answer_after_sep(seq: torch.Tensor, answer: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``x = seq SEP PAD…``, ``y`` scores ``answer`` from the SEP position on."""
    n, k = answer.shape
    x = torch.cat([seq, torch.full((n, 1), SEP), torch.full((n, k - 1), PAD)], dim=1)
    y = torch.full_like(x, IGNORE)
    y[:, seq.shape[1]:] = answer
    return x, y


def copy_task(n: int, seq_len: int, vocab_size: int = 10, seed: int = 0):
    """Read ``seq_len`` symbols, then after ``SEP`` reproduce them in order.

    Shapes: x, y ``(n, 2·seq_len)``.
    """
    _check(n, seq_len, vocab_size)
    seq = _symbols(n, seq_len, vocab_size, _generator(seed))
    return _answer_after_sep(seq, seq)


def reverse_task(n: int, seq_len: int, vocab_size: int = 10, seed: int = 0):
    """Like :func:`copy_task`, but the answer is the input reversed. Shapes: ``(n, 2·seq_len)``."""
    _check(n, seq_len, vocab_size)
    seq = _symbols(n, seq_len, vocab_size, _generator(seed))
    return _answer_after_sep(seq, seq.flip(1))


def sorting_task(n: int, seq_len: int, vocab_size: int = 10, seed: int = 0):
    """Like :func:`copy_task`, but the answer is the input sorted. Shapes: ``(n, 2·seq_len)``."""
    _check(n, seq_len, vocab_size)
    seq = _symbols(n, seq_len, vocab_size, _generator(seed))
    return _answer_after_sep(seq, seq.sort(dim=1).values)


def adding_problem(n: int, seq_len: int, seed: int = 0):
    """The adding problem (Hochreiter & Schmidhuber, 1997): at each step a value in [0, 1) and a
    marker; exactly two steps are marked, one in each half; the target is the sum of the two
    marked values. Predicting 1.0 always gives a mean squared error of about 0.167.

    Shapes: x ``(n, t, 2)`` float (value, marker), y ``(n,)`` float.
    """
    _check(n, seq_len, N_SPECIAL + 1)
    if seq_len < 2:
        raise ValueError(f"seq_len must be at least 2 to hold two markers; got {seq_len}")
    g = _generator(seed)
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
    """Key–value pairs ``k1 v1 k2 v2 … SEP q``: answer the value stored with key ``q``.

    Keys are distinct within a sequence and drawn from the lower half of the symbols, values from
    the upper half. Shapes: x, y ``(n, 2·n_pairs + 2)``; only the last position is scored.
    """
    n_keys = (vocab_size - N_SPECIAL) // 2
    _check(n, n_pairs, vocab_size, min_symbols=2)
    if n_pairs > n_keys:
        raise ValueError(f"{n_pairs} distinct keys need vocab_size >= {2 * n_pairs + N_SPECIAL}; "
                         f"got {vocab_size}")
    g = _generator(seed)
    keys = torch.rand(n, n_keys, generator=g).argsort(dim=1)[:, :n_pairs] + N_SPECIAL
    values = torch.randint(N_SPECIAL + n_keys, vocab_size, (n, n_pairs), generator=g)
    pick = torch.randint(0, n_pairs, (n,), generator=g)
    rows = torch.arange(n)
    pairs = torch.stack([keys, values], dim=2).reshape(n, 2 * n_pairs)
    x = torch.cat([pairs, torch.full((n, 1), SEP), keys[rows, pick, None]], dim=1)
    y = torch.full_like(x, IGNORE)
    y[:, -1] = values[rows, pick]
    return x, y


def selective_copying(n: int, seq_len: int, n_tokens: int = 4, vocab_size: int = 10,
                      seed: int = 0):
    """``n_tokens`` symbols scattered among ``PAD`` noise in ``seq_len`` steps; after ``SEP``
    reproduce the symbols in order (Gu & Dao, 2023). Shapes: ``(n, seq_len + n_tokens)``."""
    _check(n, seq_len, vocab_size)
    if not 1 <= n_tokens <= seq_len:
        raise ValueError(f"n_tokens must be in 1..seq_len={seq_len}; got {n_tokens}")
    g = _generator(seed)
    symbols = _symbols(n, n_tokens, vocab_size, g)
    where = torch.rand(n, seq_len, generator=g).argsort(dim=1)[:, :n_tokens].sort(dim=1).values
    seq = torch.full((n, seq_len), PAD)
    seq.scatter_(1, where, symbols)
    return _answer_after_sep(seq, symbols)


def induction_heads(n: int, seq_len: int, vocab_size: int = 16, seed: int = 0):
    """Random symbols in which a trigger (``SEP``) appears once followed by a symbol ``a``; the
    sequence ends with the trigger again and the answer is ``a`` (Olsson et al., 2022).

    Shapes: x, y ``(n, seq_len)``; only the last position is scored.
    """
    _check(n, seq_len, vocab_size, min_symbols=2)
    if seq_len < 4:
        raise ValueError(f"seq_len must be at least 4; got {seq_len}")
    g = _generator(seed)
    x = _symbols(n, seq_len, vocab_size, g)
    where = torch.randint(0, seq_len - 3, (n,), generator=g)
    rows = torch.arange(n)
    x[rows, where] = SEP
    x[:, -1] = SEP
    y = torch.full_like(x, IGNORE)
    y[:, -1] = x[rows, where + 1]
    return x, y


def passkey(n: int, seq_len: int, key_len: int = 4, vocab_size: int = 12, seed: int = 0):
    """A ``key_len``-symbol pass key hidden at a random place in random filler; after ``SEP``
    the model must repeat it (Mohtashami & Jaggi, 2023). Shapes: ``(n, seq_len + key_len)``."""
    _check(n, seq_len, vocab_size, min_symbols=2)
    if not 1 <= key_len < seq_len:
        raise ValueError(f"key_len must be in 1..seq_len-1; got {key_len}")
    g = _generator(seed)
    filler = _symbols(n, seq_len, vocab_size, g)
    key = _symbols(n, key_len, vocab_size, g)
    start = torch.randint(0, seq_len - key_len + 1, (n,), generator=g)
    cols = start[:, None] + torch.arange(key_len)
    filler.scatter_(1, cols, key)
    return _answer_after_sep(filler, key)


_DATE_FORMATS = (
    "{d} {Month} {Y}", "{Month} {d}, {Y}", "{dd}/{mm}/{Y}", "{d} {Mon} {Y}", "{Mon} {d} {Y}",
    "{Y}.{mm}.{dd}", "{dd}-{Mon}-{yy}", "{Weekday}, {Month} {d}, {Y}", "{d}.{m}.{Y}",
    "{month} {d} {Y}",
)


def date_normalisation(n: int, seed: int = 0, years: tuple[int, int] = (1950, 2049)):
    """``n`` pairs ``(human-written date, ISO date)``, e.g. ``("3 Mar 1998", "1998-03-03")``,
    in ten formats. Two-digit years are read as 1950–2049."""
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive int; got {n!r}")
    if years[0] < 1950 or years[1] > 2049 or years[0] > years[1]:
        raise ValueError(f"years must lie within 1950..2049 so two-digit years are unambiguous; "
                         f"got {years}")
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        y, m = rng.randint(*years), rng.randint(1, 12)
        d = rng.randint(1, calendar.monthrange(y, m)[1])
        fields = dict(d=d, dd=f"{d:02d}", m=m, mm=f"{m:02d}", Y=y, yy=f"{y % 100:02d}",
                      Month=calendar.month_name[m], month=calendar.month_name[m].lower(),
                      Mon=calendar.month_abbr[m],
                      Weekday=calendar.day_name[calendar.weekday(y, m, d)])
        pairs.append((rng.choice(_DATE_FORMATS).format(**fields), f"{y:04d}-{m:02d}-{d:02d}"))
    return pairs
