"""lecturelib.tasks: shapes, reproducibility and the known answer of every synthetic task."""

from __future__ import annotations

import calendar
import datetime
import doctest
import re

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lecturelib import tasks
from lecturelib.tasks import IGNORE, N_SPECIAL, PAD, SEP

TOKEN_TASKS = {  # name: (call with a seed, expected shape)
    "copy": (lambda s: tasks.copy_task(6, 5, vocab_size=9, seed=s), (6, 10)),
    "reverse": (lambda s: tasks.reverse_task(6, 5, vocab_size=9, seed=s), (6, 10)),
    "sorting": (lambda s: tasks.sorting_task(6, 5, vocab_size=9, seed=s), (6, 10)),
    "associative_recall": (lambda s: tasks.associative_recall(6, 4, vocab_size=14, seed=s),
                           (6, 10)),
    "selective_copying": (lambda s: tasks.selective_copying(6, 12, 3, vocab_size=9, seed=s),
                          (6, 15)),
    "induction_heads": (lambda s: tasks.induction_heads(6, 9, vocab_size=8, seed=s), (6, 9)),
    "passkey": (lambda s: tasks.passkey(6, 11, key_len=3, vocab_size=9, seed=s), (6, 14)),
}


@pytest.mark.parametrize("name", TOKEN_TASKS)
def test_token_task_shapes_dtype_and_vocabulary(name):
    make, shape = TOKEN_TASKS[name]
    x, y = make(0)
    assert x.shape == y.shape == shape
    assert x.dtype == y.dtype == torch.long
    assert x.min() >= 0 and x.max() < 16
    scored = y[y != IGNORE]
    assert scored.numel() > 0 and (scored >= N_SPECIAL).all()  # answers are content symbols


@pytest.mark.parametrize("name", TOKEN_TASKS)
def test_token_task_seeding(name):
    make, _ = TOKEN_TASKS[name]
    (x0, y0), (x0b, y0b), (x1, _) = make(0), make(0), make(1)
    assert torch.equal(x0, x0b) and torch.equal(y0, y0b)
    assert not torch.equal(x0, x1)


def _answer_part(x, y, seq_len):
    """Input symbols, the SEP column and the scored answers of a copy-like task."""
    assert (x[:, seq_len] == SEP).all() and (x[:, seq_len + 1:] == PAD).all()
    assert (y[:, :seq_len] == IGNORE).all()
    return x[:, :seq_len], y[:, seq_len:]


@given(n=st.integers(1, 5), seq_len=st.integers(1, 8), vocab_size=st.integers(3, 12),
       seed=st.integers(0, 2**31))
@settings(max_examples=25, deadline=None, database=None)
def test_copy_reverse_sorting_known_answers(n, seq_len, vocab_size, seed):
    seq, ans = _answer_part(*tasks.copy_task(n, seq_len, vocab_size, seed), seq_len)
    assert torch.equal(ans, seq)
    assert ((seq >= N_SPECIAL) & (seq < vocab_size)).all()
    seq, ans = _answer_part(*tasks.reverse_task(n, seq_len, vocab_size, seed), seq_len)
    assert torch.equal(ans, seq.flip(1))
    seq, ans = _answer_part(*tasks.sorting_task(n, seq_len, vocab_size, seed), seq_len)
    assert torch.equal(ans, seq.sort(dim=1).values)


def test_docstring_examples():
    x, y = tasks.copy_task(2, 3, vocab_size=6, seed=0)
    assert x.shape == y.shape == (2, 6)
    assert doctest.testmod(tasks, verbose=False).failed == 0


@given(n_pairs=st.integers(1, 6), extra=st.integers(0, 5), seed=st.integers(0, 2**31))
@settings(max_examples=25, deadline=None, database=None)
def test_associative_recall_known_answer(n_pairs, extra, seed):
    vocab_size = 2 * n_pairs + N_SPECIAL + extra
    x, y = tasks.associative_recall(8, n_pairs, vocab_size=vocab_size, seed=seed)
    assert x.shape == (8, 2 * n_pairs + 2)
    assert (y[:, :-1] == IGNORE).all() and (x[:, -2] == SEP).all()
    n_keys = (vocab_size - N_SPECIAL) // 2
    for row, target in zip(x.tolist(), y[:, -1].tolist()):
        keys, values, query = row[0:-2:2], row[1:-2:2], row[-1]
        assert len(set(keys)) == n_pairs  # distinct keys
        assert all(N_SPECIAL <= k < N_SPECIAL + n_keys for k in keys)
        assert all(N_SPECIAL + n_keys <= v < vocab_size for v in values)
        assert query in keys and target == values[keys.index(query)]


def test_associative_recall_needs_enough_keys():
    x, _ = tasks.associative_recall(2, 4, vocab_size=10)  # the smallest vocabulary that fits
    assert len(set(x[0, 0:-2:2].tolist())) == 4


@given(seq_len=st.integers(1, 12), data=st.data())
@settings(max_examples=25, deadline=None, database=None)
def test_selective_copying_known_answer(seq_len, data):
    n_tokens = data.draw(st.integers(1, seq_len))
    x, y = tasks.selective_copying(5, seq_len, n_tokens, vocab_size=7,
                                   seed=data.draw(st.integers(0, 1000)))
    assert x.shape == (5, seq_len + n_tokens)
    noise, ans = _answer_part(x, y, seq_len)
    for row, target in zip(noise.tolist(), ans.tolist()):
        assert [s for s in row if s != PAD] == target and len(target) == n_tokens


def test_induction_heads_known_answer():
    x, y = tasks.induction_heads(64, 10, vocab_size=6, seed=3)
    assert (x[:, -1] == SEP).all() and (y[:, :-1] == IGNORE).all()
    for row, target in zip(x.tolist(), y[:, -1].tolist()):
        first = row.index(SEP)
        assert first < len(row) - 3 and row.count(SEP) == 2
        assert target == row[first + 1]


def test_passkey_known_answer():
    """The key follows the one marker of the haystack, so the task can be solved."""
    key_len, seq_len = 3, 11
    x, y = tasks.passkey(32, seq_len, key_len=key_len, vocab_size=6, seed=1)
    hay, key = _answer_part(x, y, seq_len)
    for row, k in zip(hay.tolist(), key.tolist()):
        assert row.count(tasks.KEY) == 1
        i = row.index(tasks.KEY)
        assert row[i + 1:i + 1 + key_len] == k
    assert (hay >= tasks.KEY).all() and set(key.flatten().tolist()) <= {3, 4, 5}
    starts = {row.index(tasks.KEY) for row in hay.tolist()}
    assert starts == set(range(seq_len - key_len))   # every place the key fits is used


def test_adding_problem_known_answer():
    x, y = tasks.adding_problem(50, 9, seed=2)
    assert x.shape == (50, 9, 2) and y.shape == (50,)
    assert x.dtype == y.dtype == torch.float32
    values, markers = x[..., 0], x[..., 1]
    assert ((values >= 0) & (values < 1)).all()
    assert set(markers.unique().tolist()) == {0.0, 1.0}
    assert (markers.sum(1) == 2).all()
    assert (markers[:, :4].sum(1) == 1).all() and (markers[:, 4:].sum(1) == 1).all()
    torch.testing.assert_close(y, (values * markers).sum(1))


def test_adding_problem_seeding_and_minimal_length():
    assert torch.equal(tasks.adding_problem(4, 6, seed=1)[1], tasks.adding_problem(4, 6, seed=1)[1])
    assert not torch.equal(tasks.adding_problem(4, 6, seed=1)[1],
                           tasks.adding_problem(4, 6, seed=2)[1])
    x, _ = tasks.adding_problem(3, 2)
    assert (x[..., 1] == 1).all()


MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
MONTHS |= {name.lower(): i for i, name in enumerate(calendar.month_abbr) if name}


def test_date_normalisation_known_answer():
    pairs = tasks.date_normalisation(300, seed=0)
    assert len(pairs) == 300 and len({src for src, _ in pairs}) > 250
    layouts = {re.sub(r"\d+", "#", re.sub(r"[A-Za-z]+", "A", s)) for s, _ in pairs}
    assert len(layouts) == 7  # the ten formats, with month names and digit counts blurred
    for src, iso in pairs:
        date = datetime.date.fromisoformat(iso)
        assert 1950 <= date.year <= 2049
        numbers = [int(t) for t in re.findall(r"\d+", src)]
        words = [MONTHS[w] for w in re.findall(r"[a-z]+", src.lower()) if w in MONTHS]
        assert date.day in numbers, (src, iso)
        assert date.month in numbers + words, (src, iso)
        assert date.year in numbers or date.year % 100 in numbers, (src, iso)


def test_date_normalisation_seeding_and_years():
    assert tasks.date_normalisation(20, seed=4) == tasks.date_normalisation(20, seed=4)
    assert tasks.date_normalisation(20, seed=4) != tasks.date_normalisation(20, seed=5)
    years = {datetime.date.fromisoformat(iso).year
             for _, iso in tasks.date_normalisation(50, years=(2000, 2001))}
    assert years == {2000, 2001}
