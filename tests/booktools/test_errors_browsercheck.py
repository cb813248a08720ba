"""Bad input to booktools.browsercheck: each row is a call, the exception it raises and a
pattern its message must match (the argument, what was expected, what was given)."""

from __future__ import annotations

import pytest

from booktools import browsercheck

CASES = [
    # (id, call(tmp), exception, message pattern)
    ("find_pages: no site", lambda t: browsercheck.find_pages(t / "html"), ValueError,
     r"site must be a built book's html folder holding index.html; got .*html"),
    ("check_site: no site", lambda t: browsercheck.check_site(t), ValueError,
     r"site must be a built book's html folder holding index.html"),
]


@pytest.mark.parametrize("call, error, message", [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_bad_input_raises_a_clear_error(tmp_path, call, error, message):
    with pytest.raises(error, match=message):
        call(tmp_path)
