"""lecturelib.tasks refuses bad sizes with a message that names the argument, what was expected
and what was given: a size that is not an int >= 1 (a float would be truncated) or too small for
the task is a ValueError, as validate.check_int says; years that are not a pair of ints a
TypeError."""

from __future__ import annotations

import pytest

from lecturelib import tasks

TOKEN_TASKS = [tasks.copy_task, tasks.reverse_task, tasks.sorting_task]

CASES = [
    # copy, reverse and sorting share their checks: each row runs for all three
    *[(lambda f=f, a=a, k=k: f(*a, **k), err, rf"{f.__name__}\(\): {msg}")
      for f in TOKEN_TASKS for a, k, err, msg in [
          ((0, 3), {}, ValueError, r"n must be an int >= 1; got int 0"),
          ((-2, 3), {}, ValueError, r"n must be an int >= 1; got int -2"),
          ((2.0, 3), {}, ValueError, r"n must be an int >= 1; got float 2.0"),
          ((2, 0), {}, ValueError, r"seq_len must be an int >= 1; got int 0"),
          ((2, 3.5), {}, ValueError, r"seq_len must be an int >= 1; got float 3.5"),
          ((2, "3"), {}, ValueError, r"seq_len must be an int >= 1; got str '3'"),
          ((True, 3), {}, ValueError, r"n must be an int >= 1; got bool True"),
          ((2, 3), {"vocab_size": 2}, ValueError, r"vocab_size must be an int >= 3; got int 2"),
          ((2, 3), {"vocab_size": 10.0}, ValueError, r"vocab_size must be an int >= 3; got float 10.0"),
          ((2, 3), {"seed": 0.5}, ValueError, r"seed must be an int in -9223372036854775808\.\.18446744073709551615; got float 0.5"),
          ((2, 3), {"seed": None}, ValueError, r"seed must be an int in .*; got NoneType None"),
      ]],
    (lambda: tasks.adding_problem(0, 5), ValueError, r"adding_problem\(\): n must be an int >= 1"),
    (lambda: tasks.adding_problem(3, 1), ValueError,
     r"adding_problem\(\): seq_len must be at least 2 to hold two markers; got 1"),
    (lambda: tasks.adding_problem(3, 4.0), ValueError, r"seq_len must be an int >= 1; got float 4.0"),
    (lambda: tasks.adding_problem(3, 4, seed="a"), ValueError, r"seed must be an int in .*; got str 'a'"),
    (lambda: tasks.associative_recall(2, 4, vocab_size=9), ValueError,
     r"associative_recall\(\): n_pairs=4 distinct keys need vocab_size >= 10; got 9"),
    (lambda: tasks.associative_recall(2, 0), ValueError, r"n_pairs must be an int >= 1; got int 0"),
    (lambda: tasks.associative_recall(2, 2, vocab_size=3), ValueError,
     r"vocab_size must be an int >= 4; got int 3"),
    (lambda: tasks.associative_recall(2, 2, vocab_size="20"), ValueError,
     r"vocab_size must be an int >= 4; got str '20'"),
    (lambda: tasks.selective_copying(2, 4, n_tokens=5), ValueError,
     r"selective_copying\(\): n_tokens must be in 1\.\.seq_len=4; got 5"),
    (lambda: tasks.selective_copying(2, 4, n_tokens=0), ValueError,
     r"n_tokens must be an int >= 1; got int 0"),
    (lambda: tasks.selective_copying(2, 4, n_tokens=2.5), ValueError,
     r"n_tokens must be an int >= 1; got float 2.5"),
    (lambda: tasks.induction_heads(2, 3), ValueError,
     r"induction_heads\(\): seq_len must be at least 4 .*; got 3"),
    (lambda: tasks.induction_heads(2, 8, vocab_size=3), ValueError,
     r"vocab_size must be an int >= 4; got int 3"),
    (lambda: tasks.passkey(2, 4, key_len=3), ValueError,
     r"passkey\(\): key_len must be in 1\.\.seq_len-2 = 1\.\.2 \(the marker and the key must "
     r"fit in the haystack\); got 3"),
    (lambda: tasks.passkey(2, 6, vocab_size=4), ValueError,
     r"passkey\(\): vocab_size must be an int >= 5; got int 4"),
    (lambda: tasks.passkey(2, 4, key_len=0), ValueError, r"key_len must be an int >= 1; got int 0"),
    (lambda: tasks.passkey(2, 4, key_len=1.0), ValueError,
     r"key_len must be an int >= 1; got float 1.0"),
    (lambda: tasks.date_normalisation(0), ValueError,
     r"date_normalisation\(\): n must be an int >= 1; got int 0"),
    (lambda: tasks.date_normalisation(2.0), ValueError, r"n must be an int >= 1; got float 2.0"),
    (lambda: tasks.date_normalisation(3, seed="x"), ValueError,
     r"seed must be an int in .*; got str 'x'"),
    (lambda: tasks.date_normalisation(3, years=(1900, 2000)), ValueError,
     r"years must lie within 1950\.\.2049 .*; got \(1900, 2000\)"),
    (lambda: tasks.date_normalisation(3, years=(2010, 2000)), ValueError,
     r"first <= last; got \(2010, 2000\)"),
    (lambda: tasks.date_normalisation(3, years=2000), TypeError,
     r"years must be a \(first, last\) pair of ints; got 2000"),
    (lambda: tasks.date_normalisation(3, years=(1990.0, 2000)), TypeError,
     r"years must be a \(first, last\) pair of ints; got \(1990.0, 2000\)"),
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_bad_input(call, error, message):
    with pytest.raises(error, match=message):
        call()
