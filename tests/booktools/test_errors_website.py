"""Bad input to booktools.website and booktools.toc: each row is a call, the exception
it raises and a pattern its message must match."""

from __future__ import annotations

import pytest

from booktools import toc, website

CASES = [
    # (id, call(tmp), exception, message pattern)
    ("present: not a notebook", lambda t: website.present(t / "page.md"), ValueError,
     r"path must be a staged notebook \(.ipynb\); got .*page.md"),
    ("present: missing", lambda t: website.present(t / "gone.ipynb"), ValueError,
     r"path must be a staged notebook \(.ipynb\); got .*gone.ipynb"),
    ("present: not a notebook's JSON", lambda t: website.present(_write(t / "x.ipynb", "[]")),
     TypeError, r"nb must be a parsed notebook \(a dict with a 'cells' list\); got list"),
    ("toc_parts: no toc", lambda t: toc.toc_parts(t), ValueError,
     r"root must be the book's root folder holding _toc.yml; got .*"),
    ("drop_repeated_scripts: nothing there", lambda t: website.drop_repeated_scripts(t / "none"),
     ValueError, r"html must be the rendered site's folder; got .*none"),
    ("citation_list_items: nothing there", lambda t: website.citation_list_items(t / "none"),
     ValueError, r"html must be the rendered site's folder; got .*none"),
]


def _write(path, text):
    path.write_text(text)
    return path


@pytest.mark.parametrize("call, error, message", [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_bad_input_raises_a_clear_error(tmp_path, call, error, message):
    with pytest.raises(error, match=message):
        call(tmp_path)
