"""Bad input to lecturelib.transformers.positions: each row is a call, the exception it raises and a
pattern its message must match (the argument, what was expected, what was given)."""

from __future__ import annotations

import math

import pytest
import torch

from lecturelib.transformers import positions as pos
from lecturelib.transformers import self_attention as sa

X = torch.randn(2, 5, 8)
ANGLES = pos.rope_angles(5, 8)
CASES = [
    # (id, call, exception, message pattern)
    ("frequencies: odd d", lambda: pos.frequencies(7), ValueError,
     r"d must be a positive even int \(dimensions come in pairs\); got 7"),
    ("frequencies: zero base", lambda: pos.frequencies(8, 0.0), ValueError,
     r"base must be a finite number > 1 .*got 0.0"),
    ("frequencies: negative base", lambda: pos.frequencies(8, -10.0), ValueError,
     r"base must be a finite number > 1 .*got -10.0"),
    ("frequencies: base 1", lambda: pos.frequencies(8, 1), ValueError,
     r"base must be a finite number > 1 .*got 1"),
    ("frequencies: infinite base", lambda: pos.frequencies(8, math.inf), ValueError,
     r"base must be a finite number > 1 .*got inf"),
    ("sinusoidal: zero base", lambda: pos.sinusoidal(4, 8, base=0.0), ValueError,
     r"base must be a finite number > 1"),
    ("sinusoidal: float length", lambda: pos.sinusoidal(4.5, 8), ValueError,
     r"seq_len must be an int >= 1; got float 4\.5"),
    ("sinusoidal: odd width", lambda: pos.sinusoidal(4, 5), ValueError,
     r"d must be a positive even int .*got 5"),
    ("shift_matrix: float k", lambda: pos.shift_matrix(1.5, 8), ValueError,
     r"k must be an int >= -inf; got float 1\.5"),
    ("shift_matrix: negative base", lambda: pos.shift_matrix(1, 8, base=-2.0), ValueError,
     r"base must be a finite number > 1"),
    ("SinusoidalPositions: odd width", lambda: pos.SinusoidalPositions(7), ValueError,
     r"d_model must be a positive even int .*got 7"),
    ("SinusoidalPositions: zero base", lambda: pos.SinusoidalPositions(8, base=0),
     ValueError, r"base must be a finite number > 1 .*got 0"),
    ("SinusoidalPositions: other width", lambda: pos.SinusoidalPositions(6)(X), ValueError,
     r"x must be \(b, t, d_model\) = \(b, t, 6\); got \(2, 5, 8\)"),
    ("SinusoidalPositions: int x", lambda: pos.SinusoidalPositions(8)(X.long()), TypeError,
     r"x must be a float tensor \(b, t, 8\); got torch\.int64 tensor of shape \(2, 5, 8\)"),
    ("LearnedPositions: zero max_len", lambda: pos.LearnedPositions(0, 8), ValueError,
     r"max_len must be an int >= 1; got int 0"),
    ("LearnedPositions: too long", lambda: pos.LearnedPositions(4, 8)(X), ValueError,
     r"learned positions exist for 0..3 only; got a sequence of 5"),
    ("LearnedPositions: 2-D x", lambda: pos.LearnedPositions(8, 8)(X[0]), ValueError,
     r"x must be \(b, t, d_model\) = \(b, t, 8\); got \(5, 8\)"),
    ("score_terms: p of another length", lambda: pos.score_terms(X, torch.randn(4, 8)),
     ValueError, r"x must be \(\.\.\., t, d\) and p \(t, d\) with one t and d; got "
     r"\(2, 5, 8\) and \(4, 8\)"),
    ("score_terms: W of another width",
     lambda: pos.score_terms(X, torch.randn(5, 8), torch.randn(4, 6)), ValueError,
     r"W_q must be \(d_k, d\) = \(d_k, 8\); got \(4, 6\)"),
    ("score_terms: W_q and W_k differ",
     lambda: pos.score_terms(X, torch.randn(5, 8), torch.randn(4, 8), torch.randn(3, 8)),
     ValueError, r"W_q and W_k must have one shape \(d_k, d\); got \(4, 8\) and \(3, 8\)"),
    ("score_terms: int x", lambda: pos.score_terms(X.long(), torch.randn(5, 8)), TypeError,
     r"x must be a float tensor \(\.\.\., t, d\); got torch\.int64 tensor of shape \(2, 5, 8\)"),
    ("relative_distances: zero k", lambda: pos.relative_distances(4, max_distance=0),
     ValueError,
     r"max_distance must be an int >= 1; got int 0"),
    ("relative_distances: float t", lambda: pos.relative_distances(2.0), ValueError,
     r"t must be an int >= 1; got float 2\.0"),
    ("RelativeAttention: zero k", lambda: pos.RelativeAttention(8, 2, max_distance=0),
     ValueError,
     r"max_distance must be an int >= 1; got int 0"),
    ("RelativeAttention: zero heads", lambda: pos.RelativeAttention(8, 0), ValueError,
     r"n_heads must be an int >= 1; got int 0"),
    ("RelativeAttention: width of x", lambda: pos.RelativeAttention(8, 2)(X[..., :4]),
     ValueError, r"x and context must be \(b, t, 8\) and \(b, s, 8\); got \(2, 5, 4\)"),
    ("RelativeAttention: 2-D mask",
     lambda: pos.RelativeAttention(8, 2)(X, mask=sa.causal_mask(5)[0]), ValueError,
     r"mask must be 3-D \(b, t, s\) = \(2, 5, 5\).*mask\[None\]"),
    ("alibi_slopes: zero heads", lambda: pos.alibi_slopes(0), ValueError,
     r"n_heads must be an int >= 1; got int 0"),
    ("alibi_slopes: float heads", lambda: pos.alibi_slopes(4.0), ValueError,
     r"n_heads must be an int >= 1; got float 4\.0"),
    ("relative_distances: fewer keys than queries", lambda: pos.relative_distances(4, 2),
     ValueError, r"s \(keys\) must be >= t \(queries\): the t queries are the last t "
     r"of the s positions; got t=4, s=2"),
    ("alibi_bias: fewer keys than queries", lambda: pos.alibi_bias(2, 4, 2), ValueError,
     r"s \(keys\) must be >= t \(queries\).*got t=4, s=2"),
    ("alibi_bias: zero keys", lambda: pos.alibi_bias(2, 4, 0), ValueError,
     r"s must be an int >= 1; got int 0"),
    ("RelativeAttention: fewer keys than queries",
     lambda: pos.RelativeAttention(8, 2)(X, X[:, :3]), ValueError,
     r"s \(keys\) must be >= t \(queries\).*got t=5, s=3"),
    ("alibi_bias: zero length", lambda: pos.alibi_bias(4, 0), ValueError,
     r"t must be an int >= 1; got int 0"),
    ("rope_angles: odd width", lambda: pos.rope_angles(5, 7), ValueError,
     r"d must be a positive even int .*got 7"),
    ("rope_angles: negative base", lambda: pos.rope_angles(5, 8, base=-1.0), ValueError,
     r"base must be a finite number > 1"),
    ("rope_angles: negative offset", lambda: pos.rope_angles(5, 8, offset=-1), ValueError,
     r"offset \(the position of the first query\) must be an int >= 0; got int -1"),
    ("rope_angles: float offset", lambda: pos.rope_angles(5, 8, offset=0.5), ValueError,
     r"offset \(the position of the first query\) must be an int >= 0; got float 0\.5"),
    ("rope_rotate: angles of another width", lambda: pos.rope_rotate(X, ANGLES[:, :3]),
     ValueError, r"x must be \(\.\.\., t, d\) and angles \(t, d/2\); got \(2, 5, 8\) and "
     r"\(5, 3\)"),
    ("rope_rotate: angles of another length", lambda: pos.rope_rotate(X, ANGLES[:4]),
     ValueError, r"got \(2, 5, 8\) and \(4, 4\)"),
    ("rope_rotate: int x", lambda: pos.rope_rotate(X.long(), ANGLES), TypeError,
     r"x must be a float tensor \(\.\.\., t, d\); got torch\.int64 tensor of shape \(2, 5, 8\)"),
    ("rope_rotate: int angles", lambda: pos.rope_rotate(X, ANGLES.long()), TypeError,
     r"angles must be a float tensor \(t, d/2\); got torch\.int64 tensor of shape \(5, 4\)"),
    ("rope_complex: odd x", lambda: pos.rope_complex(X[..., :7], ANGLES), ValueError,
     r"x must be \(\.\.\., t, d\) and angles \(t, d/2\)"),
    ("Rotary: odd d_head", lambda: pos.Rotary(5), ValueError,
     r"d_head must be a positive even int .*got 5"),
    ("Rotary: zero base", lambda: pos.Rotary(8, base=0.0), ValueError,
     r"base must be a finite number > 1 .*got 0.0"),
    ("Rotary: other width", lambda: pos.Rotary(4)(X), ValueError,
     r"x must be \(\.\.\., t, d_head\) = \(\.\.\., t, 4\); got \(2, 5, 8\)"),
    ("Rotary: int x", lambda: pos.Rotary(8)(X.int()), TypeError,
     r"x must be a float tensor \(\.\.\., t, 8\); got torch\.int32 tensor of shape \(2, 5, 8\)"),
    ("Rotary: negative offset", lambda: pos.Rotary(8)(X, offset=-2), ValueError,
     r"offset \(the position of the first query\) must be an int >= 0; got int -2"),
]


@pytest.mark.parametrize("call, error, message", [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_bad_input_raises_a_clear_error(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_float64_rope_computes_in_float64():
    x = torch.randn(1, 2, 300, 8, dtype=torch.float64)
    m = torch.arange(300, dtype=torch.float64)[:, None] * pos.frequencies(8)  # exact angles
    x1, x2 = x[..., 0::2], x[..., 1::2]
    exact = torch.stack([x1 * m.cos() - x2 * m.sin(), x1 * m.sin() + x2 * m.cos()],
                        -1).flatten(-2)
    for rotated in (pos.Rotary(8)(x),
                    pos.rope_rotate(x, pos.rope_angles(300, 8, dtype=torch.float64)),
                    pos.rope_complex(x, pos.rope_angles(300, 8, dtype=torch.float64))):
        assert rotated.dtype == torch.float64
        torch.testing.assert_close(rotated, exact, rtol=1e-12, atol=1e-12)
    # float32 angles would be off by about 1e-5 at position 300: the test can tell
    off = pos.rope_rotate(x, pos.rope_angles(300, 8)) - exact
    assert off.abs().max() > 1e-9


def test_positional_tables_stay_finite_for_any_valid_base():
    for base in (1.5, 100.0, 1e6):
        assert torch.isfinite(pos.sinusoidal(64, 16, base)).all()
        assert torch.isfinite(pos.shift_matrix(3, 16, base)).all()
