"""Bad input to booktools.gluecheck: each row is a call, the exception it raises and a
pattern its message must match (the argument, what was expected, what was given)."""

from __future__ import annotations

import pytest

from booktools import gluecheck

CASES = [
    # (id, call, exception, message pattern)
    ("glued_numbers: a path", lambda: gluecheck.glued_numbers("nb.ipynb"), TypeError,
     r"nb must be a parsed notebook \(a dict with a 'cells' list\); got str"),
    ("glued_numbers: no cells", lambda: gluecheck.glued_numbers({"metadata": {}}), TypeError,
     r"nb must be a parsed notebook .*; got dict"),
    ("typed_glued_numbers: a list", lambda: gluecheck.typed_glued_numbers([]), TypeError,
     r"nb must be a parsed notebook .*; got list"),
]


@pytest.mark.parametrize("call, error, message", [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_bad_input_raises_a_clear_error(call, error, message):
    with pytest.raises(error, match=message):
        call()
